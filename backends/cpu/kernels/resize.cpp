// Resize (float32), modes nearest, linear (N-linear over every resized
// axis) and cubic (Keys, cubic_coeff_a, exclude_outside), with the
// coordinate transformations exporters use: half_pixel, pytorch_half_pixel,
// align_corners, asymmetric, tf_half_pixel_for_nn, half_pixel_symmetric; and
// nearest modes round_prefer_floor, round_prefer_ceil, floor, ceil.
// Coordinates are computed in float, as reference runtimes do. Scales and
// sizes must be constants; the per-axis index tables are built at prepare.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

// Per axis and output index: `taps` source offsets (already multiplied by
// the input stride) and their weights. Nearest has 1 tap, linear 2, cubic 4.
struct AxisMap {
  int taps = 1;
  std::vector<int64_t> offset;
  std::vector<float> weight;
};

float source_coordinate(const std::string& mode, int64_t x, float scale, int64_t in_len,
                        int64_t out_len) {
  const float xf = static_cast<float>(x);
  if (mode == "asymmetric") return xf / scale;
  if (mode == "align_corners") {
    return out_len == 1 ? 0.0f
                        : xf * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
  }
  if (mode == "pytorch_half_pixel") return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
  if (mode == "tf_half_pixel_for_nn") return (xf + 0.5f) / scale;
  if (mode == "half_pixel_symmetric") {
    // Centres the sampling grid when the output length was rounded.
    const float adjustment =
        static_cast<float>(out_len) / (scale * static_cast<float>(in_len));
    const float center = static_cast<float>(in_len) / 2.0f;
    return center * (1.0f - adjustment) + (xf + 0.5f) / scale - 0.5f;
  }
  return (xf + 0.5f) / scale - 0.5f;  // half_pixel
}

int64_t nearest_index(const std::string& mode, float x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const float f = std::floor(x);
  if (x - f == 0.5f) {
    return static_cast<int64_t>(mode == "round_prefer_ceil" ? f + 1.0f : f);
  }
  return static_cast<int64_t>(std::round(x));
}

// Keys cubic convolution weights for taps at -1, 0, 1, 2 from floor(x).
void cubic_weights(float s, float a, float* w) {
  const float s1 = s + 1.0f, t = 1.0f - s, t1 = 2.0f - s;
  w[0] = ((a * s1 - 5.0f * a) * s1 + 8.0f * a) * s1 - 4.0f * a;
  w[1] = ((a + 2.0f) * s - (a + 3.0f)) * s * s + 1.0f;
  w[2] = ((a + 2.0f) * t - (a + 3.0f)) * t * t + 1.0f;
  w[3] = ((a * t1 - 5.0f * a) * t1 + 8.0f * a) * t1 - 4.0f * a;
}

class ResizeKernel : public Kernel {
 public:
  ResizeKernel(Shape out, std::vector<AxisMap> maps, const float* x, float* y)
      : out_(std::move(out)), maps_(std::move(maps)), x_(x), y_(y) {}

  static constexpr int kMaxCorners = 256;

  void run(ThreadPool& pool) override {
    const int nd = static_cast<int>(out_.size());
    const int64_t numel = shape_numel(out_);
    if (numel == 0) return;
    if (nd == 0) {
      y_[0] = x_[0];
      return;
    }
    const int64_t inner = out_[nd - 1];
    const int64_t rows = numel / inner;
    const AxisMap& last = maps_[nd - 1];
    const int taps = last.taps;
    pool.parallel_for(rows, rows_per_chunk(inner * taps, 8192), [&](int64_t begin, int64_t end) {
      // Offsets and weights of the outer axes' tap combinations.
      int64_t offsets[kMaxCorners];
      float weights[kMaxCorners];
      for (int64_t row = begin; row < end; ++row) {
        int count = 1;
        offsets[0] = 0;
        weights[0] = 1.0f;
        int64_t rest = row;
        for (int d = nd - 2; d >= 0; --d) {
          const int64_t o = rest % out_[d];
          rest /= out_[d];
          const AxisMap& m = maps_[d];
          const int64_t* mo = m.offset.data() + o * m.taps;
          const float* mw = m.weight.data() + o * m.taps;
          for (int t = m.taps - 1; t >= 0; --t) {
            for (int c = 0; c < count; ++c) {
              offsets[t * count + c] = offsets[c] + mo[t];
              weights[t * count + c] = weights[c] * mw[t];
            }
          }
          count *= m.taps;
        }
        float* y = y_ + row * inner;
        if (count == 1 && taps == 1) {
          const float* x = x_ + offsets[0];
          for (int64_t k = 0; k < inner; ++k) y[k] = x[last.offset[k]];
          continue;
        }
        for (int64_t k = 0; k < inner; ++k) {
          const int64_t* lo = last.offset.data() + k * taps;
          const float* lw = last.weight.data() + k * taps;
          float sum = 0.0f;
          for (int c = 0; c < count; ++c) {
            const float* x = x_ + offsets[c];
            float line = 0.0f;
            for (int t = 0; t < taps; ++t) line += lw[t] * x[lo[t]];
            sum += weights[c] * line;
          }
          y[k] = sum;
        }
      }
    });
  }

 private:
  Shape out_;
  std::vector<AxisMap> maps_;
  const float* x_;
  float* y_;
};

}  // namespace

