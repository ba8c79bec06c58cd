// The normalisations' rows with AVX-512F (and AVX2, below). The scalar loops summed in double
// one element after another, each addition waiting on the last (about four
// cycles a float): convnext_tiny's 23 LayerNormalizations over 96-768
// channels took 2.2 ns a float, 6 ms of the run on Zen 4.
#include "norm_avx512.h"

#include <cmath>

#include "sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace kite::cpu::avx512 {
namespace {

bool available() { return sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512; }

inline __mmask16 lanes_left(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// (Masked forms with all-ones masks throughout: the plain ones pass an
// undefined operand that GCC 12 warns about, as in sgemm_avx512.cpp.)
template <int Half>
__attribute__((target("avx512f"))) inline __m512d widen(__m512 v) {
  return _mm512_maskz_cvtps_pd(
      0xFF, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), Half)));
}
__attribute__((target("avx512f"))) inline __m512d low_half(__m512 v) { return widen<0>(v); }
__attribute__((target("avx512f"))) inline __m512d high_half(__m512 v) { return widen<1>(v); }
__attribute__((target("avx512f"))) inline double sum_of(__m512d a, __m512d b) {
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_maskz_add_pd(0xFF, a, b));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

__attribute__((target("avx512f"))) void moments_avx512(const float* x, int64_t n, float epsilon,
                                                       float* mean_out, float* inv_out) {
  // Whole vectors, then the row's last part masked (zeros past n add
  // nothing): a masked load on every vector cost Zen 4 more (as in the
  // GEMM). The sums are the same either way.
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  const int64_t full = n / 16 * 16;
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = i < full ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(lanes_left(n - i), x + i);
    s0 = _mm512_maskz_add_pd(0xFF, s0, low_half(v));
    s1 = _mm512_maskz_add_pd(0xFF, s1, high_half(v));
  }
  const double mean = n > 0 ? sum_of(s0, s1) / static_cast<double>(n) : 0.0;
  const __m512d m = _mm512_set1_pd(mean);
  __m512d q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes_left(n - i);
    const __m512 v = i < full ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(k, x + i);
    // Lanes past n: d = 0 (masked subtraction), so they add nothing.
    const __m512d d0 = _mm512_maskz_sub_pd(static_cast<__mmask8>(k), low_half(v), m);
    const __m512d d1 = _mm512_maskz_sub_pd(static_cast<__mmask8>(k >> 8), high_half(v), m);
    q0 = _mm512_maskz_add_pd(0xFF, q0, _mm512_maskz_mul_pd(0xFF, d0, d0));
    q1 = _mm512_maskz_add_pd(0xFF, q1, _mm512_maskz_mul_pd(0xFF, d1, d1));
  }
  const double var = n > 0 ? sum_of(q0, q1) / static_cast<double>(n) : 0.0;
  *mean_out = static_cast<float>(mean);
  *inv_out = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(epsilon)));
}

// avx512f alone: without FMA in the target the multiply and add stay two
// roundings, the scalar formula's.
__attribute__((target("avx512f"))) void normalize_avx512(const float* x, int64_t n, float mean,
                                                         float inv, const float* scale,
                                                         const float* bias, float* y) {
  constexpr __mmask16 kAll = 0xFFFF;
  const __m512 m = _mm512_set1_ps(mean), s = _mm512_set1_ps(inv);
  const int64_t full = n / 16 * 16;
  int64_t i = 0;
  for (; i < full; i += 16) {  // whole vectors (see moments_avx512)
    __m512 t = _mm512_maskz_mul_ps(kAll, _mm512_maskz_sub_ps(kAll, _mm512_loadu_ps(x + i), m), s);
    t = _mm512_maskz_mul_ps(kAll, t, _mm512_loadu_ps(scale + i));
    if (bias) t = _mm512_maskz_add_ps(kAll, t, _mm512_loadu_ps(bias + i));
    _mm512_storeu_ps(y + i, t);
  }
  if (i < n) {
    const __mmask16 k = lanes_left(n - i);
    __m512 t = _mm512_maskz_mul_ps(kAll, _mm512_maskz_sub_ps(kAll, _mm512_maskz_loadu_ps(k, x + i), m), s);
    t = _mm512_maskz_mul_ps(kAll, t, _mm512_maskz_loadu_ps(k, scale + i));
    if (bias) t = _mm512_maskz_add_ps(kAll, t, _mm512_maskz_loadu_ps(k, bias + i));
    _mm512_mask_storeu_ps(y + i, k, t);
  }
}

