// The SGEMM micro-kernel for x86-64 processors with AVX2 and FMA, chosen at
// run time (sgemm.cpp asks cpu_supports_avx2_fma()). Compiled with a target
// attribute, so the library needs no -mavx2 and still runs on any x86-64.
// Same contract and packed layouts as the portable kernel: a 6x8 tile, one
// 8-float register per row, over kc values of k.
#include <cstdint>

#include "sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace kite::cpu::sgemm::detail {

bool cpu_supports_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

__attribute__((target("avx2,fma"))) void micro_kernel_avx2(int64_t kc, const float* a,
                                                           const float* b, float* acc) {
  static_assert(kMR == 6 && kNR == 8, "the AVX2 micro-kernel is written for 6x8 tiles");
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  for (int64_t p = 0; p < kc; ++p, a += kMR, b += kNR) {
    const __m256 bv = _mm256_loadu_ps(b);
    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), bv, c0);
    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), bv, c1);
    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), bv, c2);
    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), bv, c3);
    c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), bv, c4);
    c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), bv, c5);
  }
  _mm256_storeu_ps(acc + 0 * kNR, c0);
  _mm256_storeu_ps(acc + 1 * kNR, c1);
  _mm256_storeu_ps(acc + 2 * kNR, c2);
  _mm256_storeu_ps(acc + 3 * kNR, c3);
  _mm256_storeu_ps(acc + 4 * kNR, c4);
  _mm256_storeu_ps(acc + 5 * kNR, c5);
}

// Two 6x8 tiles that share the B panel: 12 independent accumulators hide
// the FMA latency better than 6, and each B load serves 12 rows.
__attribute__((target("avx2,fma"))) void micro_kernel_avx2_x2(int64_t kc, const float* a0,
                                                              const float* a1, const float* b,
                                                              float* acc0, float* acc1) {
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  __m256 d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0;
  for (int64_t p = 0; p < kc; ++p, a0 += kMR, a1 += kMR, b += kNR) {
    const __m256 bv = _mm256_loadu_ps(b);
    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + 0), bv, c0);
    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + 1), bv, c1);
    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + 2), bv, c2);
    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + 3), bv, c3);
    c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + 4), bv, c4);
    c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + 5), bv, c5);
    d0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + 0), bv, d0);
    d1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + 1), bv, d1);
    d2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + 2), bv, d2);
    d3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + 3), bv, d3);
    d4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + 4), bv, d4);
    d5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + 5), bv, d5);
  }
  _mm256_storeu_ps(acc0 + 0 * kNR, c0);
  _mm256_storeu_ps(acc0 + 1 * kNR, c1);
  _mm256_storeu_ps(acc0 + 2 * kNR, c2);
  _mm256_storeu_ps(acc0 + 3 * kNR, c3);
  _mm256_storeu_ps(acc0 + 4 * kNR, c4);
  _mm256_storeu_ps(acc0 + 5 * kNR, c5);
  _mm256_storeu_ps(acc1 + 0 * kNR, d0);
  _mm256_storeu_ps(acc1 + 1 * kNR, d1);
  _mm256_storeu_ps(acc1 + 2 * kNR, d2);
  _mm256_storeu_ps(acc1 + 3 * kNR, d3);
  _mm256_storeu_ps(acc1 + 4 * kNR, d4);
  _mm256_storeu_ps(acc1 + 5 * kNR, d5);
}

}  // namespace kite::cpu::sgemm::detail

#else

namespace kite::cpu::sgemm::detail {

bool cpu_supports_avx2_fma() { return false; }
void micro_kernel_avx2(int64_t, const float*, const float*, float*) {}
void micro_kernel_avx2_x2(int64_t, const float*, const float*, const float*, float*, float*) {}

}  // namespace kite::cpu::sgemm::detail

#endif