std::string check_resize(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  std::string why = expect_dtype(op, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const std::string mode = op.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return "mode '" + mode + "' is not supported";
  }
  const std::string ct = op.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ct != "half_pixel" && ct != "pytorch_half_pixel" && ct != "align_corners" &&
      ct != "asymmetric" && ct != "tf_half_pixel_for_nn" && ct != "half_pixel_symmetric") {
    return "coordinate_transformation_mode '" + ct + "' is not supported";
  }
  const std::string nm = op.attr_string("nearest_mode", "round_prefer_floor");
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil") {
    return "nearest_mode '" + nm + "' is not supported";
  }
  if (op.attr_int("antialias", 0) != 0) return "antialias is not supported";
  if (op.has_input(2)) {
    why = expect_dtype(op, 2, {KITE_DTYPE_FLOAT32});
    if (why.empty()) why = expect_constant(op, 2, "scales");
    if (!why.empty()) return why;
  }
  if (op.has_input(3)) {
    why = expect_dtype(op, 3, {KITE_DTYPE_INT64});
    if (why.empty()) why = expect_constant(op, 3, "sizes");
    if (!why.empty()) return why;
  }
  return "";
}

std::unique_ptr<Kernel> prepare_resize(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const Shape out = output_shape(args, 0);
  if (static_cast<int64_t>(out.size()) != rank) {
    return prepare_error(err, op, "output rank differs from the input");
  }
  // Axes the scales/sizes refer to (opset 18), default all.
  Shape axes = op.attr_ints("axes", {});
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) {
    a = normalize_axis(a, rank);
    if (a < 0) return prepare_error(err, op, "axes entry is out of range");
  }
  std::vector<float> scale(static_cast<size_t>(rank), 1.0f);
  const bool has_scales = op.has_input(2) && shape_numel(op.inputs[2].shape) > 0;
  if (has_scales) {
    if (shape_numel(op.inputs[2].shape) != static_cast<int64_t>(axes.size())) {
      return prepare_error(err, op, "scales has the wrong length");
    }
    const float* s = static_cast<const float*>(op.inputs[2].data);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (!(s[i] > 0.0f)) return prepare_error(err, op, "scales must be positive");
      scale[axes[i]] = s[i];
    }
  } else {
    for (int64_t a : axes) {
      scale[a] = in[a] > 0 ? static_cast<float>(out[a]) / static_cast<float>(in[a]) : 1.0f;
    }
    const std::string policy = op.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      // The common scale comes from the requested sizes, not from the output
      // shape: that one is already rounded (round(in * common)), so out/in
      // differs from the common scale on all but the deciding axis.
      const bool has_sizes = op.has_input(3) && op.inputs[3].data &&
                             shape_numel(op.inputs[3].shape) == static_cast<int64_t>(axes.size());
      const int64_t* sizes = has_sizes ? static_cast<const int64_t*>(op.inputs[3].data) : nullptr;
      float common = policy == "not_larger" ? 1e30f : 0.0f;
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = axes[i];
        const float s = sizes && in[a] > 0
                            ? static_cast<float>(sizes[i]) / static_cast<float>(in[a])
                            : scale[a];
        common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
      }
      for (int64_t a : axes) scale[a] = common;
    }
  }
  const std::string mode = op.attr_string("mode", "nearest");
  const std::string ct = op.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nm = op.attr_string("nearest_mode", "round_prefer_floor");
  const float cubic_a = op.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude_outside = op.attr_int("exclude_outside", 0) != 0;
  const Shape strides = contiguous_strides(in);
  std::vector<AxisMap> maps(static_cast<size_t>(rank));
  int64_t corners = 1;
  for (int64_t d = 0; d < rank; ++d) {
    AxisMap& m = maps[d];
    const int64_t n = in[d];
    if (n == 0 && out[d] > 0) return prepare_error(err, op, "cannot resize an empty axis");
    // An axis that keeps its size at scale 1 maps every index to itself.
    const bool identity = n == out[d] && scale[d] == 1.0f;
    m.taps = identity || mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t idx[4] = {o, o, o, o};
      float w[4] = {1.0f, 0.0f, 0.0f, 0.0f};
      if (!identity) {
        const float x = source_coordinate(ct, o, scale[d], n, out[d]);
        if (mode == "nearest") {
          const float c = std::min(std::max(x, -1.0f), static_cast<float>(n));
          idx[0] = std::min(std::max<int64_t>(nearest_index(nm, c), 0), n - 1);
        } else if (mode == "linear") {
          const float c = std::min(std::max(x, 0.0f), static_cast<float>(n - 1));
          idx[0] = std::min(static_cast<int64_t>(c), n - 1);
          idx[1] = std::min(idx[0] + 1, n - 1);
          w[1] = idx[1] == idx[0] ? 0.0f : c - static_cast<float>(idx[0]);
          w[0] = 1.0f - w[1];
        } else {
          const float c = std::min(std::max(x, -2.0f), static_cast<float>(n + 1));
          const float f = std::floor(c);
          cubic_weights(c - f, cubic_a, w);
          float total = 0.0f;
          for (int t = 0; t < 4; ++t) {
            const int64_t i = static_cast<int64_t>(f) - 1 + t;
            if (exclude_outside && (i < 0 || i >= n)) w[t] = 0.0f;
            total += w[t];
            idx[t] = std::min(std::max<int64_t>(i, 0), n - 1);
          }
          if (exclude_outside && total != 0.0f) {
            for (float& v : w) v /= total;
          }
        }
      }
      for (int t = 0; t < m.taps; ++t) {
        m.offset.push_back(idx[t] * strides[d]);
        m.weight.push_back(w[t]);
      }
    }
    if (d + 1 < rank) corners *= m.taps;
  }
  if (corners > ResizeKernel::kMaxCorners) {
    return prepare_error(err, op, "too many interpolated axes");
  }
  return std::make_unique<ResizeKernel>(out, std::move(maps),
                                        static_cast<const float*>(args.input_data(0)),
                                        static_cast<float*>(args.output_data(0)));
}

}  // namespace kite::cpu
