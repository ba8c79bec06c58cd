#include "plan_util.h"

#include <algorithm>
#include <limits>

#include "kite/ops/fused.h"

namespace kite::vk {

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
