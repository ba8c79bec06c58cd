// kite-convert: ONNX -> .kite
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/convert.h"
#include "kite/kite.h"
#include "common/npy.h"
#include "passes/pass.h"
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
               "  --memory-budget BYTES     keep the activation arena within BYTES (K/M/G\n"
               "                            suffixes), or within R times the plan's lower\n"
               "                            bound (e.g. 0.6x), by running high-resolution\n"
               "                            layers in patches and recomputing cheap tensors;\n"
               "                            fails, saying by how much, when it cannot\n"
               "  --no-inplace              plan without in-place ops and views\n"
               "  -O0, -O1, -O2             optimization level (default -O2: every pass)\n"
               "  --disable-pass NAME       skip one optimizer pass (repeatable)\n"
               "  --list-passes             print the passes and their levels, then exit\n"
               "  --report FILE             write what the conversion did as JSON (passes,\n"
               "                            fusions, ops, memory plan, budget, precision)\n"
               "  --precision P             fp32 (default), fp16 (every node that can: weights\n"
               "                            and activations in half, casts at the boundaries)\n"
               "                            or mixed (fp16 where the measured error allows)\n"
               "  --fp16-tolerance T        mixed: largest error at each output, relative to\n"
               "                            its max|ref| (default 1e-2)\n"
               "  --calibration DIR         mixed: inputs to measure with: one .npy per sample\n"
               "                            (one-input models) or one subdirectory per sample\n"
               "                            holding INPUT_NAME.npy per input (default: seeded\n"
               "                            random inputs, uniform in [-1, 1])\n"
               "  --pack-for LIST           ISA levels whose CPU kernels get the weights\n"
               "                            pre-packed in the file, used from the mapping\n"
               "                            at run time (comma-separated: x86-avx512,\n"
               "                            x86-avx2, arm64-neon, portable, host, none;\n"
               "                            default host, this machine's level)\n"
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

bool parse_bytes(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] == '-') return false;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return false;
  uint64_t scale = 1;
  const std::string suffix = end;
  if (suffix == "K" || suffix == "k") scale = 1ull << 10;
  else if (suffix == "M" || suffix == "m") scale = 1ull << 20;
  else if (suffix == "G" || suffix == "g") scale = 1ull << 30;
  else if (!suffix.empty()) return false;
  if (v > UINT64_MAX / scale) return false;
  *out = v * scale;
  return true;
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 20)) std::snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  return buf;
}


// The machine-readable report (--report).
bool write_report(const std::string& path, const std::string& in_path, const std::string& out_path,
                  int level, const kite::ir::Model& model,
                  const kite::converter::ConvertReport& report, uint64_t file_bytes,
                  std::string* err) {
  const std::string j =
      kite::converter::report_to_json(in_path, out_path, level, model, report, file_bytes);
  std::vector<uint8_t> bytes(j.begin(), j.end());
  return kite::writer::write_bytes(bytes, path, err);
}

