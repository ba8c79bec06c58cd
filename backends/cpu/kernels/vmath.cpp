#include "vmath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "sgemm.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define KITE_VMATH_AVX512 1
#include <immintrin.h>
#endif

namespace kite::cpu::vmath {
namespace {

// exp's constants, shared by every width (vmath.h): the shifter 1.5 * 2^23
// (t = x / ln2 + it holds round(x / ln2) in its low mantissa bits), ln2 in
// two parts (the first has 9 significant bits, so n times it is exact), and
// the degree-5 polynomial of the 8- and 16-lane paths (exp16).
constexpr float kExpShifter = 12582912.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = 2.12194440e-4f;
constexpr float kExpC2 = 0.4999920725822449f, kExpC3 = 0.1666709929704666f,
                kExpC4 = 0.04189310222864151f, kExpC5 = 0.00831486377865076f;

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
  const F4 shifter = splat(kExpShifter);
  const F4 t = x * kLog2e + shifter;
  const F4 n = t - shifter;
  // ln2 = 0.693359375 - 2.12194440e-4; the first part has 9 significant
  // bits, so n * it is exact.
  F4 r = x - n * kLn2Hi;
  r = r + n * kLn2Lo;
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

// Abramowitz and Stegun 7.1.26's constants.
constexpr float kErfP = 0.3275911f;
constexpr float kErfA1 = 0.254829592f, kErfA2 = -0.284496736f, kErfA3 = 1.421413741f,
                kErfA4 = -1.453152027f, kErfA5 = 1.061405429f;

// erf(z) = z P(z^2) / Q(z^2) for |z| <= kErfClamp (erf(4) rounds to 1 in
// float), the rational minimax fit XLA and Eigen use for float erf:
// within 6.5e-8 of erf in exact arithmetic.
constexpr float kErfClamp = 4.0f;
constexpr float kErfNum[7] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                              -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                              -1.60960333262415e-02f};
constexpr float kErfDen[5] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                              -7.37332916720468e-03f, -1.42647390514189e-02f};

inline F4 gelu4(F4 x) {
  const F4 z = x * 0.7071067811865476f;
  F4 zc = select(z < -kErfClamp, splat(-kErfClamp), z);  // a NaN z passes
  zc = select(zc > kErfClamp, splat(kErfClamp), zc);
  const F4 z2 = zc * zc;
  F4 p = splat(kErfNum[0]), q = splat(kErfDen[0]);
  for (int i = 1; i < 7; ++i) p = p * z2 + kErfNum[i];
  for (int i = 1; i < 5; ++i) q = q * z2 + kErfDen[i];
  F4 erf = zc * p / q;
  erf = select(erf < -1.0f, splat(-1.0f), erf);
  erf = select(erf > 1.0f, splat(1.0f), erf);
  const F4 half = 0.5f * x;
  return half * erf + half;
}

// out[i] = f(in[i]) four lanes at a time; the tail goes through the same
// lanes (zero-padded), so every element gets the same bits wherever it sits.
template <typename F>
void map4(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    F4 x;
    std::memcpy(&x, in + i, sizeof x);
    const F4 y = f(x);
    std::memcpy(out + i, &y, sizeof y);
  }
  if (i < n) {
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    std::memcpy(buf, in + i, sizeof(float) * static_cast<size_t>(n - i));
    F4 x;
    std::memcpy(&x, buf, sizeof x);
    const F4 y = f(x);
    std::memcpy(buf, &y, sizeof y);
    std::memcpy(out + i, buf, sizeof(float) * static_cast<size_t>(n - i));
  }
}

