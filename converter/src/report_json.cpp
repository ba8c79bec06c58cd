// The converter's machine-readable report: the JSON that kite-convert
// --report writes and kite_convert_file returns (keys in docs/FUSIONS.md).
#include <cmath>
#include <cstdio>

#include "kite/converter/convert.h"
#include "kite/converter/precision.h"

namespace kite::converter {
namespace {

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

}  // namespace

std::string precision_report_json(const PrecisionReport& r) {
  auto num = [](double v) {
    if (!std::isfinite(v)) return std::string("null");  // overflow: the reason says so
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  std::string j = "{\"mode\": " + quoted(precision_name(r.precision)) + ", \"tolerance\": " + num(r.tolerance) +
                  ", \"inputs\": " + quoted(r.inputs) + ", \"fp16_nodes\": " + std::to_string(r.fp16_nodes) +
                  ", \"fp32_nodes\": " + std::to_string(r.fp32_nodes) + ", \"casts\": " +
                  std::to_string(r.casts) + ", \"final_error\": " + num(r.final_error) +
                  ", \"weight_bytes_before\": " + std::to_string(r.weight_bytes_before) +
                  ", \"weight_bytes_after\": " + std::to_string(r.weight_bytes_after) + ", \"nodes\": [";
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const NodePrecision& n = r.nodes[i];
    j += std::string(i ? ", " : "") + "{\"name\": " + quoted(n.name) + ", \"op\": " + quoted(n.op) +
         ", \"precision\": " + quoted(n.fp16 ? "fp16" : "fp32") + ", \"reason\": " + quoted(n.reason) +
         ", \"error\": " + num(n.error) + "}";
  }
  return j + "]}";
}

std::string report_to_json(const std::string& onnx_path, const std::string& kite_path,
                           int opt_level, const ir::Model& model, const ConvertReport& report,
                           uint64_t file_bytes) {
  std::string j = "{\n";
  j += "  \"input\": " + quoted(onnx_path) + ",\n";
  j += "  \"output\": " + quoted(kite_path) + ",\n";
  j += "  \"opt_level\": " + std::to_string(opt_level) + ",\n";
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
  const auto& b = report.budget;
  if (b.budget > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%g", b.ratio);
    j += "  \"memory_budget\": {\"budget_bytes\": " + std::to_string(b.budget) +
         ", \"ratio\": " + ratio + ", \"lower_bound_bytes\": " + std::to_string(b.lower_bound) +
         ", \"arena_before_bytes\": " + std::to_string(b.arena_before) +
         ", \"arena_after_bytes\": " + std::to_string(b.arena_after) +
         ", \"bytes_saved\": " +
         std::to_string(b.arena_before > b.arena_after ? b.arena_before - b.arena_after : 0) +
         ", \"flops_before\": " + std::to_string(b.flops_before) +
         ", \"flops_added\": " + std::to_string(b.flops_added) +
         ", \"met\": " + (b.met ? "true" : "false") + ",\n    \"recomputed\": [";
    for (size_t i = 0; i < b.recomputed.size(); ++i) {
      const auto& r = b.recomputed[i];
      j += std::string(i ? ", " : "") + "{\"tensor\": " + quoted(r.tensor) + ", \"node\": " +
           quoted(r.node) + ", \"late_uses\": " + std::to_string(r.late_uses) +
           ", \"nodes\": " + std::to_string(r.nodes) + ", \"flops\": " + std::to_string(r.flops) +
           ", \"elements\": " + std::to_string(r.elements) +
           ", \"arena_before_bytes\": " + std::to_string(r.arena_before) +
           ", \"arena_after_bytes\": " + std::to_string(r.arena_after) + "}";
    }
    j += "],\n    \"patches\": [";
    for (size_t i = 0; i < b.patches.size(); ++i) {
      const auto& p = b.patches[i];
      j += std::string(i ? ", " : "") + "{\"first_node\": " + quoted(p.first_node) +
           ", \"last_node\": " + quoted(p.last_node) + ", \"output\": " + quoted(p.output) +
           ", \"nodes\": " + std::to_string(p.nodes) + ", \"tiles\": " + std::to_string(p.tiles) +
           ", \"flops_added\": " + std::to_string(p.flops_added) +
           ", \"arena_before_bytes\": " + std::to_string(p.arena_before) +
           ", \"arena_after_bytes\": " + std::to_string(p.arena_after) + "}";
    }
    j += "]},\n";
  }
  j += "  \"precision\": " + precision_report_json(report.precision) + ",\n";
  std::string levels;
  for (size_t i = 0; i < report.packed_for.size(); ++i) levels += std::string(i ? ", " : "") + quoted(report.packed_for[i]);
  j += "  \"packed\": {\"for\": [" + levels + "], \"forms\": " + std::to_string(report.packed_forms) +
       ", \"bytes\": " + std::to_string(report.packed_bytes) +
       ", \"source_bytes\": " + std::to_string(report.packed_source_bytes) + "},\n";
  j += "  \"weight_bytes\": " + std::to_string(report.weight_bytes) + ",\n";
  j += "  \"folded_weight_bytes\": " + std::to_string(report.folded_weight_bytes) + ",\n";
  j += "  \"file_bytes\": " + std::to_string(file_bytes) + "\n";
  j += "}\n";
  return j;
}

bool check_memory_budget(const ConvertOptions& options, const ir::Model& model,
                         const ConvertReport& report, std::string* err) {
  if ((options.memory_budget == 0 && options.memory_budget_ratio <= 0) || report.budget.met) {
    return true;
  }
  const uint64_t budget = report.budget.budget;
  *err = "memory budget " + std::to_string(budget) + " bytes";
  if (report.budget.ratio > 0) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), " (%gx the lower bound %llu)", report.budget.ratio,
                  static_cast<unsigned long long>(report.budget.lower_bound));
    *err += buf;
  }
  *err += " not met: the arena needs " + std::to_string(model.plan.arena_size) + " bytes (" +
          std::to_string(model.plan.arena_size - budget) + " over) after " +
          std::to_string(report.budget.recomputed.size()) + " recomputation(s) and " +
          std::to_string(report.budget.patches.size()) + " patched chain(s); no file written";
  return false;
}

}  // namespace kite::converter
