// MatMul, Gemm and their fused forms (FusedMatMul: MatMul + bias [N] (+
// activation); FusedGemm: Gemm + activation) on the GEMM shaders: the tiled
// one (64x64 tiles through shared memory) or, for fewer than 16 rows, one
// output per invocation. Operands are addressed through strides, so
// transposes and broadcast biases cost nothing.
#include "kernels.h"

namespace kite::vk {

namespace {

// Above this many rows the tiled shader wins; below, most of a 64-row tile
// would be idle.
constexpr uint32_t kSmallRows = 16;
// Batch broadcasts that no pair of strides expresses run one dispatch per
// batch, up to this many.
constexpr int64_t kMaxBatchDispatches = 1024;

bool fits_u32(int64_t v) { return v >= 0 && v <= static_cast<int64_t>(UINT32_MAX); }

}  // namespace

std::string add_gemm(Kernel* k, const PlanContext& ctx, const kite_backend_tensor2* a,
                     const kite_backend_tensor2* b, const kite_backend_tensor2* bias,
                     const kite_backend_tensor2* c, const GemmDesc& g) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return "";  // nothing to compute
  const std::vector<uint32_t> params = {
      g.M, g.N, g.K, g.sam, g.sak, g.sbk, g.sbn, g.scm, g.sab, g.sbb, g.scb,
      g.sbias_m, g.sbias_n, g.sbias_b, bias ? 1u : 0u, float_bits(g.alpha), float_bits(g.beta),
      g.act.code, float_bits(g.act.alpha), float_bits(g.act.beta)};
  const std::vector<Operand> operands = {read(a, g.extra_a), read(b, g.extra_b),
                                         bias ? read(bias, g.extra_bias) : unused(c), write(c, g.extra_c)};
  if (ctx.lanes) {
    const uint32_t groups[3] = {(g.N + 63) / 64, (g.M + 15) / 16, g.batch};
    if (groups[1] > ctx.limits.max_workgroup_count[1] || groups[2] > ctx.limits.max_workgroup_count[2] ||
        groups[0] > ctx.limits.max_workgroup_count[0]) {
      return "the GEMM passes the device's workgroup count limits";
    }
    add_dispatch(k, kShaderGemmLanes, operands, params, groups);
    return "";
  }
  const bool small = g.M < kSmallRows;
  uint32_t groups[3];
  if (small) {
    groups[0] = (g.N + 63) / 64;
    groups[1] = g.M;
  } else {
    groups[0] = (g.N + 63) / 64;
    groups[1] = (g.M + 63) / 64;
  }
  groups[2] = g.batch;
  if (groups[0] > ctx.limits.max_workgroup_count[0] || groups[1] > ctx.limits.max_workgroup_count[1] ||
      groups[2] > ctx.limits.max_workgroup_count[2]) {
    return "the GEMM's " + std::to_string(g.M) + "x" + std::to_string(g.N) + " (batch " +
           std::to_string(g.batch) + ") passes the device's workgroup count limits";
  }
  if (!small && ctx.limits.max_workgroup_invocations < 256) {
    return "the tiled GEMM needs 256 invocations per workgroup, the device allows " +
           std::to_string(ctx.limits.max_workgroup_invocations);
  }
  add_dispatch(k, small ? kShaderGemmSmall : kShaderGemm, operands, params, groups);
  return "";
}

