// Evaluates constant subexpressions with Kite's own CPU kernels, through the
// backend ABI (the same path the runtime takes), so the converter and the
// runtime cannot disagree on what an op computes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "kite/converter/ir.h"

namespace kite::converter {

// One CPU backend instance, created on first use and reused for every node.
class CpuEvaluator {
 public:
  CpuEvaluator() = default;
  ~CpuEvaluator();
  CpuEvaluator(const CpuEvaluator&) = delete;
  CpuEvaluator& operator=(const CpuEvaluator&) = delete;

  // True if the CPU backend runs this node as given; else false with the
  // backend's reason. Every input must have a known shape and every output
  // its inferred dtype and shape; input values are not needed.
  bool supports(const ir::Model& model, const ir::Node& node, std::string* reason);

  // Runs the node. Every present input must be a constant and every output's
  // dtype/shape known (run infer_types first). outputs_data gets one byte
  // vector per node output (empty for an absent optional output).
  bool evaluate(const ir::Model& model, const ir::Node& node,
                std::vector<std::vector<uint8_t>>* outputs_data, std::string* err);

 private:
  bool ensure_backend(std::string* err);

  const kite_backend_api* api_ = nullptr;
  void* backend_ = nullptr;
  std::vector<float> workspace_;  // the CPU kernels' scratch (workspace_size)
  uint64_t workspace_bytes_ = 0;
  bool bound_ = false;
};

// Asks the CPU backend's supports() about every node that would run: the
// main graph and the branches of each If (only the taken branch when the
// condition is a constant; If itself runs in the session). Run after
// infer_shapes. False with ONE message listing every refused node (name, op,
// the backend's reason), first line "N node(s) cannot run: ...".
bool check_cpu_support(const ir::Model& model, std::string* err);

// One-shot form of CpuEvaluator::evaluate.
bool evaluate_node_on_cpu(const ir::Model& model, const ir::Node& node,
                          std::vector<std::vector<uint8_t>>* outputs_data, std::string* err);

}  // namespace kite::converter
