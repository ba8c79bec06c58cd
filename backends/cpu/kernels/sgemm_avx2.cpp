// The SGEMM micro-kernel for x86-64 processors with AVX2 and FMA, chosen at
// run time (sgemm.cpp asks cpu_supports_avx2_fma()). Compiled with a target
// attribute, so the library needs no -mavx2 and still runs on any x86-64.
// Same packed layouts as the portable kernel. The block kernel writes C
// itself, as the AVX-512 one does, and reads a row-major B in place (it
// replaced a 6x8 micro-kernel whose tiles store_tile copied to C).
#include <algorithm>
#include <cstdint>

#include "sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace kite::cpu::sgemm::detail {

bool cpu_supports_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

namespace {

// How far ahead (floats) each row of C is prefetched for writing as a full
// tile stores it: four strips of 32 columns on, as the AVX-512 kernel does
// (its reason: the stores of large outputs waited on reads for ownership).
constexpr int64_t kStorePrefetch = 128;

// The lanes [0, count) of an 8-lane mask for maskload / maskstore.
__attribute__((target("avx2"))) inline __m256i lanes8(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(count, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The epilogue on eight values. max_ps(a, b) = a > b ? a : b, min_ps(a, b)
// = a < b ? a : b (b when either is NaN): the scalar formulas bit for bit
// (sgemm.h).
__attribute__((target("avx2"))) inline __m256 finish_avx2(Epilogue::Kind kind, __m256 lo, __m256 hi,
                                                          __m256 v) {
  if (kind == Epilogue::kRelu) return _mm256_max_ps(v, _mm256_setzero_ps());
  if (kind == Epilogue::kClip) return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
  return v;
}

// The epilogue read once per tile: the stores go through may-alias vector
// types, so a load of epi->kind beside them was repeated after each store
// (with its branches, a third of a 16-deep tile's time on Zen 3).
struct Finish {
  Epilogue::Kind kind;
  __m256 lo, hi;
};
__attribute__((target("avx2"), always_inline)) inline Finish finish_of(const Epilogue* epi) {
  const Epilogue::Kind kind = epi ? epi->kind : Epilogue::kNone;
  return {kind, _mm256_set1_ps(kind == Epilogue::kClip ? epi->lo : 0.0f),
          _mm256_set1_ps(kind == Epilogue::kClip ? epi->hi : 0.0f)};
}

// A tile's sums v for eight columns of a row of C at cr: + C (add) or + the
// row's bias (bias non-null), then the epilogue, then stored; the first
// lanes of mask only when not full.
__attribute__((target("avx2"), always_inline)) inline void store_row8(float* cr, __m256 v, bool add,
                                                                      const float* bias, const Finish& f,
                                                                      bool full, __m256i mask) {
  if (add) {
    v = _mm256_add_ps(v, full ? _mm256_loadu_ps(cr) : _mm256_maskload_ps(cr, mask));
  } else if (bias) {
    v = _mm256_add_ps(v, _mm256_set1_ps(*bias));
  }
  v = finish_avx2(f.kind, f.lo, f.hi, v);
  if (full) {
    _mm256_storeu_ps(cr, v);
  } else {
    _mm256_maskstore_ps(cr, mask, v);
  }
}

// One A panel (6 rows) by 16 columns of B: 12 accumulators, two B loads and
// six broadcasts a k step; then straight to C (block_kernel_avx2). R = 4:
// the panel's first 4 rows only (a last panel of 3 or 4 rows: m = 16, 40,
// 64, 112, 160, 256), 8 accumulators whose FMA latency, not the 12 FMAs of
// R = 6, sets the pace.
// Direct: B row-major in place, row p at lo + p * ldb (Masked: cols < 16,
// masked loads); else two packed panels lo and hi.
template <bool Direct, bool Masked, int R = 6>
__attribute__((target("avx2,fma,prfchw"))) void tile6x16(int64_t kc, const float* a, const float* lo,
                                                  const float* hi, int64_t ldb, int64_t prefetch,
                                                  float* c, int64_t ldc, int64_t rows, int64_t cols,
                                                  const float* row_bias, bool add, const Epilogue* epi,
                                                  const float* a_next, bool store_ahead,
                                                  int64_t whole_rows = 0) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i m0 = lanes8(cols), m1 = lanes8(cols - 8);
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b0, b1;
    if constexpr (Direct) {
      if constexpr (Masked) {
        // Whole vectors where B goes on past them (the lanes past cols are
        // summed and never stored): Zen 2's masked loads made a 4-column
        // strip cost more than a whole one (96 x 196 x 576 in place: 0.247
        // ms, 96 x 208: 0.240).
        if (p < whole_rows) {
          b0 = _mm256_loadu_ps(lo);
          b1 = _mm256_loadu_ps(lo + 8);
        } else {
          b0 = _mm256_maskload_ps(lo, m0);
          b1 = _mm256_maskload_ps(lo + 8, m1);
        }
      } else {
        b0 = _mm256_loadu_ps(lo);
        b1 = _mm256_loadu_ps(lo + 8);
      }
      if (prefetch > 0) _mm_prefetch(reinterpret_cast<const char*>(lo + prefetch), _MM_HINT_T0);
      lo += ldb;
    } else {
      b0 = _mm256_loadu_ps(lo);
      b1 = _mm256_loadu_ps(hi);
      lo += kNR;
      hi += kNR;
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
    // The next block's A panel, a line every other k step (its 24 bytes a
    // step: each line once or twice).
    if (a_next && (p & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(a_next + p * kMR), _MM_HINT_T0);
    a += kMR;
  }
  const Finish f = finish_of(epi);
  if (R == 6 && rows == 6 && cols == 16) {
    // A full tile: each step over all twelve accumulators, one branch each.
    if (add) {
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_loadu_ps(c + r * ldc));
        acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_loadu_ps(c + r * ldc + 8));
      }
    } else if (row_bias) {
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 bias = _mm256_set1_ps(row_bias[r]);
        acc[r][0] = _mm256_add_ps(acc[r][0], bias);
        acc[r][1] = _mm256_add_ps(acc[r][1], bias);
      }
    }
    if (f.kind != Epilogue::kNone) {
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        acc[r][0] = finish_avx2(f.kind, f.lo, f.hi, acc[r][0]);
        acc[r][1] = finish_avx2(f.kind, f.lo, f.hi, acc[r][1]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      float* cr = c + r * ldc;
      _mm256_storeu_ps(cr, acc[r][0]);
      _mm256_storeu_ps(cr + 8, acc[r][1]);
      // The row's line kStorePrefetch floats on, for writing, when the
      // task's columns go on that far (store_ahead).
      if (store_ahead) _mm_prefetch(reinterpret_cast<const char*>(cr + kStorePrefetch), _MM_HINT_ET0);
    }
    return;
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    float* cr = c + r * ldc;
#pragma GCC unroll 2
    for (int z = 0; z < 2; ++z) {
      const int64_t left = cols - 8 * z;
      if (left <= 0) break;
      store_row8(cr + 8 * z, acc[r][z], add, row_bias ? row_bias + r : nullptr, f, left >= 8, z == 0 ? m0 : m1);
    }
  }
}