void softmax4(const float* x, float* y, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  F4 m4 = splat(max);
  for (; i + 4 <= n; i += 4) {
    F4 v;
    std::memcpy(&v, x + i, sizeof v);
    m4 = select(v > m4, v, m4);
  }
  for (int k = 0; k < 4; ++k) max = std::max(max, m4[k]);
  for (; i < n; ++i) max = std::max(max, x[i]);
  F4 s4 = splat(0.0f);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    F4 v;
    std::memcpy(&v, x + i, sizeof v);
    const F4 e = exp4(v - max);
    std::memcpy(y + i, &e, sizeof e);
    s4 += e;
  }
  float sum = (s4[0] + s4[1]) + (s4[2] + s4[3]);
  if (i < n) {
    float buf[4] = {max, max, max, max};
    std::memcpy(buf, x + i, sizeof(float) * static_cast<size_t>(n - i));
    F4 v;
    std::memcpy(&v, buf, sizeof v);
    const F4 e = exp4(v - max);
    for (int64_t k = 0; k < n - i; ++k) {
      y[i + k] = e[k];
      sum += e[k];
    }
  }
  const F4 inv = splat(1.0f / sum);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    F4 v;
    std::memcpy(&v, y + i, sizeof v);
    v *= inv;
    std::memcpy(y + i, &v, sizeof v);
  }
  for (; i < n; ++i) y[i] *= inv[0];
}
#endif

#ifdef KITE_VMATH_AVX512
// exp at 16 lanes: exp4's range reduction with fused multiply-adds (r = y -
// n ln2 in two FMAs) and a degree-5 polynomial where exp4 has the degree-7
// Taylor one, so the bits differ from the 4-lane path's by an ulp or two;
// the stated bounds hold for both
// (tests/unit/cpu_kernels_test.cpp, Vmath.*, run on each level). Clamped by
// compares, so that NaN stays NaN.
__attribute__((target("avx512f,fma"))) __m512 exp16(__m512 y) {
  // (Masked forms with all-ones masks: see reciprocal16.) min_ps(c, y) is
  // c < y ? c : y, so a NaN y passes; the clamp keeps n in [-126, 127].
  constexpr __mmask16 kAll = 0xFFFF;
  y = _mm512_maskz_min_ps(kAll, _mm512_set1_ps(88.0f), y);
  y = _mm512_maskz_max_ps(kAll, _mm512_set1_ps(-87.0f), y);
  const __m512 shifter = _mm512_set1_ps(kExpShifter);
  const __m512 t = _mm512_fmadd_ps(y, _mm512_set1_ps(kLog2e), shifter);
  const __m512 n = _mm512_sub_ps(t, shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), y);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  // 1 + r (1 + r (c2 + r (c3 + r (c4 + r c5)))): the degree-5 polynomial of
  // least maximum relative error on [-ln2 / 2, ln2 / 2] with its first two
  // coefficients 1 (fitted here by iteratively reweighted least squares),
  // 1.1e-7 in exact arithmetic, 1.6e-7 with float coefficients and FMAs
  // (against 6e-8 for the degree-7 Taylor polynomial exp4 keeps): two FMAs
  // fewer, and the FMAs are what sigmoid16 waits on (14% of
  // efficientnet_b0's samples were in its SiLU).
  __m512 p = _mm512_set1_ps(kExpC5);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  // p * 2^n in one instruction (n is a whole number in [-126, 127], so
  // exactly the product with the float 2^n that exp4 builds from bits).
  return _mm512_maskz_scalef_ps(kAll, p, n);
}

// 1 / d for d >= 1: the 14-bit estimate and one Newton step, r + r (1 - d
// r), relative error about 2^-28 plus the roundings of the two FMAs (a
// division costs several times as much on these cores). The estimate of a
// d past 2^126 is 0 or a subnormal; then so is 1 / d (and sigmoid's and
// gelu's bounds are stated only where the exact value is a normal float).
// (Masked forms with all-ones masks: the plain ones pass an undefined
// operand that GCC 12 warns about. An infinite d has the estimate 0, kept:
// the Newton step would make inf * 0 a NaN; a caller whose d is never
// infinite, as sigmoid's 1 + exp16(-x) <= 1 + e^88, skips that check.)
template <bool MayBeInfinite>
__attribute__((target("avx512f,fma"))) __m512 reciprocal16(__m512 d) {
  const __m512 r = _mm512_maskz_rcp14_ps(0xFFFF, d);
  const __m512 refined = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
  if constexpr (!MayBeInfinite) return refined;
  return _mm512_mask_mov_ps(refined, _mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_EQ_OQ), r);
}

