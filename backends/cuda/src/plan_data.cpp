// Data movement: copies (Reshape and friends), Transpose, Concat, Split,
// Slice, Expand (strided copies), Gather, Pad and Resize. Copies and Gather
// move elements of any size (float16 too); Pad and Resize have float32 and
// float16 kernels (fp16 storage, fp32 arithmetic).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "kite/abi/device_rules.h"
#include "kite/ops/resolve.h"
#include "plan_util.h"

namespace kite::cuda {

namespace {

size_t elem_size(const NodeView& n, size_t input) { return kite::ops::dtype_size(n.op.inputs[input].dtype); }

std::string word_sized(const NodeView& n, size_t input) {
  const size_t e = elem_size(n, input);
  if (e == 1 || e == 2 || e == 4 || e == 8) return "";
  return input_label(n, input) + " has dtype " + kite::ops::dtype_name(n.op.inputs[input].dtype) +
         ", which the CUDA copy kernels do not take";
}

}  // namespace

std::string plan_copy(const NodeView& n, const PlanContext&, Kernel* k) {
  if (!n.op.has_input(0) || n.outputs.empty() || !n.out(0)) return "needs an input and an output";
  if (n.in(0)->byte_size != n.out(0)->byte_size) return "input and output sizes differ";
  add_copy(k, n.in(0), 0, n.out(0), 0, n.in(0)->byte_size);
  return "";
}

std::string plan_transpose(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = word_sized(n, 0);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  Shape perm;
  why = abi::perm_of(n, &perm);
  if (!why.empty()) return why;
  const Shape in_strides = strides_of(in);
  Shape out_shape, src;
  for (int64_t p : perm) {
    out_shape.push_back(in[static_cast<size_t>(p)]);
    src.push_back(in_strides[static_cast<size_t>(p)]);
  }
  return add_strided_copy(k, n.in(0), 0, n.out(0), 0, out_shape, src, strides_of(out_shape), elem_size(n, 0));
}

std::string plan_concat(const NodeView& n, const PlanContext&, Kernel* k) {
  if (n.op.inputs.empty()) return "needs inputs";
  const Shape& out = n.out_shape(0);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", 0), static_cast<int64_t>(out.size()));
  if (axis < 0) return "axis is out of range";
  const Shape out_strides = strides_of(out);
  const size_t es = kite::ops::dtype_size(n.outputs[0].dtype);
  int64_t start = 0;
  for (size_t i = 0; i < n.op.inputs.size(); ++i) {
    if (!n.op.has_input(i)) return "an input is missing";
    std::string why = word_sized(n, i);
    if (!why.empty()) return why;
    const Shape& s = n.in_shape(i);
    const uint64_t extra = static_cast<uint64_t>(start * out_strides[static_cast<size_t>(axis)]) * es;
    why = add_strided_copy(k, n.in(i), 0, n.out(0), extra, s, strides_of(s), out_strides, es);
    if (!why.empty()) return why;
    start += s[static_cast<size_t>(axis)];
  }
  if (start != out[static_cast<size_t>(axis)]) return "the inputs do not fill the output along the axis";
  return "";
}

std::string plan_split(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = word_sized(n, 0);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  if (axis < 0) return "axis is out of range";
  const Shape in_strides = strides_of(in);
  const size_t es = elem_size(n, 0);
  int64_t start = 0;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (!n.outputs[o].present) return "an output is missing";
    const Shape& s = n.out_shape(o);
    if (s.size() != in.size()) return "an output's rank differs from the input's";
    const uint64_t extra = static_cast<uint64_t>(start * in_strides[static_cast<size_t>(axis)]) * es;
    why = add_strided_copy(k, n.in(0), extra, n.out(o), 0, s, in_strides, strides_of(s), es);
    if (!why.empty()) return why;
    start += s[static_cast<size_t>(axis)];
  }
  if (start > in[static_cast<size_t>(axis)]) return "the outputs are larger than the input along the axis";
  return "";
}