// A last strip of at most 8 columns against both A panels of a block: 12
// accumulators of one vector (twelve broadcasts and one B load a k step),
// where two 6x16 tiles spent 24 FMAs a step on at most 8 useful columns.
// The 6x16 tile's arithmetic (FMAs in k order from zero, then + C or + the
// row bias, then the epilogue), so its bits. Direct: B row-major in place,
// row p at lo + p * ldb, whole vectors for p < whole_rows, else masked;
// else the packed panel lo (zero past its columns).
template <bool Direct>
__attribute__((target("avx2,fma"))) void tile12x8(int64_t kc, const float* a0, const float* a1,
                                                  const float* lo, int64_t ldb, int64_t whole_rows,
                                                  float* c, int64_t ldc, int64_t rows, int64_t cols,
                                                  const float* row_bias, bool add, const Epilogue* epi) {
  __m256 acc[2][6];
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) acc[0][r] = acc[1][r] = _mm256_setzero_ps();
  const __m256i m = lanes8(cols);
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b;
    if constexpr (Direct) {
      b = p < whole_rows ? _mm256_loadu_ps(lo) : _mm256_maskload_ps(lo, m);
      lo += ldb;
    } else {
      b = _mm256_loadu_ps(lo);
      lo += kNR;
    }
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) acc[0][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + r), b, acc[0][r]);
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) acc[1][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + r), b, acc[1][r]);
    a0 += kMR;
    a1 += kMR;
  }
  const Finish f = finish_of(epi);
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) {
      const int64_t i = q * kMR + r;
      if (i >= rows) break;
      store_row8(c + i * ldc, acc[q][r], add, row_bias ? row_bias + i : nullptr, f, cols >= 8, m);
    }
  }
}

