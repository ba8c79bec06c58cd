// The converter's reference evaluator: plain, correct, not fast. It computes
// nodes whose inputs are all constants for ops no backend runs (or runs only
// in some modes), so that ops that only ever see constants -- the mask and
// shape subgraphs exporters emit (Mod, Trilu, NonZero, EyeLike, ...) -- fold
// away at convert time and only the ops that remain in the optimized graph
// need kernels. The CPU backend stays the evaluator of every op it runs
// (src/const_eval.h); this one is asked only when the CPU backend does not
// run the node (src/fold_policy.h, src/infer_shapes.cpp).
//
// Each op computes its own result shape (NonZero's depends on the values),
// so an op here needs no op rules. Results follow the ONNX specification and
// match onnxruntime (tests/e2e/test_reference_fold.py compares them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

struct RefValue {
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // little-endian element bytes, as ir::Tensor::data
};

// True if the reference evaluator computes this op (domain "" / ai.onnx).
bool has_reference_evaluator(const std::string& op);
std::vector<std::string> reference_evaluator_ops();

// Computes the node. Every present input must be a constant. outputs gets one
// value per node output. False with *err naming the node on bad input (a
// wrong dtype, an index out of range, ...) or an op it does not compute.
bool reference_evaluate(const ir::Model& model, const ir::Node& node, std::vector<RefValue>* outputs,
                        std::string* err);

}  // namespace kite::converter