std::string plan_slice(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = word_sized(n, 0);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  std::vector<kite::ops::SliceAxis> axes;
  why = abi::slice_of(n, "CUDA", &axes);
  if (!why.empty()) return why;
  Shape first(in.size(), 0), step(in.size(), 1);
  for (size_t d = 0; d < in.size(); ++d) {
    first[d] = axes[d].start;
    step[d] = axes[d].step;
  }
  const Shape& out = n.out_shape(0);
  if (out.size() != in.size()) return "output rank differs from the input's";
  const Shape in_strides = strides_of(in);
  Shape src(in.size());
  uint64_t extra = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    // Every output index along d reads first + i * step, inside the input.
    if (out[d] > 0) {
      const int64_t last = first[d] + (out[d] - 1) * step[d];
      if (first[d] < 0 || first[d] >= in[d] || last < 0 || last >= in[d]) return "the slice reads outside its input";
    }
    extra += static_cast<uint64_t>(first[d] * in_strides[d]) * elem_size(n, 0);
    src[d] = in_strides[d] * step[d];
  }
  return add_strided_copy(k, n.in(0), extra, n.out(0), 0, out, src, strides_of(out), elem_size(n, 0));
}

std::string plan_expand(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = word_sized(n, 0);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const Shape& out = n.out_shape(0);
  if (in.size() > out.size()) return "the input has more dims than the output";
  for (size_t k2 = 0; k2 < in.size(); ++k2) {
    const size_t d = in.size() - 1 - k2, o = out.size() - 1 - k2;
    if (in[d] != 1 && in[d] != out[o]) return "the input does not broadcast to the output";
  }
  return add_strided_copy(k, n.in(0), 0, n.out(0), 0, out, broadcast_strides(in, out), strides_of(out),
                          elem_size(n, 0));
}

std::string plan_gather(const NodeView& n, const PlanContext&, Kernel* k) {
  if (n.op.inputs.size() != 2 || !n.op.has_input(1)) return "expects data and indices";
  std::string why = expect_dtype(n, 1, {KITE_DTYPE_INT32, KITE_DTYPE_INT64});
  if (!why.empty()) return why;
  const Shape& data = n.in_shape(0);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", 0), static_cast<int64_t>(data.size()));
  if (axis < 0) return "axis is out of range";
  const size_t es = elem_size(n, 0);
  if (es == 0) return input_label(n, 0) + " has no element size";
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < data.size(); ++d) inner *= data[d];
  const int64_t count = numel(n.in_shape(1));
  const int64_t total_bytes = outer * count * inner * static_cast<int64_t>(es);
  if (total_bytes >= (int64_t{1} << 31)) return "the output has 2^31 bytes or more";
  using kite_cuda::GatherParams;
  GatherParams p{};
  p.outer = static_cast<int32_t>(outer);
  p.axis_dim = static_cast<int32_t>(data[static_cast<size_t>(axis)]);
  p.inner_bytes = static_cast<int32_t>(inner * static_cast<int64_t>(es));
  p.count = static_cast<int32_t>(count);
  p.index_is_64 = n.op.inputs[1].dtype == KITE_DTYPE_INT64;
  p.node = n.node->index;
  if (total_bytes == 0) return "";
  add_launch(k, KernelId::kite_gather, p,
             {{offsetof(GatherParams, data), tensor_operand(n.in(0))},
              {offsetof(GatherParams, indices), tensor_operand(n.in(1))},
              {offsetof(GatherParams, y), tensor_operand(n.out(0))},
              {offsetof(GatherParams, status), workspace_operand(0)}},
             blocks_for(total_bytes), 1, 1, kite_cuda::kBlock);
  k->uses_status = true;
  return "";
}

