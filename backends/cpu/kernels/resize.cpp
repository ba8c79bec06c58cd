// Resize (float32), modes nearest, linear (N-linear over every resized
// axis) and cubic (Keys, cubic_coeff_a, exclude_outside), with the
// coordinate transformations exporters use: half_pixel, pytorch_half_pixel,
// align_corners, asymmetric, tf_half_pixel_for_nn, half_pixel_symmetric; and
// nearest modes round_prefer_floor, round_prefer_ceil, floor, ceil.
// Coordinates are computed in float, as reference runtimes do. Scales and
// sizes must be constants; the per-axis index tables are built at prepare.
#include <algorithm>
#include <cmath>
#include <cstring>
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

class ResizeKernel : public Kernel {
 public:
  ResizeKernel(Shape out, std::vector<AxisMap> maps, int64_t in_last, const float* x, float* y)
      : out_(std::move(out)), maps_(std::move(maps)), x_(x), y_(y) {
    // Nearest with each input column repeated f times in order (an integer
    // upsampling of the last axis, as a U-Net's decoder does): copied by
    // runs instead of a gather per output.
    if (maps_.empty()) return;
    const AxisMap& last = maps_.back();
    const int64_t out_last = out_.back();
    if (last.taps == 1 && in_last > 0 && out_last % in_last == 0 && out_last > in_last) {
      const int64_t f = out_last / in_last;
      bool runs = true;
      for (int64_t k = 0; k < out_last && runs; ++k) runs = last.offset[k] == k / f;
      if (runs) repeat_ = f;
    }
  }

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
      int64_t previous = -1;
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
          // A row that reads the same input row as the one before (the
          // outer axes upsampled too) is a copy of its output.
          if (row > begin && offsets[0] == previous) {
            std::memcpy(y, y - inner, sizeof(float) * static_cast<size_t>(inner));
            continue;
          }
          previous = offsets[0];
          const float* x = x_ + offsets[0];
          if (repeat_ > 0) {
            repeat_columns(x, y, inner / repeat_);
            continue;
          }
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
  // y[j * repeat_ + r] = x[j] for j < n, r < repeat_ (the same values the
  // gather copies).
  void repeat_columns(const float* x, float* y, int64_t n) const {
    int64_t j = 0;
#if defined(__GNUC__) || defined(__clang__)
    if (repeat_ == 2) {
      typedef float F4 __attribute__((vector_size(16)));
      for (; j + 4 <= n; j += 4) {
        F4 v;
        std::memcpy(&v, x + j, sizeof v);
        const F4 lo = __builtin_shufflevector(v, v, 0, 0, 1, 1);
        const F4 hi = __builtin_shufflevector(v, v, 2, 2, 3, 3);
        std::memcpy(y + 2 * j, &lo, sizeof lo);
        std::memcpy(y + 2 * j + 4, &hi, sizeof hi);
      }
    }
#endif
    for (; j < n; ++j) {
      for (int64_t r = 0; r < repeat_; ++r) y[j * repeat_ + r] = x[j];
    }
  }

  Shape out_;
  std::vector<AxisMap> maps_;
  int64_t repeat_ = 0;  // > 0: the last axis is each input column repeat_ times
  const float* x_;
  float* y_;
};

}  // namespace

std::string check_resize(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  std::string why = expect_dtype(op, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  kite::ops::ResizeSampling sampling;
  kite::ops::RuleError rule_err;
  if (!kite::ops::resize_sampling_of(op, &sampling, &rule_err)) return rule_err.message;
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
  // Output sizes and coordinate scales per axis, as the op rule resolves
  // them (kite::ops::resolve_resize); axes default to all (opset 18).
  const kite::ops::Attr* axes_attr = op.find_attr("axes");
  const int64_t num_axes = axes_attr ? static_cast<int64_t>(axes_attr->ints.size()) : rank;
  const bool has_scales = op.has_input(2) && shape_numel(op.inputs[2].shape) > 0;
  const bool has_sizes = op.has_input(3) && shape_numel(op.inputs[3].shape) > 0;
  kite::ops::AspectPolicy policy = kite::ops::AspectPolicy::kStretch;
  kite::ops::parse_aspect_policy(op.attr_string("keep_aspect_ratio_policy", "stretch").c_str(),
                                 &policy);  // the rule checked the name
  kite::ops::ResizeAxis resized[KITE_MAX_RANK];
  kite::ops::RuleError rule_err;
  if (!kite::ops::resolve_resize(
          in.data(), rank, axes_attr ? axes_attr->ints.data() : nullptr, num_axes,
          has_scales ? static_cast<const float*>(op.inputs[2].data) : nullptr,
          has_sizes ? static_cast<const int64_t*>(op.inputs[3].data) : nullptr, nullptr, policy,
          resized, &rule_err)) {
    return prepare_error(err, op, rule_err.message);
  }
  std::vector<float> scale(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) scale[d] = resized[d].scale;
  kite::ops::ResizeSampling sample;
  if (!kite::ops::resize_sampling_of(op, &sample, &rule_err)) return prepare_error(err, op, rule_err.message);
  const Shape strides = contiguous_strides(in);
  std::vector<AxisMap> maps(static_cast<size_t>(rank));
  int64_t corners = 1;
  for (int64_t d = 0; d < rank; ++d) {
    AxisMap& m = maps[d];
    m.taps = kite::ops::resize_taps(sample, in[d], out[d], scale[d]);
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t idx[4];
      float w[4];
      kite::ops::resize_tap(sample, in[d], out[d], scale[d], o, idx, w);
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
  return std::make_unique<ResizeKernel>(out, std::move(maps), rank > 0 ? in[rank - 1] : 0,
                                        static_cast<const float*>(args.input_data(0)),
                                        static_cast<float*>(args.output_data(0)));
}

}  // namespace kite::cpu
