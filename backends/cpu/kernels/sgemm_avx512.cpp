// The SGEMM block kernel for x86-64 processors with AVX-512F, chosen at run
// time (sgemm.cpp asks cpu_supports_avx512f()).
//
// Same packed layouts as the other kernels (A panels of kMR = 6 rows, B
// panels of kNR = 8 columns, k outermost), so packing, im2col and every
// caller stay as they are: a 512-bit row of the block is the same k row of
// two neighbouring B panels, one 256-bit load each. A block is 1 A panel
// (6 rows) by up to 8 B panels (64 columns), or 2 A panels (12 rows) by up
// to 4 (the driver's choice by the strip's width): 24 accumulators of the
// 32 registers either way; per k step, 6 broadcasts and 8 half loads (12
// and 4) feed 24 FMAs of 16 floats (the AVX2 block kernel: 8 loads for 12
// FMAs of 8 floats). The 6x64 block is the faster on Zen 4, whose
// broadcasts from memory compete with the FMAs: 6 per 24 FMAs ran a
// register-only loop at 117 GFLOP/s, 12 per 24 at 102 (one core).
//
// The result goes straight from the registers to C: tails are masked
// stores, and the row bias or the accumulation into C happens in the same
// pass (the other kernels write a tile to a buffer that store_tile copies).
//
// The instructions are enabled by a pragma after the includes rather than by
// -mavx512f on the whole file: an inline function from a header compiled
// with AVX-512 could be the copy the linker keeps, and then run on a CPU
// without it.
#include <algorithm>
#include <cstdint>

#include "sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace kite::cpu::sgemm::detail {

bool cpu_supports_avx512f() {
  __builtin_cpu_init();
  // libgcc and compiler-rt report avx512f only when the OS saves the zmm state.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

}  // namespace kite::cpu::sgemm::detail

// (prfchw: PREFETCHW, which every AVX-512 processor has; one without it
// runs the opcode as a no-op.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma,prfchw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma,prfchw")
#endif

