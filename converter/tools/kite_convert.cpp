// kite-convert: ONNX -> .kite
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/convert.h"
#include "kite/kite.h"
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
               "                            suffixes) by recomputing cheap tensors; fails,\n"
               "                            saying by how much, when it cannot\n"
               "  --no-inplace              plan without in-place ops and views\n"
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


std::string json_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string quoted(const std::string& s) { return "\"" + json_escape(s) + "\""; }

// The machine-readable report (--report).
bool write_report(const std::string& path, const std::string& in_path, const std::string& out_path,
                  int level, const kite::ir::Model& model,
                  const kite::converter::ConvertReport& report, uint64_t file_bytes,
                  std::string* err) {
  std::string j = "{\n";
  j += "  \"input\": " + quoted(in_path) + ",\n";
  j += "  \"output\": " + quoted(out_path) + ",\n";
  j += "  \"opt_level\": " + std::to_string(level) + ",\n";
  j += "  \"onnx_nodes\": " + std::to_string(report.onnx_nodes) + ",\n";
  j += "  \"nodes_before\": " + std::to_string(report.nodes_before) + ",\n";
  j += "  \"nodes_after\": " + std::to_string(report.nodes) + ",\n";
  j += "  \"kernel_launches_before\": " + std::to_string(report.kernel_launches_before) + ",\n";
  j += "  \"kernel_launches_after\": " + std::to_string(report.kernel_launches_after) + ",\n";
  j += "  \"passes\": [";
  for (size_t i = 0; i < report.passes.size(); ++i) {
    const auto& p = report.passes[i];
    j += std::string(i ? "," : "") + "\n    {\"name\": " + quoted(p.name) +
         ", \"rounds\": " + std::to_string(p.rounds) + ", \"changed\": " + std::to_string(p.changed) +
         ", \"nodes_removed\": " + std::to_string(p.nodes_removed) +
         ", \"nodes_before\": " + std::to_string(p.nodes_before) +
         ", \"nodes_after\": " + std::to_string(p.nodes_after) + ", \"counters\": {";
    bool first = true;
    for (const auto& kv : p.counters) {
      j += std::string(first ? "" : ", ") + quoted(kv.first) + ": " + std::to_string(kv.second);
      first = false;
    }
    j += "}}";
  }
  j += report.passes.empty() ? "],\n" : "\n  ],\n";
  j += "  \"fusions\": {";
  bool first = true;
  for (const auto& kv : report.fusions) {
    j += std::string(first ? "" : ", ") + quoted(kv.first) + ": " + std::to_string(kv.second);
    first = false;
  }
  j += "},\n";
  j += "  \"ops\": {";
  first = true;
  for (const auto& kv : report.op_counts) {
    j += std::string(first ? "" : ", ") + quoted(kv.first) + ": " + std::to_string(kv.second);
    first = false;
  }
  j += "},\n";
  const auto& p = model.plan;
  j += "  \"memory\": {\"arena_bytes\": " + std::to_string(p.arena_size) +
       ", \"lower_bound_bytes\": " + std::to_string(p.lower_bound) +
       ", \"naive_bytes\": " + std::to_string(p.naive_size) +
       ", \"alignment\": " + std::to_string(p.alignment) + ", \"strategy\": " + quoted(p.strategy) +
       "},\n";
  j += "  \"weight_bytes\": " + std::to_string(report.weight_bytes) + ",\n";
  j += "  \"folded_weight_bytes\": " + std::to_string(report.folded_weight_bytes) + ",\n";
  j += "  \"file_bytes\": " + std::to_string(file_bytes) + "\n";
  j += "}\n";
  std::vector<uint8_t> bytes(j.begin(), j.end());
  return kite::writer::write_bytes(bytes, path, err);
}

}  // namespace

int main(int argc, char** argv) {
  std::string in_path, out_path, report_path;
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
      if (!parse_bytes(argv[++i], &options.memory_budget) || options.memory_budget == 0) {
        std::fprintf(stderr, "kite-convert: bad --memory-budget '%s' (expected e.g. 4000000 or 4M)\n",
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
  if (options.memory_budget > 0 && !report.budget.met) {
    std::fprintf(stderr,
                 "kite-convert: memory budget %llu bytes not met: the arena needs %llu bytes "
                 "(%llu over) after %zu recomputation(s); no file written\n",
                 static_cast<unsigned long long>(options.memory_budget),
                 static_cast<unsigned long long>(model.plan.arena_size),
                 static_cast<unsigned long long>(model.plan.arena_size - options.memory_budget),
                 report.budget.recomputed.size());
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
    if (options.memory_budget > 0) {
      std::printf("  memory budget %s: arena %s -> %s by recomputing %zu tensor(s)\n",
                  human_bytes(options.memory_budget).c_str(),
                  human_bytes(report.budget.arena_before).c_str(),
                  human_bytes(report.budget.arena_after).c_str(), report.budget.recomputed.size());
      for (const auto& r : report.budget.recomputed) {
        std::printf("    recompute '%s' (node '%s') for %d late use(s): +%llu elements per run, "
                    "arena %s -> %s\n",
                    r.tensor.c_str(), r.node.c_str(), r.late_uses,
                    static_cast<unsigned long long>(r.elements), human_bytes(r.arena_before).c_str(),
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
  }
  if (!report_path.empty() &&
      !write_report(report_path, in_path, out_path, options.opt_level, model, report, bytes.size(), &err)) {
    std::fprintf(stderr, "kite-convert: %s\n", err.c_str());
    return 1;
  }
  return 0;
}
