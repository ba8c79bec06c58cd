// GridSample on 4-D inputs: nearest, bilinear and bicubic sampling; zeros,
// border and reflection padding; align_corners both ways. The coordinate
// handling follows onnxruntime's (the reference the op sweep compares
// with): a grid point is unnormalized, rounded half to even for nearest,
// then an out-of-range point is clamped (border; not for bicubic, whose
// taps are clamped one by one) or reflected (reflection) before the taps; a tap outside the image reads zero (zeros), the clamped
// pixel (border) or the reflected pixel (reflection).
#include <algorithm>
#include <cmath>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

enum class Mode { kNearest, kBilinear, kBicubic };
enum class Padding { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] (repeatedly, as a mirror at each end). In
// double, with the mirror count's parity from fmod, so a huge x is fine.
float reflect(float x, float lo, float hi) {
  const double range = static_cast<double>(hi) - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  const bool below = x < lo;
  const double dx = below ? lo - static_cast<double>(x) : static_cast<double>(x) - hi;
  const double n = std::floor(dx / range);
  const double r = dx - n * range;
  const bool even = std::fmod(n, 2.0) == 0;
  return static_cast<float>(below == even ? lo + r : hi - r);
}

// Keys' cubic convolution weights (A = -0.75) for a tap offset t in [0, 1).
void cubic_weights(float t, float w[4]) {
  const float a = -0.75f;
  auto near = [a](float x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };          // |x| <= 1
  auto far = [a](float x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };     // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

class GridSampleKernel : public Kernel {
 public:
  GridSampleKernel(const KernelArgs& args) {
    const OpNode& op = *args.op;
    const std::string mode = op.attr_string("mode", "bilinear");
    mode_ = mode == "nearest" ? Mode::kNearest
            : (mode == "bicubic" || mode == "cubic") ? Mode::kBicubic : Mode::kBilinear;
    const std::string pad = op.attr_string("padding_mode", "zeros");
    pad_ = pad == "border" ? Padding::kBorder : pad == "reflection" ? Padding::kReflection : Padding::kZeros;
    align_ = op.attr_int("align_corners", 0) != 0;
    const Shape& xs = op.inputs[0].shape;
    const Shape& gs = op.inputs[1].shape;
    n_ = xs[0];
    c_ = xs[1];
    h_ = xs[2];
    w_ = xs[3];
    ho_ = gs[1];
    wo_ = gs[2];
    x_ = static_cast<const float*>(args.input_data(0));
    grid_ = static_cast<const float*>(args.input_data(1));
    y_ = static_cast<float*>(args.output_data(0));
  }

  void run(ThreadPool& pool) override {
    const int64_t points = ho_ * wo_;
    pool.parallel_for(n_ * points, 256, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sample(i / points, i % points);
    });
  }

 private:
  float unnormalize(float v, int64_t size) const {
    return align_ ? (v + 1) / 2 * static_cast<float>(size - 1)
                  : ((v + 1) * static_cast<float>(size) - 1) / 2;
  }
  float lo(int64_t) const { return align_ ? 0.0f : -0.5f; }
  float hi(int64_t size) const { return align_ ? static_cast<float>(size - 1) : static_cast<float>(size) - 0.5f; }

  // The pixel (r, c) of one channel plane with the padding rule.
  float pixel(const float* plane, int64_t r, int64_t c) const {
    if (pad_ == Padding::kZeros) {
      return (r >= 0 && r < h_ && c >= 0 && c < w_) ? plane[r * w_ + c] : 0.0f;
    }
    if (pad_ == Padding::kReflection) {
      c = static_cast<int64_t>(reflect(static_cast<float>(c), lo(w_), hi(w_)));
      r = static_cast<int64_t>(reflect(static_cast<float>(r), lo(h_), hi(h_)));
    }
    c = std::min(std::max<int64_t>(c, 0), w_ - 1);
    r = std::min(std::max<int64_t>(r, 0), h_ - 1);
    return plane[r * w_ + c];
  }

  void sample(int64_t n, int64_t p) const {
    const float* g = grid_ + (n * ho_ * wo_ + p) * 2;
    float x = unnormalize(g[0], w_);
    float y = unnormalize(g[1], h_);
    if (mode_ == Mode::kNearest) {
      x = std::nearbyint(x);
      y = std::nearbyint(y);
    }
    if (x < lo(w_) || x > hi(w_) || y < lo(h_) || y > hi(h_)) {
      if (pad_ == Padding::kBorder && mode_ != Mode::kBicubic) {  // bicubic: its taps clamp
        x = std::min(std::max(x, 0.0f), static_cast<float>(w_ - 1));
        y = std::min(std::max(y, 0.0f), static_cast<float>(h_ - 1));
      } else if (pad_ == Padding::kReflection) {
        x = reflect(x, lo(w_), hi(w_));
        y = reflect(y, lo(h_), hi(h_));
      }
    }
    if (pad_ == Padding::kZeros) {  // every tap this far out reads zero; keeps int64 casts defined
      x = std::min(std::max(x, -8.0f), static_cast<float>(w_ + 8));
      y = std::min(std::max(y, -8.0f), static_cast<float>(h_ + 8));
    }
    const int64_t plane_size = h_ * w_;
    const float* xn = x_ + n * c_ * plane_size;
    float* yn = y_ + n * c_ * ho_ * wo_ + p;
    const int64_t step = ho_ * wo_;
    if (!std::isfinite(x) || !std::isfinite(y)) {  // NaN grid: no pixel to read
      for (int64_t ch = 0; ch < c_; ++ch) yn[ch * step] = std::nanf("");
      return;
    }
    if (mode_ == Mode::kNearest) {
      const auto c = static_cast<int64_t>(x), r = static_cast<int64_t>(y);
      for (int64_t ch = 0; ch < c_; ++ch) yn[ch * step] = pixel(xn + ch * plane_size, r, c);
      return;
    }
    const float fx = std::floor(x), fy = std::floor(y);
    const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
    const float tx = x - fx, ty = y - fy;
    if (mode_ == Mode::kBilinear) {
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float* plane = xn + ch * plane_size;
        const float top = (1 - tx) * pixel(plane, y0, x0) + tx * pixel(plane, y0, x0 + 1);
        const float bottom = (1 - tx) * pixel(plane, y0 + 1, x0) + tx * pixel(plane, y0 + 1, x0 + 1);
        yn[ch * step] = (1 - ty) * top + ty * bottom;
      }
      return;
    }
    float wx[4], wy[4];
    cubic_weights(tx, wx);
    cubic_weights(ty, wy);
    for (int64_t ch = 0; ch < c_; ++ch) {
      const float* plane = xn + ch * plane_size;
      float acc = 0;
      for (int i = 0; i < 4; ++i) {
        float rowv = 0;
        for (int j = 0; j < 4; ++j) rowv += wx[j] * pixel(plane, y0 - 1 + i, x0 - 1 + j);
        acc += wy[i] * rowv;
      }
      yn[ch * step] = acc;
    }
  }

  Mode mode_ = Mode::kBilinear;
  Padding pad_ = Padding::kZeros;
  bool align_ = false;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, ho_ = 0, wo_ = 0;
  const float* x_ = nullptr;
  const float* grid_ = nullptr;
  float* y_ = nullptr;
};

}  // namespace

std::string check_grid_sample(const OpNode& op) {
  std::string why = expect_dtypes(op, 0, 2, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  if (op.inputs[0].rank() != 4) return "only 4-D inputs";
  return "";
}

std::unique_ptr<Kernel> prepare_grid_sample(const KernelArgs& args, std::string*) {
  return std::make_unique<GridSampleKernel>(args);
}

}  // namespace kite::cpu
