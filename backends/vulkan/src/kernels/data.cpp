// Data movement on the strided-copy shader (Reshape and friends between
// distinct places, Transpose, Concat, Split, Slice, Expand, Gather with
// constant indices), and the Gather (indices from a tensor), Pad, Cast and
// Resize shaders. Element sizes of 4 and 8 bytes (float32, int32, int64).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "kite/abi/device_rules.h"
#include "kite/ops/half.h"
#include "kite/ops/resolve.h"

namespace kite::vk {

namespace {

// Copies elements over an index space `dims`; strides in elements (signed),
// offsets in words. 64-bit elements become an innermost dim of 2 words.
std::string add_strided_copy(Kernel* k, const PlanContext& ctx, const kite_backend_tensor2* src,
                             uint32_t src_extra, const kite_backend_tensor2* dst, uint32_t dst_extra,
                             Shape dims, Shape ss, Shape ds, size_t words, bool elide_if_aliased) {
  const int64_t count = numel(dims);
  if (count == 0) return "";
  // Collapse: drop 1-dims; merge neighbours both sides walk contiguously.
  abi::MergedAxes merged = abi::merge_axes(dims, ss, ds);
  Shape &d = merged.dims, &s = merged.a, &t = merged.b;
  for (int64_t& v : s) v *= static_cast<int64_t>(words);
  for (int64_t& v : t) v *= static_cast<int64_t>(words);
  if (words > 1) {
    if (!d.empty() && s.back() == static_cast<int64_t>(words) && t.back() == static_cast<int64_t>(words)) {
      d.back() *= static_cast<int64_t>(words);
      s.back() = 1;
      t.back() = 1;
    } else {
      d.push_back(static_cast<int64_t>(words));
      s.push_back(1);
      t.push_back(1);
    }
  }
  if (d.empty()) {  // one element
    d.push_back(1);
    s.push_back(0);
    t.push_back(0);
  }
  if (d.size() > 6) return "the copy needs more than 6 dims after collapsing";
  const int64_t total = count * static_cast<int64_t>(words);
  if (total > static_cast<int64_t>(INT32_MAX)) return "tensor is too large for 32-bit indexing";
  std::vector<uint32_t> params = {static_cast<uint32_t>(total), static_cast<uint32_t>(d.size())};
  for (size_t i = 0; i < 6; ++i) params.push_back(i < d.size() ? static_cast<uint32_t>(d[i]) : 1u);
  for (size_t i = 0; i < 6; ++i) params.push_back(i < s.size() ? int_bits(s[i]) : 0u);
  for (size_t i = 0; i < 6; ++i) params.push_back(i < t.size() ? int_bits(t[i]) : 0u);
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(total), 256, groups)) return "tensor is too large for the grid";
  Dispatch& dispatch = add_dispatch(k, kShaderCopy, {read(src, src_extra), write(dst, dst_extra)}, params, groups);
  dispatch.elide_if_aliased = elide_if_aliased;
  // A part written into a contiguous block of the output (Concat along the
  // outermost non-trivial axis) names its bytes, so that the parts need no
  // barriers between them.
  if (elide_if_aliased) dispatch.operands[1].span_bytes = static_cast<uint64_t>(total) * unit_bytes(dst);
  return "";
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::string word_dtype(const NodeView& n, size_t i, size_t* words) {
  if (!n.op.has_input(i)) return "input " + std::to_string(i) + " is missing";
  *words = dtype_words(n.op.inputs[i].dtype);
  if (*words == 0) {
    return input_label(n, i) + " has dtype " + kite::ops::dtype_name(n.op.inputs[i].dtype) +
           " (the Vulkan kernels take float32, int32 and int64)";
  }
  return "";
}

}  // namespace

std::string plan_copy(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (n.outputs[i].present) return "output " + std::to_string(i) + " (a Dropout mask) is not supported";
  }
  const Shape& out = n.out_shape(0);
  const int64_t count = numel(out);
  return add_strided_copy(k, ctx, n.in(0), 0, n.out(0), 0, {count}, {1}, {1}, words, true);
}