// sigmoid4's steps at 16 lanes (the processor's AVX-512F, chosen at run
// time as the SGEMM level is). The compiler may fuse a multiply and an add
// here, so the bits can differ from the 4-lane path's by an ulp or so; the
// stated bound holds for both (tests/unit/cpu_kernels_test.cpp runs it on
// each level), and on one machine every element gets the same bits.
__attribute__((target("avx512f,fma"))) __m512 sigmoid16(__m512 x, bool times_x) {
  const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
  const __m512 s = reciprocal16<false>(_mm512_add_ps(_mm512_set1_ps(1.0f), e));
  return times_x ? _mm512_mul_ps(x, s) : s;
}

// gelu4's steps at 16 lanes.
__attribute__((target("avx512f,fma"))) __m512 gelu16(__m512 x) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.7071067811865476f));
  const __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 az = _mm512_mask_sub_ps(z, negative, _mm512_setzero_ps(), z);
  const __m512 t = reciprocal16<true>(_mm512_fmadd_ps(_mm512_set1_ps(kErfP), az, _mm512_set1_ps(1.0f)));
  __m512 poly = _mm512_set1_ps(kErfA5);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kErfA4));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kErfA3));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kErfA2));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kErfA1));
  poly = _mm512_mul_ps(poly, t);
  const __m512 e = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                                 _mm512_mul_ps(poly, exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(az, az)))));
  const __m512 erf = _mm512_mask_sub_ps(e, negative, _mm512_setzero_ps(), e);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), erf));
}

// The 16-lane functions as function objects for map16 (its caller passes
// no vector by value: a non-AVX-512 caller may not).
struct Sigmoid16 {
  bool times_x;
  __attribute__((target("avx512f,fma"))) __m512 operator()(__m512 x) const { return sigmoid16(x, times_x); }
};
struct Gelu16 {
  __attribute__((target("avx512f,fma"))) __m512 operator()(__m512 x) const { return gelu16(x); }
};
// hard_sigmoid's formula lane by lane: alpha x, + beta, two roundings as the
// scalar expression (the _round forms: GCC fuses a plain multiply and add
// into an FMA where the target has one), min_ps(v, 1) is v < 1 ? v : 1 and
// max_ps(v, 0) is v > 0 ? v : 0, std::min / std::max's.
struct HardSigmoid16 {
  float alpha, beta;
  bool times_x;
  __attribute__((target("avx512f,fma"))) __m512 operator()(__m512 x) const {
    constexpr __mmask16 kAll = 0xFFFF;  // (masked forms: see reciprocal16)
    constexpr int kCurrent = _MM_FROUND_CUR_DIRECTION;
    __m512 v = _mm512_maskz_add_round_ps(
        kAll, _mm512_maskz_mul_round_ps(kAll, _mm512_set1_ps(alpha), x, kCurrent), _mm512_set1_ps(beta),
        kCurrent);
    v = _mm512_maskz_min_ps(kAll, v, _mm512_set1_ps(1.0f));
    v = _mm512_maskz_max_ps(kAll, v, _mm512_setzero_ps());
    return times_x ? _mm512_maskz_mul_round_ps(kAll, x, v, kCurrent) : v;
  }
};

// out[i] = f(in[i]) sixteen lanes at a time, the tail through the same lanes
// masked.
template <typename F>
__attribute__((target("avx512f,fma"))) void map16(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, f(_mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, f(_mm512_maskz_loadu_ps(m, in + i)));
  }
}

// map16 on rows rows of n floats, ld apart, in place: one call for a tile.
// map16's loop written out, so that f's constants are loaded once a tile,
// not once a row (a tile's rows can be as short as 32 floats).
template <typename F>
__attribute__((target("avx512f,fma"))) void map16_rows(float* v, int64_t ld, int64_t rows, int64_t n, F f) {
  const int64_t full = n / 16 * 16;
  const __mmask16 m = static_cast<__mmask16>((1u << (n - full)) - 1u);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = v + r * ld;
    for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(row + i, f(_mm512_loadu_ps(row + i)));
    if (m) _mm512_mask_storeu_ps(row + full, m, f(_mm512_maskz_loadu_ps(m, row + full)));
  }
}