namespace kite::cpu::sgemm::detail {
namespace {

static_assert(kMR == 6 && kNR == 8, "the AVX-512 kernel is written for 6x8 panels");
// How far ahead (floats) each row of C is prefetched for writing as the
// block stores it: the row's part four strips of 32 columns on. Without it,
// large outputs waited on the reads for ownership of each line at the
// store (Zen 4, 1 thread: mobilenet_v2's 16 -> 96 layer on 112x112, 4.8 MB
// out, 0.69 -> 0.56 ms; unet_small 0.93x; 2 strips ahead and 8 no better).
constexpr int64_t kStorePrefetch = 128;

// Row p of two B panels side by side: columns 0-7 from lo, 8-15 from hi.
inline __m512 load_pair(const float* lo, const float* hi) {
  // Masked forms with all-ones masks: the unmasked insert (and the cast and
  // zero-extend built on it) passes an undefined operand that GCC 12 warns
  // about. The compiler emits one load and one vinsertf64x4 all the same.
  constexpr __mmask8 kAll = 0xFF;
  const __m512d zero = _mm512_setzero_pd();
  const __m512d l = _mm512_mask_insertf64x4(zero, kAll, zero, _mm256_castps_pd(_mm256_loadu_ps(lo)), 0);
  return _mm512_castpd_ps(
      _mm512_mask_insertf64x4(l, kAll, l, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}

inline __mmask16 column_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

// NA A panels (1 or 2) by NZ pairs of B panels (1 or 2; 3 or 4 with one A
// panel); Direct: B read in
// place, row p of the block's columns at b[0] + p * ldb (16 floats per
// load, masked past cols), instead of from packed panels.
// a_next: the next pair's first A panel at this k block (its second at the
// same distance as a1 from a0), fetched into L1 a line a step on each k
// block's first strip, or null: the weights are cold at each run, and the
// first strip waited on every line of them (the AVX2 level's tile does the
// same).
// Masked: the strip is narrower than its NZ vectors (cols < 16 NZ), so
// B in place and C are read and C written with masks; else whole vectors.
// RA: the rows of a lone A panel that are computed (rows <= RA), so a
// last panel of 2 or 4 rows (m = 16, 32, 40, 64, ...) does not run the
// FMAs of rows past m: a 16 x 12544 x 32 pointwise layer computed 18 rows.
template <int NA, int NZ, bool Direct, bool Masked = false, int RA = static_cast<int>(kMR)>
void block(int64_t kc, const float* a0, const float* a1, const float* const* b, int64_t ldb,
           int64_t prefetch, float* c, int64_t ldc, int64_t rows, int64_t cols,
           const float* row_bias, bool add, const Epilogue* epi, bool store_ahead,
           const float* a_next) {
  static_assert(NZ <= 2 || NA == 1, "three or four vectors across: one A panel (24 accumulators)");
  static_assert(NA == 1 || RA == static_cast<int>(kMR), "partial rows: one A panel");
  constexpr int R = NA == 1 ? RA : NA * static_cast<int>(kMR);
  __m512 acc[R][NZ];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_setzero_ps();
  }
  // Packed: vector z is B panels 2z and 2z + 1 (b[2z], b[2z + 1]).
  const float* bp[2 * NZ];
#pragma GCC unroll 8
  for (int q = 0; q < 2 * NZ; ++q) bp[q] = Direct ? b[0] : b[q];
  const float* b0 = b[0];
  __mmask16 direct_mask[NZ];
#pragma GCC unroll 4
  for (int z = 0; z < NZ; ++z) direct_mask[z] = cols > 16 * z ? column_mask(cols - 16 * z) : __mmask16{0};
  // Unrolled by 4: the loop's own instructions were a tenth of the body.
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[NZ];
    if constexpr (Direct) {
#pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) {
        bv[z] = Masked ? _mm512_maskz_loadu_ps(direct_mask[z], b0 + 16 * z) : _mm512_loadu_ps(b0 + 16 * z);
      }
      if (prefetch > 0) {
#pragma GCC unroll 4
        for (int z = 0; z < (NZ == 1 ? 2 : NZ); ++z) {
          _mm_prefetch(reinterpret_cast<const char*>(b0 + prefetch + 16 * z), _MM_HINT_T0);
        }
      }
      b0 += ldb;
    } else {
#pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) bv[z] = load_pair(bp[2 * z], bp[2 * z + 1]);
#pragma GCC unroll 8
      for (int q = 0; q < 2 * NZ; ++q) bp[q] += kNR;
    }
#pragma GCC unroll 6
    for (int r = 0; r < (NA == 1 ? RA : static_cast<int>(kMR)); ++r) {
      const __m512 av = _mm512_set1_ps(a0[r]);
#pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_fmadd_ps(av, bv[z], acc[r][z]);
    }
    if (a_next) {
      // One line a step, the two panels in turn: 48 bytes of each panel
      // every two steps, a line each.
      const float* line = NA == 2 && (p & 1) ? a_next + (a1 - a0) : a_next;
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
      a_next += kMR;
    }
    a0 += kMR;
    if constexpr (NA == 2) {
#pragma GCC unroll 6
      for (int r = 0; r < static_cast<int>(kMR); ++r) {
        const __m512 av = _mm512_set1_ps(a1[r]);
#pragma GCC unroll 2
        for (int z = 0; z < NZ; ++z) {
          acc[kMR + r][z] = _mm512_fmadd_ps(av, bv[z], acc[kMR + r][z]);
        }
      }
      a1 += kMR;
    }
  }
  // The epilogue read once, here: the stores go through may-alias vector
  // types, so a read of epi->kind among them was repeated after every store
  // (as on the AVX2 level, where that cost a third of a 16-deep tile).
  const Epilogue::Kind kind = epi ? epi->kind : Epilogue::kNone;
  const __m512 lo_v = _mm512_set1_ps(kind == Epilogue::kClip ? epi->lo : 0.0f);
  const __m512 hi_v = _mm512_set1_ps(kind == Epilogue::kClip ? epi->hi : 0.0f);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) {
      const int64_t left = cols - 16 * z;
      if (left <= 0) break;
      const __mmask16 m = column_mask(left);
      __m512 v = acc[r][z];
      if (add) {
        v = _mm512_add_ps(v, Masked ? _mm512_maskz_loadu_ps(m, cr + 16 * z) : _mm512_loadu_ps(cr + 16 * z));
      } else if (row_bias) {
        v = _mm512_add_ps(v, _mm512_set1_ps(row_bias[r]));
      }
      // maxps(a, b) = a > b ? a : b, minps(a, b) = a < b ? a : b (b when
      // either is NaN): Relu x > 0 ? x : 0, Clip (x < lo ? lo : x) then
      // (hi < v ? hi : v), the scalar formulas bit for bit.
      // (Zero-masked forms with all-ones masks: the plain ones pass an
      // undefined operand GCC 12 warns about, as in load_pair.)
      constexpr __mmask16 kAll = 0xFFFF;
      if (kind == Epilogue::kRelu) {
        v = _mm512_maskz_max_ps(kAll, v, _mm512_setzero_ps());
      } else if (kind == Epilogue::kClip) {
        v = _mm512_maskz_max_ps(kAll, lo_v, v);
        v = _mm512_maskz_min_ps(kAll, hi_v, v);
      }
      if (Masked) {
        _mm512_mask_storeu_ps(cr + 16 * z, m, v);
      } else {
        _mm512_storeu_ps(cr + 16 * z, v);
      }
    }
    if (NZ >= 2 && cols == 16 * NZ && store_ahead) {  // a full strip, and the task's columns go on
#pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) {
        _mm_prefetch(reinterpret_cast<const char*>(cr + kStorePrefetch + 16 * z), _MM_HINT_ET0);
      }
    }
  }
}

}  // namespace

