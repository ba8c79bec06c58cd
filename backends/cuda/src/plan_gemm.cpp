// Matrix products: MatMul (numpy batching and broadcasting), Gemm, and the
// fused MatMul+Add[+act] and Gemm+act. Two implementations, chosen per
// node like convolutions (gemm=auto: both timed at prepare, the faster
// kept): cuBLASLt with its bias / ReLU / GELU(tanh) epilogues (other
// activations: Kite's activation kernel in place after it), and Kite's own
// tiled GEMM with the whole epilogue fused. float16 nodes (fp16 storage,
// fp32 arithmetic) run on Kite's own kernels only.
#include <algorithm>

#include "backend.h"
#include "kite/abi/device_rules.h"
#include "library_calls.h"
#include "plan_util.h"

namespace kite::cuda {

using kite_cuda::Act;

namespace {

// The product as both implementations see it. bias: a tensor added with
// beta, broadcast through (sbias_m, sbias_n) and batch strides; c_full: the
// bias is a full [M, N] matrix per batch (cuBLASLt's C).
struct Product {
  GemmDesc g;
  const kite_backend_tensor2 *a = nullptr, *b = nullptr, *bias = nullptr, *y = nullptr;
  bool bias_is_row = false;   // bias varies along N only (cuBLASLt's bias epilogue)
  bool bias_is_full = false;  // bias is [M, N] (cuBLASLt's C)
};

int lt_epilogue(const Act& act, bool has_bias, bool* act_fused) {
  *act_fused = act.op == kite_cuda::kOpIdentity || (has_bias && (act.op == kite_cuda::kOpRelu || act.op == kite_cuda::kOpGeluTanh));
  if (!has_bias) return 0;
  if (act.op == kite_cuda::kOpRelu) return 2;
  if (act.op == kite_cuda::kOpGeluTanh) return 3;  // cuBLASLt's GELU is the tanh form
  return 1;
}

std::string finish(const NodeView& n, const PlanContext& ctx, Kernel* k, const Product& pr) {
  Kernel own;
  add_own_gemm(&own, pr.a, pr.b, pr.bias, pr.y, pr.g);
  own.how = "own tiled GEMM";
  const int64_t batches = pr.g.nb1 * pr.g.nb2;
  const bool lt_shape = batches == 1 || pr.g.nb1 == 1;
  const bool lt_bias = !pr.bias || (pr.bias_is_row && pr.g.beta == 1.0f && pr.g.sbias1 == 0 && pr.g.sbias2 == 0) ||
                       (pr.bias_is_full && pr.g.sbias1 == 0 && (batches == 1 || pr.g.sbias2 == pr.g.M * pr.g.N));
  const bool operands_ok = (pr.g.sbn == 1 || pr.g.sbk == 1) && (pr.g.sak == 1 || pr.g.sam == 1);
  // float16: Kite's kernels only (the cuBLASLt call is float32).
  if (pr.g.half || !ctx.use_cublaslt || !ctx.backend || !lt_shape || !lt_bias || !operands_ok) {
    k->steps = std::move(own.steps);
    k->how = own.how;
    return "";
  }
  Backend& b = *ctx.backend;
  LtShape s;
  s.M = pr.g.M, s.N = pr.g.N, s.K = pr.g.K;
  s.sam = pr.g.sam, s.sak = pr.g.sak, s.sbk = pr.g.sbk, s.sbn = pr.g.sbn;
  s.batch = batches;
  s.sa = pr.g.sa2, s.sb = pr.g.sb2, s.sy = pr.g.M * pr.g.N;
  s.alpha = pr.g.alpha;
  s.beta = pr.g.beta;
  bool act_fused = false;
  const bool row_bias = pr.bias && pr.bias_is_row;
  s.epilogue = lt_epilogue(pr.g.act, row_bias, &act_fused);
  const Operand a = tensor_operand(pr.a), bb = tensor_operand(pr.b), y = tensor_operand(pr.y);
  const Operand bias = pr.bias ? tensor_operand(pr.bias) : Operand{};
  float lt_ms = -1.0f;
  std::string why;
  auto call = make_lt_matmul(b, s, a, bb, pr.bias && pr.bias_is_full && !row_bias ? &bias : nullptr,
                             row_bias ? &bias : nullptr, y, &lt_ms, &why);
  if (!call) return pick_faster(b, k, &own, nullptr, why, b.options().gemm == "cublaslt", lt_ms, "cuBLASLt");
  Kernel lib;
  Step st;
  st.kind = Step::Kind::kLibrary;
  st.call = call;
  lib.steps.push_back(std::move(st));
  lib.how = "cuBLASLt";
  if (!act_fused) {
    add_bias_act(&lib, pr.y, nullptr, numel(n.out_shape(0)), 1, 1, pr.g.act);
    const float act_ms = b.measure({lib.steps.back()});
    if (lt_ms >= 0.0f && act_ms >= 0.0f) lt_ms += act_ms;
    lib.how = "cuBLASLt + own activation";
  } else if (s.epilogue > 0) {
    lib.how = s.epilogue == 1 ? "cuBLASLt + bias epilogue" : s.epilogue == 2 ? "cuBLASLt + bias/ReLU epilogue" : "cuBLASLt + bias/GELU epilogue";
  }
  return pick_faster(b, k, &own, &lib, why, b.options().gemm == "cublaslt", lt_ms, "cuBLASLt");
}

// MatMul's operands and batch structure (numpy rules, broadcasting).
std::string describe_matmul(const NodeView& n, Product* pr) {
  std::string why = float_storage_all(n, &pr->g.half);
  if (!why.empty()) return why;
  Shape a = n.in_shape(0), b = n.in_shape(1);
  if (a.empty() || b.empty()) return "MatMul of a scalar";
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  GemmDesc& g = pr->g;
  g.M = a[a.size() - 2];
  g.K = a.back();
  g.N = b.back();
  if (b[b.size() - 2] != g.K) return "inner dims differ";
  g.sam = g.K, g.sak = 1, g.sbk = g.N, g.sbn = 1;
  const Shape ab(a.begin(), a.end() - 2), bbat(b.begin(), b.end() - 2);
  const size_t rank = std::max(ab.size(), bbat.size());
  Shape dims(rank, 1), sa(rank, 0), sb(rank, 0);
  int64_t stride_a = g.M * g.K, stride_b = g.K * g.N;
  for (size_t i = 0; i < rank; ++i) {
    const size_t o = rank - 1 - i;
    const int64_t da = i < ab.size() ? ab[ab.size() - 1 - i] : 1;
    const int64_t db = i < bbat.size() ? bbat[bbat.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return "batch dims do not broadcast";
    dims[o] = std::max(da, db);
    sa[o] = da == 1 ? 0 : stride_a;
    sb[o] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  // Merge batch axes into at most two levels.
  abi::MergedAxes merged = abi::merge_axes(dims, sa, sb);
  Shape &ld = merged.dims, &la = merged.a, &lb = merged.b;
  if (ld.size() > 2) return "batch dims broadcast in more than two groups (the CUDA kernels take two)";
  // A batch of row-major A times one shared B is one taller product.
  if (ld.size() == 1 && lb[0] == 0 && la[0] == g.M * g.K) {
    g.M *= ld[0];
    ld.clear();
  }
  while (ld.size() < 2) {
    ld.insert(ld.begin(), 1);
    la.insert(la.begin(), 0);
    lb.insert(lb.begin(), 0);
  }
  g.nb1 = ld[0], g.nb2 = ld[1];
  g.sa1 = la[0], g.sa2 = la[1], g.sb1 = lb[0], g.sb2 = lb[1];
  if (g.nb1 * g.nb2 > 65535) return "more than 65535 batches";
  pr->a = n.in(0);
  pr->b = n.in(1);
  pr->y = n.out(0);
  return "";
}

// Gemm's operands: transA/transB, alpha, beta, C broadcast to [M, N].
std::string describe_gemm(const NodeView& n, const OpNode& op, Product* pr) {
  std::string why = float_storage_all(n, &pr->g.half);
  if (!why.empty()) return why;
  const Shape& a = n.in_shape(0);
  const Shape& b = n.in_shape(1);
  if (a.size() != 2 || b.size() != 2) return "A and B must be matrices";
  const bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
  GemmDesc& g = pr->g;
  g.M = ta ? a[1] : a[0];
  g.K = ta ? a[0] : a[1];
  g.N = tb ? b[0] : b[1];
  if ((tb ? b[1] : b[0]) != g.K) return "inner dims differ";
  g.sam = ta ? 1 : a[1];
  g.sak = ta ? a[1] : 1;
  g.sbk = tb ? 1 : b[1];
  g.sbn = tb ? b[1] : 1;
  g.alpha = op.attr_float("alpha", 1.0f);
  g.beta = op.attr_float("beta", 1.0f);
  pr->a = n.in(0);
  pr->b = n.in(1);
  pr->y = n.out(0);
  if (op.has_input(2) && g.beta != 0.0f) {
    const Shape& c = n.in_shape(2);
    if (c.size() > 2) return "C has more than 2 dims";
    const int64_t cn = c.empty() ? 1 : c.back();
    const int64_t cm = c.size() == 2 ? c[0] : 1;
    if ((cn != 1 && cn != g.N) || (cm != 1 && cm != g.M)) return "C does not broadcast to [M, N]";
    g.sbias_n = cn == 1 ? 0 : 1;
    g.sbias_m = cm == 1 ? 0 : cn;
    pr->bias = n.in(2);
    pr->bias_is_row = cm == 1 && cn == g.N;
    pr->bias_is_full = cm == g.M && cn == g.N;
  }
  return "";
}

}  // namespace

std::string plan_matmul(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  Product pr;
  std::string why = describe_matmul(n, &pr);
  if (!why.empty()) return why;
  if (numel(n.out_shape(0)) == 0) return "";
  if (pr.g.K == 0) return "MatMul over an empty inner dim";
  return finish(n, ctx, k, pr);
}

std::string plan_fused_matmul(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  const std::string base = "MatMul+Add";
  if (n.pattern.compare(0, base.size(), base) != 0) return "pattern '" + n.pattern + "' is not MatMul+Add[+<activation>]";
  Act act;
  std::string why = parse_activation(n, true, &act);
  if (!why.empty()) return why;
  if (act.op == kite_cuda::kOpIdentity && n.pattern != base) return "pattern '" + n.pattern + "' names an activation the node lacks";
  if (n.op.inputs.size() != 3 || !n.op.has_input(2) || n.outputs.size() != 1) return "expects inputs a, b and bias";
  const OpNode mm = primitive(n, "MatMul", 2);
  why = check_primitive_output(n, mm, 0);
  if (!why.empty()) return why;
  const Shape& out = n.out_shape(0);
  if (out.empty()) return "output must have at least one dim";
  if (n.in_shape(2) != Shape{out.back()}) return input_label(n, 2) + " must have shape [" + std::to_string(out.back()) + "]";
  Product pr;
  why = describe_matmul(n, &pr);
  if (!why.empty()) return why;
  if (numel(out) == 0) return "";
  if (pr.g.K == 0) return "MatMul over an empty inner dim";
  pr.bias = n.in(2);
  pr.bias_is_row = true;
  pr.g.sbias_n = 1;
  pr.g.act = act;
  return finish(n, ctx, k, pr);
}

std::string plan_gemm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  Product pr;
  std::string why = describe_gemm(n, n.op, &pr);
  if (!why.empty()) return why;
  if (numel(n.out_shape(0)) == 0) return "";
  if (pr.g.K == 0) return "Gemm over an empty inner dim";
  return finish(n, ctx, k, pr);
}

std::string plan_fused_gemm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.pattern.compare(0, 5, "Gemm+") != 0) return "pattern '" + n.pattern + "' is not Gemm+<activation>";
  Act act;
  std::string why = parse_activation(n, false, &act);
  if (!why.empty()) return why;
  if (n.op.inputs.size() < 2 || n.op.inputs.size() > 3 || n.outputs.size() != 1) return "expects A, B [, C] and one output";
  const OpNode gemm = primitive(n, "Gemm", 3);
  why = check_primitive_output(n, gemm, 0);
  if (!why.empty()) return why;
  Product pr;
  why = describe_gemm(n, gemm, &pr);
  if (!why.empty()) return why;
  if (numel(n.out_shape(0)) == 0) return "";
  if (pr.g.K == 0) return "Gemm over an empty inner dim";
  pr.g.act = act;
  return finish(n, ctx, k, pr);
}

}  // namespace kite::cuda
