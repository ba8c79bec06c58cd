// Helpers the plan functions share: operands, workgroup grids, dtype and
// constant checks, activation codes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "../kernel.h"
#include "kite/abi/plan_helpers.h"
#include "kite/ops/resolve.h"

namespace kite::vk {

using namespace kite::abi::plan;  // Shape, numel, primitive, check_primitive_output ...

// Elementwise op codes of common.glsl (OP_*).
enum OpCode : uint32_t {
  kOpNone = 0, kOpRelu, kOpClip, kOpSigmoid, kOpSiLU, kOpHardSigmoid, kOpHardSwish,
  kOpLeakyRelu, kOpTanh, kOpGelu, kOpGeluTanh, kOpSqrt, kOpReciprocal, kOpExp, kOpLog, kOpAbs,
  kOpNeg, kOpErf, kOpElu, kOpSoftplus, kOpSign, kOpCeil, kOpFloor, kOpRound, kOpSin, kOpCos,
  kOpMish, kOpScale
};

// A shader's code for each op one plan function takes (OP_*, reduction
// and binary codes).
struct OpCodeEntry {
  const char* op;
  uint32_t code;
};
// "" and *code for n's op, or why the table has none.
template <size_t N>
std::string op_code(const NodeView& n, const OpCodeEntry (&table)[N], uint32_t* code) {
  for (const OpCodeEntry& e : table) {
    if (n.op.op == e.op) {
      *code = e.code;
      return "";
    }
  }
  return "op " + n.op.op + " has no Vulkan kernel";
}

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

// Units per element in the shaders' storage: 32-bit words, or one 16-bit
// unit for float16 (the half variants' WORD_T); 0: not supported.
size_t dtype_words(kite_dtype dtype);
// Bytes of one storage unit of t: 2 for float16 (the half variants), else 4.
inline uint64_t unit_bytes(const kite_backend_tensor2* t) {
  return t && t->dtype == KITE_DTYPE_FLOAT16 ? 2 : 4;
}
// "" when every float input and output of n has dtype float32, or every one
// float16 (then *half is set) on a device with 16-bit storage buffers; else
// why not. Inputs listed in `skip` (Resize's roi and scales) are not looked at.
std::string float_dtypes(const NodeView& n, const PlanContext& ctx, bool* half,
                         std::initializer_list<size_t> skip = {});

// Workgroups for n invocations of `local` each, spread over x and y when x
// alone would pass the device's limit. False when even that does not fit.
bool grid_1d(const PlanContext& ctx, uint64_t n, uint32_t local, uint32_t groups[3]);
// Groups for `count` workgroups (one per row), spread over x and y.
bool grid_groups(const PlanContext& ctx, uint64_t count, uint32_t groups[3]);

// Appends a dispatch; params are the shader's words after its offsets.
Dispatch& add_dispatch(Kernel* k, ShaderId shader, std::vector<Operand> operands,
                       std::vector<uint32_t> params, const uint32_t groups[3]);

// The checks of kite/abi/device_node.h, naming this backend. float32 in
// `dtypes` admits float16 too: Backend::plan lets a node with float16
// tensors reach only the plan functions whose shaders have half variants
// (half_plan), and only when all its float tensors are float16.
std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes);
// True if plan's kernels take float16 nodes (fp16 storage, fp32 arithmetic).
bool half_plan(PlanFn plan);
inline std::string expect_constant(const NodeView& n, size_t i, const char* what) {
  return abi::expect_constant(n, i, what, "Vulkan");
}
inline std::string reduce_axes_of(const NodeView& n, std::vector<int64_t>* axes) {
  return abi::reduce_axes_of(n, axes, "Vulkan");
}

// The fused node's activation (attributes activation, activation_alpha,
// activation_beta); the pattern must end with "+<activation>". optional:
// absent means none.
std::string parse_activation(const NodeView& n, bool optional, Activation* out);

}  // namespace kite::vk
