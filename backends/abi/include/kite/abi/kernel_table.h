// Kernel tables of the backends: finding an op and checking that a table
// is well formed, for any entry type with an `op` member; and the op lists
// the device backends share.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kite/abi/device_node.h"

namespace kite::abi {

// The entry for `op`, or NULL.
template <typename Entry>
const Entry* find_entry(const std::vector<Entry>& table, const std::string& op) {
  for (const Entry& e : table) {
    if (op == e.op) return &e;
  }
  return nullptr;
}

// "" when every entry is complete (`complete(entry)`, which also sees a NULL
// op) and no op is listed twice; else what is wrong, starting with `what`
// ("CPU kernel table", "Vulkan fused kernel table").
template <typename Entry, typename Complete>
std::string check_entries(const std::vector<Entry>& table, const std::string& what, Complete complete) {
  std::set<std::string> seen;
  for (const Entry& e : table) {
    if (!e.op || !complete(e)) return what + " has an incomplete entry";
    if (!seen.insert(e.op).second) return what + " lists op " + e.op + " twice";
  }
  return "";
}

// A device backend's two kernel tables (primitive ops, domain ""; the
// optimizer's fused ops, domain "kite"), each entry an op and the backend's
// plan function for it.
template <typename PlanFn>
class DeviceKernels {
 public:
  struct Entry {
    const char* op;
    PlanFn plan;
  };
  // backend names it in messages ("Vulkan").
  DeviceKernels(std::string backend, std::vector<Entry> primitive, std::vector<Entry> fused)
      : backend_(std::move(backend)), primitive_(std::move(primitive)), fused_(std::move(fused)) {}

  // The entry for op in the fused or the primitive table, or NULL.
  const Entry* find(const std::string& op, bool fused) const { return find_entry(fused ? fused_ : primitive_, op); }
  // Why find() gave NULL, naming the op (and the fused node's pattern).
  std::string missing(const std::string& op, const std::string& pattern) const {
    return pattern.empty() ? "no " + backend_ + " kernel for op " + op
                           : "no " + backend_ + " kernel for fused op " + op + " (pattern " + pattern + ")";
  }
  // Everything a device backend checks before it plans a node: the node's
  // view (view_node), a kernel for its op, and for a primitive its declared
  // outputs. "" with *view and *entry, or why the node is not taken.
  std::string select(const kite_backend_node2& node, NodeView* view, std::string* label, const Entry** entry) const {
    std::string why = view_node(node, view, label);
    if (!why.empty()) return why;
    *entry = find(view->op.op, view->fused());
    if (!*entry) return missing(view->op.op, view->pattern);
    return view->fused() ? "" : check_declared_outputs(*view);
  }
  // "" when both tables are well formed (complete entries, no op twice).
  std::string check() const {
    const auto complete = [](const Entry& e) { return e.plan != nullptr; };
    std::string why = check_entries(primitive_, backend_ + " kernel table", complete);
    if (why.empty()) why = check_entries(fused_, backend_ + " fused kernel table", complete);
    return why;
  }

 private:
  std::string backend_;
  std::vector<Entry> primitive_, fused_;
};

}  // namespace kite::abi

// The ops the device backends (Vulkan, CUDA) implement, each with the plan
// function that takes it: the two backends split their kernels into the
// same families with the same plan function names, so one list serves
// both. A backend builds its DeviceKernels with X(op, plan) expanding to an
// entry, its own plan functions found by name in its namespace; an op only
// one backend has goes into that backend's table next to the list.
// Primitive ops (domain ""):
#define KITE_DEVICE_PRIMITIVE_KERNELS(X) \
  /* Convolution and matrix products. */ \
  X("Conv", plan_conv) \
  X("Gemm", plan_gemm) \
  X("MatMul", plan_matmul) \
  /* Elementwise, two inputs with numpy broadcasting. */ \
  X("Add", plan_binary) \
  X("Sub", plan_binary) \
  X("Mul", plan_binary) \
  X("Div", plan_binary) \
  X("Pow", plan_binary) \
  X("PRelu", plan_binary) \
  X("Sum", plan_variadic) \
  X("Mean", plan_variadic) \
  X("Max", plan_variadic) \
  X("Min", plan_variadic) \
  /* Elementwise, one input. */ \
  X("Relu", plan_unary) \
  X("Sigmoid", plan_unary) \
  X("Tanh", plan_unary) \
  X("Clip", plan_unary) \
  X("Sqrt", plan_unary) \
  X("Reciprocal", plan_unary) \
  X("Exp", plan_unary) \
  X("Log", plan_unary) \
  X("Abs", plan_unary) \
  X("Neg", plan_unary) \
  X("Erf", plan_unary) \
  X("LeakyRelu", plan_unary) \
  X("Elu", plan_unary) \
  X("HardSigmoid", plan_unary) \
  X("HardSwish", plan_unary) \
  X("Gelu", plan_unary) \
  X("Softplus", plan_unary) \
  X("Sign", plan_unary) \
  X("Ceil", plan_unary) \
  X("Floor", plan_unary) \
  X("Round", plan_unary) \
  X("Sin", plan_unary) \
  X("Cos", plan_unary) \
  X("Mish", plan_unary) \
  /* Pooling, normalisation, softmax. */ \
  X("MaxPool", plan_pool) \
  X("AveragePool", plan_pool) \
  X("GlobalAveragePool", plan_global_pool) \
  X("GlobalMaxPool", plan_global_pool) \
  X("BatchNormalization", plan_batch_norm) \
  X("InstanceNormalization", plan_instance_norm) \
  X("LayerNormalization", plan_layer_norm) \
  X("Softmax", plan_softmax) \
  X("LogSoftmax", plan_softmax) \
  /* Data movement. */ \
  X("Identity", plan_copy) \
  X("Reshape", plan_copy) \
  X("Flatten", plan_copy) \
  X("Squeeze", plan_copy) \
  X("Unsqueeze", plan_copy) \
  X("Dropout", plan_copy) \
  X("Transpose", plan_transpose) \
  X("Concat", plan_concat) \
  X("Split", plan_split) \
  X("Slice", plan_slice) \
  X("Expand", plan_expand) \
  X("Gather", plan_gather) \
  X("Pad", plan_pad) \
  X("Cast", plan_cast) \
  X("Resize", plan_resize) \
  /* Reductions. */ \
  X("ReduceSum", plan_reduce) \
  X("ReduceMean", plan_reduce) \
  X("ReduceMax", plan_reduce) \
  X("ReduceMin", plan_reduce) \
  X("ReduceProd", plan_reduce) \
  X("ReduceL1", plan_reduce) \
  X("ReduceL2", plan_reduce) \
  X("ReduceSumSquare", plan_reduce) \
  X("ReduceLogSumExp", plan_reduce)

// The graph optimizer's fused ops (domain "kite", docs/FUSIONS.md):
#define KITE_DEVICE_FUSED_KERNELS(X) \
  X("FusedConv", plan_fused_conv) \
  X("FusedGemm", plan_fused_gemm) \
  X("FusedMatMul", plan_fused_matmul) \
  X("Gelu", plan_fused_gelu) \
  X("LayerNormalization", plan_fused_layer_norm) \
  X("SkipLayerNormalization", plan_fused_skip_layer_norm) \
  X("Attention", plan_fused_attention)