// An A panel of at most 2 rows (m = 32, 80, 128, 320, 512: 6q + 2) by a
// block's 32 columns: 8 accumulators, four B loads and two broadcasts a k
// step, where two 6x16 tiles spent 24 FMAs a step on 4 useful rows of
// values (m = 32: a sixth of the GEMM's time). The 6x16 tile's
// arithmetic, so its bits. Direct: B row-major in place (the 32 columns
// from lo, row p at lo + p * ldb); else four packed panels b[0..3].
template <bool Direct>
__attribute__((target("avx2,fma"))) void tile2x32(int64_t kc, const float* a, const float* const* b,
                                                  const float* lo, int64_t ldb, float* c, int64_t ldc,
                                                  int64_t rows, const float* row_bias, bool add,
                                                  const Epilogue* epi) {
  __m256 acc[2][4];
#pragma GCC unroll 2
  for (int r = 0; r < 2; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_ps();
  const float *b0 = Direct ? lo : b[0], *b1 = Direct ? lo : b[1], *b2 = Direct ? lo : b[2],
              *b3 = Direct ? lo : b[3];
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    __m256 v[4];
    if constexpr (Direct) {
      v[0] = _mm256_loadu_ps(lo);
      v[1] = _mm256_loadu_ps(lo + 8);
      v[2] = _mm256_loadu_ps(lo + 16);
      v[3] = _mm256_loadu_ps(lo + 24);
      lo += ldb;
    } else {
      v[0] = _mm256_loadu_ps(b0 + p * kNR);
      v[1] = _mm256_loadu_ps(b1 + p * kNR);
      v[2] = _mm256_loadu_ps(b2 + p * kNR);
      v[3] = _mm256_loadu_ps(b3 + p * kNR);
    }
#pragma GCC unroll 2
    for (int r = 0; r < 2; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
#pragma GCC unroll 4
      for (int z = 0; z < 4; ++z) acc[r][z] = _mm256_fmadd_ps(av, v[z], acc[r][z]);
    }
    a += kMR;
  }
  const Finish f = finish_of(epi);
  const __m256i all = _mm256_set1_epi32(-1);
#pragma GCC unroll 2
  for (int r = 0; r < 2; ++r) {
    if (r >= rows) break;
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      store_row8(c + r * ldc + 8 * z, acc[r][z], add, row_bias ? row_bias + r : nullptr, f, true, all);
    }
  }
}

