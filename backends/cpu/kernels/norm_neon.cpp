// The normalisations' row statistics and scaling with Advanced SIMD (NEON)
// intrinsics, for AArch64. Statistics accumulate in double, as the scalar
// path does: vcvt_f64_f32 widens two floats at a time into float64x2 sums.
#include "norm_neon.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_neon.h>

#include <cmath>

namespace kite::cpu::neon {

void moments(const float* x, int64_t n, float epsilon, float* mean_out, float* inv_out) {
  float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
    s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
  }
  double sum = vaddvq_f64(vaddq_f64(s0, s1));
  for (; i < n; ++i) sum += x[i];
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  const float64x2_t m = vdupq_n_f64(mean);
  float64x2_t q0 = vdupq_n_f64(0.0), q1 = vdupq_n_f64(0.0);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const float64x2_t d0 = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), m);
    const float64x2_t d1 = vsubq_f64(vcvt_high_f64_f32(v), m);
    q0 = vfmaq_f64(q0, d0, d0);
    q1 = vfmaq_f64(q1, d1, d1);
  }
  double sq = vaddvq_f64(vaddq_f64(q0, q1));
  for (; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  *mean_out = static_cast<float>(mean);
  *inv_out = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(epsilon)));
}

void normalize_row(const float* x, int64_t n, float mean, float inv, const float* scale,
                   const float* bias, float* y) {
  const float32x4_t m = vdupq_n_f32(mean), s = vdupq_n_f32(inv);
  int64_t i = 0;
  if (bias) {
    for (; i + 4 <= n; i += 4) {
      const float32x4_t t = vmulq_f32(vsubq_f32(vld1q_f32(x + i), m), s);
      vst1q_f32(y + i, vfmaq_f32(vld1q_f32(bias + i), t, vld1q_f32(scale + i)));
    }
    for (; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  } else {
    for (; i + 4 <= n; i += 4) {
      const float32x4_t t = vmulq_f32(vsubq_f32(vld1q_f32(x + i), m), s);
      vst1q_f32(y + i, vmulq_f32(t, vld1q_f32(scale + i)));
    }
    for (; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i];
  }
}

}  // namespace kite::cpu::neon

#endif
