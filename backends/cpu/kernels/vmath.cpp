#include "vmath.h"

#include <cmath>
#include <cstring>

namespace kite::cpu::vmath {
namespace {

#if defined(__GNUC__) || defined(__clang__)
// 4 lanes: one SSE or NEON register at the baseline (no 32-byte vectors in
// signatures, which the baseline x86-64 ABI passes differently).
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

inline F4 splat(float x) {
  F4 v = {};
  return v + x;
}

inline F4 select(I4 mask, F4 a, F4 b) {
  I4 ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  const I4 r = (mask & ia) | (~mask & ib);
  F4 out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

inline F4 exp4(F4 x) {
  // Clamped so that n + 127 is in [1, 254]; NaN fails both tests and stays.
  x = select(x > 88.0f, splat(88.0f), x);
  x = select(x < -87.0f, splat(-87.0f), x);
  // t = x / ln2 + 1.5 * 2^23: its low mantissa bits hold round(x / ln2).
  const F4 shifter = splat(12582912.0f);
  const F4 t = x * 1.44269504088896341f + shifter;
  const F4 n = t - shifter;
  // ln2 = 0.693359375 - 2.12194440e-4; the first part has 9 significant
  // bits, so n * it is exact.
  F4 r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  F4 p = splat(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  I4 ti, si;
  std::memcpy(&ti, &t, sizeof ti);
  const F4 sh = shifter;
  std::memcpy(&si, &sh, sizeof si);
  const I4 bits = (ti - si + 127) << 23;
  F4 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline F4 sigmoid4(F4 x, bool times_x) {
  const F4 s = 1.0f / (1.0f + exp4(-x));
  return times_x ? x * s : s;
}
#endif

}  // namespace

void sigmoid(const float* in, float* out, int64_t n, bool times_x) {
#if defined(__GNUC__) || defined(__clang__)
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    F4 x;
    std::memcpy(&x, in + i, sizeof x);
    const F4 y = sigmoid4(x, times_x);
    std::memcpy(out + i, &y, sizeof y);
  }
  if (i < n) {
    // The tail through the same lanes, so every element gets the same bits
    // wherever it sits.
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    std::memcpy(buf, in + i, sizeof(float) * static_cast<size_t>(n - i));
    F4 x;
    std::memcpy(&x, buf, sizeof x);
    const F4 y = sigmoid4(x, times_x);
    std::memcpy(buf, &y, sizeof y);
    std::memcpy(out + i, buf, sizeof(float) * static_cast<size_t>(n - i));
  }
#else
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float s = x >= 0.0f ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
    out[i] = times_x ? x * s : s;
  }
#endif
}

}  // namespace kite::cpu::vmath
