#include "plan_util.h"

#include <algorithm>
#include <limits>

#include "kite/ops/fused.h"

namespace kite::vk {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

size_t dtype_words(kite_dtype dtype) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32:
    case KITE_DTYPE_INT32: return 1;
    case KITE_DTYPE_INT64: return 2;
    default: return 0;
  }
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
  d.shader = shader;
  d.operands = std::move(operands);
  d.params = std::move(params);
  for (int i = 0; i < 3; ++i) d.groups[i] = groups[i];
  k->dispatches.push_back(std::move(d));
  return k->dispatches.back();
}

std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes) {
  return abi::expect_dtype(n, i, dtypes, "Vulkan");
}

std::string expect_constant(const NodeView& n, size_t i, const char* what) {
  return abi::expect_constant(n, i, what, "Vulkan");
}

std::string reduce_axes_of(const NodeView& n, std::vector<int64_t>* axes) {
  return abi::reduce_axes_of(n, axes, "Vulkan");
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

OpNode primitive(const NodeView& n, const char* op_type, size_t num_inputs) {
  return kite::ops::fused_primitive(n.op, op_type, num_inputs);
}

std::string check_primitive_output(const NodeView& n, const OpNode& primitive_op, size_t k) {
  return kite::ops::check_primitive_output(primitive_op, n.outputs, k);
}

}  // namespace kite::vk
