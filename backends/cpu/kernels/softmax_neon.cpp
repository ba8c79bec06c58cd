// Softmax and LogSoftmax along a contiguous axis with Advanced SIMD (NEON)
// intrinsics, for AArch64 (softmax.cpp calls it there; other architectures
// compile nothing here). The scalar loops spend their time in std::exp, a
// libm call per element; here exp is computed four lanes at a time:
//
//   exp(x) = 2^n * exp(r),  n = round(x / ln 2),  r = x - n ln 2 (|r| <= ln2/2)
//
// with ln 2 split into a part exact in float (0.693359375) and the rest
// (-2.12194440e-4), so r carries no cancellation error, and exp(r) by
// Cephes' degree-6 minimax polynomial for expf (relative error ~1e-7).
// 2^n is added to the exponent bits. Inputs are clamped to [-87.3, 88]:
// below, exp underflows (softmax adds < 1e-38 where the exact value is a
// denormal or 0, next to a sum >= 1); above cannot occur in softmax, whose
// inputs are x - max <= 0.
#include "softmax_neon.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

namespace kite::cpu::neon {
namespace {

inline float32x4_t exp4(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3365f)), vdupq_n_f32(88.0f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  // exp(r) = 1 + r + r^2 * p(r)
  const float32x4_t er = vaddq_f32(vfmaq_f32(r, vmulq_f32(r, r), p), vdupq_n_f32(1.0f));
  const int32x4_t scale = vshlq_n_s32(vcvtq_s32_f32(n), 23);
  return vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(er), scale));
}

}  // namespace

void softmax_contiguous(const float* x, float* y, int64_t n, bool log) {
  if (n <= 0) return;
  const int64_t n4 = n & ~int64_t{3};
  float max = x[0];
  if (n4 > 0) {
    float32x4_t m = vld1q_f32(x);
    for (int64_t j = 4; j < n4; j += 4) m = vmaxq_f32(m, vld1q_f32(x + j));
    max = vmaxvq_f32(m);
  }
  for (int64_t j = n4; j < n; ++j) max = std::max(max, x[j]);
  const float32x4_t vmax = vdupq_n_f32(max);
  float32x4_t acc = vdupq_n_f32(0.0f);
  float tail = 0.0f;
  if (log) {
    for (int64_t j = 0; j < n4; j += 4) acc = vaddq_f32(acc, exp4(vsubq_f32(vld1q_f32(x + j), vmax)));
    for (int64_t j = n4; j < n; ++j) tail += std::exp(x[j] - max);
    const float shift = max + std::log(vaddvq_f32(acc) + tail);
    const float32x4_t vshift = vdupq_n_f32(shift);
    for (int64_t j = 0; j < n4; j += 4) vst1q_f32(y + j, vsubq_f32(vld1q_f32(x + j), vshift));
    for (int64_t j = n4; j < n; ++j) y[j] = x[j] - shift;
    return;
  }
  for (int64_t j = 0; j < n4; j += 4) {
    const float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + j), vmax));
    vst1q_f32(y + j, e);
    acc = vaddq_f32(acc, e);
  }
  for (int64_t j = n4; j < n; ++j) {
    y[j] = std::exp(x[j] - max);
    tail += y[j];
  }
  const float32x4_t inv = vdupq_n_f32(1.0f / (vaddvq_f32(acc) + tail));
  for (int64_t j = 0; j < n4; j += 4) vst1q_f32(y + j, vmulq_f32(vld1q_f32(y + j), inv));
  const float inv1 = vgetq_lane_f32(inv, 0);
  for (int64_t j = n4; j < n; ++j) y[j] *= inv1;
}

}  // namespace kite::cpu::neon

#endif
