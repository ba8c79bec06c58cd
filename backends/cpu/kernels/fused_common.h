// What the fused kernels share: the activation epilogue, the primitive op a
// fused op extends (for validation with the kite::ops rules), and SubNode,
// a primitive ABI node over a fused node's tensors so that a fused kernel
// can reuse a primitive kernel (Conv, Gemm, MatMul, LayerNormalization).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "fused_kernels.h"
#include "sgemm.h"
#include "kite/abi/node.h"
#include "kite/ops/fused.h"

namespace kite::cpu::fused {

// The activation a fused node applies last (kite::ops rule of the fused
// ops). Formulas are the primitive kernels' (kernels/unary.cpp), so the
// fused path and the body path agree closely.
using Activation = kite::ops::FusedActivation;
inline std::string parse_activation(const OpNode& op, const std::string& pattern, bool optional,
                                    Activation* out) {
  return kite::ops::parse_fused_activation(op, pattern, optional, out);
}

// y[i] = act(y[i] + bias[i % n]) over rows x n values (bias may be null).
void apply_activation(const Activation& act, float* y, int64_t rows, int64_t n, const float* bias,
                      ThreadPool& pool);

// act (an Activation) on one tile of C, rows x cols floats ldc apart, with
// apply_activation's bits: the GEMM's tile hook (sgemm::Epilogue::tile).
void activation_tile(const void* act, float* c, int64_t ldc, int64_t rows, int64_t cols);
// Sets *e to apply act in a primitive kernel's store: Relu and Clip by the
// store's own formulas, and, with hook, sigmoid, SiLU, hard sigmoid /
// swish and GELU by the tile hook (activation_tile over act, which must
// outlive the runs that use *e), so each block gets it while in cache, not
// in a second pass over the output. false (e untouched) for the others.
bool activation_into_epilogue(const Activation& act, bool hook, sgemm::Epilogue* e);

// The fused node as the primitive op it extends, its declared output, and
// the primitive's rules against that output: kite/ops/fused.h.
inline OpNode primitive(const OpNode& fused, const char* op_type, size_t num_inputs) {
  return kite::ops::fused_primitive(fused, op_type, num_inputs);
}
inline std::string expect_output(const OpNode& /*op*/, const std::vector<TensorType>& outputs, size_t k,
                                 kite_dtype dtype, const Shape& shape) {
  return kite::ops::expect_declared_output(outputs, k, dtype, shape);
}
inline std::string check_primitive_output(const OpNode& /*fused*/, const OpNode& primitive_op,
                                          const std::vector<TensorType>& outputs, size_t k) {
  return kite::ops::check_primitive_output(primitive_op, outputs, k);
}

// A primitive ABI node over some of a fused node's tensors. Owns everything
// the node points to; keep it alive as long as the kernel prepared from it.
class SubNode {
 public:
  // op_type with attrs over the fused node's inputs input_slots (-1: absent)
  // and its output output_slot.
  SubNode(const kite_backend_node& fused, const char* op_type, const std::vector<kite::ops::Attr>& attrs,
          const std::vector<int>& input_slots, int output_slot);
  SubNode(const SubNode&) = delete;
  SubNode& operator=(const SubNode&) = delete;
  // Validates the primitive node like the backend does (kite::ops rules,
  // declared output) and prepares its kernel with fn.
  // The inner kernel gets outer's threads, workspace (the backend's shared
  // scratch: it runs alone, inside this fused kernel's run) and packed
  // weight forms (this node's tensors are outer's).
  std::unique_ptr<Kernel> prepare(PrepareFn fn, const KernelArgs& outer, std::string* err);

 private:
  std::string op_type_;
  std::vector<kite::ops::Attr> attr_values_;
  OpNode op_;
  std::vector<const kite_backend_tensor*> inputs_;
  std::vector<const kite_backend_tensor*> outputs_;
  kite::abi::AttrTable attrs_;  // ABI attributes over attr_values_
  kite_backend_node node_{};
};

}  // namespace kite::cpu::fused
