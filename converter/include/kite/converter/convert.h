// The converter's top level: ONNX in, planned ir::Model out, .kite written.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "memory/budget.h"

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
};

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
  kite::memory::BudgetReport budget;   // when ConvertOptions::memory_budget > 0
};

// Imports, infers shapes, optimizes, plans memory. On failure err names what
// is wrong.
bool convert_onnx_file(const std::string& onnx_path, const ConvertOptions& options,
                       ir::Model* out, ConvertReport* report, std::string* err);

// Makes graph outputs real arena tensors: an output that is a constant or a
// graph input gets an Identity node copying it.
void materialize_outputs(ir::Model* model);

}  // namespace kite::converter
