// Elementwise ops (float32): binary with numpy broadcasting (Add, Sub, Mul,
// Div, Pow, PRelu, and Sum/Max/Min/Mean of one or two inputs), unary math
// and activations (Clip with constant bounds), and the fused Gelu.
// Broadcasting is expressed as element strides over the output's shape,
// collapsed to at most 6 dims.
#include <limits>

#include "kernels.h"
#include "kite/ops/half.h"

namespace kite::vk {

namespace {

enum BinaryCode : uint32_t { kAdd = 0, kSub, kMul, kDiv, kPow, kMax, kMin, kPrelu };

struct BinaryShape {
  Shape dims;
  Shape sa, sb;  // element strides over dims (0: broadcast)
};

// Merges neighbouring dims that every operand walks contiguously (or not at
// all) and drops dims of size 1.
void collapse(Shape* dims, std::vector<Shape*> strides) {
  Shape d;
  std::vector<Shape> s(strides.size());
  for (size_t i = 0; i < dims->size(); ++i) {
    if ((*dims)[i] == 1) continue;
    bool merge = !d.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k) {
      merge = s[k].back() == (*strides[k])[i] * (*dims)[i];
    }
    if (merge) {
      d.back() *= (*dims)[i];
      for (size_t k = 0; k < strides.size(); ++k) s[k].back() = (*strides[k])[i];
    } else {
      d.push_back((*dims)[i]);
      for (size_t k = 0; k < strides.size(); ++k) s[k].push_back((*strides[k])[i]);
    }
  }
  *dims = d;
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = s[k];
}

std::string add_binary(Kernel* k, const PlanContext& ctx, const kite_backend_tensor2* a,
                       const Shape& as, const kite_backend_tensor2* b, const Shape& bs,
                       const kite_backend_tensor2* c, const Shape& cs, uint32_t code,
                       const Activation& act) {
  BinaryShape s;
  s.dims = cs;
  s.sa = broadcast_strides(as, cs);
  s.sb = broadcast_strides(bs, cs);
  Shape sc(cs.size(), 1);
  for (size_t i = cs.size(); i-- > 1;) sc[i - 1] = sc[i] * cs[i];
  collapse(&s.dims, {&s.sa, &s.sb, &sc});
  const int64_t count = numel(cs);
  if (count > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  if (count == 0) return "";
  // The shader walks up to 6 dims; more (rare after collapsing) become one
  // dispatch per index of the leading ones.
  const size_t lead = s.dims.size() > 6 ? s.dims.size() - 6 : 0;
  const Shape lead_dims(s.dims.begin(), s.dims.begin() + static_cast<std::ptrdiff_t>(lead));
  const int64_t dispatches = numel(lead_dims);
  if (dispatches > 4096) return "the broadcast needs more than 6 dims and too many dispatches";
  const Shape dims(s.dims.begin() + static_cast<std::ptrdiff_t>(lead), s.dims.end());
  const int64_t inner = numel(dims);
  for (int64_t z = 0; z < dispatches; ++z) {
    int64_t rest = z, ea = 0, eb = 0, ec = 0;
    for (size_t d = lead; d-- > 0;) {
      const int64_t idx = rest % s.dims[d];
      rest /= s.dims[d];
      ea += idx * s.sa[d];
      eb += idx * s.sb[d];
      ec += idx * sc[d];
    }
    std::vector<uint32_t> params = {static_cast<uint32_t>(inner), code, static_cast<uint32_t>(dims.size())};
    for (size_t i = 0; i < 6; ++i) params.push_back(i < dims.size() ? static_cast<uint32_t>(dims[i]) : 1u);
    for (size_t i = 0; i < 6; ++i) params.push_back(i < dims.size() ? static_cast<uint32_t>(s.sa[lead + i]) : 0u);
    for (size_t i = 0; i < 6; ++i) params.push_back(i < dims.size() ? static_cast<uint32_t>(s.sb[lead + i]) : 0u);
    params.push_back(act.code);
    params.push_back(float_bits(act.alpha));
    params.push_back(float_bits(act.beta));
    uint32_t groups[3];
    if (!grid_1d(ctx, static_cast<uint64_t>(inner), 256, groups)) return "tensor is too large for the grid";
    Dispatch& d = add_dispatch(k, kShaderBinary,
                               {read(a, static_cast<uint32_t>(ea)), read(b, static_cast<uint32_t>(eb)),
                                write(c, static_cast<uint32_t>(ec))},
                               params, groups);
    // Each dispatch writes its own rows of the output: no barriers between.
    if (lead > 0 && ec + inner <= count && sc[lead - 1] == inner) d.operands[2].span_bytes = static_cast<uint64_t>(inner) * unit_bytes(c);
  }
  return "";
}

std::string add_unary(Kernel* k, const PlanContext& ctx, const kite_backend_tensor2* x,
                      const kite_backend_tensor2* y, int64_t count, uint32_t code, float alpha,
                      float beta) {
  if (count > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(count), 256, groups)) return "tensor is too large for the grid";
  if (count == 0) return "";
  add_dispatch(k, kShaderUnary, {read(x), write(y)},
               {static_cast<uint32_t>(count), code, float_bits(alpha), float_bits(beta)}, groups);
  return "";
}

constexpr OpCodeEntry kBinaryCodes[] = {{"Add", kAdd}, {"Sub", kSub},   {"Mul", kMul},     {"Div", kDiv},
                                        {"Pow", kPow}, {"PRelu", kPrelu}, {"Sum", kAdd}, {"Mean", kAdd},
                                        {"Max", kMax}, {"Min", kMin}};

}  // namespace

