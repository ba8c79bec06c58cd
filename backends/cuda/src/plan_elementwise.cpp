// Elementwise ops: unary ops (one formula table shared with the fused
// epilogues), broadcasting binary ops, Sum/Mean/Max/Min, BatchNormalization
// (inference, folded into a per-channel affine), Cast and the fused GELU.
// Unary, binary, Sum/Mean/Max/Min and GELU also run float16 nodes (fp16
// storage, fp32 arithmetic: the _f16 kernels).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kite/abi/device_rules.h"
#include "kite/ops/half.h"
#include "plan_util.h"

namespace kite::cuda {

using kite_cuda::Act;

namespace {

struct UnaryName {
  const char* op;
  int32_t code;
};
constexpr UnaryName kUnary[] = {
    {"Relu", kite_cuda::kOpRelu},       {"Sigmoid", kite_cuda::kOpSigmoid}, {"Tanh", kite_cuda::kOpTanh},
    {"Sqrt", kite_cuda::kOpSqrt},       {"Reciprocal", kite_cuda::kOpReciprocal}, {"Exp", kite_cuda::kOpExp},
    {"Log", kite_cuda::kOpLog},         {"Abs", kite_cuda::kOpAbs},         {"Neg", kite_cuda::kOpNeg},
    {"Erf", kite_cuda::kOpErf},         {"Softplus", kite_cuda::kOpSoftplus}, {"Sign", kite_cuda::kOpSign},
    {"Ceil", kite_cuda::kOpCeil},       {"Floor", kite_cuda::kOpFloor},     {"Round", kite_cuda::kOpRound},
    {"Sin", kite_cuda::kOpSin},         {"Cos", kite_cuda::kOpCos},         {"Mish", kite_cuda::kOpMish},
    {"Softsign", kite_cuda::kOpSoftsign}, {"LeakyRelu", kite_cuda::kOpLeakyRelu}, {"Elu", kite_cuda::kOpElu},
    {"HardSigmoid", kite_cuda::kOpHardSigmoid}, {"HardSwish", kite_cuda::kOpHardSwish},
    {"Selu", kite_cuda::kOpSelu},       {"Clip", kite_cuda::kOpClip},       {"Gelu", kite_cuda::kOpGelu},
};

// A constant scalar input's float value (Clip's min/max: float32, or float16
// in a float16 node).
bool constant_scalar(const TensorType& t, float* out) {
  if (!t.data || numel(t.shape) != 1) return false;
  if (t.dtype == KITE_DTYPE_FLOAT16) {
    uint16_t h;
    std::memcpy(&h, t.data, 2);
    *out = kite::half_to_float(h);
    return true;
  }
  if (t.dtype != KITE_DTYPE_FLOAT32) return false;
  std::memcpy(out, t.data, 4);
  return true;
}

// y = a (op) b over `out` with numpy broadcasting.
std::string add_binary(Kernel* k, const kite_backend_tensor2* a, const Shape& as, const kite_backend_tensor2* b,
                       const Shape& bs, const kite_backend_tensor2* y, const Shape& out, int32_t op, bool half) {
  using kite_cuda::BinaryParams;
  const int64_t n = numel(out);
  if (n == 0) return "";
  BinaryParams p{};
  p.n = static_cast<int32_t>(n);
  p.op = op;
  p.contiguous = as == out && bs == out;
  if (!p.contiguous) {
    const abi::MergedAxes m = abi::merge_axes(out, broadcast_strides(as, out), broadcast_strides(bs, out));
    const Shape &shape = m.dims, &ma = m.a, &mb = m.b;
    if (shape.size() > static_cast<size_t>(kite_cuda::kMaxBinaryRank)) {
      return "broadcasting over " + std::to_string(shape.size()) + " axes (the CUDA kernel takes " +
             std::to_string(kite_cuda::kMaxBinaryRank) + ")";
    }
    p.rank = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
      p.shape[i] = static_cast<int32_t>(shape[i]);
      p.sa[i] = static_cast<int32_t>(ma[i]);
      p.sb[i] = static_cast<int32_t>(mb[i]);
    }
  }
  add_launch(k, storage_kernel(half, KernelId::kite_binary, KernelId::kite_binary_f16), p,
             {{offsetof(BinaryParams, a), tensor_operand(a)},
              {offsetof(BinaryParams, b), tensor_operand(b)},
              {offsetof(BinaryParams, y), tensor_operand(y)}},
             blocks_for(n), 1, 1, kite_cuda::kBlock);
  return "";
}

// Do two tensors start at the same bytes (an in-place plan)? Only known at
// prepare, when buffers are set.
bool same_bytes(const kite_backend_tensor2* a, const kite_backend_tensor2* b) {
  return a && b && a->buffer && a->buffer == b->buffer && a->offset == b->offset;
}

}  // namespace