__attribute__((target("avx512f,fma"))) void softmax_avx512(const float* x, float* y, int64_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ), v);
  }
  __mmask16 tail = i < n ? static_cast<__mmask16>((1u << (n - i)) - 1u) : 0;
  if (tail) {
    const __m512 v = _mm512_maskz_loadu_ps(tail, x + i);
    m = _mm512_mask_mov_ps(m, static_cast<__mmask16>(_mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) & tail), v);
  }
  // Reductions through memory: GCC 12's _mm512_reduce_* trip -Wuninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float max = lanes[0];
  for (int k = 1; k < 16; ++k) max = std::max(max, lanes[k]);
  const __m512 mv = _mm512_set1_ps(max);
  __m512 s = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
    _mm512_storeu_ps(y + i, e);
    s = _mm512_add_ps(s, e);
  }
  if (tail) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), mv));
    _mm512_mask_storeu_ps(y + i, tail, e);
    s = _mm512_mask_add_ps(s, tail, s, e);
  }
  _mm512_store_ps(lanes, s);
  float sum = 0.0f;
  for (int k = 0; k < 16; ++k) sum += lanes[k];
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
  if (tail) _mm512_mask_storeu_ps(y + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + i), inv));
}

#endif

#ifdef KITE_VMATH_AVX512
// The AVX2 level (AVX2 and FMA, chosen at run time as the SGEMM level is):
// 8 lanes with exp16's steps. Measured on an AMD EPYC (Zen 3, no
// AVX-512), 1 thread: the 4-lane SSE path's SiLU was 44% of
// efficientnet_b0's samples.
//
// exp16's range reduction and degree-5 polynomial; 2^n from the exponent
// bits (exp4's way), whose product with p rounds once as scalef does, so
// the bits are exp16's.
//
// Each step runs on N vectors side by side (exp8_n, sigmoid8_n, gelu8_n):
// one vector's steps form a chain of ~60 cycles of latency, more than
// Zen 2's floating-point scheduler reaches across on its own, so with one
// vector a step the loop ran at about one vector per 13 cycles; N = 4
// interleaves four chains. Every vector gets the same operations in the
// same order whatever N is, so the bits do not depend on N (nor on where
// a row's tail falls): the multiplies and adds that follow exp's
// polynomial are written as the FMAs they are to be (GCC contracted a
// multiply and an add in some of the four chains and not in others).

// One Horner step on N vectors: p[j] = p[j] x[j] + c.
template <int N>
__attribute__((target("avx2,fma"), always_inline)) inline void horner8_n(__m256* p, const __m256* x, float c) {
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) p[j] = _mm256_fmadd_ps(p[j], x[j], _mm256_set1_ps(c));
}

// exp8_n leaves v[j] = p and scale[j] = 2^n: exp(v[j]) is their product.
template <int N>
__attribute__((target("avx2,fma"), always_inline)) inline void exp8_n(__m256* v, __m256* scale) {
  const __m256 shifter = _mm256_set1_ps(kExpShifter);
  __m256 t[N], r[N], p[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    // min_ps(c, y) is c < y ? c : y, so a NaN y passes.
    const __m256 y = _mm256_max_ps(_mm256_set1_ps(-87.0f), _mm256_min_ps(_mm256_set1_ps(88.0f), v[j]));
    t[j] = _mm256_fmadd_ps(y, _mm256_set1_ps(kLog2e), shifter);
    const __m256 n = _mm256_sub_ps(t[j], shifter);
    r[j] = _mm256_fmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), y));
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) p[j] = _mm256_set1_ps(kExpC5);
  horner8_n<N>(p, r, kExpC4);
  horner8_n<N>(p, r, kExpC3);
  horner8_n<N>(p, r, kExpC2);
  horner8_n<N>(p, r, 1.0f);
  horner8_n<N>(p, r, 1.0f);
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    v[j] = p[j];
    scale[j] = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t[j]), _mm256_castps_si256(shifter)),
                         _mm256_set1_epi32(127)),
        23));
  }
}

