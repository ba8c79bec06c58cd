// Convolutions (2-D, and 1-D as H = 1), float32 or float16 (fp16 storage,
// fp32 arithmetic: Kite's own kernels only), NCHW. Two
// implementations, chosen per node:
//  - cuDNN (not in lean mode): cudnnConvolutionBiasActivationForward for a
//    bias + ReLU, else cudnnConvolutionForward followed by Kite's bias +
//    activation kernel in place;
//  - Kite's own: kite_conv_direct for depthwise and tiny reductions,
//    kite_conv_igemm (implicit GEMM) otherwise, bias and activation fused.
// With conv=auto (the default) both are timed at prepare on the session's
// own buffers and the faster one is kept; conv=cudnn / conv=own force one.
#include <algorithm>

#include "backend.h"
#include "library_calls.h"
#include "plan_util.h"

namespace kite::cuda {

using kite_cuda::Act;

namespace {

std::string plan_conv_node(const NodeView& n, const PlanContext& ctx, Kernel* k, const OpNode& conv, Act act) {
  bool half = false;
  std::string why = float_storage_all(n, &half);
  if (!why.empty()) return why;
  kite::ops::WindowGeometry g;
  if (!kite::ops::window_geometry(conv, &g, &why)) return why;
  const Shape& x = n.in_shape(0);
  const Shape& w = n.in_shape(1);
  if (x.size() != 3 && x.size() != 4) return "a " + std::to_string(x.size() - 2) + "-D convolution (CUDA runs 1-D and 2-D)";
  Window2d win;
  if (!window_2d(g, &win)) return "the window is not 1-D or 2-D";
  ConvShape s;
  s.n = static_cast<int>(x[0]);
  s.c = static_cast<int>(x[1]);
  s.h = static_cast<int>(win.h);
  s.w = static_cast<int>(win.w);
  s.m = static_cast<int>(w[0]);
  s.kh = static_cast<int>(win.kh);
  s.kw = static_cast<int>(win.kw);
  s.oh = static_cast<int>(win.oh);
  s.ow = static_cast<int>(win.ow);
  s.sh = static_cast<int>(win.sh);
  s.sw = static_cast<int>(win.sw);
  s.dh = static_cast<int>(win.dh);
  s.dw = static_cast<int>(win.dw);
  s.ph = static_cast<int>(win.ph);
  s.pw = static_cast<int>(win.pw);
  s.groups = static_cast<int>(g.group);
  const bool asymmetric = win.ph != win.ph_end || win.pw != win.pw_end;
  const bool has_bias = conv.has_input(2);
  const kite_backend_tensor2* bias = has_bias ? n.in(2) : nullptr;
  const int64_t out_count = numel(n.out_shape(0));
  if (out_count == 0) return "";

  // Kite's own kernel.
  Kernel own;
  {
    using kite_cuda::ConvParams;
    ConvParams p{};
    p.N = s.n, p.C = s.c, p.H = s.h, p.W = s.w, p.M = s.m, p.OH = s.oh, p.OW = s.ow;
    p.KH = s.kh, p.KW = s.kw, p.SH = s.sh, p.SW = s.sw, p.PH = s.ph, p.PW = s.pw, p.DH = s.dh, p.DW = s.dw;
    p.groups = s.groups;
    p.act = act;
    const int cg = s.c / s.groups, mg = s.m / s.groups;
    const int64_t reduction = static_cast<int64_t>(cg) * s.kh * s.kw;
    const int64_t columns = static_cast<int64_t>(s.n) * s.oh * s.ow;
    std::initializer_list<Bind> binds = {{offsetof(ConvParams, x), tensor_operand(n.in(0))},
                                         {offsetof(ConvParams, w), tensor_operand(n.in(1))},
                                         {offsetof(ConvParams, y), tensor_operand(n.out(0))}};
    Step* st;
    if (reduction < 16 || mg < 4 || s.groups > ctx.props.max_grid_z) {
      st = &add_launch(&own, storage_kernel(half, KernelId::kite_conv_direct, KernelId::kite_conv_direct_f16), p,
                       binds, blocks_for(out_count), 1, 1, kite_cuda::kBlock);
      own.how = "own direct convolution";
    } else {
      const int64_t gy = (mg + 63) / 64;
      if (gy > ctx.props.max_grid_y) return "too many output channels per group for the grid";
      st = &add_launch(&own, storage_kernel(half, KernelId::kite_conv_igemm, KernelId::kite_conv_igemm_f16), p,
                       binds, static_cast<uint64_t>((columns + 63) / 64),
                       static_cast<uint32_t>(gy), static_cast<uint32_t>(s.groups), 256);
      own.how = "own implicit GEMM";
    }
    if (bias) st->fixups.push_back(Fixup{static_cast<uint32_t>(offsetof(ConvParams, bias)), tensor_operand(bias)});
  }
  // float16: Kite's kernels only (the cuDNN call is float32).
  const bool try_cudnn = ctx.use_cudnn && !ctx.force_own_conv && !asymmetric && !half;
  if (!try_cudnn || !ctx.backend) {
    // supports2, or no cuDNN: Kite's kernel (always available).
    k->steps = std::move(own.steps);
    k->how = own.how;
    return "";
  }
  // cuDNN, measured against the own kernel (conv=auto).
  Backend& b = *ctx.backend;
  const bool relu = act.op == kite_cuda::kOpRelu;
  float cudnn_ms = -1.0f;
  std::string cudnn_why;
  auto call = make_cudnn_conv(b, s, tensor_operand(n.in(0)), tensor_operand(n.in(1)),
                              bias ? tensor_operand(bias) : Operand{}, tensor_operand(n.out(0)), relu, has_bias,
                              &cudnn_ms, &cudnn_why);
  Kernel lib;
  if (call) {
    Step st;
    st.kind = Step::Kind::kLibrary;
    st.call = call;
    lib.steps.push_back(std::move(st));
    const bool fused = has_bias && relu;
    if (!fused && (bias || act.op != kite_cuda::kOpIdentity)) {
      add_bias_act(&lib, n.out(0), bias, out_count, s.m, static_cast<int64_t>(s.oh) * s.ow, act);
      const float epilogue_ms = b.measure(lib.steps.size() > 1 ? std::vector<Step>{lib.steps.back()} : std::vector<Step>{});
      if (cudnn_ms >= 0.0f && epilogue_ms >= 0.0f) cudnn_ms += epilogue_ms;
    }
    lib.how = fused ? "cuDNN conv + bias + ReLU" : "cuDNN conv + own bias/activation";
  }
  return pick_faster(b, k, &own, call ? &lib : nullptr, cudnn_why, b.options().conv == "cudnn", cudnn_ms, "cuDNN");
}

}  // namespace

std::string plan_conv(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  return plan_conv_node(n, ctx, k, n.op, Act{kite_cuda::kOpIdentity, 0.0f, 0.0f});
}

std::string plan_fused_conv(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.pattern.compare(0, 5, "Conv+") != 0) return "pattern '" + n.pattern + "' is not Conv+<activation>";
  Act act;
  std::string why = parse_activation(n, false, &act);
  if (!why.empty()) return why;
  if (n.op.inputs.size() < 2 || n.op.inputs.size() > 3 || n.outputs.size() != 1) return "expects X, W [, B] and one output";
  const OpNode conv = primitive(n, "Conv", 3);
  why = check_primitive_output(n, conv, 0);
  if (!why.empty()) return why;
  return plan_conv_node(n, ctx, k, conv, act);
}

}  // namespace kite::cuda
