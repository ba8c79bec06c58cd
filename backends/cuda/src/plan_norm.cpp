// Softmax and LogSoftmax (opset-13 semantics), LayerNormalization (the ONNX
// op and the fused pattern), Add + LayerNormalization (skip), Instance-
// Normalization and the fused attention.
#include <algorithm>
#include <cmath>

#include "kite/abi/device_rules.h"
#include "plan_util.h"

namespace kite::cuda {

namespace {

// LayerNorm-family launch: one block per row.
void add_norm(Kernel* k, const NodeView& n, const kite_backend_tensor2* x, const kite_backend_tensor2* skip,
              const kite_backend_tensor2* scale, const kite_backend_tensor2* bias, const kite_backend_tensor2* y,
              const kite_backend_tensor2* sum, int64_t rows, int64_t cols, bool per_row, int64_t channels) {
  using kite_cuda::NormParams;
  NormParams p{};
  p.rows = static_cast<int32_t>(rows);
  p.cols = static_cast<int32_t>(cols);
  p.per_row = per_row ? 1 : 0;
  p.channels = static_cast<int32_t>(std::max<int64_t>(channels, 1));
  p.epsilon = n.op.attr_float("epsilon", 1e-5f);
  Step& s = add_launch(k, KernelId::kite_layernorm, p,
                       {{offsetof(NormParams, x), tensor_operand(x)}, {offsetof(NormParams, y), tensor_operand(y)}},
                       static_cast<uint64_t>(rows), 1, 1, cols >= 1024 ? 256 : cols >= 256 ? 128 : 64);
  auto bind = [&](size_t at, const kite_backend_tensor2* t) {
    if (t) s.fixups.push_back(Fixup{static_cast<uint32_t>(at), tensor_operand(t)});
  };
  bind(offsetof(NormParams, skip), skip);
  bind(offsetof(NormParams, scale), scale);
  bind(offsetof(NormParams, bias), bias);
  bind(offsetof(NormParams, sum), sum);
}

std::string layer_norm(const NodeView& n, Kernel* k, size_t x_index, const kite_backend_tensor2* skip,
                       const kite_backend_tensor2* sum) {
  const Shape& x = n.in_shape(x_index);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  if (axis < 0) return "axis is out of range";
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) (d < axis ? rows : cols) *= x[static_cast<size_t>(d)];
  const size_t scale_index = x_index + (skip ? 2 : 1);
  for (size_t i = scale_index; i < scale_index + 2 && i < n.op.inputs.size(); ++i) {
    if (!n.op.has_input(i)) continue;
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
    if (numel(n.in_shape(i)) != cols) {
      return input_label(n, i) + " has " + std::to_string(numel(n.in_shape(i))) + " values, expected the " +
             std::to_string(cols) + " of the normalised dims";
    }
  }
  if (rows == 0 || cols == 0) return "";
  const kite_backend_tensor2* scale = n.op.has_input(scale_index) ? n.in(scale_index) : nullptr;
  const kite_backend_tensor2* bias = n.op.has_input(scale_index + 1) ? n.in(scale_index + 1) : nullptr;
  add_norm(k, n, n.in(x_index), skip, scale, bias, n.out(0), sum, rows, cols, false, 1);
  return "";
}

}  // namespace

std::string plan_softmax(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = rank == 0 ? 0 : normalize_axis(n.op.attr_int("axis", -1), rank);
  if (axis < 0) return "axis is out of range";
  int64_t outer = 1, len = rank == 0 ? 1 : x[static_cast<size_t>(axis)], inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= x[static_cast<size_t>(d)];
    if (d > axis) inner *= x[static_cast<size_t>(d)];
  }
  if (outer * len * inner == 0) return "";
  using kite_cuda::SoftmaxParams;
  SoftmaxParams p{};
  p.outer = static_cast<int32_t>(outer);
  p.len = static_cast<int32_t>(len);
  p.inner = static_cast<int32_t>(inner);
  p.log = n.op.op == "LogSoftmax";
  std::initializer_list<Bind> binds = {{offsetof(SoftmaxParams, x), tensor_operand(n.in(0))},
                                       {offsetof(SoftmaxParams, y), tensor_operand(n.out(0))}};
  if (inner == 1) {
    add_launch(k, KernelId::kite_softmax_rows, p, binds, static_cast<uint64_t>(outer), 1, 1, len >= 1024 ? 256 : 64);
  } else {
    add_launch(k, KernelId::kite_softmax_strided, p, binds, blocks_for(outer * inner), 1, 1, kite_cuda::kBlock);
  }
  return "";
}

std::string plan_layer_norm(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  for (size_t o = 1; o < n.outputs.size(); ++o) {
    if (n.outputs[o].present) return "LayerNormalization's Mean and InvStdDev outputs are not supported";
  }
  return layer_norm(n, k, 0, nullptr, nullptr);
}