__attribute__((target("avx2,fma"))) __m256 exp8(__m256 y) {
  __m256 scale;
  exp8_n<1>(&y, &scale);
  return _mm256_mul_ps(y, scale);
}

// sigmoid16's steps at 8 lanes, with a division where sigmoid16 refines a
// reciprocal estimate (AVX2's is 12 bits, one Newton step leaves ~2^-22;
// the division rounds once, and the estimate and its Newton step measured
// slower on Zen 2: 0.82 against 0.66 ms for efficientnet_b0's 1.2 M SiLUs).
template <int N>
__attribute__((target("avx2,fma"), always_inline)) inline void sigmoid8_n(__m256* x, bool times_x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 e[N], scale[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) e[j] = _mm256_sub_ps(_mm256_setzero_ps(), x[j]);
  exp8_n<N>(e, scale);
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    // 1 + e^-x, rounded once.
    const __m256 s = _mm256_div_ps(one, _mm256_fmadd_ps(e[j], scale[j], one));
    x[j] = times_x ? _mm256_mul_ps(x[j], s) : s;
  }
}

// gelu16's steps at 8 lanes (a division for t, as sigmoid8).
template <int N>
__attribute__((target("avx2,fma"), always_inline)) inline void gelu8_n(__m256* x) {
  __m256 zc[N], z2[N], p[N], q[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const __m256 z = _mm256_mul_ps(x[j], _mm256_set1_ps(0.7071067811865476f));
    // max_ps(c, z) is c > z ? c : z, so a NaN z passes (and min_ps's).
    zc[j] = _mm256_min_ps(_mm256_set1_ps(kErfClamp), _mm256_max_ps(_mm256_set1_ps(-kErfClamp), z));
    z2[j] = _mm256_mul_ps(zc[j], zc[j]);
    p[j] = _mm256_set1_ps(kErfNum[0]);
    q[j] = _mm256_set1_ps(kErfDen[0]);
  }
  for (int i = 1; i < 7; ++i) horner8_n<N>(p, z2, kErfNum[i]);
  for (int i = 1; i < 5; ++i) horner8_n<N>(q, z2, kErfDen[i]);
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    __m256 erf = _mm256_div_ps(_mm256_mul_ps(zc[j], p[j]), q[j]);
    erf = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_set1_ps(-1.0f), erf));
    const __m256 half = _mm256_mul_ps(_mm256_set1_ps(0.5f), x[j]);
    x[j] = _mm256_fmadd_ps(half, erf, half);
  }
}

struct Sigmoid8 {
  bool times_x;
  template <int N>
  __attribute__((target("avx2,fma"), always_inline)) void many(__m256* v) const {
    sigmoid8_n<N>(v, times_x);
  }
};
struct Gelu8 {
  template <int N>
  __attribute__((target("avx2,fma"), always_inline)) void many(__m256* v) const {
    gelu8_n<N>(v);
  }
};

// The lanes [0, count) of an 8-lane mask for maskload / maskstore.
__attribute__((target("avx2"))) inline __m256i lanes8(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// out[i] = f(in[i]) eight lanes at a time, the tail through the same lanes
// (masked: zeros in, only the tail out).
// (f.many<N> maps N vectors at once: four while 32 floats remain.)
template <typename F>
__attribute__((target("avx2,fma"))) void map8(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v[4] = {_mm256_loadu_ps(in + i), _mm256_loadu_ps(in + i + 8), _mm256_loadu_ps(in + i + 16),
                   _mm256_loadu_ps(in + i + 24)};
    f.template many<4>(v);
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(out + i + 8 * j, v[j]);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(in + i);
    f.template many<1>(&v);
    _mm256_storeu_ps(out + i, v);
  }
  if (i < n) {
    const __m256i m = lanes8(n - i);
    __m256 v = _mm256_maskload_ps(in + i, m);
    f.template many<1>(&v);
    _mm256_maskstore_ps(out + i, m, v);
  }
}

