#include "kite/abi/device_rules.h"

#include <cstring>

#include "kite/ops/attention.h"
#include "kite/ops/fused.h"
#include "kite/ops/half.h"

namespace kite::abi {

MergedAxes merge_axes(const std::vector<int64_t>& dims, const std::vector<int64_t>& a_strides,
                      const std::vector<int64_t>& b_strides) {
  MergedAxes m;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!m.dims.empty() && m.a.back() == a_strides[i] * dims[i] && m.b.back() == b_strides[i] * dims[i]) {
      m.dims.back() *= dims[i];
      m.a.back() = a_strides[i];
      m.b.back() = b_strides[i];
      continue;
    }
    m.dims.push_back(dims[i]);
    m.a.push_back(a_strides[i]);
    m.b.push_back(b_strides[i]);
  }
  return m;
}

std::string inner_resize_of(const NodeView& n, const char* backend, InnerResize* out, bool float16) {
  std::string why = float16 ? expect_dtype(n, 0, {KITE_DTYPE_FLOAT32, KITE_DTYPE_FLOAT16}, backend)
                            : expect_dtype(n, 0, {KITE_DTYPE_FLOAT32}, backend);
  if (!why.empty()) return why;
  kite::ops::RuleError rule_err;
  if (!kite::ops::resize_sampling_of(n.op, &out->sampling, &rule_err)) return rule_err.message;
  if (n.op.attr_int("antialias", 0) != 0) return "antialias is not supported";
  const std::string policy = n.op.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") return "keep_aspect_ratio_policy '" + policy + "' is not supported on " + backend;
  const std::vector<int64_t>& in = n.in_shape(0);
  const std::vector<int64_t>& to = n.out_shape(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  if (rank < 1 || to.size() != in.size()) {
    return input_label(n, 0) + " has " + std::to_string(rank) + " dims and the output " +
           std::to_string(to.size()) + ": Resize needs rank >= 1 on both, the same";
  }
  std::vector<int64_t> axes = n.op.attr_ints("axes", {});
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  const bool has_scales = n.op.has_input(2) && n.op.inputs[2].numel() > 0;
  if (has_scales) {
    why = expect_dtype(n, 2, {KITE_DTYPE_FLOAT32}, backend);
    if (why.empty()) why = expect_constant(n, 2, "scales", backend);
    if (!why.empty()) return why;
    const int64_t count = n.op.inputs[2].numel();
    if (count != static_cast<int64_t>(axes.size())) {
      return "scales (" + input_label(n, 2) + ") has " + std::to_string(count) + " values for " +
             std::to_string(axes.size()) + " axes";
    }
    scales.resize(axes.size());
    std::memcpy(scales.data(), n.op.inputs[2].data, scales.size() * sizeof(float));  // may be unaligned
  } else {
    // Stretched to the declared output, which the op rules derived from sizes.
    for (int64_t a : axes) {
      const int64_t d = kite::ops::normalize_axis(a, rank);
      if (d < 0) return "Resize axes entry " + std::to_string(a) + " is out of range for rank " + std::to_string(rank);
      sizes.push_back(to[static_cast<size_t>(d)]);
    }
  }
  if (rank > KITE_MAX_RANK) return input_label(n, 0) + " has " + std::to_string(rank) + " dims";
  kite::ops::ResizeAxis resized[KITE_MAX_RANK];
  if (!kite::ops::resolve_resize(in.data(), rank, axes.data(), static_cast<int64_t>(axes.size()),
                                 has_scales ? scales.data() : nullptr, has_scales ? nullptr : sizes.data(), nullptr,
                                 kite::ops::AspectPolicy::kStretch, resized, &rule_err)) {
    return rule_err.message;
  }
  for (int64_t d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    if (resized[d].out != to[ud]) {
      return "output '" + n.outputs[0].name + "' has " + std::to_string(to[ud]) + " on axis " + std::to_string(d) +
             ", the scales give " + std::to_string(resized[d].out);
    }
    if (d + 2 < rank && (in[ud] != to[ud] || resized[d].scale != 1.0f)) {
      return "resizing axis " + std::to_string(d) + " is not supported on " + backend +
             " (its kernel resizes the two innermost axes only)";
    }
  }
  const size_t w = static_cast<size_t>(rank - 1);
  out->in_h = out->out_h = 1;
  out->scale_h = 1.0f;
  out->in_w = in[w];
  out->out_w = to[w];
  out->scale_w = resized[w].scale;
  if (rank >= 2) {
    out->in_h = in[w - 1];
    out->out_h = to[w - 1];
    out->scale_h = resized[w - 1].scale;
  }
  return "";
}

std::string device_attention_of(const NodeView& n, const char* backend, std::vector<int64_t>* scores,
                                std::vector<int64_t>* out) {
  std::string why = kite::ops::attention_shapes(n.op, n.pattern, n.outputs, scores, out);
  for (size_t i = 0; why.empty() && i < n.op.inputs.size(); ++i) {
    if (n.op.has_input(i)) why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32}, backend);
  }
  if (why.empty()) why = kite::ops::expect_declared_output(n.outputs, 0, KITE_DTYPE_FLOAT32, *out);
  return why;
}