std::string plan_unary(const NodeView& n, const PlanContext&, Kernel* k) {
  bool half = false;
  std::string why = float_storage_all(n, &half);  // Clip's min and max too
  if (!why.empty()) return why;
  Act act{kite_cuda::kOpIdentity, 0.0f, 0.0f};
  for (const UnaryName& u : kUnary) {
    if (n.op.op == u.op) act.op = u.code;
  }
  const std::string& op = n.op.op;
  if (op == "LeakyRelu") act.alpha = n.op.attr_float("alpha", 0.01f);
  if (op == "Elu") act.alpha = n.op.attr_float("alpha", 1.0f);
  if (op == "HardSigmoid") {
    act.alpha = n.op.attr_float("alpha", 0.2f);
    act.beta = n.op.attr_float("beta", 0.5f);
  }
  if (op == "HardSwish") {
    act.alpha = 1.0f / 6.0f;
    act.beta = 0.5f;
  }
  if (op == "Selu") {
    act.alpha = n.op.attr_float("alpha", 1.67326319217681884765625f);
    act.beta = n.op.attr_float("gamma", 1.05070102214813232421875f);
  }
  if (op == "Gelu") {
    const std::string approximate = n.op.attr_string("approximate", "none");
    if (approximate == "tanh") act.op = kite_cuda::kOpGeluTanh;
    else if (approximate != "none") return "Gelu approximate '" + approximate + "' is not supported";
  }
  if (op == "Clip") {
    act.alpha = -INFINITY;
    act.beta = INFINITY;
    if (n.op.find_attr("min")) act.alpha = n.op.attr_float("min", -INFINITY);
    if (n.op.find_attr("max")) act.beta = n.op.attr_float("max", INFINITY);
    for (size_t i = 1; i < 3; ++i) {
      if (!n.op.has_input(i)) continue;
      float v = 0.0f;
      if (!constant_scalar(n.op.inputs[i], &v)) {
        return std::string(i == 1 ? "min" : "max") + " (" + input_label(n, i) + ") must be a constant float scalar on CUDA";
      }
      (i == 1 ? act.alpha : act.beta) = v;
    }
  }
  add_unary(k, n.in(0), n.out(0), numel(n.out_shape(0)), act, half);
  return "";
}

std::string plan_binary(const NodeView& n, const PlanContext&, Kernel* k) {
  bool half = false;
  std::string why = float_storage(n, {0, 1}, &half);
  if (!why.empty()) return why;
  const std::string& op = n.op.op;
  const int32_t code = op == "Add" ? kite_cuda::kOpAdd : op == "Sub" ? kite_cuda::kOpSub : op == "Mul" ? kite_cuda::kOpMul
                     : op == "Div" ? kite_cuda::kOpDiv : op == "Pow" ? kite_cuda::kOpPow : kite_cuda::kOpPRelu;
  return add_binary(k, n.in(0), n.in_shape(0), n.in(1), n.in_shape(1), n.out(0), n.out_shape(0), code, half);
}

std::string plan_variadic(const NodeView& n, const PlanContext&, Kernel* k) {
  const size_t count = n.op.inputs.size();
  if (count == 0) return "needs at least one input";
  bool half = false;
  std::string why = float_storage_all(n, &half);
  if (!why.empty()) return why;
  const std::string& op = n.op.op;
  const int32_t code = op == "Max" ? kite_cuda::kOpMax : op == "Min" ? kite_cuda::kOpMin : kite_cuda::kOpAdd;
  const Shape& out = n.out_shape(0);
  const kite_backend_tensor2* y = n.out(0);
  // An input planned in place of the output is consumed first.
  std::vector<size_t> order;
  for (size_t i = 0; i < count; ++i) {
    if (same_bytes(n.in(i), y)) order.insert(order.begin(), i);
    else order.push_back(i);
  }
  if (count == 1) {
    if (n.in_shape(0) != out) return "one input of another shape than the output";
    add_copy(k, n.in(0), 0, y, 0, n.in(0)->byte_size);
  } else {
    why = add_binary(k, n.in(order[0]), n.in_shape(order[0]), n.in(order[1]), n.in_shape(order[1]), y, out, code, half);
    for (size_t i = 2; why.empty() && i < count; ++i) {
      why = add_binary(k, y, out, n.in(order[i]), n.in_shape(order[i]), y, out, code, half);
    }
    if (!why.empty()) return why;
  }
  if (op == "Mean") add_unary(k, y, y, numel(out), Act{kite_cuda::kOpScale, 1.0f / static_cast<float>(count), 0.0f}, half);
  return "";
}