void block_kernel_avx512(int na, int nz, int64_t kc, const float* a0, const float* a1,
                         const float* const* b, int64_t ldb, int64_t prefetch, int64_t /*whole_rows*/,
                         float* c,
                         int64_t ldc, int64_t rows, int64_t cols, const float* row_bias, bool add,
                         const Epilogue* epi, const float* a_next, int64_t c_room) {
  const bool ahead = c_room >= kStorePrefetch + 16 * nz;
  // Whole-vector loads of B in place and of C, and whole-vector stores,
  // for a full strip; masked ones only for a last strip's columns (Zen 4
  // ran the masked loads of B at 5-7% of the GEMM: 256 x 784 x 256 105 ->
  // 111 GFLOP/s, 96 x 196 x 576 105 -> 111).
  const bool masked = cols < 16 * nz;
#define KITE_BLOCK_ROWS(NA, NZ, RA)                                                                      \
  do {                                                                                                   \
    if (ldb <= 0 && masked) {                                                                            \
      return block<NA, NZ, false, true, RA>(kc, a0, a1, b, 0, 0, c, ldc, rows, cols, row_bias, add, epi, \
                                            ahead, a_next);                                              \
    }                                                                                                    \
    if (ldb <= 0) {                                                                                      \
      return block<NA, NZ, false, false, RA>(kc, a0, a1, b, 0, 0, c, ldc, rows, cols, row_bias, add,     \
                                             epi, ahead, a_next);                                        \
    }                                                                                                    \
    if (masked) {                                                                                        \
      return block<NA, NZ, true, true, RA>(kc, a0, a1, b, ldb, prefetch, c, ldc, rows, cols, row_bias,   \
                                           add, epi, ahead, a_next);                                     \
    }                                                                                                    \
    return block<NA, NZ, true, false, RA>(kc, a0, a1, b, ldb, prefetch, c, ldc, rows, cols, row_bias,    \
                                          add, epi, ahead, a_next);                                      \
  } while (false)
#define KITE_BLOCK(NA, NZ) KITE_BLOCK_ROWS(NA, NZ, static_cast<int>(kMR))
  // The 6x64 and 6x48 blocks on a last panel of up to 2 or 4 rows: those
  // rows only.
  if (nz == 4 && rows <= 2) KITE_BLOCK_ROWS(1, 4, 2);
  if (nz == 4 && rows <= 4) KITE_BLOCK_ROWS(1, 4, 4);
  if (nz == 4) KITE_BLOCK(1, 4);
  if (nz == 3 && rows <= 2) KITE_BLOCK_ROWS(1, 3, 2);
  if (nz == 3 && rows <= 4) KITE_BLOCK_ROWS(1, 3, 4);
  if (nz == 3) KITE_BLOCK(1, 3);
  if (na == 2) {
    if (nz == 2) KITE_BLOCK(2, 2);
    KITE_BLOCK(2, 1);
  }
  if (nz == 2) KITE_BLOCK(1, 2);
  KITE_BLOCK(1, 1);
#undef KITE_BLOCK
#undef KITE_BLOCK_ROWS
}

