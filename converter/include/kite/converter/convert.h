// The converter's top level: ONNX in, planned ir::Model out, .kite written.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/converter/memory_stats.h"
#include "kite/converter/precision.h"

namespace kite::converter {

struct ConvertOptions {
  std::map<std::string, std::vector<int64_t>> input_shapes;
  uint64_t arena_alignment = 256;
  // Graph optimizer (converter/passes): 0 none, 1 folding and elimination,
  // 2 also fusion. Passes named in disabled_passes are skipped.
  int opt_level = 2;
  std::vector<std::string> disabled_passes;
  // Memory planning: in-place ops and views on (default), and an optional
  // arena budget met by recomputing cheap tensors (0: no budget).
  bool allow_aliasing = true;
  uint64_t memory_budget = 0;
  // Budget relative to the unbudgeted plan's lower bound (0.6: 60% of it);
  // used when memory_budget is 0 and this is > 0.
  double memory_budget_ratio = 0;
  // Half precision (kite/converter/precision.h): fp32 (default), fp16, mixed.
  PrecisionOptions precision;
  // ISA levels whose CPU kernels get their weights pre-packed in the file
  // (kite-convert --pack-for): "x86-avx512", "x86-avx2", "arm64-neon",
  // "portable", "host" (this machine's level) or "none". Default: host.
  std::vector<std::string> pack_for = {"host"};
};

// Resolves pack_for to level names (host replaced, none dropped,
// duplicates removed); false with err naming a level it does not know.
bool resolve_pack_for(const std::vector<std::string>& requested, std::vector<std::string>* levels,
                      std::string* err);
// Parses a comma-separated --pack-for list ("x86-avx512,arm64-neon") into
// *requested, checking every name; false with err on an empty list or an
// unknown name.
bool parse_pack_for(const std::string& list, std::vector<std::string>* requested, std::string* err);

// What one optimizer pass did over the whole pipeline run.
struct PassStats {
  std::string name;
  int rounds = 0;             // times it ran
  int changed = 0;            // times it changed the graph
  int64_t nodes_removed = 0;  // main-graph nodes before minus after, summed over runs
  size_t nodes_before = 0;    // main-graph nodes before its first run
  size_t nodes_after = 0;     // nodes_before - nodes_removed: what its own runs did
  std::map<std::string, int64_t> counters;  // pass-specific ("folded", "Conv+Relu", ...)
};

struct ConvertReport {
  size_t onnx_nodes = 0;
  size_t nodes_before = 0;   // main-graph nodes entering the optimizer (after shape inference)
  size_t nodes = 0;          // main-graph nodes written
  size_t tensors = 0;
  size_t constants = 0;
  uint64_t weight_bytes = 0;
  uint64_t file_bytes = 0;
  std::map<std::string, int> op_counts;
  // One launch per executed kernel (a fused node is one; an If costs its
  // taken branch), before and after the optimizer.
  int64_t kernel_launches_before = 0;
  int64_t kernel_launches_after = 0;
  std::vector<PassStats> passes;       // in pipeline order
  std::map<std::string, int> fusions;  // fused pattern -> count
  uint64_t folded_weight_bytes = 0;    // bytes of constants the optimizer wrote
  kite::memory::PlanStats memory;      // in-place and view savings
  kite::memory::BudgetReport budget;   // when a memory budget (bytes or ratio) is set
  PrecisionReport precision;           // each node's precision and why
  // Pre-packed weight forms written (ConvertOptions::pack_for).
  std::vector<std::string> packed_for;  // the levels, resolved
  int packed_forms = 0;                 // blobs (each under one key per level)
  uint64_t packed_bytes = 0;
  // Bytes of the constants that have a form: what a run that uses the
  // forms does not read (unless another consumer reads a constant as is).
  uint64_t packed_source_bytes = 0;
  // When convert_onnx_file fails: the step that failed, so that callers can
  // map it to a status: "support" (ops, dtypes or attributes Kite does not
  // support, found while importing or when checking the CPU kernels),
  // "import" (malformed ONNX), "shapes", "optimize", "precision", "memory".
  std::string failed_step;
};

// Imports, infers shapes, optimizes, plans memory. On failure err names what
// is wrong.
bool convert_onnx_file(const std::string& onnx_path, const ConvertOptions& options,
                       ir::Model* out, ConvertReport* report, std::string* err);

// The machine-readable report (kite-convert --report, kite_convert_file): one
// JSON object; its keys are described in docs/FUSIONS.md.
std::string report_to_json(const std::string& onnx_path, const std::string& kite_path,
                           int opt_level, const ir::Model& model, const ConvertReport& report,
                           uint64_t file_bytes);

// False, with err saying by how much, when options.memory_budget was set and
// the converted model's arena does not fit it (nothing should be written).
bool check_memory_budget(const ConvertOptions& options, const ir::Model& model,
                         const ConvertReport& report, std::string* err);

// Makes graph outputs real arena tensors: an output that is a constant or a
// graph input gets an Identity node copying it. An unused node output
// before a used one (LSTM's Y when only Y_h is read) gets a tensor of its
// own, since a .kite node may leave off trailing outputs only.
void materialize_outputs(ir::Model* model);

}  // namespace kite::converter