// --calibration DIR: one .npy per sample, or one subdirectory per sample
// with a NAME.npy per input; in name order, so the samples are reproducible.
bool read_calibration(const std::string& dir, std::vector<kite::converter::CalibrationSample>* out,
                      std::string* err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *err = "--calibration " + dir + ": not a directory";
    return false;
  }
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir, ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  auto read_into = [&](const fs::path& file, kite::converter::CalibrationSample* sample) {
    kite::apps::NpyArray a;
    if (!kite::apps::read_npy(file.string(), &a, err)) return false;
    kite::converter::CalibrationValue& v = (*sample)[file.stem().string()];
    v.dtype = a.dtype;
    v.shape = a.shape;
    v.data = std::move(a.data);
    return true;
  };
  for (const fs::path& p : entries) {
    kite::converter::CalibrationSample sample;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.path().extension() == ".npy") files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        if (!read_into(f, &sample)) return false;
      }
    } else if (p.extension() == ".npy") {
      if (!read_into(p, &sample)) return false;
    }
    if (!sample.empty()) out->push_back(std::move(sample));
  }
  if (out->empty()) {
    *err = "--calibration " + dir + ": no .npy files";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string in_path, out_path, report_path, calibration_dir;
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
    } else if (a == "--memory-budget" && i + 1 < argc) {
      const std::string text = argv[++i];
      bool ok = false;
      if (!text.empty() && (text.back() == 'x' || text.back() == 'X')) {
        char* end = nullptr;
        const double r = std::strtod(text.c_str(), &end);
        ok = end == text.c_str() + text.size() - 1 && r > 0 && r < 1e6;
        options.memory_budget_ratio = r;
        options.memory_budget = 0;
      } else {
        ok = parse_bytes(text, &options.memory_budget) && options.memory_budget > 0;
        options.memory_budget_ratio = 0;
      }
      if (!ok) {
        std::fprintf(stderr,
                     "kite-convert: bad --memory-budget '%s' (expected e.g. 4000000, 4M, or 0.6x "
                     "for 60%% of the lower bound)\n",
                     argv[i]);
        return 2;
      }
    } else if (a == "--no-inplace") {
      options.allow_aliasing = false;
    } else if (a == "-O0" || a == "-O1" || a == "-O2") {
      options.opt_level = a[2] - '0';
    } else if (a == "--disable-pass" && i + 1 < argc) {
      const std::string name = argv[++i];
      if (!kite::passes::is_pass_name(name)) {
        std::fprintf(stderr, "kite-convert: unknown pass '%s' (see --list-passes)\n", name.c_str());
        return 2;
      }
      options.disabled_passes.push_back(name);
    } else if (a == "--list-passes") {
      for (const kite::passes::Pass& p : kite::passes::all_passes()) {
        std::printf("%-34s -O%d\n", p.name, p.level);
      }
      return 0;
    } else if (a == "--report" && i + 1 < argc) {
      report_path = argv[++i];
    } else if (a == "--precision" && i + 1 < argc) {
      if (!kite::converter::parse_precision(argv[++i], &options.precision.precision)) {
        std::fprintf(stderr, "kite-convert: bad --precision '%s' (expected fp32, fp16 or mixed)\n", argv[i]);
        return 2;
      }
    } else if (a == "--pack-for" && i + 1 < argc) {
      std::string pack_err;
      if (!kite::converter::parse_pack_for(argv[++i], &options.pack_for, &pack_err)) {
        std::fprintf(stderr, "kite-convert: bad --pack-for: %s\n", pack_err.c_str());
        return 2;
      }
    } else if (a == "--fp16-tolerance" && i + 1 < argc) {
      char* end = nullptr;
      const double t = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || !(t > 0) || t > 1e6) {
        std::fprintf(stderr, "kite-convert: bad --fp16-tolerance '%s' (expected a number > 0, e.g. 1e-2)\n",
                     argv[i]);
        return 2;
      }
      options.precision.tolerance = t;
    } else if (a == "--calibration" && i + 1 < argc) {
      calibration_dir = argv[++i];
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
  if (!calibration_dir.empty()) {
    if (options.precision.precision != kite::converter::Precision::kMixed) {
      std::fprintf(stderr, "kite-convert: --calibration needs --precision mixed\n");
      return 2;
    }
    if (!read_calibration(calibration_dir, &options.precision.samples, &err)) {
      std::fprintf(stderr, "kite-convert: %s\n", err.c_str());
      return 1;
    }
  }
  if (!kite::converter::convert_onnx_file(in_path, options, &model, &report, &err)) {
    std::fprintf(stderr, "kite-convert: %s: %s\n", in_path.c_str(), err.c_str());
    return 1;
  }
  if (!kite::converter::check_memory_budget(options, model, report, &err)) {
    std::fprintf(stderr, "kite-convert: %s\n", err.c_str());
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
    std::printf("  aliasing: %d in-place nodes, %d views, %d concats written in place (arena "
                "without them %s, lower bound %s)\n",
                report.memory.inplace_nodes, report.memory.view_nodes, report.memory.concat_nodes,
                human_bytes(report.memory.arena_without_aliasing).c_str(),
                human_bytes(report.memory.lower_bound_without_aliasing).c_str());
    if (options.memory_budget > 0 || options.memory_budget_ratio > 0) {
      const auto& b = report.budget;
      std::string ratio;
      if (b.ratio > 0) {
        char buf[48];
        std::snprintf(buf, sizeof(buf), " (%gx the lower bound)", b.ratio);
        ratio = buf;
      }
      std::printf("  memory budget %s%s: lower bound %s, arena %s -> %s (%s saved) with %zu "
                  "patched chain(s) and %zu recomputed tensor(s), +%.2f MFLOPs per run "
                  "(+%.2f%%)\n",
                  human_bytes(b.budget).c_str(), ratio.c_str(), human_bytes(b.lower_bound).c_str(),
                  human_bytes(b.arena_before).c_str(), human_bytes(b.arena_after).c_str(),
                  human_bytes(b.arena_before > b.arena_after ? b.arena_before - b.arena_after : 0)
                      .c_str(),
                  b.patches.size(), b.recomputed.size(), b.flops_added / 1e6,
                  b.flops_before ? 100.0 * static_cast<double>(b.flops_added) /
                                       static_cast<double>(b.flops_before)
                                 : 0.0);
      for (const auto& p : b.patches) {
        std::printf("    patch '%s'..'%s' (%d nodes) -> '%s' in %d row bands: +%.2f MFLOPs, "
                    "arena %s -> %s\n",
                    p.first_node.c_str(), p.last_node.c_str(), p.nodes, p.output.c_str(), p.tiles,
                    p.flops_added / 1e6, human_bytes(p.arena_before).c_str(),
                    human_bytes(p.arena_after).c_str());
      }
      for (const auto& r : report.budget.recomputed) {
        std::printf("    recompute '%s' (node '%s', chain of %d) for %d late use(s): +%llu elements, "
                    "+%.2f MFLOPs per run, arena %s -> %s\n",
                    r.tensor.c_str(), r.node.c_str(), r.nodes, r.late_uses,
                    static_cast<unsigned long long>(r.elements), r.flops / 1e6,
                    human_bytes(r.arena_before).c_str(),
                    human_bytes(r.arena_after).c_str());
      }
    }
    std::printf("  file: %s (folded weights written by the optimizer: %s)\n",
                human_bytes(bytes.size()).c_str(), human_bytes(report.folded_weight_bytes).c_str());
    std::printf("  optimizer -O%d: %zu -> %zu nodes, kernel launches %lld -> %lld\n",
                options.opt_level, report.nodes_before, report.nodes,
                static_cast<long long>(report.kernel_launches_before),
                static_cast<long long>(report.kernel_launches_after));
    for (const auto& ps : report.passes) {
      std::string details;
      for (const auto& kv : ps.counters) {
        details += (details.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
      }
      std::printf("    %-32s rounds %d, changed %d, nodes %zu -> %zu (%+lld)%s%s\n", ps.name.c_str(),
                  ps.rounds, ps.changed, ps.nodes_before, ps.nodes_after,
                  static_cast<long long>(-ps.nodes_removed), details.empty() ? "" : ": ",
                  details.c_str());
    }
    std::string fused;
    for (const auto& kv : report.fusions) {
      fused += (fused.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
    }
    std::printf("  fused patterns: %s\n", fused.empty() ? "none" : fused.c_str());
    std::string levels;
    for (const std::string& l : report.packed_for) levels += (levels.empty() ? "" : ", ") + l;
    if (report.packed_forms > 0) {
      std::printf("  packed weights for %s: %d form(s), %s\n", levels.c_str(), report.packed_forms,
                  human_bytes(report.packed_bytes).c_str());
    } else {
      std::printf("  packed weights: none%s\n", levels.empty() ? " (--pack-for none)" : "");
    }
    const kite::converter::PrecisionReport& pr = report.precision;
    if (pr.precision != kite::converter::Precision::kFp32) {
      std::printf("  precision %s: %d node(s) fp16, %d fp32, %d cast(s) inserted; weights %s -> %s\n",
                  kite::converter::precision_name(pr.precision), pr.fp16_nodes, pr.fp32_nodes, pr.casts,
                  human_bytes(pr.weight_bytes_before).c_str(), human_bytes(pr.weight_bytes_after).c_str());
      if (pr.precision == kite::converter::Precision::kMixed) {
        std::printf("    measured on %s; whole graph error %.3g x max|ref| (tolerance %g)\n",
                    pr.inputs.c_str(), pr.final_error, pr.tolerance);
      }
      for (const auto& n : pr.nodes) {
        if (!n.fp16 && (n.op == "Conv" || n.op == "MatMul" || n.op == "Gemm" || n.op == "FusedConv" ||
                        n.op == "FusedMatMul" || n.op == "FusedGemm" || n.reason.rfind("overflow", 0) == 0 ||
                        n.reason.rfind("error", 0) == 0 || n.reason.rfind("the whole", 0) == 0)) {
          std::printf("    kept fp32: %s '%s': %s\n", n.op.c_str(), n.name.c_str(), n.reason.c_str());
        }
      }
    }
  }
  if (!report_path.empty() &&
      !write_report(report_path, in_path, out_path, options.opt_level, model, report, bytes.size(), &err)) {
    std::fprintf(stderr, "kite-convert: %s\n", err.c_str());
    return 1;
  }
  return 0;
}