// Output vector j (0-5) of a 16-column step holds elements 16j .. 16j + 15
// of the step's 96 floats; element e is column e / 6 of row e % 6. So
// vector j is six masked permutes, row r's by the same index (e / 6) under
// the mask of the lanes whose row is r: 36 permutes, 6 loads and 6 stores
// for 96 floats, where the scalar loop did 96 loads and 96 stores.
int64_t pack_a_panel_avx512(const float* a, int64_t lda, int64_t k, float alpha, float* dst) {
  struct Tables {
    alignas(64) int32_t index[6][16];
    __mmask16 mask[6][6];
  };
  static const Tables tables = [] {
    Tables t{};
    for (int j = 0; j < 6; ++j) {
      for (int r = 0; r < 6; ++r) t.mask[j][r] = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * j + l;
        t.index[j][l] = e / 6;
        t.mask[j][e % 6] = static_cast<__mmask16>(t.mask[j][e % 6] | (1u << l));
      }
    }
    return t;
  }();
  const __m512 scale = _mm512_set1_ps(alpha);
  const bool scaled = alpha != 1.0f;
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    __m512 row[6];
    for (int r = 0; r < 6; ++r) {
      row[r] = _mm512_loadu_ps(a + r * lda + p);
      if (scaled) row[r] = _mm512_mul_ps(row[r], scale);
    }
    float* d = dst + p * kMR;
    for (int j = 0; j < 6; ++j) {
      const __m512i index = _mm512_load_si512(tables.index[j]);
      __m512 v = _mm512_maskz_permutexvar_ps(tables.mask[j][0], index, row[0]);
      for (int r = 1; r < 6; ++r) v = _mm512_mask_permutexvar_ps(v, tables.mask[j][r], index, row[r]);
      _mm512_storeu_ps(d + 16 * j, v);
    }
  }
  return p;
}