// map8 on rows rows of n floats, ld apart, in place (map16_rows' reason).
template <typename F>
__attribute__((target("avx2,fma"))) void map8_rows(float* v, int64_t ld, int64_t rows, int64_t n, F f) {
  for (int64_t r = 0; r < rows; ++r) map8(v + r * ld, v + r * ld, n, f);
}

// hard_sigmoid's formula at 8 lanes: built for AVX2 without FMA, so the
// compiler cannot fuse alpha x + beta (the scalar expression rounds twice);
// min_ps(v, 1) is v < 1 ? v : 1 and max_ps(v, 0) v > 0 ? v : 0, as
// std::min / std::max.
__attribute__((target("avx2"))) inline __m256 hard_sigmoid8(__m256 x, __m256 a, __m256 b, bool times_x) {
  __m256 h = _mm256_add_ps(_mm256_mul_ps(a, x), b);
  h = _mm256_max_ps(_mm256_min_ps(h, _mm256_set1_ps(1.0f)), _mm256_setzero_ps());
  return times_x ? _mm256_mul_ps(x, h) : h;
}

// rows rows of n floats from in (in_ld apart) to v (ld apart).
__attribute__((target("avx2"))) void hard_sigmoid_avx2(float* v, int64_t ld, int64_t rows,
                                                       const float* in, int64_t in_ld, int64_t n,
                                                       float alpha, float beta, bool times_x) {
  const __m256 a = _mm256_set1_ps(alpha), b = _mm256_set1_ps(beta);
  const int64_t full = n / 8 * 8;
  const __m256i m = lanes8(n - full);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = in + r * in_ld;
    float* dst = v + r * ld;
    for (int64_t i = 0; i < full; i += 8) {
      _mm256_storeu_ps(dst + i, hard_sigmoid8(_mm256_loadu_ps(src + i), a, b, times_x));
    }
    if (full < n) {
      _mm256_maskstore_ps(dst + full, m, hard_sigmoid8(_mm256_maskload_ps(src + full, m), a, b, times_x));
    }
  }
}

__attribute__((target("avx2,fma"))) void softmax_avx2(const float* x, float* y, int64_t n) {
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m = minus_inf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    m = _mm256_blendv_ps(m, v, _mm256_cmp_ps(v, m, _CMP_GT_OQ));
  }
  const int64_t full = i, rest = n - i;
  const __m256i tail = lanes8(rest);
  if (rest > 0) {
    const __m256 v = _mm256_blendv_ps(minus_inf, _mm256_maskload_ps(x + i, tail), _mm256_castsi256_ps(tail));
    m = _mm256_blendv_ps(m, v, _mm256_cmp_ps(v, m, _CMP_GT_OQ));
  }
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, m);
  float max = lanes[0];
  for (int k = 1; k < 8; ++k) max = std::max(max, lanes[k]);
  const __m256 mv = _mm256_set1_ps(max);
  // The sum in sixteen lanes, two vectors (softmax_avx512's grouping: with
  // eight, a row of 4099 summed 512 terms a lane and its error passed the
  // bound).
  __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (i = 0; i < full; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
    _mm256_storeu_ps(y + i, e);
    s[(i / 8) % 2] = _mm256_add_ps(s[(i / 8) % 2], e);
  }
  if (rest > 0) {
    const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, tail), mv)),
                                   _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(y + i, tail, e);
    s[(i / 8) % 2] = _mm256_add_ps(s[(i / 8) % 2], e);
  }
  _mm256_store_ps(lanes, s[0]);
  _mm256_store_ps(lanes + 8, s[1]);
  float sum = 0.0f;
  for (int k = 0; k < 16; ++k) sum += lanes[k];
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (i = 0; i < full; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  if (rest > 0) _mm256_maskstore_ps(y + i, tail, _mm256_mul_ps(_mm256_maskload_ps(y + i, tail), inv));
}

