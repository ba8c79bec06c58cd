// Softmax / LogSoftmax, LayerNormalization (primitive and fused),
// skip-LayerNorm (fused Add + LayerNormalization), InstanceNormalization,
// BatchNormalization (inference) and fused Attention (float32; statistics
// and softmax sums in float32).
#include "kernels.h"
#include "kite/abi/device_rules.h"

namespace kite::vk {

namespace {

Shape strip_leading_ones(Shape s) {
  size_t i = 0;
  while (i < s.size() && s[i] == 1) ++i;
  return Shape(s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
}

// Rows normalised by the layernorm shader. b: the skip input (or null);
// sum: the skip-LayerNorm's second output (or null).
std::string add_layer_norm(const NodeView& n, const PlanContext& ctx, Kernel* k, size_t x_in,
                           const kite_backend_tensor2* b, size_t scale_in, const kite_backend_tensor2* bias,
                           const kite_backend_tensor2* sum) {
  const Shape& x = n.in_shape(x_in);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  if (axis < 0) return "axis is out of range";
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
    (d < axis ? rows : cols) *= x[static_cast<size_t>(d)];
  }
  const Shape block = strip_leading_ones(Shape(x.begin() + axis, x.end()));
  for (size_t i : {scale_in, scale_in + 1}) {
    if (!n.op.has_input(i)) continue;
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
    if (strip_leading_ones(n.in_shape(i)) != block) {
      return input_label(n, i) + " is " + kite::ops::shape_string(n.in_shape(i)) +
             "; the Vulkan kernel takes the normalised dims " + kite::ops::shape_string(block);
    }
  }
  if (rows * cols > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  if (rows == 0 || cols == 0) return "";
  uint32_t groups[3];
  if (!grid_groups(ctx, static_cast<uint64_t>(rows), groups)) return "tensor is too large for the grid";
  const uint32_t flags = (b ? 1u : 0u) | (bias ? 2u : 0u) | (sum ? 4u : 0u);
  const kite_backend_tensor2* y = n.out(0);
  add_dispatch(k, kShaderLayerNorm,
               {read(n.in(x_in)), b ? read(b) : unused(y), read(n.in(scale_in)), bias ? read(bias) : unused(y),
                write(y), sum ? write(sum) : unused(y)},
               {static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), flags, 1u,
                float_bits(n.op.attr_float("epsilon", 1e-5f))},
               groups);
  return "";
}

}  // namespace

std::string plan_softmax(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.op.op == "Hardmax") return "Hardmax has no Vulkan kernel";
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  const int64_t r = static_cast<int64_t>(x.size());
  if (r == 0) return "Softmax needs at least one dim";
  const int64_t axis = normalize_axis(n.op.attr_int("axis", -1), r);
  if (axis < 0) return "axis is out of range";
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x[static_cast<size_t>(d)];
  const int64_t N = x[static_cast<size_t>(axis)];
  if (outer * N * inner > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  if (outer * N * inner == 0) return "";
  const bool rows = inner == 1;
  uint32_t groups[3];
  if (rows ? !grid_groups(ctx, static_cast<uint64_t>(outer), groups)
           : !grid_1d(ctx, static_cast<uint64_t>(outer * inner), 64, groups)) {
    return "tensor is too large for the grid";
  }
  add_dispatch(k, kShaderSoftmax, {read(n.in(0)), write(n.out(0))},
               {static_cast<uint32_t>(outer), static_cast<uint32_t>(N), static_cast<uint32_t>(inner),
                n.op.op == "LogSoftmax" ? 1u : 0u, rows ? 1u : 0u},
               groups);
  return "";
}

std::string plan_layer_norm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (n.outputs[i].present) return "LayerNormalization's Mean and InvStdDev outputs are not supported on Vulkan";
  }
  if (!n.op.has_input(1)) return "Scale is missing";
  return add_layer_norm(n, ctx, k, 0, nullptr, 1, n.op.has_input(2) ? n.in(2) : nullptr, nullptr);
}

std::string plan_fused_layer_norm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  if (n.pattern != "LayerNormalization") return "pattern '" + n.pattern + "' is not LayerNormalization";
  if (n.op.inputs.size() < 2 || n.op.inputs.size() > 3 || n.outputs.size() != 1) {
    return "expects inputs x, scale [, bias] and one output";
  }
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const OpNode p = primitive(n, "LayerNormalization", 3);
  why = check_primitive_output(n, p, 0);
  if (!why.empty()) return why;
  return add_layer_norm(n, ctx, k, 0, nullptr, 1, n.op.has_input(2) ? n.in(2) : nullptr, nullptr);
}

std::string plan_fused_skip_layer_norm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = abi::check_skip_layer_norm(n, "Vulkan");
  if (!why.empty()) return why;
  const kite_backend_tensor2* sum = n.outputs.size() > 1 && n.outputs[1].present ? n.out(1) : nullptr;
  return add_layer_norm(n, ctx, k, 0, n.in(1), 2, n.op.has_input(3) ? n.in(3) : nullptr, sum);
}

