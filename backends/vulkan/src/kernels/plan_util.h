// Helpers the plan functions share: operands, workgroup grids, dtype and
// constant checks, activation codes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../kernel.h"
#include "kite/ops/resolve.h"

namespace kite::vk {

using Shape = std::vector<int64_t>;
using kite::ops::OpNode;
using kite::ops::TensorType;
using abi::broadcast_strides;
using abi::constant_ints;
using abi::input_label;
using kite::ops::normalize_axis;  // -1 when out of range

// Elementwise op codes of common.glsl (OP_*).
enum OpCode : uint32_t {
  kOpNone = 0, kOpRelu, kOpClip, kOpSigmoid, kOpSiLU, kOpHardSigmoid, kOpHardSwish,
  kOpLeakyRelu, kOpTanh, kOpGelu, kOpGeluTanh, kOpSqrt, kOpReciprocal, kOpExp, kOpLog, kOpAbs,
  kOpNeg, kOpErf, kOpElu, kOpSoftplus, kOpSign, kOpCeil, kOpFloor, kOpRound, kOpSin, kOpCos,
  kOpMish, kOpScale
};

struct Activation {
  uint32_t code = kOpNone;
  float alpha = 0.0f, beta = 0.0f;
};

inline Operand read(const kite_backend_tensor2* t, uint32_t extra_words = 0) {
  Operand o;
  o.tensor = t;
  o.access = Access::kRead;
  o.extra_words = extra_words;
  return o;
}
inline Operand write(const kite_backend_tensor2* t, uint32_t extra_words = 0) {
  Operand o;
  o.tensor = t;
  o.access = Access::kWrite;
  o.extra_words = extra_words;
  return o;
}
// A binding the shader declares but does not touch (an absent optional
// input): bound to another tensor of the dispatch, ignored by barriers.
inline Operand unused(const kite_backend_tensor2* t) {
  Operand o;
  o.tensor = t;
  o.access = Access::kUnused;
  return o;
}
inline Operand table_operand() {
  Operand o;
  o.kind = Operand::Kind::kTable;
  o.access = Access::kRead;
  return o;
}
inline Operand status_operand() {
  Operand o;
  o.kind = Operand::Kind::kStatus;
  o.access = Access::kReadWrite;
  return o;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline uint32_t int_bits(int64_t v) { return static_cast<uint32_t>(static_cast<int32_t>(v)); }

int64_t numel(const Shape& s);
size_t dtype_words(kite_dtype dtype);  // 32-bit words per element (0: not word-sized)

// Workgroups for n invocations of `local` each, spread over x and y when x
// alone would pass the device's limit. False when even that does not fit.
bool grid_1d(const PlanContext& ctx, uint64_t n, uint32_t local, uint32_t groups[3]);
// Groups for `count` workgroups (one per row), spread over x and y.
bool grid_groups(const PlanContext& ctx, uint64_t count, uint32_t groups[3]);

// Appends a dispatch; params are the shader's words after its offsets.
Dispatch& add_dispatch(Kernel* k, ShaderId shader, std::vector<Operand> operands,
                       std::vector<uint32_t> params, const uint32_t groups[3]);

// "" when input i is present with one of the dtypes.
std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes);
// "" when input i is a constant (its host bytes are readable).
std::string expect_constant(const NodeView& n, size_t i, const char* what);
// A reduction's axes (input 1 or the attribute), not yet normalized.
std::string reduce_axes_of(const NodeView& n, std::vector<int64_t>* axes);

// The fused node's activation (attributes activation, activation_alpha,
// activation_beta); the pattern must end with "+<activation>". optional:
// absent means none.
std::string parse_activation(const NodeView& n, bool optional, Activation* out);
// The fused node as the primitive op it extends: the first num_inputs
// inputs, attributes without the activation ones.
OpNode primitive(const NodeView& n, const char* op_type, size_t num_inputs);
// "" when the primitive op's rules give declared output k.
std::string check_primitive_output(const NodeView& n, const OpNode& primitive_op, size_t k);

}  // namespace kite::vk