std::string plan_binary(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  uint32_t code = 0;
  std::string why = op_code(n, kBinaryCodes, &code);
  if (!why.empty()) return why;
  if (n.op.inputs.size() != 2) return "expects two inputs";
  for (size_t i = 0; i < 2; ++i) {
    why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  return add_binary(k, ctx, n.in(0), n.in_shape(0), n.in(1), n.in_shape(1), n.out(0), n.out_shape(0),
                    code, Activation());
}

std::string plan_variadic(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  uint32_t code = 0;
  std::string why = op_code(n, kBinaryCodes, &code);
  if (!why.empty()) return why;
  const size_t count = n.op.inputs.size();
  if (count < 1 || count > 2) {
    return n.op.op + " with " + std::to_string(count) + " inputs is not supported on Vulkan (1 or 2)";
  }
  for (size_t i = 0; i < count; ++i) {
    why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  if (count == 1) {
    // A copy (one input: the value itself) through the identity broadcast.
    return add_unary(k, ctx, n.in(0), n.out(0), numel(n.out_shape(0)), kOpNone, 0.0f, 0.0f);
  }
  Activation act;
  if (n.op.op == "Mean") {
    act.code = kOpScale;
    act.alpha = 0.5f;
  }
  return add_binary(k, ctx, n.in(0), n.in_shape(0), n.in(1), n.in_shape(1), n.out(0), n.out_shape(0),
                    code, act);
}

std::string plan_unary(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  static constexpr OpCodeEntry kCodes[] = {{"Relu", kOpRelu},       {"Sigmoid", kOpSigmoid}, {"Tanh", kOpTanh},
                {"Sqrt", kOpSqrt},       {"Reciprocal", kOpReciprocal}, {"Exp", kOpExp},
                {"Log", kOpLog},         {"Abs", kOpAbs},         {"Neg", kOpNeg},
                {"Erf", kOpErf},         {"LeakyRelu", kOpLeakyRelu}, {"Elu", kOpElu},
                {"HardSigmoid", kOpHardSigmoid}, {"HardSwish", kOpHardSwish}, {"Gelu", kOpGelu},
                {"Softplus", kOpSoftplus}, {"Sign", kOpSign},     {"Ceil", kOpCeil},
                {"Floor", kOpFloor},     {"Round", kOpRound},     {"Sin", kOpSin},
                {"Cos", kOpCos},         {"Mish", kOpMish},       {"Clip", kOpClip}};
  uint32_t code = 0;
  std::string why = op_code(n, kCodes, &code);
  if (why.empty()) why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  float alpha = 0.0f, beta = 0.0f;
  const std::string& op = n.op.op;
  if (op == "LeakyRelu") alpha = n.op.attr_float("alpha", 0.01f);
  if (op == "Elu") alpha = n.op.attr_float("alpha", 1.0f);
  if (op == "HardSigmoid") {
    alpha = n.op.attr_float("alpha", 0.2f);
    beta = n.op.attr_float("beta", 0.5f);
  }
  if (op == "HardSwish") {
    alpha = 1.0f / 6.0f;
    beta = 0.5f;
  }
  if (op == "Gelu") {
    const std::string approximate = n.op.attr_string("approximate", "none");
    if (approximate == "tanh") {
      code = kOpGeluTanh;
    } else if (approximate != "none") {
      return "approximate '" + approximate + "' is not supported";
    }
  }
  if (op == "Clip") {
    // Bounds from the attributes (opset < 11) or constant inputs.
    alpha = n.op.attr_float("min", -std::numeric_limits<float>::infinity());
    beta = n.op.attr_float("max", std::numeric_limits<float>::infinity());
    for (size_t i = 1; i < 3; ++i) {
      if (!n.op.has_input(i)) continue;
      why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
      if (why.empty()) why = expect_constant(n, i, i == 1 ? "min" : "max");
      if (!why.empty()) return why;
      if (numel(n.in_shape(i)) != 1) return input_label(n, i) + " must hold one value";
      float v;
      if (n.op.inputs[i].dtype == KITE_DTYPE_FLOAT16) {  // a bound of a float16 Clip
        uint16_t h;
        std::memcpy(&h, n.op.inputs[i].data, 2);
        v = kite::half_to_float(h);
      } else {
        std::memcpy(&v, n.op.inputs[i].data, 4);
      }
      (i == 1 ? alpha : beta) = v;
    }
  }
  return add_unary(k, ctx, n.in(0), n.out(0), numel(n.out_shape(0)), code, alpha, beta);
}

std::string plan_fused_gelu(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  const std::string approximate = n.op.attr_string("approximate", "none");
  if (!(n.pattern == "Gelu" && approximate == "none") && !(n.pattern == "Gelu(tanh)" && approximate == "tanh")) {
    return "pattern '" + n.pattern + "' with approximate '" + approximate + "' is not a known GELU";
  }
  if (n.op.inputs.size() != 1 || n.outputs.size() != 1) return "expects one input and one output";
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const OpNode p = primitive(n, "Gelu", 1);
  why = check_primitive_output(n, p, 0);
  if (!why.empty()) return why;
  return add_unary(k, ctx, n.in(0), n.out(0), numel(n.out_shape(0)),
                   approximate == "tanh" ? kOpGeluTanh : kOpGelu, 0.0f, 0.0f);
}

}  // namespace kite::vk