std::string plan_transpose(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  Shape perm;
  why = abi::perm_of(n, &perm);
  if (!why.empty()) return why;
  const Shape in_strides = contiguous_strides(in);
  Shape dims(static_cast<size_t>(r)), ss(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    const int64_t p = perm[static_cast<size_t>(i)];
    dims[static_cast<size_t>(i)] = in[static_cast<size_t>(p)];
    ss[static_cast<size_t>(i)] = in_strides[static_cast<size_t>(p)];
  }
  return add_strided_copy(k, ctx, n.in(0), 0, n.out(0), 0, dims, ss, contiguous_strides(dims), words, false);
}

std::string plan_concat(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  const Shape& out = n.out_shape(0);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", 0), static_cast<int64_t>(out.size()));
  if (axis < 0) return "axis is out of range";
  const Shape out_strides = contiguous_strides(out);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[static_cast<size_t>(d)];
  int64_t pos = 0;
  for (size_t i = 0; i < n.op.inputs.size(); ++i) {
    const Shape& s = n.in_shape(i);
    const int64_t extra = pos * out_strides[static_cast<size_t>(axis)] * static_cast<int64_t>(words);
    if (extra > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
    // A part is a contiguous block of the output only when nothing lies
    // before the axis: only then may the planner have put it in place.
    why = add_strided_copy(k, ctx, n.in(i), 0, n.out(0), static_cast<uint32_t>(extra), s,
                           contiguous_strides(s), out_strides, words, outer == 1);
    if (!why.empty()) return why;
    pos += s[static_cast<size_t>(axis)];
  }
  return "";
}

std::string plan_split(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const int64_t axis = normalize_axis(n.op.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  if (axis < 0) return "axis is out of range";
  const Shape in_strides = contiguous_strides(in);
  int64_t pos = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (!n.outputs[i].present) return "every Split output must be used on Vulkan";
    const Shape& s = n.out_shape(i);
    const int64_t extra = pos * in_strides[static_cast<size_t>(axis)] * static_cast<int64_t>(words);
    if (extra > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
    why = add_strided_copy(k, ctx, n.in(0), static_cast<uint32_t>(extra), n.out(i), 0, s, in_strides,
                           contiguous_strides(s), words, false);
    if (!why.empty()) return why;
    pos += s[static_cast<size_t>(axis)];
  }
  return "";
}

std::string plan_slice(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<kite::ops::SliceAxis> axes;
  why = abi::slice_of(n, "Vulkan", &axes);
  if (!why.empty()) return why;
  Shape start(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
  for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
    start[d] = axes[d].start;
    step[d] = axes[d].step;
  }
  const Shape in_strides = contiguous_strides(in);
  const Shape& out = n.out_shape(0);
  int64_t extra = 0;
  Shape ss(static_cast<size_t>(r));
  for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
    if (out[d] > 0) extra += start[d] * in_strides[d];
    ss[d] = in_strides[d] * step[d];
  }
  extra *= static_cast<int64_t>(words);
  if (extra > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  return add_strided_copy(k, ctx, n.in(0), static_cast<uint32_t>(extra), n.out(0), 0, out, ss,
                          contiguous_strides(out), words, false);
}

std::string plan_expand(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const Shape& out = n.out_shape(0);
  if (in.size() > out.size()) return "Expand's input has more dims than its output";
  return add_strided_copy(k, ctx, n.in(0), 0, n.out(0), 0, out, broadcast_strides(in, out), contiguous_strides(out),
                          words, false);
}

std::string plan_gather(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  size_t words = 0;
  std::string why = word_dtype(n, 0, &words);
  if (!why.empty()) return why;
  why = expect_dtype(n, 1, {KITE_DTYPE_INT32, KITE_DTYPE_INT64});
  if (!why.empty()) return why;
  const Shape& data = n.in_shape(0);
  const int64_t r = static_cast<int64_t>(data.size());
  const int64_t axis = normalize_axis(n.op.attr_int("axis", 0), r);
  if (axis < 0) return "axis is out of range";
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= data[static_cast<size_t>(d)];
  const int64_t len = data[static_cast<size_t>(axis)];
  const int64_t count = numel(n.in_shape(1));
  const int64_t inner_words = inner * static_cast<int64_t>(words);
  if (outer * len * inner_words > static_cast<int64_t>(INT32_MAX) ||
      outer * count * inner_words > static_cast<int64_t>(INT32_MAX)) {
    return "tensor is too large for 32-bit indexing";
  }
  if (n.op.inputs[1].data && count <= 16) {
    // Constant indices, checked now: one strided copy per index.
    const std::vector<int64_t> idx = constant_ints(n.op.inputs[1]);
    for (int64_t j = 0; j < count; ++j) {
      int64_t v = idx[static_cast<size_t>(j)];
      if (v < -len || v >= len) {
        return "index " + std::to_string(v) + " of " + input_label(n, 1) + " is out of range [" +
               std::to_string(-len) + ", " + std::to_string(len) + ")";
      }
      if (v < 0) v += len;
      why = add_strided_copy(k, ctx, n.in(0), static_cast<uint32_t>(v * inner_words), n.out(0),
                             static_cast<uint32_t>(j * inner_words), {outer, inner},
                             {len * inner, 1}, {count * inner, 1}, words, false);
      if (!why.empty()) return why;
    }
    return "";
  }
  const int64_t total = outer * count * inner_words;
  if (total == 0) return "";
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(total), 256, groups)) return "tensor is too large for the grid";
  add_dispatch(k, kShaderGather, {read(n.in(0)), read(n.in(1)), write(n.out(0)), status_operand()},
               {static_cast<uint32_t>(total), static_cast<uint32_t>(len), static_cast<uint32_t>(inner_words),
                static_cast<uint32_t>(count), static_cast<uint32_t>(dtype_words(n.op.inputs[1].dtype)),
                static_cast<uint32_t>(n.node->index)},
               groups);
  k->uses_status = true;
  return "";
}