std::string perm_of(const NodeView& n, std::vector<int64_t>* out) {
  const std::vector<int64_t> perm = n.op.attr_ints("perm", {});
  const int64_t rank = static_cast<int64_t>(n.op.inputs[0].shape.size());
  out->assign(static_cast<size_t>(rank), 0);
  kite::ops::RuleError err;
  if (!kite::ops::resolve_perm(rank, perm.empty() ? nullptr : perm.data(), static_cast<int64_t>(perm.size()),
                               out->data(), &err)) {
    return err.message;
  }
  return "";
}

std::string slice_of(const NodeView& n, const char* backend, std::vector<kite::ops::SliceAxis>* out) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.op.inputs.size() >= 3) {
    for (size_t i = 1; i < n.op.inputs.size(); ++i) {
      if (!n.op.has_input(i)) continue;
      std::string why =
          expect_constant(n, i, i == 1 ? "starts" : i == 2 ? "ends" : i == 3 ? "axes" : "steps", backend);
      if (!why.empty()) return why;
    }
    starts = constant_ints(n.op.inputs[1]);
    ends = constant_ints(n.op.inputs[2]);
    if (n.op.has_input(3)) axes = constant_ints(n.op.inputs[3]);
    if (n.op.has_input(4)) steps = constant_ints(n.op.inputs[4]);
  } else {
    starts = n.op.attr_ints("starts", {});
    ends = n.op.attr_ints("ends", {});
    axes = n.op.attr_ints("axes", {});
  }
  if (ends.size() != starts.size() || (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size())) {
    return "starts, ends, axes and steps differ in length";
  }
  kite::ops::SliceSpec spec;
  spec.starts = starts.data();
  spec.ends = ends.data();
  spec.axes = axes.empty() ? nullptr : axes.data();
  spec.steps = steps.empty() ? nullptr : steps.data();
  spec.count = static_cast<int64_t>(starts.size());
  const std::vector<int64_t>& in = n.op.inputs[0].shape;
  out->assign(in.size(), kite::ops::SliceAxis{});
  kite::ops::RuleError err;
  if (!kite::ops::resolve_slice(in.data(), static_cast<int64_t>(in.size()), spec, out->data(), &err)) {
    return err.message;
  }
  return "";
}