// arith at 8 lanes; the tail by the scalar loop (one rounding each: the
// same bits).
template <Arith Op, int SA, int SB>
__attribute__((target("avx2"))) int64_t arith_avx2(const float* a, const float* b, float* out, int64_t n) {
  const __m256 av = SA == 0 ? _mm256_set1_ps(a[0]) : _mm256_setzero_ps();
  const __m256 bv = SB == 0 ? _mm256_set1_ps(b[0]) : _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = SA == 0 ? av : _mm256_loadu_ps(a + i);
    const __m256 y = SB == 0 ? bv : _mm256_loadu_ps(b + i);
    __m256 r;
    if constexpr (Op == Arith::kAdd) r = _mm256_add_ps(x, y);
    if constexpr (Op == Arith::kSub) r = _mm256_sub_ps(x, y);
    if constexpr (Op == Arith::kMul) r = _mm256_mul_ps(x, y);
    if constexpr (Op == Arith::kDiv) r = _mm256_div_ps(x, y);
    _mm256_storeu_ps(out + i, r);
  }
  return i;
}
#endif

// arith's loops: Op applied to T (a float or a vector of floats; +, -, *,
// / on vectors are lane by lane, one rounding each).
template <Arith Op, typename T>
inline T apply(T x, T y) {
  if constexpr (Op == Arith::kAdd) return x + y;
  if constexpr (Op == Arith::kSub) return x - y;
  if constexpr (Op == Arith::kMul) return x * y;
  return x / y;
}

#ifdef KITE_VMATH_AVX512
template <Arith Op>
__attribute__((target("avx512f"))) __m512 apply16(__m512 x, __m512 y) {
  // (Masked forms with all-ones masks: see reciprocal16.)
  constexpr __mmask16 kAll = 0xFFFF;
  if constexpr (Op == Arith::kAdd) return _mm512_maskz_add_ps(kAll, x, y);
  if constexpr (Op == Arith::kSub) return _mm512_maskz_sub_ps(kAll, x, y);
  if constexpr (Op == Arith::kMul) return _mm512_maskz_mul_ps(kAll, x, y);
  return _mm512_maskz_div_ps(kAll, x, y);
}

// SA, SB: the strides (0 or 1). The last partial vector by masks.
template <Arith Op, int SA, int SB>
__attribute__((target("avx512f"))) void arith_avx512(const float* a, const float* b, float* out,
                                                    int64_t n) {
  const __m512 av = SA == 0 ? _mm512_set1_ps(a[0]) : _mm512_setzero_ps();
  const __m512 bv = SB == 0 ? _mm512_set1_ps(b[0]) : _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = SA == 0 ? av : _mm512_loadu_ps(a + i);
    const __m512 y = SB == 0 ? bv : _mm512_loadu_ps(b + i);
    _mm512_storeu_ps(out + i, apply16<Op>(x, y));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    // Masked-off lanes divide 1 by 1, not 0 by 0 (no spurious flags).
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 x = SA == 0 ? av : _mm512_mask_loadu_ps(one, m, a + i);
    const __m512 y = SB == 0 ? bv : _mm512_mask_loadu_ps(one, m, b + i);
    _mm512_mask_storeu_ps(out + i, m, apply16<Op>(x, y));
  }
}
#endif

template <Arith Op, int SA, int SB>
void arith_as(const float* a, const float* b, float* out, int64_t n) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    arith_avx512<Op, SA, SB>(a, b, out, n);
    return;
  }
#endif
  int64_t i = 0;
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) i = arith_avx2<Op, SA, SB>(a, b, out, n);
#endif
#if defined(__GNUC__) || defined(__clang__)
  const F4 av = splat(a[0]), bv = splat(b[0]);
  for (; i + 4 <= n; i += 4) {
    F4 x = av, y = bv;
    if constexpr (SA == 1) std::memcpy(&x, a + i, sizeof x);
    if constexpr (SB == 1) std::memcpy(&y, b + i, sizeof y);
    const F4 r = apply<Op>(x, y);
    std::memcpy(out + i, &r, sizeof r);
  }