namespace {

// MatMul's operands as numpy defines them (1-D operands promoted), with the
// batch broadcast as strides or, where strides cannot express it, one
// dispatch per batch.
std::string plan_matmul_core(const NodeView& n, const PlanContext& ctx, const Shape& as,
                             const Shape& bs, const kite_backend_tensor2* bias,
                             const Activation& act, Kernel* k) {
  if (as.empty() || bs.empty()) return "MatMul operands must have at least one dim";
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  const int64_t M = a_vec ? 1 : as[as.size() - 2];
  const int64_t K = as.back();
  const int64_t N = b_vec ? 1 : bs.back();
  const int64_t Kb = b_vec ? bs[0] : bs[bs.size() - 2];
  if (K != Kb) return "MatMul inner dims differ";
  const Shape a_batch(as.begin(), as.end() - (a_vec ? 1 : 2));
  const Shape b_batch(bs.begin(), bs.end() - (b_vec ? 1 : 2));
  Shape out_batch;
  if (!kite::ops::broadcast_shapes(a_batch, b_batch, &out_batch)) return "MatMul batch dims do not broadcast";
  const int64_t batch = numel(out_batch);
  if (!fits_u32(M) || !fits_u32(N) || !fits_u32(K) || !fits_u32(M * K) || !fits_u32(K * N) ||
      !fits_u32(M * N) || !fits_u32(batch * M * N)) {
    return "MatMul is too large for 32-bit indexing";
  }
  GemmDesc g;
  g.M = static_cast<uint32_t>(M);
  g.N = static_cast<uint32_t>(N);
  g.K = static_cast<uint32_t>(K);
  g.sam = static_cast<uint32_t>(K);
  g.sak = 1;
  g.sbk = static_cast<uint32_t>(N);
  g.sbn = 1;
  g.scm = static_cast<uint32_t>(N);
  g.scb = static_cast<uint32_t>(M * N);
  if (bias) {
    g.sbias_n = 1;
  }
  g.act = act;
  // Left-pad the batch shapes to the output's rank.
  const size_t r = out_batch.size();
  Shape ap(r, 1), bp(r, 1);
  std::copy(a_batch.begin(), a_batch.end(), ap.begin() + static_cast<std::ptrdiff_t>(r - a_batch.size()));
  std::copy(b_batch.begin(), b_batch.end(), bp.begin() + static_cast<std::ptrdiff_t>(r - b_batch.size()));
  auto stride_for = [&](const Shape& p, int64_t matrix) -> int64_t {
    if (numel(p) == 1) return 0;
    if (p == out_batch) return matrix;
    return -1;  // partial broadcast
  };
  const int64_t sa = stride_for(ap, M * K), sb = stride_for(bp, K * N);
  if (sa >= 0 && sb >= 0) {
    g.batch = static_cast<uint32_t>(batch);
    g.sab = static_cast<uint32_t>(sa);
    g.sbb = static_cast<uint32_t>(sb);
    return add_gemm(k, ctx, n.in(0), n.in(1), bias, n.out(0), g);
  }
  if (batch > kMaxBatchDispatches) return "MatMul's batch broadcast needs too many dispatches";
  g.batch = 1;
  for (int64_t z = 0; z < batch; ++z) {
    int64_t rest = z, ia = 0, ib = 0, a_stride = 1, b_stride = 1;
    for (size_t d = r; d-- > 0;) {
      const int64_t idx = rest % out_batch[d];
      rest /= out_batch[d];
      ia += (ap[d] == 1 ? 0 : idx) * a_stride;
      ib += (bp[d] == 1 ? 0 : idx) * b_stride;
      a_stride *= ap[d];
      b_stride *= bp[d];
    }
    g.extra_a = static_cast<uint32_t>(ia * M * K);
    g.extra_b = static_cast<uint32_t>(ib * K * N);
    g.extra_c = static_cast<uint32_t>(z * M * N);
    std::string why = add_gemm(k, ctx, n.in(0), n.in(1), bias, n.out(0), g);
    if (!why.empty()) return why;
  }
  return "";
}

// Gemm's (transA, transB, alpha, beta, C broadcast) as a GEMM descriptor.
std::string plan_gemm_core(const NodeView& n, const PlanContext& ctx, const Activation& act, Kernel* k) {
  const Shape& as = n.in_shape(0);
  const Shape& bs = n.in_shape(1);
  if (as.size() != 2 || bs.size() != 2) return "Gemm operands must be 2-D";
  const bool ta = n.op.attr_int("transA", 0) != 0, tb = n.op.attr_int("transB", 0) != 0;
  const int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1];
  const int64_t N = tb ? bs[0] : bs[1];
  if (!fits_u32(M * K) || !fits_u32(K * N) || !fits_u32(M * N)) return "Gemm is too large for 32-bit indexing";
  GemmDesc g;
  g.M = static_cast<uint32_t>(M);
  g.N = static_cast<uint32_t>(N);
  g.K = static_cast<uint32_t>(K);
  g.batch = 1;
  g.sam = ta ? 1 : static_cast<uint32_t>(K);
  g.sak = ta ? static_cast<uint32_t>(M) : 1;
  g.sbk = tb ? 1 : static_cast<uint32_t>(N);
  g.sbn = tb ? static_cast<uint32_t>(K) : 1;
  g.scm = static_cast<uint32_t>(N);
  g.alpha = n.op.attr_float("alpha", 1.0f);
  g.beta = n.op.attr_float("beta", 1.0f);
  g.act = act;
  const kite_backend_tensor2* bias = nullptr;
  if (n.op.has_input(2)) {
    std::string why = expect_dtype(n, 2, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
    const Shape& cs = n.in_shape(2);
    bias = n.in(2);
    if (cs.size() == 1) {
      g.sbias_n = cs[0] == 1 ? 0 : 1;
    } else if (cs.size() == 2) {
      g.sbias_m = cs[0] == 1 ? 0 : static_cast<uint32_t>(cs[1]);
      g.sbias_n = cs[1] == 1 ? 0 : 1;
    } else if (!cs.empty()) {
      return "Gemm's C has more than 2 dims";
    }
  }
  return add_gemm(k, ctx, n.in(0), n.in(1), bias, n.out(0), g);
}

}  // namespace