std::string plan_batch_norm(const NodeView& n, const PlanContext&, Kernel* k) {
  if (n.op.inputs.size() < 5) return "expects X, scale, B, mean, var";
  for (size_t i = 0; i < 5; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
    if (i > 0) {
      why = expect_constant(n, i, "scale, B, mean and var");
      if (!why.empty()) return why;
    }
  }
  if (n.op.attr_int("training_mode", 0) != 0) return "training_mode is not supported";
  const Shape& x = n.in_shape(0);
  if (x.size() < 2) return "X needs at least 2 dims";
  const int64_t c = x[1];
  for (size_t i = 1; i < 5; ++i) {
    if (n.in_shape(i) != Shape{c}) return input_label(n, i) + " must have shape [" + std::to_string(c) + "]";
  }
  const float eps = n.op.attr_float("epsilon", 1e-5f);
  auto value = [&](size_t i, int64_t j) { return static_cast<const float*>(n.op.inputs[i].data)[j]; };
  Table t;
  t.bytes.resize(static_cast<size_t>(2 * c) * 4);
  float* scale = reinterpret_cast<float*>(t.bytes.data());
  for (int64_t j = 0; j < c; ++j) {
    const float s = value(1, j) / std::sqrt(value(4, j) + eps);
    scale[j] = s;
    scale[c + j] = value(2, j) - value(3, j) * s;
  }
  k->tables.push_back(std::move(t));
  using kite_cuda::ChannelAffineParams;
  ChannelAffineParams p{};
  const int64_t total = numel(x);
  p.n = static_cast<int32_t>(total);
  p.channels = static_cast<int32_t>(c);
  p.inner = static_cast<int32_t>(c == 0 ? 1 : std::max<int64_t>(1, total / std::max<int64_t>(x[0], 1) / c));
  add_launch(k, KernelId::kite_channel_affine, p,
             {{offsetof(ChannelAffineParams, x), tensor_operand(n.in(0))},
              {offsetof(ChannelAffineParams, y), tensor_operand(n.out(0))},
              {offsetof(ChannelAffineParams, scale), table_operand(0, 0)},
              {offsetof(ChannelAffineParams, shift), table_operand(0, static_cast<uint64_t>(c) * 4)}},
             blocks_for(total), 1, 1, kite_cuda::kBlock);
  return "";
}

std::string plan_cast(const NodeView& n, const PlanContext&, Kernel* k) {
  const kite_dtype from = n.op.inputs.empty() ? KITE_DTYPE_UNDEFINED : n.op.inputs[0].dtype;
  const kite_dtype to = n.outputs.empty() ? KITE_DTYPE_UNDEFINED : n.outputs[0].dtype;
  auto known = [](kite_dtype d) {
    return d == KITE_DTYPE_FLOAT32 || d == KITE_DTYPE_FLOAT16 || d == KITE_DTYPE_INT32 || d == KITE_DTYPE_INT64 ||
           d == KITE_DTYPE_BOOL || d == KITE_DTYPE_INT8 || d == KITE_DTYPE_UINT8;
  };
  if (!known(from) || !known(to)) {
    return std::string("Cast from ") + kite::ops::dtype_name(from) + " to " + kite::ops::dtype_name(to) +
           " is not supported on CUDA";
  }
  const int64_t total = numel(n.out_shape(0));
  if (from == to) {
    add_copy(k, n.in(0), 0, n.out(0), 0, n.in(0)->byte_size);
    return "";
  }
  using kite_cuda::CastParams;
  CastParams p{};
  p.n = static_cast<int32_t>(total);
  p.from = from;
  p.to = to;
  add_launch(k, KernelId::kite_cast, p,
             {{offsetof(CastParams, x), tensor_operand(n.in(0))}, {offsetof(CastParams, y), tensor_operand(n.out(0))}},
             blocks_for(total), 1, 1, kite_cuda::kBlock);
  return "";
}

std::string plan_fused_gelu(const NodeView& n, const PlanContext&, Kernel* k) {
  const std::string approximate = n.op.attr_string("approximate", "none");
  if (!(n.pattern == "Gelu" && approximate == "none") && !(n.pattern == "Gelu(tanh)" && approximate == "tanh")) {
    return "pattern '" + n.pattern + "' with approximate '" + approximate + "' is not a known GELU";
  }
  if (n.op.inputs.size() != 1 || n.outputs.size() != 1) return "expects one input and one output";
  bool half = false;
  std::string why = float_storage(n, {0}, &half);
  if (why.empty()) why = expect_output(n, 0, half ? KITE_DTYPE_FLOAT16 : KITE_DTYPE_FLOAT32, n.in_shape(0));
  if (!why.empty()) return why;
  add_unary(k, n.in(0), n.out(0), numel(n.in_shape(0)),
            Act{approximate == "tanh" ? kite_cuda::kOpGeluTanh : kite_cuda::kOpGelu, 0.0f, 0.0f}, half);
  return "";
}

}  // namespace kite::cuda
