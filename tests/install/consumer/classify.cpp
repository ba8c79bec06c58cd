// classify.cpp: apps/examples/classify.c in C++ through kite.hpp, printing
// the same line, so the test can compare the two.
#include <cstdio>
#include <vector>

#include <kite/kite.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.kite\n", argv[0]);
    return 2;
  }
  if (kite_version_number() != KITE_VERSION_NUMBER) {
    std::fprintf(stderr, "kite.hpp is %s but the library is %s\n", KITE_VERSION_STRING,
                 kite_version_string());
    return 1;
  }
  try {
    kite::Model model = kite::Model::load_file(argv[1]);
    kite::Session session(model);
    const kite::TensorInfo in = session.input_info(0);
    std::vector<float> input(in.byte_size / sizeof(float));
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 256) / 255.0f;
    session.set_input(in.name, input);
    session.run();
    const kite::TensorInfo out = session.output_info(0);
    const std::vector<float> y = session.output<float>(out.name);
    size_t best = 0;
    for (size_t i = 1; i < y.size(); ++i) {
      if (y[i] > y[best]) best = i;
    }
    std::printf("output '%s': argmax %lu, value %g\n", out.name.c_str(),
                static_cast<unsigned long>(best), static_cast<double>(y[best]));
  } catch (const kite::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