// The AVX2 level: the same two passes eight floats a step (two vectors of
// four double accumulators), tails by masked loads and stores.
__attribute__((target("avx2"))) inline __m256i lanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n >= 8 ? 8 : n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2"))) inline double sum_of4(__m256d a, __m256d b) {
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a, b));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

// Sixteen floats a step into four double accumulators (four addition
// chains: with two, each step waited on the last one's additions), plain
// loads; the tail (n % 16) eight at a time, masked. convnext_tiny's
// 96-float rows on Zen 2 spent ~4 cycles a float here with two chains and
// a masked load on every step.
__attribute__((target("avx2"))) void moments_avx2(const float* x, int64_t n, float epsilon,
                                                  float* mean_out, float* inv_out) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  __m256d s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
  const int64_t full = n / 16 * 16;
  for (int64_t i = 0; i < full; i += 16) {
    const __m256 v = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
    s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
  }
  for (int64_t i = full; i < n; i += 8) {
    const __m256 v = _mm256_maskload_ps(x + i, lanes8(n - i));  // zeros past n add nothing
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  const double mean = n > 0 ? sum_of4(_mm256_add_pd(s0, s2), _mm256_add_pd(s1, s3)) / static_cast<double>(n) : 0.0;
  const __m256d m = _mm256_set1_pd(mean);
  __m256d q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
  __m256d q2 = _mm256_setzero_pd(), q3 = _mm256_setzero_pd();
  for (int64_t i = 0; i < full; i += 16) {
    const __m256 v = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
    const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m);
    const __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m);
    const __m256d d2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(w)), m);
    const __m256d d3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)), m);
    q0 = _mm256_add_pd(q0, _mm256_mul_pd(d0, d0));
    q1 = _mm256_add_pd(q1, _mm256_mul_pd(d1, d1));
    q2 = _mm256_add_pd(q2, _mm256_mul_pd(d2, d2));
    q3 = _mm256_add_pd(q3, _mm256_mul_pd(d3, d3));
  }
  for (int64_t i = full; i < n; i += 8) {
    const __m256i k = lanes8(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, k);
    // Lanes past n: d masked to 0, so they add nothing.
    const __m256d k0 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(k)));
    const __m256d k1 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(k, 1)));
    const __m256d d0 = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m), k0);
    const __m256d d1 = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m), k1);
    q0 = _mm256_add_pd(q0, _mm256_mul_pd(d0, d0));
    q1 = _mm256_add_pd(q1, _mm256_mul_pd(d1, d1));
  }
  const double var = n > 0 ? sum_of4(_mm256_add_pd(q0, q2), _mm256_add_pd(q1, q3)) / static_cast<double>(n) : 0.0;
  *mean_out = static_cast<float>(mean);
  *inv_out = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(epsilon)));
}

// avx2 alone (no FMA in the target): the scalar formula's roundings. Plain
// loads and stores but for the last partial vector.
__attribute__((target("avx2"))) void normalize_avx2(const float* x, int64_t n, float mean, float inv,
                                                    const float* scale, const float* bias, float* y) {
  const __m256 m = _mm256_set1_ps(mean), s = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), s);
    t = _mm256_mul_ps(t, _mm256_loadu_ps(scale + i));
    if (bias) t = _mm256_add_ps(t, _mm256_loadu_ps(bias + i));
    _mm256_storeu_ps(y + i, t);
  }
  if (i < n) {
    const __m256i k = lanes8(n - i);
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), m), s);
    t = _mm256_mul_ps(t, _mm256_maskload_ps(scale + i, k));
    if (bias) t = _mm256_add_ps(t, _mm256_maskload_ps(bias + i, k));
    _mm256_maskstore_ps(y + i, k, t);
  }
}

bool avx2_level() { return sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma; }

}  // namespace

bool moments(const float* x, int64_t n, float epsilon, float* mean_out, float* inv_out) {
  if (available()) {
    moments_avx512(x, n, epsilon, mean_out, inv_out);
    return true;
  }
  if (!avx2_level()) return false;
  moments_avx2(x, n, epsilon, mean_out, inv_out);
  return true;
}

bool normalize_row(const float* x, int64_t n, float mean, float inv, const float* scale,
                   const float* bias, float* y) {
  if (available()) {
    normalize_avx512(x, n, mean, inv, scale, bias, y);
    return true;
  }
  if (!avx2_level()) return false;
  normalize_avx2(x, n, mean, inv, scale, bias, y);
  return true;
}

}  // namespace kite::cpu::avx512

#else

namespace kite::cpu::avx512 {
bool moments(const float*, int64_t, float, float*, float*) { return false; }
bool normalize_row(const float*, int64_t, float, float, const float*, const float*, float*) {
  return false;
}
}  // namespace kite::cpu::avx512

#endif