std::string plan_instance_norm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = abi::check_instance_norm(n, "Vulkan");
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  const int64_t channels = x[1];
  int64_t plane = 1;
  for (size_t d = 2; d < x.size(); ++d) plane *= x[d];
  const int64_t rows = x[0] * channels;
  if (rows * plane > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  if (rows == 0 || plane == 0) return "";
  uint32_t groups[3];
  if (!grid_groups(ctx, static_cast<uint64_t>(rows), groups)) return "tensor is too large for the grid";
  const kite_backend_tensor2* y = n.out(0);
  add_dispatch(k, kShaderLayerNorm,
               {read(n.in(0)), unused(y), read(n.in(1)), read(n.in(2)), write(y), unused(y)},
               {static_cast<uint32_t>(rows), static_cast<uint32_t>(plane), 2u | 8u,
                static_cast<uint32_t>(channels), float_bits(n.op.attr_float("epsilon", 1e-5f))},
               groups);
  return "";
}

std::string plan_batch_norm(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  for (size_t i = 0; i < 5; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (n.outputs[i].present) return "BatchNormalization's training outputs are not supported";
  }
  if (n.op.attr_int("training_mode", 0) != 0) return "training_mode is not supported";
  const Shape& x = n.in_shape(0);
  if (x.size() < 2) return "needs an input of rank >= 2";
  const int64_t channels = x[1];
  for (size_t i = 1; i < 5; ++i) {
    if (numel(n.in_shape(i)) != channels) return input_label(n, i) + " must have C values";
  }
  int64_t plane = 1;
  for (size_t d = 2; d < x.size(); ++d) plane *= x[d];
  const int64_t total = numel(x);
  if (total > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  if (total == 0) return "";
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(total), 256, groups)) return "tensor is too large for the grid";
  add_dispatch(k, kShaderBatchNorm,
               {read(n.in(0)), read(n.in(1)), read(n.in(2)), read(n.in(3)), read(n.in(4)), write(n.out(0))},
               {static_cast<uint32_t>(total), static_cast<uint32_t>(channels), static_cast<uint32_t>(plane),
                float_bits(n.op.attr_float("epsilon", 1e-5f))},
               groups);
  return "";
}

std::string plan_fused_attention(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  Shape scores, out;
  const std::string why = abi::device_attention_of(n, "Vulkan", &scores, &out);
  if (!why.empty()) return why;
  const Shape& q = n.in_shape(0);
  const Shape& kt = n.in_shape(1);
  const Shape& v = n.in_shape(2);
  const size_t r = q.size();
  const Shape lead(q.begin(), q.end() - 2);
  const int64_t B = numel(lead), S = q[r - 2], D = q[r - 1], T = kt[r - 1], Dv = v[r - 1];
  constexpr int64_t kMaxT = 2048;  // the shader's shared scores array
  if (T > kMaxT) return "attention over " + std::to_string(T) + " keys passes the Vulkan kernel's " + std::to_string(kMaxT);
  if (B * S * std::max(D, Dv) > static_cast<int64_t>(UINT32_MAX) || B * D * T > static_cast<int64_t>(UINT32_MAX) ||
      B * T * Dv > static_cast<int64_t>(UINT32_MAX)) {
    return "tensor is too large for 32-bit indexing";
  }
  const bool has_mask = n.op.inputs.size() > 3 && n.op.has_input(3);
  uint32_t mask_row = 0, mask_col = 0;
  std::vector<uint32_t> lead_dims, lead_strides;
  if (has_mask) {
    const Shape& m = n.in_shape(3);
    Shape joined;
    if (m.size() > r || !kite::ops::broadcast_shapes(m, scores, &joined) || joined != scores) {
      return input_label(n, 3) + " does not broadcast to the scores " + kite::ops::shape_string(scores);
    }
    // Strides of the mask read as [lead..., S, T].
    const Shape st = broadcast_strides(m, scores);
    mask_row = static_cast<uint32_t>(st[r - 2]);
    mask_col = static_cast<uint32_t>(st[r - 1]);
    // Leading dims: drop those of size 1, merge the rest where contiguous.
    const Shape st_lead(st.begin(), st.end() - 2);
    const abi::MergedAxes merged = abi::merge_axes(lead, st_lead, st_lead);
    for (size_t i = 0; i < merged.dims.size(); ++i) {
      lead_dims.push_back(static_cast<uint32_t>(merged.dims[i]));
      lead_strides.push_back(static_cast<uint32_t>(merged.a[i]));
    }
    if (lead_dims.size() > 4) return "the mask's broadcast over the leading dims needs more than 4 dims";
  }
  if (B * S == 0 || Dv == 0) return "";
  uint32_t groups[3];
  if (!grid_groups(ctx, static_cast<uint64_t>(B * S), groups)) return "tensor is too large for the grid";
  std::vector<uint32_t> params = {static_cast<uint32_t>(B), static_cast<uint32_t>(S), static_cast<uint32_t>(D),
                                  static_cast<uint32_t>(T), static_cast<uint32_t>(Dv), float_bits(n.op.attr_float("scale", 1.0f)),
                                  has_mask ? 1u : 0u, mask_row, mask_col,
                                  static_cast<uint32_t>(lead_dims.size())};
  for (size_t i = 0; i < 4; ++i) params.push_back(i < lead_dims.size() ? lead_dims[i] : 1u);
  for (size_t i = 0; i < 4; ++i) params.push_back(i < lead_strides.size() ? lead_strides[i] : 0u);
  params.push_back(n.op.attr_int("nan_to_zero", 0) != 0 ? 1u : 0u);
  const kite_backend_tensor2* y = n.out(0);
  add_dispatch(k, kShaderAttention,
               {read(n.in(0)), read(n.in(1)), read(n.in(2)), has_mask ? read(n.in(3)) : unused(y), write(y)},
               params, groups);
  return "";
}

}  // namespace kite::vk
