// kite-convert: ONNX -> .kite
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kite/converter/convert.h"
#include "kite/kite.h"
#include "writer/kite_writer.h"

namespace {

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: kite-convert IN.onnx -o OUT.kite [--input-shape NAME=1x3x224x224 ...]\n"
               "\n"
               "Converts an ONNX model into a Kite model file: imports it, fixes every\n"
               "shape, plans activation memory and writes weights into aligned blobs.\n"
               "  -o, --output FILE         the .kite file to write (written atomically)\n"
               "  --input-shape NAME=DIMS   fix the shape of input NAME (dims joined by 'x')\n"
               "  -q, --quiet               print errors only\n"
               "  --version                 print the version\n");
}

bool parse_shape(const std::string& spec, std::string* name, std::vector<int64_t>* dims) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 >= spec.size()) return false;
  *name = spec.substr(0, eq);
  dims->clear();
  std::string rest = spec.substr(eq + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t x = rest.find_first_of("x,", start);
    if (x == std::string::npos) x = rest.size();
    const std::string tok = rest.substr(start, x - start);
    if (tok.empty()) return false;
    char* end = nullptr;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (*end != '\0' || v < 0) return false;
    dims->push_back(v);
    start = x + 1;
  }
  return true;
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 20)) std::snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string in_path, out_path;
  bool quiet = false;
  kite::converter::ConvertOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("kite-convert %s (format %d.%d)\n", KITE_VERSION_STRING, KITE_FORMAT_MAJOR,
                  KITE_FORMAT_MINOR);
      return 0;
    } else if ((a == "-o" || a == "--output") && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--input-shape" && i + 1 < argc) {
      std::string name;
      std::vector<int64_t> dims;
      if (!parse_shape(argv[++i], &name, &dims)) {
        std::fprintf(stderr, "kite-convert: bad --input-shape '%s' (expected NAME=1x3x224x224)\n",
                     argv[i]);
        return 2;
      }
      options.input_shapes[name] = dims;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kite-convert: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else if (in_path.empty()) {
      in_path = a;
    } else {
      std::fprintf(stderr, "kite-convert: more than one input file ('%s', '%s')\n",
                   in_path.c_str(), a.c_str());
      return 2;
    }
  }
  if (in_path.empty() || out_path.empty()) {
    usage(stderr);
    return 2;
  }

  kite::ir::Model model;
  kite::converter::ConvertReport report;
  std::string err;
  if (!kite::converter::convert_onnx_file(in_path, options, &model, &report, &err)) {
    std::fprintf(stderr, "kite-convert: %s: %s\n", in_path.c_str(), err.c_str());
    return 1;
  }
  model.producer = std::string("kite-convert ") + KITE_VERSION_STRING;
  std::vector<uint8_t> bytes;
  if (!kite::writer::serialize(model, &bytes, &err) ||
      !kite::writer::write_bytes(bytes, out_path, &err)) {
    std::fprintf(stderr, "kite-convert: %s\n", err.c_str());
    return 1;
  }
  if (!quiet) {
    const auto& p = model.plan;
    std::printf("kite-convert: %s -> %s\n", in_path.c_str(), out_path.c_str());
    std::printf("  source opset %lld, %zu ONNX nodes -> %zu Kite nodes, %zu tensors\n",
                static_cast<long long>(model.source_opset), report.onnx_nodes, report.nodes,
                report.tensors);
    std::string ops;
    for (const auto& kv : report.op_counts) {
      ops += (ops.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
    }
    std::printf("  ops: %s\n", ops.c_str());
    std::printf("  weights: %zu constants, %s\n", report.constants,
                human_bytes(report.weight_bytes).c_str());
    std::printf("  memory plan (%s, %llu-byte aligned): arena %s, lower bound %s, naive %s\n",
                p.strategy.c_str(), static_cast<unsigned long long>(p.alignment),
                human_bytes(p.arena_size).c_str(), human_bytes(p.lower_bound).c_str(),
                human_bytes(p.naive_size).c_str());
    std::printf("  file: %s\n", human_bytes(bytes.size()).c_str());
  }
  return 0;
}