std::string plan_matmul(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  for (size_t i = 0; i < 2; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  return plan_matmul_core(n, ctx, n.in_shape(0), n.in_shape(1), nullptr, Activation(), k);
}

std::string plan_gemm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  for (size_t i = 0; i < 2; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  return plan_gemm_core(n, ctx, Activation(), k);
}

std::string plan_fused_matmul(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.pattern.rfind("MatMul+Add", 0) != 0) return "pattern '" + n.pattern + "' is not MatMul+Add";
  if (n.op.inputs.size() != 3 || !n.op.has_input(2) || n.outputs.size() != 1) {
    return "expects inputs A, B, bias and one output";
  }
  for (size_t i = 0; i < 3; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  Activation act;
  std::string why = parse_activation(n, true, &act);
  if (!why.empty()) return why;
  const OpNode p = primitive(n, "MatMul", 2);
  why = check_primitive_output(n, p, 0);
  if (!why.empty()) return why;
  const Shape& out = n.out_shape(0);
  const Shape& bias = n.in_shape(2);
  const int64_t N = out.empty() ? 1 : out.back();
  if (bias.size() != 1 || bias[0] != N) {
    return input_label(n, 2) + " is " + kite::ops::shape_string(bias) + ", expected [" +
           std::to_string(N) + "]";
  }
  return plan_matmul_core(n, ctx, n.in_shape(0), n.in_shape(1), n.in(2), act, k);
}

std::string plan_fused_gemm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.pattern.rfind("Gemm+", 0) != 0) return "pattern '" + n.pattern + "' is not Gemm+<activation>";
  if (n.op.inputs.size() < 2 || n.op.inputs.size() > 3 || n.outputs.size() != 1) {
    return "expects inputs A, B [, C] and one output";
  }
  for (size_t i = 0; i < 2; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  Activation act;
  std::string why = parse_activation(n, false, &act);
  if (!why.empty()) return why;
  const OpNode p = primitive(n, "Gemm", 3);
  why = check_primitive_output(n, p, 0);
  if (!why.empty()) return why;
  return plan_gemm_core(n, ctx, act, k);
}

}  // namespace kite::vk