void gemv_panels_avx512(int64_t ip0, int64_t ip1, int64_t m, int64_t k, const float* packed_a,
                        const float* x, int64_t x_stride, float* y, int64_t ldy,
                        const float* row_bias, bool add, const Epilogue* epilogue) {
  // Lane l of step vector j holds row (16j + l) % 6 of column (16j + l) / 6.
  alignas(64) static const int32_t kIndex[3][16] = {
      {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2},
      {2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5},
      {5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7}};
  const __m512i i0 = _mm512_load_si512(kIndex[0]), i1 = _mm512_load_si512(kIndex[1]);
  const __m512i i2 = _mm512_load_si512(kIndex[2]);
  alignas(64) int32_t offsets[16] = {};
  for (int l = 0; l < 8; ++l) offsets[l] = static_cast<int32_t>(l * x_stride);
  const __m512i gather = _mm512_load_si512(offsets);
  const int64_t k8 = k / 8 * 8;
  // (Masked permutes with all-ones masks: the plain ones pass an undefined
  // operand that GCC 12 warns about, as in load_pair.)
  constexpr __mmask16 kAll = 0xFFFF;
  for (int64_t ip = ip0; ip < ip1; ++ip) {
    const float* a = packed_a + ip * k * kMR;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps();
    for (int64_t p = 0; p < k8; p += 8) {
      // x(p .. p + 7) in the low lanes (the high ones are never indexed).
      const __m512 xv = x_stride == 1
                            ? _mm512_maskz_loadu_ps(0x00FF, x + p)
                            : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0x00FF, gather,
                                                       x + p * x_stride, 4);
      const float* ap = a + p * kMR;
      acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(ap), _mm512_maskz_permutexvar_ps(kAll, i0, xv), acc0);
      acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(ap + 16), _mm512_maskz_permutexvar_ps(kAll, i1, xv), acc1);
      acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(ap + 32), _mm512_maskz_permutexvar_ps(kAll, i2, xv), acc2);
    }
    alignas(64) float lanes[48];
    _mm512_store_ps(lanes, acc0);
    _mm512_store_ps(lanes + 16, acc1);
    _mm512_store_ps(lanes + 32, acc2);
    const int64_t rows = std::min<int64_t>(kMR, m - ip * kMR);
    for (int64_t r = 0; r < rows; ++r) {
      // The row's eight lanes (one per column of the step), then the tail.
      float v = 0.0f;
      for (int q = 0; q < 8; ++q) v += lanes[q * kMR + r];
      for (int64_t p = k8; p < k; ++p) v += a[p * kMR + r] * x[p * x_stride];
      const int64_t i = ip * kMR + r;
      float* out = y + i * ldy;
      if (add) {
        v += *out;
      } else if (row_bias) {
        v += row_bias[i];
      }
      *out = epilogue ? finish_value(*epilogue, v) : v;
    }
  }
}

namespace {

// NC columns (x + c, y + c) of NV vectors of panels (two per vector: rows
// of panel 2h in lanes 0-5, of panel 2h + 1 in lanes 8-13; the last
// vector's second panel only where np says so) of column_avx512, one k
// block: NV x NC accumulators, each k step's A loads shared by the columns.
template <int NV, int NC>
void column_block(int64_t ip, int64_t np, int64_t m, int64_t k, int64_t k_end, int64_t k0, int64_t kc,
                  const float* packed_a, const float* x, int64_t x_stride, float* y, int64_t ldy,
                  const float* row_bias, bool add, const Epilogue* epilogue) {
  __m512 acc[NV][NC];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[v][c] = _mm512_setzero_ps();
  }
  const float* a = packed_a + ip * k * kMR + k0 * kMR;
  const float* xp = x + k0 * x_stride;
  const int64_t panel = k * kMR;
  // The last vector's second panel, where there is one (a masked-off lane
  // is not read).
  const bool last_hi_panel = 2 * NV <= np;
  const __mmask16 last_hi = last_hi_panel ? static_cast<__mmask16>(0x3F00) : static_cast<__mmask16>(0);
  auto step = [&](const __m512 (&av)[NV]) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      const __m512 xv = _mm512_set1_ps(xp[c]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[v][c] = _mm512_fmadd_ps(av[v], xv, acc[v][c]);
    }
  };
  // Each panel's six rows as a whole 8-float load (two floats of the next
  // k after them, in lanes nobody stores), the second panel's into lanes
  // 8-15: masked loads on every step cost Zen 4 more than the FMAs (the
  // lone last column of 320 x 49 x 960 in place, 1 thread: 26.9 -> 17.3
  // us; of 1280 x 49 x 320 39 -> 24). The panels' very last k, whose load
  // would pass the packed A, goes masked.
  const int64_t whole = k0 + kc == k ? kc - 1 : kc;
  for (int64_t p = 0; p < whole; ++p, a += kMR, xp += x_stride) {
    __m512 av[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const float* lo = a + 2 * v * panel;
      av[v] = load_pair(lo, v + 1 < NV || last_hi_panel ? lo + panel : lo);
    }
    step(av);
  }
  for (int64_t p = whole; p < kc; ++p, a += kMR, xp += x_stride) {
    __m512 av[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      // The second panel's six rows loaded from 8 floats before them, so
      // they land in lanes 8-13.
      av[v] = _mm512_maskz_loadu_ps(0x003F, a + 2 * v * panel);
      av[v] = _mm512_mask_loadu_ps(av[v], v + 1 < NV ? static_cast<__mmask16>(0x3F00) : last_hi,
                                   a + (2 * v + 1) * panel - 8);
    }
    step(av);
  }
  // The block kernel's store, value by value: the k block's sum, then + C
  // (a later k block, or accumulate) or + the row bias, then the epilogue
  // after the last k block, its formulas.
  const bool last = k0 + kc == k_end;
  // (Unrolled: an index into acc not known at compile time kept the
  // accumulators in memory, stored at every k step.)
  alignas(64) float lanes[16];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm512_store_ps(lanes, acc[v][c]);
      for (int h = 0; h < 2 && 2 * v + h < np; ++h) {
        store_column_panel(lanes + 8 * h, ip + 2 * v + h, m, y + c, ldy, row_bias, add, last, epilogue);
      }
    }
  }
}