std::string plan_fused_layer_norm(const NodeView& n, const PlanContext&, Kernel* k) {
  if (n.pattern != "LayerNormalization") return "pattern '" + n.pattern + "' is not LayerNormalization";
  if (n.op.inputs.size() < 2 || n.op.inputs.size() > 3 || n.outputs.size() != 1) return "expects x, scale [, bias] and one output";
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (why.empty()) why = expect_output(n, 0, KITE_DTYPE_FLOAT32, n.in_shape(0));
  if (!why.empty()) return why;
  return layer_norm(n, k, 0, nullptr, nullptr);
}

std::string plan_fused_skip_layer_norm(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = abi::check_skip_layer_norm(n, "CUDA");
  if (!why.empty()) return why;
  const kite_backend_tensor2* sum = n.outputs.size() > 1 && n.outputs[1].present ? n.out(1) : nullptr;
  return layer_norm(n, k, 0, n.in(1), sum);
}

std::string plan_instance_norm(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = abi::check_instance_norm(n, "CUDA");
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  const int64_t c = x[1];
  const int64_t rows = x[0] * c;
  const int64_t cols = numel(x) / std::max<int64_t>(rows, 1);
  if (rows == 0 || cols == 0) return "";
  add_norm(k, n, n.in(0), nullptr, n.in(1), n.in(2), n.out(0), nullptr, rows, cols, true, c);
  return "";
}

std::string plan_fused_attention(const NodeView& n, const PlanContext&, Kernel* k) {
  Shape scores, out;
  const std::string why = abi::device_attention_of(n, "CUDA", &scores, &out);
  if (!why.empty()) return why;
  const Shape& q = n.in_shape(0);
  const size_t r = q.size();
  const int64_t S = q[r - 2], D = q[r - 1], T = scores[r - 1], Dv = out[r - 1];
  const float scale = n.op.attr_float("scale", 1.0f);
  if (D > kite_cuda::kAttentionMaxD) return "head size " + std::to_string(D) + " (the CUDA kernel takes up to 256)";
  if (Dv > kite_cuda::kAttentionMaxDv) return "value size " + std::to_string(Dv) + " (the CUDA kernel takes up to 512)";
  using kite_cuda::AttentionParams;
  AttentionParams p{};
  const Shape lead(q.begin(), q.end() - 2);
  const int64_t B = numel(lead);
  p.B = static_cast<int32_t>(B);
  p.S = static_cast<int32_t>(S);
  p.D = static_cast<int32_t>(D);
  p.T = static_cast<int32_t>(T);
  p.Dv = static_cast<int32_t>(Dv);
  p.scale = scale;
  p.nan_to_zero = n.op.attr_int("nan_to_zero", 0) != 0 ? 1 : 0;
  const bool has_mask = n.op.has_input(3);
  if (has_mask) {
    // The mask's strides along the scores [lead..., S, T] (0: broadcast).
    const Shape& m = n.in_shape(3);
    if (m.size() > r) return "the mask has more dims than the scores";
    Shape ms(r, 0);
    int64_t stride = 1;
    for (size_t i = 0; i < m.size(); ++i) {
      const size_t d = m.size() - 1 - i, o = r - 1 - i;
      if (m[d] != 1 && m[d] != scores[o]) return input_label(n, 3) + " does not broadcast to the scores";
      ms[o] = m[d] == 1 ? 0 : stride;
      stride *= m[d];
    }
    p.mask_row_stride = static_cast<int32_t>(ms[r - 2]);
    p.mask_col_stride = static_cast<int32_t>(ms[r - 1]);
    const Shape lead_strides(ms.begin(), ms.end() - 2);
    const abi::MergedAxes merged = abi::merge_axes(lead, lead_strides, lead_strides);
    if (merged.dims.size() > static_cast<size_t>(kite_cuda::kAttentionMaxLead)) {
      return "the mask broadcasts over too many groups of dims";
    }
    p.lead_rank = static_cast<int32_t>(merged.dims.size());
    for (size_t i = 0; i < merged.dims.size(); ++i) {
      p.lead_dims[i] = static_cast<int32_t>(merged.dims[i]);
      p.mask_lead_strides[i] = static_cast<int32_t>(merged.a[i]);
    }
  }
  if (B * S == 0 || Dv == 0) return "";
  if (T == 0) return "attention over no keys";
  Step& s = add_launch(k, KernelId::kite_attention, p,
                       {{offsetof(AttentionParams, q), tensor_operand(n.in(0))},
                        {offsetof(AttentionParams, kt), tensor_operand(n.in(1))},
                        {offsetof(AttentionParams, v), tensor_operand(n.in(2))},
                        {offsetof(AttentionParams, y), tensor_operand(n.out(0))}},
                       static_cast<uint64_t>(B * S), 1, 1, 128);
  if (has_mask) s.fixups.push_back(Fixup{static_cast<uint32_t>(offsetof(AttentionParams, mask)), tensor_operand(n.in(3))});
  k->how = "own fused attention (online softmax, no score matrix)";
  return "";
}

}  // namespace kite::cuda