std::string plan_pad(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32});
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const Shape& out = n.out_shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  if (r > 6) return "Pad over more than 6 dims is not supported on Vulkan";
  abi::PadSpec pad;
  why = abi::pad_of(n, "Vulkan", &pad);
  if (!why.empty()) return why;
  const uint32_t mode_code = pad.mode == kite::ops::PadMode::kConstant ? 0 : pad.mode == kite::ops::PadMode::kReflect ? 1 : 2;
  // The rule gives float32 bits; a float16 input's shader stores half bits.
  uint32_t value = pad.value_bits;
  if (n.op.inputs[0].dtype == KITE_DTYPE_FLOAT16) {
    float f;
    std::memcpy(&f, &value, 4);
    value = kite::float_to_half(f);
  }
  Shape begin(static_cast<size_t>(r), 0);
  for (size_t d = 0; d < in.size(); ++d) begin[d] = pad.axes[d].begin;
  const int64_t total = numel(out);
  if (total > static_cast<int64_t>(INT32_MAX) || numel(in) > static_cast<int64_t>(INT32_MAX)) {
    return "tensor is too large for 32-bit indexing";
  }
  if (total == 0) return "";
  if (mode_code != 0 && numel(in) == 0) return "cannot pad an empty tensor by reflect or edge";
  std::vector<uint32_t> params = {static_cast<uint32_t>(total), static_cast<uint32_t>(r), mode_code, value};
  for (int64_t i = 0; i < 6; ++i) params.push_back(i < r ? static_cast<uint32_t>(out[static_cast<size_t>(i)]) : 1u);
  for (int64_t i = 0; i < 6; ++i) params.push_back(i < r ? static_cast<uint32_t>(in[static_cast<size_t>(i)]) : 1u);
  for (int64_t i = 0; i < 6; ++i) params.push_back(i < r ? int_bits(begin[static_cast<size_t>(i)]) : 0u);
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(total), 256, groups)) return "tensor is too large for the grid";
  add_dispatch(k, kShaderPad, {read(n.in(0)), write(n.out(0))}, params, groups);
  return "";
}