// column_avx512 for NC columns: eight panels (four vectors) a step where
// the accumulators fit the 32 registers beside the A vectors (NC <= 6),
// else six; the rest in one smaller step.
template <int NC>
void columns(int64_t ip0, int64_t ip1, int64_t m, int64_t k, int64_t k_begin, int64_t k_end,
             int64_t kc_block, const float* packed_a, const float* x, int64_t x_stride, float* y,
             int64_t ldy, const float* row_bias, bool accumulate, const Epilogue* epilogue) {
  constexpr int64_t kStep = NC <= 6 ? 8 : 6;
  for (int64_t ip = ip0; ip < ip1; ip += kStep) {
    const int64_t np = std::min<int64_t>(kStep, ip1 - ip);
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kc_block) {
      const int64_t kc = std::min(kc_block, k_end - k0);
      const bool add = accumulate || k0 > k_begin;
      switch ((np + 1) / 2) {
        case 4:
          if constexpr (kStep >= 8) {
            column_block<4, NC>(ip, np, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue);
          }
          break;
        case 3: column_block<3, NC>(ip, np, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
        case 2: column_block<2, NC>(ip, np, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
        default: column_block<1, NC>(ip, np, m, k, k_end, k0, kc, packed_a, x, x_stride, y, ldy, row_bias, add, epilogue); break;
      }
    }
  }
}

}  // namespace

void column_avx512(int64_t ip0, int64_t ip1, int64_t m, int64_t k, int64_t k_begin,
                   int64_t k_end, int64_t kc_block,
                   const float* packed_a, const float* x, int64_t x_stride, float* y, int64_t ldy,
                   const float* row_bias, bool accumulate, const Epilogue* epilogue, int64_t cols) {
  for (int64_t c = 0; c < cols; c += 8) {
    const int64_t nc = std::min<int64_t>(8, cols - c);
    const float* xc = x + c;
    float* yc = y + c;
#define KITE_COLUMNS(N)                                                                              \
  case N:                                                                                            \
    columns<N>(ip0, ip1, m, k, k_begin, k_end, kc_block, packed_a, xc, x_stride, yc, ldy, row_bias, \
               accumulate, epilogue);                                                                \
    break;
    switch (nc) {
      KITE_COLUMNS(8)
      KITE_COLUMNS(7)
      KITE_COLUMNS(6)
      KITE_COLUMNS(5)
      KITE_COLUMNS(4)
      KITE_COLUMNS(3)
      KITE_COLUMNS(2)
      default: columns<1>(ip0, ip1, m, k, k_begin, k_end, kc_block, packed_a, xc, x_stride, yc, ldy, row_bias,
                          accumulate, epilogue);
    }
#undef KITE_COLUMNS
  }
}