// NP panels of column_avx2, one k block: panel q's six rows in lanes 0-5
// of acc[q], NP independent FMA chains.
template <int NP>
__attribute__((target("avx2,fma"))) void column_block(int64_t ip, int64_t m, int64_t k, int64_t k_end, int64_t k0,
                                                      int64_t kc, const float* packed_a, const float* x,
                                                      int64_t x_stride, float* y, int64_t ldy,
                                                      const float* row_bias, bool add,
                                                      const Epilogue* epilogue) {
  const __m256i six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
  __m256 acc[NP];
  for (int q = 0; q < NP; ++q) acc[q] = _mm256_setzero_ps();
  const float* a = packed_a + ip * k * kMR + k0 * kMR;
  const int64_t panel = k * kMR;
  for (int64_t p = k0; p < k0 + kc; ++p, a += kMR) {
    const __m256 xv = _mm256_broadcast_ss(x + p * x_stride);
    for (int q = 0; q < NP; ++q) acc[q] = _mm256_fmadd_ps(_mm256_maskload_ps(a + q * panel, six), xv, acc[q]);
  }
  // The block kernel's store, value by value: the k block's sum, then + C
  // (a later k block, or accumulate) or + the row bias, then the epilogue
  // after the last k block, its formulas.
  const bool last = k0 + kc == k_end;
  alignas(32) float lanes[NP][8];
  for (int q = 0; q < NP; ++q) _mm256_store_ps(lanes[q], acc[q]);
  for (int q = 0; q < NP; ++q) store_column_panel(lanes[q], ip + q, m, y, ldy, row_bias, add, last, epilogue);
}

}  // namespace

