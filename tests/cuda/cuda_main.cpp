// main() of the CUDA test programs: where the backend under test has no
// device (the real plugin without a GPU or driver) the program prints why
// and exits with 77, which ctest reports as skipped, never as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "cuda_graphs.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strcmp(argv[i], "--gtest_list_tests") == 0;
  if (!listing) {
    const std::string why = kite::cudatest::unavailable_reason();
    if (!why.empty()) {
      std::printf("SKIP: backend '%s' has no device here: %s\n", kite::cudatest::backend().c_str(), why.c_str());
      return 77;
    }
    std::printf("backend under test: %s\n", kite::cudatest::backend().c_str());
  }
  return RUN_ALL_TESTS();
}