void row_avx512(int64_t jp0, int64_t jp1, int64_t n, int64_t k, int64_t kc_block, const float* packed_a,
                const float* packed_b, float* c, const float* row_bias, bool accumulate,
                const Epilogue* epilogue) {
  constexpr int64_t kGroup = 8;  // B panels a step: 64 columns, four accumulators
  const float bias = row_bias ? row_bias[0] : 0.0f;
  for (int64_t jp = jp0; jp < jp1; jp += kGroup) {
    const int64_t panels = std::min(kGroup, jp1 - jp);
    const int64_t j = jp * kNR;
    const int64_t cols = std::min(panels * kNR, n - j);
    const int z_count = static_cast<int>((panels + 1) / 2);
    // Past the last panel, a pair's high half reads the low one again
    // (columns nobody stores).
    const float* b[kGroup];
    for (int64_t q = 0; q < kGroup; ++q) b[q] = packed_b + (jp + std::min(q, panels - 1)) * k * kNR;
    for (int64_t k0 = 0; k0 < k; k0 += kc_block) {
      const int64_t kc = std::min(kc_block, k - k0);
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      const float* a = packed_a + k0 * kMR;
      const int64_t o = k0 * kNR;
      for (int64_t p = 0; p < kc; ++p) {
        const __m512 av = _mm512_set1_ps(a[p * kMR]);
        const int64_t at = o + p * kNR;
        if ((p & 7) == 0) {
          // Eight panels read side by side: each one's line a few hundred
          // bytes ahead (one line holds two k rows of a panel).
          for (int q = 0; q < 2 * z_count; ++q) {
            _mm_prefetch(reinterpret_cast<const char*>(b[q] + at + 128), _MM_HINT_T0);
          }
        }
        for (int z = 0; z < 4; ++z) {
          if (z < z_count) acc[z] = _mm512_fmadd_ps(av, load_pair(b[2 * z] + at, b[2 * z + 1] + at), acc[z]);
        }
      }
      const bool add = accumulate || k0 > 0;
      const bool last = k0 + kc == k;
      for (int z = 0; z < z_count; ++z) {
        const int64_t left = cols - 16 * z;
        if (left <= 0) break;
        const __mmask16 m = column_mask(left);
        float* cz = c + j + 16 * z;
        __m512 v = acc[z];
        if (add) {
          v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cz));
        } else if (row_bias) {
          v = _mm512_add_ps(v, _mm512_set1_ps(bias));
        }
        if (last && epilogue) {
          constexpr __mmask16 kAll = 0xFFFF;  // (masked forms: see block)
          if (epilogue->kind == Epilogue::kRelu) {
            v = _mm512_maskz_max_ps(kAll, v, _mm512_setzero_ps());
          } else if (epilogue->kind == Epilogue::kClip) {
            v = _mm512_maskz_max_ps(kAll, _mm512_set1_ps(epilogue->lo), v);
            v = _mm512_maskz_min_ps(kAll, _mm512_set1_ps(epilogue->hi), v);
          }
        }
        _mm512_mask_storeu_ps(cz, m, v);
      }
    }
  }
}

}  // namespace kite::cpu::sgemm::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

namespace kite::cpu::sgemm::detail {

bool cpu_supports_avx512f() { return false; }
void block_kernel_avx512(int, int, int64_t, const float*, const float*, const float* const*, int64_t,
                         int64_t, int64_t, float*, int64_t, int64_t, int64_t, const float*, bool,
                         const Epilogue*, const float*, int64_t) {}
int64_t pack_a_panel_avx512(const float*, int64_t, int64_t, float, float*) { return 0; }
void gemv_panels_avx512(int64_t, int64_t, int64_t, int64_t, const float*, const float*, int64_t,
                        float*, int64_t, const float*, bool, const Epilogue*) {}
void column_avx512(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float*, const float*, int64_t,
                   float*, int64_t, const float*, bool, const Epilogue*, int64_t) {}
void row_avx512(int64_t, int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*,
                const float*, bool, const Epilogue*) {}

}  // namespace kite::cpu::sgemm::detail

#endif