std::string plan_cast(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
  if (!why.empty()) return why;
  const kite_dtype from = n.op.inputs[0].dtype, to = n.outputs[0].dtype;
  auto code = [](kite_dtype d) -> uint32_t {
    return d == KITE_DTYPE_FLOAT32 ? 0u : d == KITE_DTYPE_INT32 ? 1u : d == KITE_DTYPE_INT64 ? 2u : 3u;
  };
  if (code(to) == 3 && to != KITE_DTYPE_FLOAT16) {
    return std::string("Cast to ") + kite::ops::dtype_name(to) + " is not supported on Vulkan";
  }
  const bool half = from == KITE_DTYPE_FLOAT16 || to == KITE_DTYPE_FLOAT16;
  if (half && !ctx.physical.storage_16bit) {
    return "a float16 Cast needs 16-bit storage buffers (storageBuffer16BitAccess), which the device lacks";
  }
  const int64_t count = numel(n.out_shape(0));
  if (from == to) return add_strided_copy(k, ctx, n.in(0), 0, n.out(0), 0, {count}, {1}, {1}, dtype_words(from), true);
  if (half && from != KITE_DTYPE_FLOAT32 && to != KITE_DTYPE_FLOAT32) {
    return std::string("Cast from ") + kite::ops::dtype_name(from) + " to " + kite::ops::dtype_name(to) +
           " is not supported on Vulkan (float16 converts to and from float32 only)";
  }
  if (count > static_cast<int64_t>(INT32_MAX) / 2) return "tensor is too large for 32-bit indexing";
  if (count == 0) return "";
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(count), 256, groups)) return "tensor is too large for the grid";
  if (half) {
    add_dispatch(k, from == KITE_DTYPE_FLOAT16 ? kShaderCastWiden : kShaderCastNarrow, {read(n.in(0)), write(n.out(0))},
                 {static_cast<uint32_t>(count)}, groups);
    return "";
  }
  add_dispatch(k, kShaderCast, {read(n.in(0)), write(n.out(0))},
               {static_cast<uint32_t>(count), code(from), code(to)}, groups);
  return "";
}

namespace {

// Appends one axis's table: per output index, `taps` (index, weight bits),
// sampled by the rule every backend shares (kite::ops::resize_tap).
int axis_table(const ops::ResizeSampling& sampling, int64_t in_len, int64_t out_len, float scale,
               std::vector<uint32_t>* table) {
  const int taps = ops::resize_taps(sampling, in_len, out_len, scale);
  for (int64_t o = 0; o < out_len; ++o) {
    int64_t idx[4];
    float w[4];
    ops::resize_tap(sampling, in_len, out_len, scale, o, idx, w);
    for (int t = 0; t < taps; ++t) {
      table->push_back(static_cast<uint32_t>(idx[t]));
      table->push_back(float_bits(w[t]));
    }
  }
  return taps;
}

}  // namespace

std::string plan_resize(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  abi::InnerResize r;
  // float16 X: Backend::plan has checked the node's float tensors.
  const std::string why = abi::inner_resize_of(n, "Vulkan", &r, true);
  if (!why.empty()) return why;
  const Shape& in = n.in_shape(0);
  const Shape& out = n.out_shape(0);
  const int64_t H = r.in_h, W = r.in_w, OH = r.out_h, OW = r.out_w;
  const int64_t total = numel(out);
  if (total > static_cast<int64_t>(INT32_MAX) || numel(in) > static_cast<int64_t>(INT32_MAX)) {
    return "tensor is too large for 32-bit indexing";
  }
  if (total == 0) return "";
  k->table.clear();
  const int taps_h = axis_table(r.sampling, H, OH, r.scale_h, &k->table);
  const int taps_w = axis_table(r.sampling, W, OW, r.scale_w, &k->table);
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(total), 256, groups)) return "tensor is too large for the grid";
  add_dispatch(k, kShaderResize, {read(n.in(0)), write(n.out(0)), table_operand()},
               {static_cast<uint32_t>(total), static_cast<uint32_t>(H), static_cast<uint32_t>(W),
                static_cast<uint32_t>(OH), static_cast<uint32_t>(OW), static_cast<uint32_t>(taps_h),
                static_cast<uint32_t>(taps_w)},
               groups);
  return "";
}

}  // namespace kite::vk