void column_avx2(int64_t ip0, int64_t ip1, int64_t m, int64_t k, int64_t k_begin,
                 int64_t k_end, int64_t kc_block,
                 const float* packed_a, const float* x, int64_t x_stride, float* y, int64_t ldy,
                 const float* row_bias, bool accumulate, const Epilogue* epilogue, int64_t cols) {
  // Column by column (the driver gives this level one at a time). Four
  // panels (four FMA chains) at a time, the rest in one smaller step; k
  // blocks as the block kernel's.
  for (int64_t col = 0; col < cols; ++col, ++x, ++y) {
    for (int64_t ip = ip0; ip < ip1; ip += 4) {
      const int64_t np = std::min<int64_t>(4, ip1 - ip);
      for (int64_t k0 = k_begin; k0 < k_end; k0 += kc_block) {
        const int64_t kc = std::min(kc_block, k_end - k0);
        const bool add = accumulate || k0 > k_begin;
        switch (np) {
          case 4: column_block<4>(ip, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
          case 3: column_block<3>(ip, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
          case 2: column_block<2>(ip, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
          default: column_block<1>(ip, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
        }
      }
    }
  }
}

__attribute__((target("avx2"))) int64_t pack_a_panel_avx2(const float* a, int64_t lda, int64_t k,
                                                          float alpha, float* dst) {
  // Eight columns a step: the six rows (and two of zeros) transposed 8x8 by
  // unpacks, shuffles and lane swaps; column j's six values are the first
  // lanes of vector j, stored eight wide in column order (the next column
  // overwrites the two extra), the last one masked to six.
  const __m256 scale = _mm256_set1_ps(alpha);
  const bool scaled = alpha != 1.0f;
  const __m256i six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
  const __m256 zero = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 r[6];
    for (int i = 0; i < 6; ++i) {
      r[i] = _mm256_loadu_ps(a + i * lda + p);
      if (scaled) r[i] = _mm256_mul_ps(r[i], scale);
    }
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(zero, zero), t7 = t6;
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    float* d = dst + p * kMR;
    _mm256_storeu_ps(d + 0 * kMR, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(d + 1 * kMR, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(d + 2 * kMR, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(d + 3 * kMR, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(d + 4 * kMR, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(d + 5 * kMR, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(d + 6 * kMR, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_maskstore_ps(d + 7 * kMR, six, _mm256_permute2f128_ps(s3, s7, 0x31));
  }
  return p;
}

__attribute__((target("avx2,fma"))) void row_avx2(int64_t jp0, int64_t jp1, int64_t n, int64_t k,
                                                  int64_t kc_block, const float* packed_a,
                                                  const float* packed_b, float* c, const float* row_bias,
                                                  bool accumulate, const Epilogue* epilogue) {
  // Eight B panels a step (64 columns), one accumulator each, fed by one
  // broadcast of x(p) a k step: the block kernel's FMA for row 0 of a
  // tile, operand for operand, where it spent six rows of FMAs on this one.
  constexpr int64_t kGroup = 8;
  const float bias = row_bias ? row_bias[0] : 0.0f;
  const Finish f = finish_of(epilogue);
  for (int64_t jp = jp0; jp < jp1; jp += kGroup) {
    const int64_t panels = std::min(kGroup, jp1 - jp);
    const int64_t j = jp * kNR;
    const int64_t cols = std::min(panels * kNR, n - j);
    // Past the last panel, the last one again (columns nobody stores).
    const float* b[kGroup];
    for (int64_t q = 0; q < kGroup; ++q) b[q] = packed_b + (jp + std::min(q, panels - 1)) * k * kNR;
    for (int64_t k0 = 0; k0 < k; k0 += kc_block) {
      const int64_t kc = std::min(kc_block, k - k0);
      __m256 acc[kGroup];
      for (int q = 0; q < kGroup; ++q) acc[q] = _mm256_setzero_ps();
      const float* a = packed_a + k0 * kMR;
      const int64_t o = k0 * kNR;
      for (int64_t p = 0; p < kc; ++p) {
        const __m256 av = _mm256_broadcast_ss(a + p * kMR);
        const int64_t at = o + p * kNR;
        if ((p & 1) == 0) {
          // Eight panels side by side: each one's line 512 bytes ahead (a
          // line holds two k rows of a panel).
          for (int q = 0; q < kGroup; ++q) _mm_prefetch(reinterpret_cast<const char*>(b[q] + at + 128), _MM_HINT_T0);
        }
        for (int q = 0; q < kGroup; ++q) acc[q] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b[q] + at), acc[q]);
      }
      const bool add = accumulate || k0 > 0;
      const bool last = k0 + kc == k;
      for (int q = 0; q < kGroup; ++q) {
        const int64_t left = cols - 8 * q;
        if (left <= 0) break;
        const __m256i m = lanes8(left);
        float* cq = c + j + 8 * q;
        __m256 v = acc[q];
        if (add) {
          v = _mm256_add_ps(v, left >= 8 ? _mm256_loadu_ps(cq) : _mm256_maskload_ps(cq, m));
        } else if (row_bias) {
          v = _mm256_add_ps(v, _mm256_set1_ps(bias));
        }
        if (last) v = finish_avx2(f.kind, f.lo, f.hi, v);
        if (left >= 8) {
          _mm256_storeu_ps(cq, v);
        } else {
          _mm256_maskstore_ps(cq, m, v);
        }
      }
    }
  }
}

void block_kernel_avx2(int na, int nz, int64_t kc, const float* a0, const float* a1,
                       const float* const* b, int64_t ldb, int64_t prefetch, int64_t whole_rows,
                       float* c, int64_t ldc, int64_t rows, int64_t cols, const float* row_bias,
                       bool add, const Epilogue* epi, const float* a_next, int64_t c_room) {
  // A last panel of 1 or 2 rows under 32 whole columns: one 2x32 tile.
  if (cols == 32 && rows - (na - 1) * kMR <= 2) {
    const int q = na - 1;
    const float* a = q == 0 ? a0 : a1;
    float* cq = c + q * kMR * ldc;
    const float* bias = row_bias ? row_bias + q * kMR : nullptr;
    const int64_t qr = rows - q * kMR;
    if (ldb > 0) {
      tile2x32<true>(kc, a, b, b[0], ldb, cq, ldc, qr, bias, add, epi);
    } else {
      tile2x32<false>(kc, a, b, nullptr, 0, cq, ldc, qr, bias, add, epi);
    }
    if (--na == 0) return;
  }
  // Each 16 columns against each A panel in turn: the 16 columns' k block
  // (16 KiB of B at kc 256) stays in L1 for the second panel.
  for (int z = 0; z < nz; ++z) {
    const int64_t zc = std::min<int64_t>(16, cols - 16 * z);
    if (zc <= 0) break;
    if (zc <= 8 && na == 2 && (z > 0 || a_next == nullptr)) {
      // (Not a strip that fetches the next block's A: the 6x16 tiles do.)
      float* cz = c + 16 * z;
      if (ldb > 0) {
        tile12x8<true>(kc, a0, a1, b[0] + 16 * z, ldb, whole_rows, cz, ldc, rows, zc, row_bias, add, epi);
      } else {
        tile12x8<false>(kc, a0, a1, b[2 * z], 0, 0, cz, ldc, rows, zc, row_bias, add, epi);
      }
      continue;
    }
    for (int q = 0; q < na; ++q) {
      const int64_t qr = std::min<int64_t>(kMR, rows - q * kMR);
      if (qr <= 0) break;
      const float* a = q == 0 ? a0 : a1;
      float* cq = c + q * kMR * ldc + 16 * z;
      const float* bias = row_bias ? row_bias + q * kMR : nullptr;
      // The first 16 columns fetch the next block's panels (as far apart
      // as this block's), one each.
      const float* an = z == 0 && a_next ? a_next + (a1 - a0) * q : nullptr;
      const bool ahead = c_room - 16 * z >= kStorePrefetch + 16;
      if (qr <= 4) {
        // A last panel of 3 or 4 rows: the 4-row tile.
        if (ldb > 0) {
          const float* lo = b[0] + 16 * z;
          if (zc == 16) {
            tile6x16<true, false, 4>(kc, a, lo, lo, ldb, prefetch, cq, ldc, qr, zc, bias, add, epi, an, ahead);
          } else {
            tile6x16<true, true, 4>(kc, a, lo, lo, ldb, prefetch, cq, ldc, qr, zc, bias, add, epi, an, ahead, whole_rows);
          }
        } else {
          tile6x16<false, false, 4>(kc, a, b[2 * z], b[2 * z + 1], 0, 0, cq, ldc, qr, zc, bias, add, epi, an, ahead);
        }
      } else if (ldb > 0) {
        const float* lo = b[0] + 16 * z;
        if (zc == 16) {
          tile6x16<true, false>(kc, a, lo, lo, ldb, prefetch, cq, ldc, qr, zc, bias, add, epi, an, ahead);
        } else {
          tile6x16<true, true>(kc, a, lo, lo, ldb, prefetch, cq, ldc, qr, zc, bias, add, epi, an, ahead, whole_rows);
        }
      } else {
        tile6x16<false, false>(kc, a, b[2 * z], b[2 * z + 1], 0, 0, cq, ldc, qr, zc, bias, add, epi, an, ahead);
      }
    }
  }
}

}  // namespace kite::cpu::sgemm::detail

#else

namespace kite::cpu::sgemm::detail {

bool cpu_supports_avx2_fma() { return false; }
void block_kernel_avx2(int, int, int64_t, const float*, const float*, const float* const*, int64_t,
                       int64_t, int64_t, float*, int64_t, int64_t, int64_t, const float*, bool, const Epilogue*,
                       const float*, int64_t) {}
int64_t pack_a_panel_avx2(const float*, int64_t, int64_t, float, float*) { return 0; }
void row_avx2(int64_t, int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*, const float*,
              bool, const Epilogue*) {}
void column_avx2(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float*, const float*, int64_t, float*,
                 int64_t, const float*, bool, const Epilogue*, int64_t) {}

}  // namespace kite::cpu::sgemm::detail

#endif