std::string plan_pad(const NodeView& n, const PlanContext&, Kernel* k) {
  bool half = false;
  std::string why = float_storage(n, {0}, &half);
  if (!why.empty()) return why;
  abi::PadSpec pad;
  why = abi::pad_of(n, "CUDA", &pad);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  if (rank > kite_cuda::kMaxRank) return "more than 8 dims";
  const Shape& out = n.out_shape(0);
  using kite_cuda::PadParams;
  PadParams p{};
  const int64_t total = numel(out);
  p.n = static_cast<int32_t>(total);
  p.rank = static_cast<int32_t>(rank);
  p.mode = pad.mode == kite::ops::PadMode::kConstant ? 0 : pad.mode == kite::ops::PadMode::kReflect ? 1 : 2;
  std::memcpy(&p.value, &pad.value_bits, 4);
  for (size_t d = 0; d < in.size(); ++d) {
    p.in_shape[d] = static_cast<int32_t>(in[d]);
    p.out_shape[d] = static_cast<int32_t>(out[d]);
    p.pad_begin[d] = static_cast<int32_t>(pad.axes[d].begin);
  }
  if (total == 0) return "";
  add_launch(k, storage_kernel(half, KernelId::kite_pad, KernelId::kite_pad_f16), p,
             {{offsetof(PadParams, x), tensor_operand(n.in(0))}, {offsetof(PadParams, y), tensor_operand(n.out(0))}},
             blocks_for(total), 1, 1, kite_cuda::kBlock);
  return "";
}

namespace {

// Taps of one axis: offsets (index * stride) and weights per output index.
struct AxisTaps {
  int taps = 1;
  std::vector<int32_t> offset;
  std::vector<float> weight;
};

AxisTaps axis_taps(const ops::ResizeSampling& sampling, int64_t in_len, int64_t out_len, float scale,
                   int64_t stride) {
  AxisTaps m;
  m.taps = ops::resize_taps(sampling, in_len, out_len, scale);
  for (int64_t o = 0; o < out_len; ++o) {
    int64_t idx[4];
    float w[4];
    ops::resize_tap(sampling, in_len, out_len, scale, o, idx, w);
    for (int t = 0; t < m.taps; ++t) {
      m.offset.push_back(static_cast<int32_t>(idx[t] * stride));
      m.weight.push_back(w[t]);
    }
  }
  return m;
}

}  // namespace

std::string plan_resize(const NodeView& n, const PlanContext&, Kernel* k) {
  abi::InnerResize r;
  bool half = false;
  std::string why = float_storage(n, {0}, &half);  // X and Y; roi and scales stay float32
  if (why.empty()) why = abi::inner_resize_of(n, "CUDA", &r, true);
  if (!why.empty()) return why;
  const Shape& out = n.out_shape(0);
  const int64_t ih = r.in_h, iw = r.in_w, oh = r.out_h, ow = r.out_w;
  const AxisTaps h = axis_taps(r.sampling, ih, oh, r.scale_h, iw);
  const AxisTaps w = axis_taps(r.sampling, iw, ow, r.scale_w, 1);
  Table t;
  const size_t hb = h.offset.size() * 4, wb = w.offset.size() * 4;
  t.bytes.resize(2 * hb + 2 * wb);
  std::memcpy(t.bytes.data(), h.offset.data(), hb);
  std::memcpy(t.bytes.data() + hb, h.weight.data(), hb);
  std::memcpy(t.bytes.data() + 2 * hb, w.offset.data(), wb);
  std::memcpy(t.bytes.data() + 2 * hb + wb, w.weight.data(), wb);
  k->tables.push_back(std::move(t));
  using kite_cuda::ResizeParams;
  ResizeParams p{};
  p.planes = static_cast<int32_t>(numel(out) / std::max<int64_t>(oh * ow, 1));
  p.IH = static_cast<int32_t>(ih);
  p.IW = static_cast<int32_t>(iw);
  p.OH = static_cast<int32_t>(oh);
  p.OW = static_cast<int32_t>(ow);
  p.taps_h = h.taps;
  p.taps_w = w.taps;
  const int64_t total = numel(out);
  if (total == 0) return "";
  add_launch(k, storage_kernel(half, KernelId::kite_resize, KernelId::kite_resize_f16), p,
             {{offsetof(ResizeParams, x), tensor_operand(n.in(0))},
              {offsetof(ResizeParams, y), tensor_operand(n.out(0))},
              {offsetof(ResizeParams, h_offset), table_operand(0, 0)},
              {offsetof(ResizeParams, h_weight), table_operand(0, hb)},
              {offsetof(ResizeParams, w_offset), table_operand(0, 2 * hb)},
              {offsetof(ResizeParams, w_weight), table_operand(0, 2 * hb + wb)}},
             blocks_for(total), 1, 1, kite_cuda::kBlock);
  return "";
}

}  // namespace kite::cuda
