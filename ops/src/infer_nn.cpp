// Rules of the network ops: convolutions, pooling, matrix products and
// normalizations.
#include "infer_util.h"

namespace kite::ops::detail {
namespace {

// ---- sliding windows ------------------------------------------------------

bool valid_auto_pad(Ctx& c, std::string* auto_pad) {
  if (!c.attr_string("auto_pad", "NOTSET", auto_pad)) return false;
  if (*auto_pad == "NOTSET" || *auto_pad == "VALID" || *auto_pad == "SAME_UPPER" ||
      *auto_pad == "SAME_LOWER") {
    return true;
  }
  return c.fail("attribute 'auto_pad' is '" + *auto_pad +
                "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
}

// Reads a per-axis attribute of `count` values, each >= min_value.
bool per_axis_ints(Ctx& c, const char* name, size_t count, int64_t def, int64_t min_value,
                   std::vector<int64_t>* v) {
  bool present = false;
  if (!c.attr_ints(name, v, &present)) return false;
  if (!present) {
    v->assign(count, def);
    return true;
  }
  if (v->size() != count) {
    return c.fail(std::string("attribute '") + name + "' " + ints_string(*v) + " has " +
                  std::to_string(v->size()) + " values, expected " + std::to_string(count));
  }
  for (int64_t x : *v) {
    if (x < min_value) {
      return c.fail(std::string("attribute '") + name + "' " + ints_string(*v) + " has value " +
                    std::to_string(x) + ", expected >= " + std::to_string(min_value));
    }
  }
  return true;
}

// Strides, dilations and explicit pads for `sp` spatial axes.
bool window_attrs(Ctx& c, size_t sp, WindowGeometry* g, std::string* auto_pad) {
  std::vector<int64_t> pads;
  if (!valid_auto_pad(c, auto_pad) || !per_axis_ints(c, "strides", sp, 1, 1, &g->strides) ||
      !per_axis_ints(c, "dilations", sp, 1, 1, &g->dilations) ||
      !per_axis_ints(c, "pads", 2 * sp, 0, 0, &pads)) {
    return false;
  }
  g->pads_begin.assign(pads.begin(), pads.begin() + sp);
  g->pads_end.assign(pads.begin() + sp, pads.end());
  g->output_padding.assign(sp, 0);
  return true;
}

// The kernel's extent with dilation: (k - 1) * d + 1.
bool extent(Ctx& c, int64_t k, int64_t d, size_t a, int64_t* ek) {
  if (!mul_ok(k - 1, d, ek) || !add_ok(*ek, 1, ek)) {
    return c.overflow("kernel " + std::to_string(k) + " with dilation " + std::to_string(d) +
                      " on spatial axis " + std::to_string(a));
  }
  return true;
}

// Output size of Conv and the pools; resolves auto_pad into pads. Pools
// (is_pool) also need every pad smaller than the kernel, as ONNX Runtime
// requires, so that no window lies wholly in padding (an average over zero
// elements).
bool forward_window(Ctx& c, const std::string& auto_pad, bool ceil_mode, bool is_pool,
                    WindowGeometry* g) {
  const size_t sp = g->input.size();
  g->output.assign(sp, 0);
  for (size_t a = 0; a < sp; ++a) {
    const int64_t in = g->input[a], k = g->kernel[a], s = g->strides[a];
    const std::string axis_name = "spatial axis " + std::to_string(a);
    int64_t ek = 0;
    if (!extent(c, k, g->dilations[a], a, &ek)) return false;
    int64_t out = 0;
    if (auto_pad == "NOTSET") {
      const int64_t pb = g->pads_begin[a], pe = g->pads_end[a];
      if (is_pool && (pb >= k || pe >= k)) {
        return c.fail("pads " + std::to_string(pb) + " and " + std::to_string(pe) + " on " +
                      axis_name + " must be smaller than kernel " + std::to_string(k));
      }
      int64_t in_pb = 0, padded = 0, span = 0;
      if (!add_ok(in, pb, &in_pb) || !add_ok(in_pb, pe, &padded)) {
        return c.overflow("padded size on " + axis_name);
      }
      if (!sub_ok(padded, ek, &span) || span < 0) {
        return c.fail(c.input_label(0, "X") + " has size " + std::to_string(in) + " on " +
                      axis_name + " (" + std::to_string(padded) +
                      " with pads), smaller than the kernel extent " + std::to_string(ek));
      }
      out = span / s + 1;
      if (ceil_mode && span % s != 0) {
        ++out;
        // As in PyTorch and ONNX Runtime: the last window must start inside
        // the input or the leading padding.
        int64_t start = 0;
        if (!mul_ok(out - 1, s, &start) || start >= in_pb) --out;
      }
    } else if (auto_pad == "VALID") {
      if (in < ek) {
        return c.fail(c.input_label(0, "X") + " has size " + std::to_string(in) + " on " +
                      axis_name + ", smaller than the kernel extent " + std::to_string(ek));
      }
      out = (in - ek) / s + 1;
      g->pads_begin[a] = g->pads_end[a] = 0;
    } else {  // SAME_UPPER, SAME_LOWER: output = ceil(in / stride)
      out = in / s + (in % s != 0 ? 1 : 0);
      int64_t total = 0;
      if (out > 0) {
        if (!mul_ok(out - 1, s, &total) || !add_ok(total, ek, &total)) {
          return c.overflow("padding on " + axis_name);
        }
        total -= in;  // no overflow: both sides non-negative
        if (total < 0) total = 0;
      }
      const int64_t half = total / 2;
      g->pads_begin[a] = auto_pad == "SAME_UPPER" ? half : total - half;
      g->pads_end[a] = total - g->pads_begin[a];
    }
    g->output[a] = out;
  }
  return true;
}

// Kernel dims from W (Conv, ConvTranspose); kernel_shape, when given, must
// agree with them.
bool kernel_from_weight(Ctx& c, size_t sp, WindowGeometry* g) {
  const auto& w = c.shape(1);
  g->kernel.assign(w.begin() + 2, w.end());
  for (size_t a = 0; a < sp; ++a) {
    if (g->kernel[a] < 1) {
      return c.fail(c.input_label(1, "W") + " has shape " + shape_string(w) +
                    ": kernel dim " + std::to_string(a + 2) + " is 0");
    }
  }
  std::vector<int64_t> ks;
  bool present = false;
  if (!c.attr_ints("kernel_shape", &ks, &present)) return false;
  if (present && ks != g->kernel) {
    return c.fail("attribute 'kernel_shape' " + ints_string(ks) + " does not match " +
                  c.input_label(1, "W") + " of shape " + shape_string(w));
  }
  return true;
}

bool group_attr(Ctx& c, int64_t* group) {
  if (!c.attr_int("group", 1, group)) return false;
  if (*group < 1) return c.fail("attribute 'group' is " + std::to_string(*group) + ", expected >= 1");
  return true;
}

bool bias_matches(Ctx& c, int64_t m) {
  if (!c.has(2)) return true;
  if (!c.same_dtype(2, "B", 0, "X") || !c.rank_is(2, "B", 1)) return false;
  return c.dim_is(2, "B", 0, m, "one per output channel");
}

bool conv_geometry(Ctx& c, WindowGeometry* g) {
  if (!c.arity(2, 3, 1, 1) || !c.dtype_in(0, "X", kFloat) || !c.same_dtype(1, "W", 0, "X") ||
      !c.rank_between(0, "X", 3, 5) || !c.rank_is(1, "W", c.rank(0))) {
    return false;
  }
  const size_t sp = static_cast<size_t>(c.rank(0) - 2);
  const int64_t channels = c.shape(0)[1], m = c.shape(1)[0];
  if (!group_attr(c, &g->group)) return false;
  if (channels % g->group != 0) {
    return c.fail(c.input_label(0, "X") + " has " + std::to_string(channels) +
                  " channels, not divisible by group " + std::to_string(g->group));
  }
  if (!c.dim_is(1, "W", 1, channels / g->group, "input channels / group")) return false;
  if (m % g->group != 0) {
    return c.fail(c.input_label(1, "W") + " has " + std::to_string(m) +
                  " output channels, not divisible by group " + std::to_string(g->group));
  }
  if (!bias_matches(c, m)) return false;
  std::string auto_pad;
  g->input.assign(c.shape(0).begin() + 2, c.shape(0).end());
  return kernel_from_weight(c, sp, g) && window_attrs(c, sp, g, &auto_pad) &&
         forward_window(c, auto_pad, false, false, g);
}

bool conv_transpose_geometry(Ctx& c, WindowGeometry* g) {
  if (!c.arity(2, 3, 1, 1) || !c.dtype_in(0, "X", kFloat) || !c.same_dtype(1, "W", 0, "X") ||
      !c.rank_between(0, "X", 3, 5) || !c.rank_is(1, "W", c.rank(0))) {
    return false;
  }
  const size_t sp = static_cast<size_t>(c.rank(0) - 2);
  const int64_t channels = c.shape(0)[1];
  if (!group_attr(c, &g->group)) return false;
  if (!c.dim_is(1, "W", 0, channels, "the input channels")) return false;
  if (channels % g->group != 0) {
    return c.fail(c.input_label(0, "X") + " has " + std::to_string(channels) +
                  " channels, not divisible by group " + std::to_string(g->group));
  }
  int64_t m = 0;
  if (!mul_ok(c.shape(1)[1], g->group, &m)) return c.overflow("output channels");
  if (!bias_matches(c, m)) return false;
  std::string auto_pad;
  g->input.assign(c.shape(0).begin() + 2, c.shape(0).end());
  if (!kernel_from_weight(c, sp, g) || !window_attrs(c, sp, g, &auto_pad) ||
      !per_axis_ints(c, "output_padding", sp, 0, 0, &g->output_padding)) {
    return false;
  }
  std::vector<int64_t> output_shape;
  bool has_output_shape = false;
  if (!c.attr_ints("output_shape", &output_shape, &has_output_shape)) return false;
  if (has_output_shape) {
    if (output_shape.size() == sp + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (output_shape.size() != sp) {
      return c.fail("attribute 'output_shape' " + ints_string(output_shape) + " has " +
                    std::to_string(output_shape.size()) + " values, expected " +
                    std::to_string(sp));
    }
  }
  g->output.assign(sp, 0);
  for (size_t a = 0; a < sp; ++a) {
    const int64_t in = g->input[a], s = g->strides[a], op = g->output_padding[a];
    const std::string axis_name = "spatial axis " + std::to_string(a);
    if (op >= s && op >= g->dilations[a]) {
      return c.fail("attribute 'output_padding' " + ints_string(g->output_padding) + " on " +
                    axis_name + " must be smaller than the stride or the dilation");
    }
    if (in < 1) {
      return c.fail(c.input_label(0, "X") + " has size 0 on " + axis_name);
    }
    int64_t ek = 0, full = 0;  // full: output size with no padding removed
    if (!extent(c, g->kernel[a], g->dilations[a], a, &ek)) return false;
    if (!mul_ok(s, in - 1, &full) || !add_ok(full, op, &full) || !add_ok(full, ek, &full)) {
      return c.overflow("output size on " + axis_name);
    }
    int64_t out = 0;
    if (has_output_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      if (has_output_shape) {
        out = output_shape[a];
      } else if (!mul_ok(in, s, &out)) {
        return c.overflow("output size on " + axis_name);
      }
      if (out < 0) {
        return c.fail("output size " + std::to_string(out) + " on " + axis_name +
                      " is negative");
      }
      // An output larger than the full result (negative total padding) is
      // padded with zeros (plus bias) at the end: no padding is removed, as
      // onnxruntime (max(0, total)) and ONNX's reference do.
      const int64_t total = full > out ? full - out : 0;
      // ONNX's ConvTranspose puts the odd pad at the end for SAME_UPPER and at
      // the start otherwise.
      g->pads_begin[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pads_end[a] = total - g->pads_begin[a];
    } else {
      if (auto_pad == "VALID") g->pads_begin[a] = g->pads_end[a] = 0;
      int64_t pads = 0;
      if (!add_ok(g->pads_begin[a], g->pads_end[a], &pads)) return c.overflow("pads");
      out = full - pads;
      if (out < 0) {
        return c.fail("pads " + std::to_string(g->pads_begin[a]) + " and " +
                      std::to_string(g->pads_end[a]) + " on " + axis_name +
                      " exceed the output size " + std::to_string(full));
      }
    }
    g->output[a] = out;
  }
  return true;
}

bool pool_geometry(Ctx& c, WindowGeometry* g) {
  const bool is_max = c.node.op == "MaxPool";
  if (!c.arity(1, 1, 1, is_max ? 2 : 1)) return false;
  if (c.node.uses_output(1)) return c.fail("output 1 (Indices) is not supported");
  if (!c.dtype_in(0, "X", is_max ? kFloat | kI8 | kU8 : kFloat) || !c.rank_between(0, "X", 3, 5)) {
    return false;
  }
  const size_t sp = static_cast<size_t>(c.rank(0) - 2);
  if (!c.has_attr("kernel_shape")) return c.fail("attribute 'kernel_shape' is required");
  if (!per_axis_ints(c, "kernel_shape", sp, 1, 1, &g->kernel)) return false;
  bool ceil_mode = false, flag = false;
  if (!c.attr_bool("ceil_mode", false, &ceil_mode)) return false;
  if (is_max ? !c.attr_bool("storage_order", false, &flag)
             : !c.attr_bool("count_include_pad", false, &flag)) {
    return false;
  }
  std::string auto_pad;
  g->input.assign(c.shape(0).begin() + 2, c.shape(0).end());
  return window_attrs(c, sp, g, &auto_pad) && forward_window(c, auto_pad, ceil_mode, true, g);
}

bool infer_window(Ctx& c) {
  WindowGeometry g;
  if (!window_rules(c, &g)) return false;
  std::vector<int64_t> shape = {c.shape(0)[0], 0};
  if (c.node.op == "Conv") {
    shape[1] = c.shape(1)[0];
  } else if (c.node.op == "ConvTranspose") {
    shape[1] = c.shape(1)[1] * g.group;  // checked in conv_transpose_geometry
  } else {
    shape[1] = c.shape(0)[1];
  }
  shape.insert(shape.end(), g.output.begin(), g.output.end());
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_global_pool(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "X", kFloat) ||
      !c.rank_between(0, "X", 3, KITE_MAX_RANK)) {
    return false;
  }
  std::vector<int64_t> shape = c.shape(0);
  for (size_t a = 2; a < shape.size(); ++a) {
    if (shape[a] == 0) {
      return c.fail(c.input_label(0, "X") + " has shape " + shape_string(shape) +
                    ": an empty spatial axis has no " +
                    (c.node.op == "GlobalMaxPool" ? "maximum" : "average"));
    }
    shape[a] = 1;
  }
  return c.set(0, c.in(0).dtype, shape);
}

// ---- matrix products -------------------------------------------------------

// A resolve_gemm/resolve_matmul message names A and B by role; add the tensors.
bool product_failed(Ctx& c, const RuleError& e) {
  return c.fail(std::string(e.message) + " (A is " + c.input_label(0, "A") + ", B is " +
                c.input_label(1, "B") + ")");
}

bool infer_gemm(Ctx& c) {
  static const uint32_t kTypes = kFloat | kI32 | kI64;
  if (!c.arity(2, 3, 1, 1) || !c.dtype_in(0, "A", kTypes) || !c.same_dtype(1, "B", 0, "A") ||
      (c.has(2) && !c.same_dtype(2, "C", 0, "A")) || !c.rank_is(0, "A", 2) ||
      !c.rank_is(1, "B", 2)) {
    return false;
  }
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  if (!c.attr_bool("transA", false, &trans_a) || !c.attr_bool("transB", false, &trans_b) ||
      !c.attr_float("alpha", 1.0f, &alpha) || !c.attr_float("beta", 1.0f, &beta)) {
    return false;
  }
  MatMulShape product;
  RuleError e;
  if (!resolve_gemm(c.shape(0).data(), c.shape(1).data(), trans_a, trans_b, &product, &e)) {
    return product_failed(c, e);
  }
  const std::vector<int64_t> y = {product.m, product.n};
  if (c.has(2) && !broadcasts_to(c.shape(2), y)) {
    return c.fail(c.input_label(2, "C") + " has shape " + shape_string(c.shape(2)) +
                  ", which does not broadcast to " + shape_string(y));
  }
  return c.set(0, c.in(0).dtype, y);
}

bool infer_matmul(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "A", kFloat | kI32 | kI64) ||
      !c.same_dtype(1, "B", 0, "A") || !c.rank_between(0, "A", 1, KITE_MAX_RANK) ||
      !c.rank_between(1, "B", 1, KITE_MAX_RANK)) {
    return false;
  }
  // numpy.matmul: a 1-D A is a row vector, a 1-D B a column vector; the
  // added dim is removed from the result. Leading (batch) dims broadcast.
  MatMulShape product;
  RuleError e;
  if (!resolve_matmul(c.shape(0).data(), c.rank(0), c.shape(1).data(), c.rank(1), &product, &e)) {
    return product_failed(c, e);
  }
  return c.set(0, c.in(0).dtype, {product.out, product.out + product.out_rank});
}

// ---- normalizations --------------------------------------------------------

// Inputs first..last are rank-1 vectors of `n` elements of a float dtype.
bool per_channel(Ctx& c, size_t i, const char* role, int64_t n, uint32_t dtypes) {
  return c.dtype_in(i, role, dtypes) && c.rank_is(i, role, 1) &&
         c.dim_is(i, role, 0, n, "one per channel");
}

bool infer_batch_norm(Ctx& c) {
  if (!c.arity(5, 5, 1, 3)) return false;
  if (c.node.uses_output(1) || c.node.uses_output(2)) {
    return c.fail("has " + std::to_string(c.node.num_outputs) +
                  " outputs, expected 1: training-mode outputs (running mean and variance) "
                  "are not supported");
  }
  bool training = false;
  float epsilon = 0, momentum = 0;
  if (!c.attr_bool("training_mode", false, &training) ||
      !c.attr_float("epsilon", 1e-5f, &epsilon) || !c.attr_float("momentum", 0.9f, &momentum)) {
    return false;
  }
  if (training) return c.fail("attribute 'training_mode' is 1; only inference is supported");
  if (!(epsilon >= 0)) return c.fail("attribute 'epsilon' is negative or NaN");
  if (!c.dtype_in(0, "X", kFloat) || !c.rank_between(0, "X", 2, KITE_MAX_RANK)) return false;
  const int64_t channels = c.shape(0)[1];
  static const char* const kRoles[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    if (!per_channel(c, i, kRoles[i], channels, kFloat)) return false;
  }
  if (!c.same_dtype(2, "B", 1, "scale") || !c.same_dtype(4, "input_var", 3, "input_mean")) {
    return false;
  }
  return c.same_as_input(0, 0);
}

bool infer_instance_norm(Ctx& c) {
  float epsilon = 0;
  if (!c.arity(3, 3, 1, 1) || !c.dtype_in(0, "input", kFloat) ||
      !c.rank_between(0, "input", 3, KITE_MAX_RANK) ||
      !c.attr_float("epsilon", 1e-5f, &epsilon)) {
    return false;
  }
  if (!(epsilon >= 0)) return c.fail("attribute 'epsilon' is negative or NaN");
  const int64_t channels = c.shape(0)[1];
  if (!per_channel(c, 1, "scale", channels, kFloat) || !c.same_dtype(1, "scale", 0, "input") ||
      !per_channel(c, 2, "B", channels, kFloat) || !c.same_dtype(2, "B", 0, "input")) {
    return false;
  }
  return c.same_as_input(0, 0);
}

bool infer_layer_norm(Ctx& c) {
  if (!c.arity(2, 3, 1, 3) || !c.dtype_in(0, "X", kFloat) ||
      !c.rank_between(0, "X", 1, KITE_MAX_RANK) || !c.same_dtype(1, "Scale", 0, "X") ||
      (c.has(2) && !c.same_dtype(2, "B", 0, "X"))) {
    return false;
  }
  int64_t axis = 0, stash_type = 0;
  float epsilon = 0;
  if (!c.attr_int("axis", -1, &axis) || !c.attr_int("stash_type", 1, &stash_type) ||
      !c.attr_float("epsilon", 1e-5f, &epsilon) ||
      !c.axis("attribute 'axis'", axis, c.rank(0), &axis)) {
    return false;
  }
  if (stash_type != 1) {
    return c.fail("attribute 'stash_type' is " + std::to_string(stash_type) +
                  ", only 1 (float32) is supported");
  }
  if (!(epsilon >= 0)) return c.fail("attribute 'epsilon' is negative or NaN");
  const auto& x = c.shape(0);
  const std::vector<int64_t> normalized(x.begin() + axis, x.end());
  int64_t norm_size = 0;
  checked_numel(normalized, &norm_size);  // a part of a checked shape
  // Scale and B must cover the normalized shape element for element (leading
  // 1s aside), so a kernel can index them with the normalized offset.
  for (size_t i = 1; i <= 2; ++i) {
    if (!c.has(i)) continue;
    const char* role = i == 1 ? "Scale" : "B";
    if (!broadcasts_to(c.shape(i), normalized) || c.in(i).numel() != norm_size) {
      return c.fail(c.input_label(i, role) + " has shape " + shape_string(c.shape(i)) +
                    ", expected the normalized shape " + shape_string(normalized));
    }
  }
  std::vector<int64_t> stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  return c.same_as_input(0, 0) && c.set(1, KITE_DTYPE_FLOAT32, stats) &&
         c.set(2, KITE_DTYPE_FLOAT32, stats);
}

}  // namespace

bool window_rules(Ctx& c, WindowGeometry* g) {
  const std::string& op = c.node.op;
  if (op == "Conv") return conv_geometry(c, g);
  if (op == "ConvTranspose") return conv_transpose_geometry(c, g);
  return pool_geometry(c, g);
}

const std::vector<OpRule>& nn_rules() {
  static const std::vector<OpRule> rules = {
      {"Conv", infer_window},
      {"ConvTranspose", infer_window},
      {"MaxPool", infer_window},
      {"AveragePool", infer_window},
      {"GlobalAveragePool", infer_global_pool},
      {"GlobalMaxPool", infer_global_pool},
      {"Gemm", infer_gemm},
      {"MatMul", infer_matmul},
      {"BatchNormalization", infer_batch_norm},
      {"InstanceNormalization", infer_instance_norm},
      {"LayerNormalization", infer_layer_norm},
  };
  return rules;
}

}  // namespace kite::ops::detail
