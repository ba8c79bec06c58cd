#include "kernels.h"

#include <algorithm>
#include <limits>

#include "kite/ops/fused.h"

namespace kite::vk {

size_t dtype_words(kite_dtype dtype) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32:
    case KITE_DTYPE_INT32:
    case KITE_DTYPE_FLOAT16: return 1;  // one 16-bit unit in the half variants
    case KITE_DTYPE_INT64: return 2;
    default: return 0;
  }
}

std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes) {
  std::vector<kite_dtype> admitted(dtypes);
  for (kite_dtype d : dtypes) {
    if (d == KITE_DTYPE_FLOAT32) admitted.push_back(KITE_DTYPE_FLOAT16);
  }
  if (!n.op.has_input(i)) return "input " + std::to_string(i) + " is missing";
  for (kite_dtype d : admitted) {
    if (n.op.inputs[i].dtype == d) return "";
  }
  return abi::expect_dtype(n, i, dtypes, "Vulkan");
}

std::string float_dtypes(const NodeView& n, const PlanContext& ctx, bool* half,
                         std::initializer_list<size_t> skip) {
  // The float inputs (integer ones, indices and shapes, are the plan
  // functions' to check), then the rule the device backends share.
  std::vector<size_t> inputs;
  for (size_t i = 0; i < n.op.inputs.size(); ++i) {
    const kite_dtype d = n.op.inputs[i].dtype;
    if (std::find(skip.begin(), skip.end(), i) == skip.end() &&
        (d == KITE_DTYPE_FLOAT32 || d == KITE_DTYPE_FLOAT16)) {
      inputs.push_back(i);
    }
  }
  const std::string why = abi::float_storage(n, inputs, "Vulkan", half);
  if (!why.empty()) return why;
  if (*half && !ctx.physical.storage_16bit) {
    return "float16 tensors need 16-bit storage buffers (storageBuffer16BitAccess), which the device lacks";
  }
  return "";
}

bool half_plan(PlanFn plan) {
  static const PlanFn plans[] = {
      plan_conv,      plan_fused_conv, plan_matmul,    plan_gemm,      plan_fused_matmul,
      plan_fused_gemm, plan_binary,    plan_variadic,  plan_unary,     plan_fused_gelu,
      plan_copy,      plan_transpose,  plan_concat,    plan_split,     plan_slice,
      plan_expand,    plan_gather,     plan_pad,       plan_resize,    plan_pool,
  };
  return std::find(std::begin(plans), std::end(plans), plan) != std::end(plans);
}

bool grid_1d(const PlanContext& ctx, uint64_t n, uint32_t local, uint32_t groups[3]) {
  const uint64_t count = (n + local - 1) / local;
  return grid_groups(ctx, count, groups);
}

bool grid_groups(const PlanContext& ctx, uint64_t count, uint32_t groups[3]) {
  const uint64_t max_x = ctx.limits.max_workgroup_count[0];
  const uint64_t max_y = ctx.limits.max_workgroup_count[1];
  groups[2] = 1;
  if (count == 0) {
    groups[0] = groups[1] = 0;
    return true;
  }
  if (count <= max_x) {
    groups[0] = static_cast<uint32_t>(count);
    groups[1] = 1;
    return true;
  }
  // x * y >= count; shaders skip the indices past the end.
  const uint64_t y = (count + max_x - 1) / max_x;
  if (y > max_y) return false;
  groups[0] = static_cast<uint32_t>((count + y - 1) / y);
  groups[1] = static_cast<uint32_t>(y);
  return true;
}

Dispatch& add_dispatch(Kernel* k, ShaderId shader, std::vector<Operand> operands,
                       std::vector<uint32_t> params, const uint32_t groups[3]) {
  Dispatch d;
  // A float16 tensor among the operands picks the shader's half variant
  // (the plan functions admit float16 only where every float tensor of the
  // node is float16 and the shader has one).
  const ShaderId half = half_variant(shader);
  for (const Operand& o : operands) {
    if (half != kShaderCount && o.kind == Operand::Kind::kTensor && o.tensor &&
        o.tensor->dtype == KITE_DTYPE_FLOAT16) {
      shader = half;
    }
  }
  d.shader = shader;
  d.operands = std::move(operands);
  d.params = std::move(params);
  for (int i = 0; i < 3; ++i) d.groups[i] = groups[i];
  k->dispatches.push_back(std::move(d));
  return k->dispatches.back();
}

// The shaders' activation codes follow kite::ops::FusedActivation::Kind.
static_assert(kOpNone == uint32_t{kite::ops::FusedActivation::kNone} &&
                  kOpRelu == uint32_t{kite::ops::FusedActivation::kRelu} &&
                  kOpGeluTanh == uint32_t{kite::ops::FusedActivation::kGeluTanh},
              "OpCode's activations are out of step with kite::ops::FusedActivation");

std::string parse_activation(const NodeView& n, bool optional, Activation* out) {
  kite::ops::FusedActivation a;
  const std::string why = kite::ops::parse_fused_activation(n.op, n.pattern, optional, &a);
  out->code = static_cast<uint32_t>(a.kind);
  out->alpha = a.alpha;
  out->beta = a.beta;
  return why;
}

}  // namespace kite::vk
