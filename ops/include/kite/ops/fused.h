// Rules of the graph optimizer's fused ops (domain "kite", docs/FUSIONS.md)
// that every backend applies the same way: the folded activation, the
// primitive op a fused op extends, and its declared output. A backend maps
// FusedActivation::Kind onto its own kernel codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kite/ops/op_node.h"

namespace kite::ops {

// An activation folded into a fused op (attributes activation,
// activation_alpha, activation_beta), with ONNX's defaults for alpha/beta.
struct FusedActivation {
  enum Kind { kNone, kRelu, kClip, kSigmoid, kSiLU, kHardSigmoid, kHardSwish, kLeakyRelu, kTanh, kGelu, kGeluTanh };
  Kind kind = kNone;
  float alpha = 0.0f, beta = 0.0f;
};

// "" and *out, or why the node's activation is not usable. The pattern
// must end with "+<activation>". optional: an absent activation is kNone.
std::string parse_fused_activation(const OpNode& op, const std::string& pattern, bool optional,
                                   FusedActivation* out);

// The fused node as the primitive op it extends: the first num_inputs
// inputs, its attributes without the activation ones, one output.
OpNode fused_primitive(const OpNode& fused, const char* op_type, size_t num_inputs);

// "" when declared output k exists with this dtype and shape.
std::string expect_declared_output(const std::vector<TensorType>& outputs, size_t k, kite_dtype dtype,
                                   const std::vector<int64_t>& shape);

// Runs the op rules of a primitive op (fused_primitive) and checks that
// their output is declared output k: "" or why not.
std::string check_primitive_output(const OpNode& primitive_op, const std::vector<TensorType>& outputs, size_t k);

}  // namespace kite::ops
