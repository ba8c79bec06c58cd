// Conv and FusedConv (Conv + bias + activation), NCHW, 1-D and 2-D:
//  - 1x1, stride 1, no padding, one group: a GEMM per image (W [Cout, Cin] x
//    X [Cin, H*W]);
//  - depthwise (group = input channels > 1): the direct depthwise shader;
//  - everything else (grouped, strided, dilated, any kernel): the implicit
//    GEMM shader, which reads the input through the window geometry.
// Geometry (auto_pad, pads, output size) comes from kite::ops::window_geometry.
#include "kernels.h"

namespace kite::vk {

namespace {

std::string plan_conv_core(const NodeView& n, const OpNode& conv, const PlanContext& ctx,
                           const Activation& act, Kernel* k) {
  for (size_t i = 0; i < conv.inputs.size(); ++i) {
    if (!conv.has_input(i)) continue;
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  kite::ops::WindowGeometry g;
  std::string err;
  if (!kite::ops::window_geometry(conv, &g, &err)) return err;
  Window2d win;  // 1-D as 2-D with H = 1
  if (!window_2d(g, &win)) return "the Vulkan Conv takes 1 or 2 spatial dims, not " + std::to_string(g.input.size());
  const Shape& x = conv.inputs[0].shape;
  const Shape& w = conv.inputs[1].shape;
  const int64_t batch = x[0], cin = x[1], cout = w[0];
  const int64_t group = g.group;
  if (group <= 0 || cin % group != 0 || cout % group != 0) return "channels do not divide into groups";
  const int64_t H = win.h, W = win.w, OH = win.oh, OW = win.ow, KH = win.kh, KW = win.kw;
  const int64_t sh = win.sh, sw = win.sw, dh = win.dh, dw = win.dw;
  const int64_t ph = win.ph, pw = win.pw, pe_h = win.ph_end, pe_w = win.pw_end;
  const uint64_t in_elems = static_cast<uint64_t>(numel(x));
  const uint64_t out_elems = static_cast<uint64_t>(batch * cout * OH * OW);
  if (in_elems > UINT32_MAX || out_elems > UINT32_MAX || static_cast<uint64_t>(numel(w)) > UINT32_MAX) {
    return "Conv is too large for 32-bit indexing";
  }
  const kite_backend_tensor2* bias = conv.has_input(2) ? n.in(2) : nullptr;
  if (batch == 0 || cout == 0 || OH == 0 || OW == 0) return "";
  const bool pointwise = group == 1 && KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 &&
                         pw == 0 && pe_h == 0 && pe_w == 0;
  if (pointwise) {
    GemmDesc d;
    d.M = static_cast<uint32_t>(cout);
    d.N = static_cast<uint32_t>(OH * OW);
    d.K = static_cast<uint32_t>(cin);
    d.batch = static_cast<uint32_t>(batch);
    d.sam = static_cast<uint32_t>(cin);
    d.sak = 1;
    d.sbk = static_cast<uint32_t>(H * W);
    d.sbn = 1;
    d.scm = static_cast<uint32_t>(OH * OW);
    d.sab = 0;
    d.sbb = static_cast<uint32_t>(cin * H * W);
    d.scb = static_cast<uint32_t>(cout * OH * OW);
    d.sbias_m = 1;
    d.act = act;
    return add_gemm(k, ctx, n.in(1), n.in(0), bias, n.out(0), d);
  }
  const std::vector<uint32_t> geometry = {
      static_cast<uint32_t>(KH), static_cast<uint32_t>(KW), static_cast<uint32_t>(sh),
      static_cast<uint32_t>(sw), static_cast<uint32_t>(dh), static_cast<uint32_t>(dw),
      int_bits(ph), int_bits(pw)};
  uint32_t groups[3];
  if (group == cin && group > 1) {
    // Depthwise: output channel oc reads input channel oc / (cout / cin).
    std::vector<uint32_t> params = {static_cast<uint32_t>(cin), static_cast<uint32_t>(H),
                                    static_cast<uint32_t>(W), static_cast<uint32_t>(cout),
                                    static_cast<uint32_t>(OH), static_cast<uint32_t>(OW)};
    params.insert(params.end(), geometry.begin(), geometry.end());
    params.push_back(static_cast<uint32_t>(cout / cin));
    params.push_back(bias ? 1u : 0u);
    params.push_back(act.code);
    params.push_back(float_bits(act.alpha));
    params.push_back(float_bits(act.beta));
    if (!grid_1d(ctx, static_cast<uint64_t>(OH * OW), 64, groups)) return "Conv output is too large";
    groups[2] = static_cast<uint32_t>(batch * cout);
    if (groups[2] > ctx.limits.max_workgroup_count[2]) return "batch x channels passes the workgroup count limit";
    add_dispatch(k, kShaderConvDepthwise, {read(n.in(0)), read(n.in(1)), bias ? read(bias) : unused(n.out(0)),
                                           write(n.out(0))},
                 params, groups);
    return "";
  }
  if (!ctx.lanes && ctx.limits.max_workgroup_invocations < 256) {
    return "the implicit-GEMM Conv needs 256 invocations per workgroup";
  }
  std::vector<uint32_t> params = {static_cast<uint32_t>(cin / group), static_cast<uint32_t>(H),
                                  static_cast<uint32_t>(W), static_cast<uint32_t>(cout / group),
                                  static_cast<uint32_t>(OH), static_cast<uint32_t>(OW)};
  params.insert(params.end(), geometry.begin(), geometry.end());
  params.push_back(static_cast<uint32_t>(group));
  params.push_back(bias ? 1u : 0u);
  params.push_back(act.code);
  params.push_back(float_bits(act.alpha));
  params.push_back(float_bits(act.beta));
  groups[0] = static_cast<uint32_t>((OH * OW + 63) / 64);
  groups[1] = static_cast<uint32_t>((cout / group + (ctx.lanes ? 15 : 63)) / (ctx.lanes ? 16 : 64));
  groups[2] = static_cast<uint32_t>(batch * group);
  for (int i = 0; i < 3; ++i) {
    if (groups[i] > ctx.limits.max_workgroup_count[i]) return "Conv passes the workgroup count limits";
  }
  add_dispatch(k, ctx.lanes ? kShaderConvLanes : kShaderConv, {read(n.in(0)), read(n.in(1)), bias ? read(bias) : unused(n.out(0)),
                                write(n.out(0))},
               params, groups);
  return "";
}

}  // namespace

std::string plan_conv(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  return plan_conv_core(n, n.op, ctx, Activation(), k);
}

std::string plan_fused_conv(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.pattern.rfind("Conv+", 0) != 0) return "pattern '" + n.pattern + "' is not Conv+<activation>";
  if (n.op.inputs.size() < 2 || n.op.inputs.size() > 3 || n.outputs.size() != 1) {
    return "expects inputs X, W [, B] and one output";
  }
  Activation act;
  std::string why = parse_activation(n, false, &act);
  if (!why.empty()) return why;
  const OpNode p = primitive(n, "Conv", 3);
  why = check_primitive_output(n, p, 0);
  if (!why.empty()) return why;
  return plan_conv_core(n, p, ctx, act, k);
}

}  // namespace kite::vk