#endif
  for (; i < n; ++i) out[i] = apply<Op>(a[i * SA], b[i * SB]);
}

template <Arith Op>
void arith_op(const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n) {
  if (sa == 1 && sb == 1) return arith_as<Op, 1, 1>(a, b, out, n);
  if (sa == 0) return arith_as<Op, 0, 1>(a, b, out, n);
  arith_as<Op, 1, 0>(a, b, out, n);
}

}  // namespace

void arith(Arith op, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n) {
  if (n <= 0) return;
  switch (op) {
    case Arith::kAdd: return arith_op<Arith::kAdd>(a, sa, b, sb, out, n);
    case Arith::kSub: return arith_op<Arith::kSub>(a, sa, b, sb, out, n);
    case Arith::kMul: return arith_op<Arith::kMul>(a, sa, b, sb, out, n);
    case Arith::kDiv: return arith_op<Arith::kDiv>(a, sa, b, sb, out, n);
  }
}

void softmax(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    softmax_avx512(x, y, n);
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    softmax_avx2(x, y, n);
    return;
  }
#endif
#if defined(__GNUC__) || defined(__clang__)
  softmax4(x, y, n);
#else
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max = std::max(max, x[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = std::exp(x[j] - max);
    sum += y[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
#endif
}

void add(const float* a, const float* b, float* out, int64_t n) {
  arith(Arith::kAdd, a, 1, b, 1, out, n);
}

void gelu(const float* in, float* out, int64_t n) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    map16(in, out, n, Gelu16{});
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    map8(in, out, n, Gelu8{});
    return;
  }
#endif
#if defined(__GNUC__) || defined(__clang__)
  map4(in, out, n, [](F4 x) { return gelu4(x); });
#else
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * 0.7071067811865476f));
#endif
}

void gelu_rows(float* v, int64_t ld, int64_t rows, int64_t n) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    map16_rows(v, ld, rows, n, Gelu16{});
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    map8_rows(v, ld, rows, n, Gelu8{});
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) gelu(v + r * ld, v + r * ld, n);
}

void hard_sigmoid(const float* in, float* out, int64_t n, float alpha, float beta, bool times_x) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    map16(in, out, n, HardSigmoid16{alpha, beta, times_x});
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    hard_sigmoid_avx2(out, 0, 1, in, 0, n, alpha, beta, times_x);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float v = std::max(0.0f, std::min(1.0f, alpha * x + beta));
    out[i] = times_x ? x * v : v;
  }
}

void hard_sigmoid_rows(float* v, int64_t ld, int64_t rows, int64_t n, float alpha, float beta,
                       bool times_x) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    map16_rows(v, ld, rows, n, HardSigmoid16{alpha, beta, times_x});
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    hard_sigmoid_avx2(v, ld, rows, v, ld, n, alpha, beta, times_x);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) hard_sigmoid(v + r * ld, v + r * ld, n, alpha, beta, times_x);
}

void sigmoid(const float* in, float* out, int64_t n, bool times_x) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    map16(in, out, n, Sigmoid16{times_x});
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    map8(in, out, n, Sigmoid8{times_x});
    return;
  }
#endif
#if defined(__GNUC__) || defined(__clang__)
  map4(in, out, n, [times_x](F4 x) { return sigmoid4(x, times_x); });
#else
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float s = x >= 0.0f ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
    out[i] = times_x ? x * s : s;
  }
#endif
}

void sigmoid_rows(float* v, int64_t ld, int64_t rows, int64_t n, bool times_x) {
#ifdef KITE_VMATH_AVX512
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512) {
    map16_rows(v, ld, rows, n, Sigmoid16{times_x});
    return;
  }
  if (sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx2Fma) {
    map8_rows(v, ld, rows, n, Sigmoid8{times_x});
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) sigmoid(v + r * ld, v + r * ld, n, times_x);
}

}  // namespace kite::cpu::vmath