std::string pad_of(const NodeView& n, const char* backend, PadSpec* out) {
  const std::string mode = n.op.attr_string("mode", "constant");
  if (!kite::ops::parse_pad_mode(mode.c_str(), &out->mode) || out->mode == kite::ops::PadMode::kWrap) {
    return "Pad mode '" + mode + "' is not supported on " + backend;
  }
  std::vector<int64_t> pads, axes;
  if (n.op.has_input(1)) {
    std::string why = expect_constant(n, 1, "pads", backend);
    if (!why.empty()) return why;
    pads = constant_ints(n.op.inputs[1]);
  } else {
    pads = n.op.attr_ints("pads", {});
  }
  const float value = n.op.attr_float("value", 0.0f);
  std::memcpy(&out->value_bits, &value, 4);
  if (n.op.has_input(2) && n.op.inputs[2].numel() > 0) {
    std::string why = expect_constant(n, 2, "constant_value", backend);
    if (!why.empty()) return why;
    const kite::ops::TensorType& v = n.op.inputs[2];
    const bool half = v.dtype == KITE_DTYPE_FLOAT16;
    if (v.dtype != n.op.inputs[0].dtype || (kite::ops::dtype_size(v.dtype) != 4 && !half) || v.numel() != 1) {
      return input_label(n, 2) + " must be one value of the input's dtype";
    }
    if (half) {
      uint16_t h;
      std::memcpy(&h, v.data, 2);
      const float wide = kite::half_to_float(h);
      std::memcpy(&out->value_bits, &wide, 4);
    } else {
      std::memcpy(&out->value_bits, v.data, 4);
    }
  }
  if (n.op.has_input(3)) {
    std::string why = expect_constant(n, 3, "axes", backend);
    if (!why.empty()) return why;
    axes = constant_ints(n.op.inputs[3]);
  }
  for (int64_t p : pads) {
    if (p < 0) return "negative pads (cropping) are not supported on " + std::string(backend);
  }
  const std::vector<int64_t>& in = n.op.inputs[0].shape;
  out->axes.assign(in.size(), kite::ops::PadAxis{});
  kite::ops::RuleError err;
  if (!kite::ops::resolve_pad(in.data(), static_cast<int64_t>(in.size()), out->mode, pads.data(),
                              static_cast<int64_t>(pads.size()), axes.empty() ? nullptr : axes.data(),
                              static_cast<int64_t>(axes.empty() ? in.size() : axes.size()), out->axes.data(),
                              &err)) {
    return err.message;
  }
  for (size_t d = 0; d < in.size() && !n.outputs.empty(); ++d) {
    if (d >= n.outputs[0].shape.size() || n.outputs[0].shape[d] != out->axes[d].out) {
      return "the pads give another output shape than the declared one";
    }
  }
  return "";
}

std::string check_skip_layer_norm(const NodeView& n, const char* backend) {
  if (n.pattern != "Add+LayerNormalization") return "pattern '" + n.pattern + "' is not Add+LayerNormalization";
  if (n.op.inputs.size() < 3 || n.op.inputs.size() > 4 || !n.op.has_input(0) || !n.op.has_input(1) ||
      !n.op.has_input(2)) {
    return "expects inputs a, b, scale [, bias]";
  }
  for (size_t i = 0; i < 2; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32}, backend);
    if (!why.empty()) return why;
  }
  const std::vector<int64_t>& x = n.op.inputs[0].shape;
  if (n.op.inputs[1].shape != x) return input_label(n, 1) + " must have the shape of " + input_label(n, 0);
  if (n.outputs.empty() || n.outputs.size() > 2) return "expects outputs y [, a + b]";
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (k == 1 && !n.outputs[1].present) continue;  // a + b is optional
    std::string why = kite::ops::expect_declared_output(n.outputs, k, KITE_DTYPE_FLOAT32, x);
    if (!why.empty()) return why;
  }
  return "";
}

std::string check_instance_norm(const NodeView& n, const char* backend) {
  if (n.op.inputs.size() != 3 || n.outputs.size() != 1) return "expects inputs x, scale, B and one output";
  for (size_t i = 0; i < 3; ++i) {
    std::string why = expect_dtype(n, i, {KITE_DTYPE_FLOAT32}, backend);
    if (!why.empty()) return why;
  }
  const std::vector<int64_t>& x = n.op.inputs[0].shape;
  if (x.size() < 3) return input_label(n, 0) + " needs rank >= 3";
  const std::vector<int64_t> per_channel = {x[1]};
  for (size_t i = 1; i < 3; ++i) {
    if (n.op.inputs[i].shape != per_channel) {
      return input_label(n, i) + " must have shape [C] = [" + std::to_string(x[1]) + "]";
    }
  }
  return "";
}

}  // namespace kite::abi
