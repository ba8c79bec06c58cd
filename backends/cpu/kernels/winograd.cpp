// Winograd F(4x4, 3x3) and F(2x2, 3x3): the choice, the plan, the weight
// transform, and the three steps of a run (input transform, a GEMM per
// point, output transform) per block of tiles.
#include "winograd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KITE_WG_VECTOR 1
#else
#define KITE_WG_VECTOR 0
#endif

namespace kite::cpu::winograd {

// The row gathers and scatters by shuffles (F(4x4)'s, F(2x2)'s): the x86
// levels have their own (below, found first from inside their namespaces);
// the others copy lane by lane. Each returns the lanes it filled (gathers:
// lanes past the count included, as zeros) or wrote (scatters), one bit a
// lane; input_tiles and output_tiles copy the rest lane by lane.
inline uint32_t gather_strip(const Conv&, const float*, int64_t, int64_t, float (*)[kLanes]) {
  return 0;
}
inline uint32_t scatter_strip(const Conv&, int64_t, int64_t, const float (*)[kLanes], float*) {
  return 0;
}
inline uint32_t gather_strip2(const Conv&, const float*, int64_t, int64_t, float (*)[kLanes]) {
  return 0;
}
inline uint32_t scatter_strip2(const Conv&, int64_t, int64_t, const float (*)[kLanes], float*) {
  return 0;
}

#if KITE_WG_VECTOR
namespace portable {
#include "winograd_impl.inc"
}  // namespace portable
#endif

}  // namespace kite::cpu::winograd

// The x86 levels: the same source with the instructions enabled by a pragma
// after every include (see sgemm_avx512.cpp for why).
#if KITE_WG_VECTOR && defined(__x86_64__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace kite::cpu::winograd::avx2 {

// The gathers and scatters eight lanes (a half of the sixteen) at a time by
// shuffles within 128-bit halves (AVX2 has no two-source permute across the
// whole register). A half whose tiles span tile rows is done run by run,
// each blended in by its lanes. Measured on an AMD EPYC (Zen 3), 1 thread:
// unet_small (all Winograd F(4x4) but its stem) 10.4 -> 9.3 ms, best of
// alternating runs; the lane-by-lane copies were 34% of its samples.
//
// Lane l's column j of a half's tiles is row[base + Tile * l + j]: a
// window of 8 * Tile + 2 floats of one input row (the tiles overlap by two
// columns). Masked, only row[lo .. hi) is read and the rest is zero (the
// padding, and columns of lanes another run fills): the loads wholly
// inside plain, wholly outside none, the one or two across an edge by
// vmaskmovps. (A zero-padded copy of the window instead, memset and
// memcpy, cost more than the shuffles: its 16-byte reloads of the copy's
// stores could not be forwarded.)
template <bool Masked>
inline __m128 load4(const float* row, int64_t x, int64_t lo, int64_t hi) {
  if (!Masked || (x >= lo && x + 4 <= hi)) {
    return _mm_loadu_ps(row + x);
  } else if (x + 4 <= lo || x >= hi) {
    return _mm_setzero_ps();
  } else {
    const __m128i at = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(x)), _mm_setr_epi32(0, 1, 2, 3));
    const __m128i in = _mm_and_si128(_mm_cmpgt_epi32(at, _mm_set1_epi32(static_cast<int>(lo - 1))),
                                     _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(hi)), at));
    // (The address of masked-off floats may lie outside the row: formed
    // without pointer arithmetic past it.)
    const float* p = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) +
                                                    static_cast<uintptr_t>(x * 4));
    return _mm_maskload_ps(p, in);
  }
}
template <bool Masked>
inline __m256 load1(const float* row, int64_t x, int64_t lo, int64_t hi) {
  if (Masked && (x < lo || x >= hi)) return _mm256_setzero_ps();
  return _mm256_broadcast_ss(row + x);
}

// F(4x4): r_k = (columns 4k.., 16 + 4k..) holds lanes k and k + 4, so a
// 4x4 transpose in each 128-bit half gives columns 0..3 of lanes 0..7 in
// order; columns 4 and 5 are columns 0 and 1 of the next lane.
template <bool Masked>
inline void columns4(const float* row, int64_t base, int64_t lo, int64_t hi, __m256* c) {
  __m256 r[4];
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(load4<Masked>(row, base + 4 * k, lo, hi)),
                                load4<Masked>(row, base + 16 + 4 * k, lo, hi), 1);
  }
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  c[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  c[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  c[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  c[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  c[4] = _mm256_blend_ps(_mm256_permutevar8x32_ps(c[0], next), load1<Masked>(row, base + 32, lo, hi), 0x80);
  c[5] = _mm256_blend_ps(_mm256_permutevar8x32_ps(c[1], next), load1<Masked>(row, base + 33, lo, hi), 0x80);
}

// F(2x2): columns 0 and 1 are the even and odd floats of the window's first
// 16, columns 2 and 3 those of the next lane.
template <bool Masked>
inline void columns2(const float* row, int64_t base, int64_t lo, int64_t hi, __m256* c) {
  __m256 a, b;
  a = _mm256_insertf128_ps(_mm256_castps128_ps256(load4<Masked>(row, base, lo, hi)),
                           load4<Masked>(row, base + 4, lo, hi), 1);
  b = _mm256_insertf128_ps(_mm256_castps128_ps256(load4<Masked>(row, base + 8, lo, hi)),
                           load4<Masked>(row, base + 12, lo, hi), 1);
  // shuffle_ps leaves the 64-bit pairs in order 0, 2, 1, 3.
  const __m256d ev = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
  const __m256d od = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  c[0] = _mm256_castpd_ps(_mm256_permute4x64_pd(ev, _MM_SHUFFLE(3, 1, 2, 0)));
  c[1] = _mm256_castpd_ps(_mm256_permute4x64_pd(od, _MM_SHUFFLE(3, 1, 2, 0)));
  const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  c[2] = _mm256_blend_ps(_mm256_permutevar8x32_ps(c[0], next), load1<Masked>(row, base + 16, lo, hi), 0x80);
  c[3] = _mm256_blend_ps(_mm256_permutevar8x32_ps(c[1], next), load1<Masked>(row, base + 17, lo, hi), 0x80);
}

// The inverse for one output row: column j of lanes 0..7 in c[j] to
// p[Tile * l + j], 8 * Tile floats.
inline void rows4(const __m256* c, float* p) {
  const __m256 t0 = _mm256_unpacklo_ps(c[0], c[1]), t1 = _mm256_unpackhi_ps(c[0], c[1]);
  const __m256 t2 = _mm256_unpacklo_ps(c[2], c[3]), t3 = _mm256_unpackhi_ps(c[2], c[3]);
  // o_k: lane k in the low half, lane k + 4 in the high one.
  const __m256 o0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 o1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 o2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 o3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(p, _mm256_permute2f128_ps(o0, o1, 0x20));
  _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(o2, o3, 0x20));
  _mm256_storeu_ps(p + 16, _mm256_permute2f128_ps(o0, o1, 0x31));
  _mm256_storeu_ps(p + 24, _mm256_permute2f128_ps(o2, o3, 0x31));
}

inline void rows2(const __m256* c, float* p) {
  const __m256 lo = _mm256_unpacklo_ps(c[0], c[1]), hi = _mm256_unpackhi_ps(c[0], c[1]);
  _mm256_storeu_ps(p, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

template <int Tile, bool Masked>
inline void columns(const float* row, int64_t base, int64_t lo, int64_t hi, __m256* c) {
  if constexpr (Tile == 4) columns4<Masked>(row, base, lo, hi, c);
  if constexpr (Tile == 2) columns2<Masked>(row, base, lo, hi, c);
}
template <int Tile>
inline void rows(const __m256* c, float* p) {
  if constexpr (Tile == 4) rows4(c, p);
  if constexpr (Tile == 2) rows2(c, p);
}

inline __m256 lanes_mask(int64_t a, int64_t b) {  // lanes [a, b) of 8
  const __m256i at = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(a)), at),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(b)), at));
  return _mm256_castsi256_ps(in);
}

// Tiles first + l0 .. of a half: lanes [a, b) lie in one tile row (ty);
// lane l's tile column is tx0 + l (tx0 may be negative for a run that
// starts later in the half).
struct Run {
  int64_t a, b, ty, tx0;
};
inline Run run_at(const Conv& cv, int64_t first, int64_t a, int64_t n) {
  const int64_t ty = first / cv.tiles_w, tx = first % cv.tiles_w;
  return {a, std::min<int64_t>(n, a + cv.tiles_w - tx), ty, tx - a};
}

template <int Tile>
uint32_t gather_halves(const Conv& cv, const float* xc, int64_t first, int64_t count,
                       float (*d)[kLanes]) {
  constexpr int Alpha = Tile + 2, Span = 8 * Tile + 2;
  const int64_t W = cv.in_w, H = cv.in_h;
  for (int64_t l0 = 0; l0 < kLanes; l0 += 8) {
    const int64_t n = std::max<int64_t>(0, std::min<int64_t>(8, count - l0));
    const bool whole = n == 8 && run_at(cv, first + l0, 0, n).b == 8;
    if (!whole) {  // lanes of other runs, and lanes past the count, are zero
      for (int q = 0; q < Alpha * Alpha; ++q) _mm256_store_ps(d[q] + l0, _mm256_setzero_ps());
    }
    for (int64_t a = 0; a < n;) {
      const Run run = run_at(cv, first + l0 + a, a, n);
      const int64_t base = run.tx0 * Tile - cv.pad_w;  // window's first column
      const int64_t lo = std::max<int64_t>(0, base + Tile * run.a);
      const int64_t hi = std::min<int64_t>(W, base + Tile * (run.b - 1) + Alpha);
      const bool direct = base >= 0 && base + Span <= W;  // other lanes' columns: blended off
      const __m256 mask = lanes_mask(run.a, run.b);
      for (int i = 0; i < Alpha; ++i) {
        const int64_t y = run.ty * Tile - cv.pad_h + i;
        __m256 c[Alpha];
        if (y < 0 || y >= H) {  // a padding row: zeros
          if (!whole) continue;
          for (int j = 0; j < Alpha; ++j) c[j] = _mm256_setzero_ps();
        } else if (direct) {
          columns<Tile, false>(xc + y * W, base, lo, hi, c);
        } else {
          columns<Tile, true>(xc + y * W, base, lo, hi, c);
        }
        for (int j = 0; j < Alpha; ++j) {
          float* at = d[i * Alpha + j] + l0;
          _mm256_store_ps(at, whole ? c[j] : _mm256_blendv_ps(_mm256_load_ps(at), c[j], mask));
        }
      }
      a = run.b;
    }
  }
  return 0xFFFFu;
}

// The output rows of a half: straight to the plane when its eight tiles
// are one run inside it; else (runs across tile rows, the plane's right
// edge) to a buffer, then each run's part of it copied (masked stores cost
// more on Zen 3 than the copies).
template <int Tile>
uint32_t scatter_halves(const Conv& cv, int64_t first, int64_t count, const float (*y)[kLanes],
                        float* ym) {
  const int64_t OH = cv.out_h, OW = cv.out_w;
  for (int64_t l0 = 0; l0 < count; l0 += 8) {
    const int64_t n = std::min<int64_t>(8, count - l0);
    for (int i = 0; i < Tile; ++i) {
      __m256 c[Tile];
      for (int j = 0; j < Tile; ++j) c[j] = _mm256_load_ps(y[i * Tile + j] + l0);
      alignas(32) float buf[8 * Tile];
      bool in_buf = false;
      for (int64_t a = 0; a < n;) {
        const Run run = run_at(cv, first + l0 + a, a, n);
        a = run.b;
        const int64_t oy = run.ty * Tile + i;
        if (oy >= OH) continue;
        float* row = ym + oy * OW;
        const int64_t base = run.tx0 * Tile;  // output column of lane 0's column 0
        if (run.a == 0 && run.b == 8 && base + 8 * Tile <= OW) {
          rows<Tile>(c, row + base);
          continue;
        }
        if (!in_buf) rows<Tile>(c, buf);
        in_buf = true;
        const int64_t lo = base + Tile * run.a, hi = std::min<int64_t>(OW, base + Tile * run.b);
        if (hi > lo) std::memcpy(row + lo, buf + (lo - base), (hi - lo) * sizeof(float));
      }
    }
  }
  return count >= 32 ? ~0u : (1u << count) - 1u;
}

static uint32_t gather_strip(const Conv& cv, const float* xc, int64_t first, int64_t count,
                             float (*d)[kLanes]) {
  return gather_halves<4>(cv, xc, first, count, d);
}
static uint32_t gather_strip2(const Conv& cv, const float* xc, int64_t first, int64_t count,
                              float (*d)[kLanes]) {
  return gather_halves<2>(cv, xc, first, count, d);
}
static uint32_t scatter_strip(const Conv& cv, int64_t first, int64_t count,
                              const float (*y)[kLanes], float* ym) {
  return scatter_halves<4>(cv, first, count, y, ym);
}
static uint32_t scatter_strip2(const Conv& cv, int64_t first, int64_t count,
                               const float (*y)[kLanes], float* ym) {
  return scatter_halves<2>(cv, first, count, y, ym);
}

#include "winograd_impl.inc"
}  // namespace kite::cpu::winograd::avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif
namespace kite::cpu::winograd::avx512 {

// The input tiles of lanes 0 .. count-1 (tiles first ...) into d[i * 6 +
// j][lane] with shuffles instead of 36 scalar stores per lane, when they lie
// in at most kMaxRuns tile rows (false, nothing written, otherwise).
//
// Within one tile row, lane l's column j is x = base + 4l + j: a window of
// 66 floats of the input row, read as four masked 16-float loads (the mask
// drops what is outside the row: padding reads zero) and two scalars, then
// split by x mod 4 with two-source permutes; columns 4 and 5 are columns 0
// and 1 of the next lane. A run of lanes in the next tile row is the same
// with its own base, blended in by lane mask.
constexpr int64_t kMaxRuns = 6;

// The lanes of tiles first .. first + count - 1 as runs within tile rows:
// run r is lanes [lane0[r], lane1[r]) of tile row ty0 + r, whose lane l
// starts at output column (l - lane0[r] + its first tile's column) * tile,
// that is at tile * l + col[r]. 0 when there are more than kMaxRuns.
static int64_t tile_runs(const Conv& cv, int64_t first, int64_t count, int64_t* ty0, int64_t* lane0,
                  int64_t* lane1, int64_t* col) {
  *ty0 = first / cv.tiles_w;
  const int64_t tx0 = first % cv.tiles_w;
  const int64_t runs = 1 + (tx0 + count - 1) / cv.tiles_w;
  if (runs > kMaxRuns) return 0;
  for (int64_t r = 0, l = 0; r < runs; ++r) {
    const int64_t tx = r == 0 ? tx0 : 0;
    lane0[r] = l;
    lane1[r] = std::min(count, l + cv.tiles_w - tx);
    col[r] = (tx - l) * cv.tile;
    l = lane1[r];
  }
  return runs;
}

inline __mmask16 bits(int64_t lo, int64_t hi) {  // bits [lo, hi) of 16, clamped
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 16);
  return hi > lo ? static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u)) : 0;
}

// An address that a masked access may use although it is outside the
// array (masked-off elements are not touched): formed without pointer
// arithmetic past the array.
template <typename T>
inline T* offset(T* p, int64_t elements) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) +
                              static_cast<uintptr_t>(elements * static_cast<int64_t>(sizeof(T))));
}

// tile_runs with base[r] the input column of lane 0 (the output column
// less the left padding), for the gathers.
static int64_t input_runs(const Conv& cv, int64_t first, int64_t count, int64_t* ty0,
                          int64_t* lane0, int64_t* lane1, int64_t* base) {
  const int64_t runs = tile_runs(cv, first, count, ty0, lane0, lane1, base);
  for (int64_t r = 0; r < runs; ++r) base[r] -= cv.pad_w;
  return runs;
}

static uint32_t gather_strip(const Conv& cv, const float* xc, int64_t first, int64_t count,
                             float (*d)[kLanes]) {
  const int64_t W = cv.in_w, H = cv.in_h;
  int64_t ty0 = 0, lane0[kMaxRuns], lane1[kMaxRuns], base[kMaxRuns];
  const int64_t runs = input_runs(cv, first, count, &ty0, lane0, lane1, base);
  if (runs == 0) return 0;
  alignas(64) static const int32_t kIdx[4][16] = {
      {0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28},
      {1, 5, 9, 13, 17, 21, 25, 29, 1, 5, 9, 13, 17, 21, 25, 29},
      {2, 6, 10, 14, 18, 22, 26, 30, 2, 6, 10, 14, 18, 22, 26, 30},
      {3, 7, 11, 15, 19, 23, 27, 31, 3, 7, 11, 15, 19, 23, 27, 31}};
  for (int64_t i = 0; i < kAlpha; ++i) {
    __m512 e[kAlpha];
    for (int j = 0; j < kAlpha; ++j) e[j] = _mm512_setzero_ps();
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t y = (ty0 + r) * kTile - cv.pad_h + i;
      if (y < 0 || y >= H) continue;  // a padding row: zeros
      const float* row = xc + y * W;
      const int64_t b = base[r];
      __m512 a[4];
      for (int q = 0; q < 4; ++q) {
        const int64_t at = b + 16 * q;
        a[q] = _mm512_maskz_loadu_ps(bits(-at, W - at), offset(row, at));
      }
      const float x64 = b + 64 >= 0 && b + 64 < W ? row[b + 64] : 0.0f;
      const float x65 = b + 65 >= 0 && b + 65 < W ? row[b + 65] : 0.0f;
      __m512 ph[4];
      for (int k = 0; k < 4; ++k) {
        const __m512i idx = _mm512_load_si512(kIdx[k]);
        ph[k] = _mm512_mask_blend_ps(static_cast<__mmask16>(0xFF00),
                                     _mm512_permutex2var_ps(a[0], idx, a[1]),
                                     _mm512_permutex2var_ps(a[2], idx, a[3]));
      }
      // (Zero-masked forms with all-ones masks: the plain ones pass an
      // undefined operand that GCC 12 warns about, as in sgemm_avx512.cpp.)
      constexpr __mmask16 kAll = 0xFFFF;
      const __m512i p0 = _mm512_castps_si512(ph[0]), p1 = _mm512_castps_si512(ph[1]);
      const __m512i n0 = _mm512_castps_si512(_mm512_set1_ps(x64));
      const __m512i n1 = _mm512_castps_si512(_mm512_set1_ps(x65));
      const __m512 e4 = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(kAll, n0, p0, 1));
      const __m512 e5 = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(kAll, n1, p1, 1));
      const __mmask16 lanes = bits(lane0[r], lane1[r]);
      for (int k = 0; k < 4; ++k) e[k] = _mm512_mask_mov_ps(e[k], lanes, ph[k]);
      e[4] = _mm512_mask_mov_ps(e[4], lanes, e4);
      e[5] = _mm512_mask_mov_ps(e[5], lanes, e5);
    }
    for (int j = 0; j < kAlpha; ++j) _mm512_store_ps(d[i * kAlpha + j], e[j]);
  }
  return 0xFFFFu;
}

// F(2x2)'s: lane l's column j is x = base + 2l + j, a window of 34 floats
// (two masked loads and two scalars) split into even and odd columns;
// columns 2 and 3 are columns 0 and 1 of the next lane.
static uint32_t gather_strip2(const Conv& cv, const float* xc, int64_t first, int64_t count,
                              float (*d)[kLanes]) {
  const int64_t W = cv.in_w, H = cv.in_h;
  int64_t ty0 = 0, lane0[kMaxRuns], lane1[kMaxRuns], base[kMaxRuns];
  const int64_t runs = input_runs(cv, first, count, &ty0, lane0, lane1, base);
  if (runs == 0) return 0;
  alignas(64) static const int32_t kEvenOdd[2][16] = {
      {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
      {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}};
  const __m512i even = _mm512_load_si512(kEvenOdd[0]), odd = _mm512_load_si512(kEvenOdd[1]);
  constexpr __mmask16 kAll = 0xFFFF;  // (masked forms: see gather_strip)
  for (int64_t i = 0; i < 4; ++i) {
    __m512 e[4];
    for (int j = 0; j < 4; ++j) e[j] = _mm512_setzero_ps();
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t y = (ty0 + r) * 2 - cv.pad_h + i;
      if (y < 0 || y >= H) continue;  // a padding row: zeros
      const float* row = xc + y * W;
      const int64_t b = base[r];
      const __m512 a0 = _mm512_maskz_loadu_ps(bits(-b, W - b), offset(row, b));
      const __m512 a1 = _mm512_maskz_loadu_ps(bits(-(b + 16), W - (b + 16)), offset(row, b + 16));
      const float x32 = b + 32 >= 0 && b + 32 < W ? row[b + 32] : 0.0f;
      const float x33 = b + 33 >= 0 && b + 33 < W ? row[b + 33] : 0.0f;
      const __m512 ev = _mm512_permutex2var_ps(a0, even, a1), od = _mm512_permutex2var_ps(a0, odd, a1);
      const __m512i n0 = _mm512_castps_si512(_mm512_set1_ps(x32));
      const __m512i n1 = _mm512_castps_si512(_mm512_set1_ps(x33));
      const __m512 e2 = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(kAll, n0, _mm512_castps_si512(ev), 1));
      const __m512 e3 = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(kAll, n1, _mm512_castps_si512(od), 1));
      const __mmask16 lanes = bits(lane0[r], lane1[r]);
      e[0] = _mm512_mask_mov_ps(e[0], lanes, ev);
      e[1] = _mm512_mask_mov_ps(e[1], lanes, od);
      e[2] = _mm512_mask_mov_ps(e[2], lanes, e2);
      e[3] = _mm512_mask_mov_ps(e[3], lanes, e3);
    }
    for (int j = 0; j < 4; ++j) _mm512_store_ps(d[i * 4 + j], e[j]);
  }
  return 0xFFFFu;
}

// The inverse for the output: y[i * Tile + j][lane] to row i, column j of
// the lane's output tile, in at most kMaxRuns tile rows. Per output row, the
// Tile columns' vectors are interleaved into 16 * Tile consecutive floats
// (two-source permutes: pairs of columns, then for F(4x4) pairs of pairs)
// and stored with masks that keep each run inside its lanes and the plane.
template <int Tile>
bool scatter_rows(const Conv& cv, int64_t first, int64_t count, const float (*y)[kLanes],
                  float* ym) {
  int64_t ty0 = 0, lane0[kMaxRuns], lane1[kMaxRuns], col[kMaxRuns];
  const int64_t runs = tile_runs(cv, first, count, &ty0, lane0, lane1, col);
  if (runs == 0) return false;
  // pair[h][2l + b] = y[b][8h + l]; quad[q][m] = column m % 4 of lane 4q + m / 4.
  alignas(64) static const int32_t kPair[2][16] = {
      {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23},
      {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}};
  alignas(64) static const int32_t kQuad[2][16] = {
      {0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23},
      {8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31}};
  const __m512i pair0 = _mm512_load_si512(kPair[0]), pair1 = _mm512_load_si512(kPair[1]);
  const __m512i quad0 = _mm512_load_si512(kQuad[0]), quad1 = _mm512_load_si512(kQuad[1]);
  const int64_t OH = cv.out_h, OW = cv.out_w;
  for (int64_t i = 0; i < Tile; ++i) {
    __m512 out[Tile];
    const __m512 c0 = _mm512_load_ps(y[i * Tile]), c1 = _mm512_load_ps(y[i * Tile + 1]);
    const __m512 p01[2] = {_mm512_permutex2var_ps(c0, pair0, c1), _mm512_permutex2var_ps(c0, pair1, c1)};
    if constexpr (Tile == 2) {
      out[0] = p01[0];
      out[1] = p01[1];
    } else {
      const __m512 c2 = _mm512_load_ps(y[i * Tile + 2]), c3 = _mm512_load_ps(y[i * Tile + 3]);
      const __m512 p23[2] = {_mm512_permutex2var_ps(c2, pair0, c3), _mm512_permutex2var_ps(c2, pair1, c3)};
      for (int q = 0; q < 4; ++q) {
        out[q] = _mm512_permutex2var_ps(p01[q / 2], q % 2 ? quad1 : quad0, p23[q / 2]);
      }
    }
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t oy = (ty0 + r) * Tile + i;
      if (oy >= OH) continue;
      float* row = ym + oy * OW;
      for (int q = 0; q < Tile; ++q) {
        // Elements 16q + m: lane (16q + m) / Tile in the run, column col + 16q + m.
        const int64_t e = 16 * q, at = col[r] + e;
        const __mmask16 m = bits(Tile * lane0[r] - e, Tile * lane1[r] - e) & bits(-at, OW - at);
        _mm512_mask_storeu_ps(offset(row, at), m, out[q]);
      }
    }
  }
  return true;
}

static uint32_t scatter_strip(const Conv& cv, int64_t first, int64_t count,
                              const float (*y)[kLanes], float* ym) {
  return scatter_rows<4>(cv, first, count, y, ym) ? 0xFFFFu : 0u;
}
static uint32_t scatter_strip2(const Conv& cv, int64_t first, int64_t count,
                               const float (*y)[kLanes], float* ym) {
  return scatter_rows<2>(cv, first, count, y, ym) ? 0xFFFFu : 0u;
}

#include "winograd_impl.inc"
}  // namespace kite::cpu::winograd::avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#define KITE_WG_X86 1
#else
#define KITE_WG_X86 0
#endif

namespace kite::cpu::winograd {

namespace {

// F(4x4) from this many of its tiles (a 13x13 image and up): below, its
// weights (4x the bytes of the 3x3 ones) are streamed for too few tiles,
// and F(2x2) (1.8x the bytes) does as well or better. Measured on resnet18
// (Intel Xeon, AVX-512, 1 thread): the 14x14 layer3 convolutions (16 tiles
// of 4x4) 1.55 ms as F(4x4), 1.55-1.6 as F(2x2) (reading 4 MB of weights
// instead of 9); the 7x7 layer4 ones (4 tiles) 2.9 ms on im2col, 4.9 as
// F(4x4), 2.05 as F(2x2). On an AMD EPYC (Zen 2, AVX2) the 16-tile layers
// run faster as F(4x4) (kite-run --profile, KITE_CPU_WINOGRAD=4 against
// F(2x2)): resnet18's layer3 1.86-2.0 -> 1.45-1.61 ms each at 1 thread,
// 1.15-1.35 -> 0.88-1.0 at 2; squeezenet1_1's 13x13 layers 0.38 -> 0.30
// and 0.61 -> 0.47 ms at 1 thread. Hence 16, not 32 as before.
constexpr int64_t kMinTiles4 = 16;
// F(2x2) from this many of its tiles (an 8x8 image, 7x7 rounded up).
constexpr int64_t kMinTiles2 = 16;
// The block's transformed input and GEMM output (points * (channels +
// out_channels) floats per tile) are kept near this size, inside L2: half
// the L2 of the core (the weights and the input rows stream through the
// rest), at most 128K floats (512 KiB, the size measured on Zen 4 and the
// Xeons, whose L2 is 1-2 MiB). On a Zen 3 (512 KiB of L2) 128K floats
// spilled to L3: unet_small at 2 threads 5.7 -> 4.6 ms with 64K, resnet18
// 19.3 -> 17.2, squeezenet1_1 7.0 -> 6.8 (1 thread: within 2%; best of
// alternating runs).
constexpr int64_t kBlockFloatsMost = 128 * 1024;
int64_t block_floats_budget() {
  static const int64_t floats = [] {
    int64_t l2 = 0;
#if defined(_SC_LEVEL2_CACHE_SIZE)
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    if (l2 <= 0) return kBlockFloatsMost;  // unknown: as measured before
    return std::max<int64_t>(16 * 1024, std::min<int64_t>(kBlockFloatsMost, l2 / 2 / 4));
  }();
  return floats;
}

using InputFn = void (*)(const Conv&, const float*, int64_t, int64_t, int64_t, int64_t, float*,
                         int64_t);
using OutputFn = void (*)(const Conv&, const float*, int64_t, int64_t, int64_t, float,
                          const sgemm::Epilogue&, float*);

struct Level {
  InputFn input;
  OutputFn output;
};

template <int Tile>
Level level_for() {
#if KITE_WG_X86
  switch (sgemm::micro_kernel_in_use()) {
    case sgemm::MicroKernel::kAvx512:
      return {avx512::input_tiles<Tile>, avx512::output_tiles<Tile>};
    case sgemm::MicroKernel::kAvx2Fma:
      return {avx2::input_tiles<Tile>, avx2::output_tiles<Tile>};
    default:
      break;
  }
#endif
#if KITE_WG_VECTOR
  return {portable::input_tiles<Tile>, portable::output_tiles<Tile>};
#else
  return {nullptr, nullptr};
#endif
}

Level level(int64_t tile) { return tile == 2 ? level_for<2>() : level_for<4>(); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t tile_for(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels) {
  // KITE_CPU_WINOGRAD=off: im2col + GEMM for every convolution (A/B
  // measurements; files packed for Winograd then pack the weights at load).
  // =4 or =2: that tile size wherever Winograd applies.
  static const int forced = [] {
    const char* env = std::getenv("KITE_CPU_WINOGRAD");
    if (env == nullptr) return -1;
    if (std::strcmp(env, "off") == 0) return 0;
    if (std::strcmp(env, "4") == 0) return 4;
    if (std::strcmp(env, "2") == 0) return 2;
    return -1;
  }();
  if (!KITE_WG_VECTOR || forced == 0) return 0;
  if (g.input.size() != 2 || g.output.size() != 2 || g.kernel.size() != 2) return 0;
  for (size_t i = 0; i < 2; ++i) {
    if (g.kernel[i] != 3 || g.strides[i] != 1 || g.dilations[i] != 1) return 0;
  }
  if (g.group != 1 || channels < 2 || out_channels < 1) return 0;  // one channel: direct loop
  auto tiles = [&](int64_t t) { return ceil_div(g.output[0], t) * ceil_div(g.output[1], t); };
  if (forced > 0) return tiles(forced) >= 1 ? forced : 0;
  if (tiles(4) >= kMinTiles4) return 4;
  if (tiles(2) >= kMinTiles2) return 2;
  return 0;
}

const char* layout_name(int64_t tile) { return tile == 2 ? "wino23-a6" : "wino43-a6"; }

int64_t packed_weight_floats(int64_t tile, int64_t out_channels, int64_t channels) {
  return points(tile) * sgemm::packed_a_floats(out_channels, channels);
}

void pack_weights(int64_t tile, const float* w, int64_t out_channels, int64_t channels, float* dst) {
  // G (alpha x 3): F(4x4) for the points 0, 1, -1, 2, -2 and infinity;
  // F(2x2) for 0, 1, -1 and infinity.
  static const double G4[6][3] = {{1.0 / 4, 0, 0},
                                  {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                  {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                  {0, 0, 1}};
  static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const int alpha = static_cast<int>(tile + 2);
  auto G = [&](int i, int j) { return tile == 2 ? G2[i][j] : G4[i][j]; };
  const int64_t pairs = out_channels * channels;
  const int64_t n_points = points(tile);
  std::vector<float> u(static_cast<size_t>(n_points * pairs));  // point-major
  for (int64_t mc = 0; mc < pairs; ++mc) {
    const float* g = w + mc * 9;
    double gt[6][3];  // G g
    for (int i = 0; i < alpha; ++i) {
      for (int j = 0; j < 3; ++j) gt[i][j] = G(i, 0) * g[j] + G(i, 1) * g[3 + j] + G(i, 2) * g[6 + j];
    }
    for (int i = 0; i < alpha; ++i) {
      for (int j = 0; j < alpha; ++j) {  // (G g) G^T
        const double s = gt[i][0] * G(j, 0) + gt[i][1] * G(j, 1) + gt[i][2] * G(j, 2);
        u[static_cast<size_t>((i * alpha + j) * pairs + mc)] = static_cast<float>(s);
      }
    }
  }
  const int64_t per_point = sgemm::packed_a_floats(out_channels, channels);
  for (int64_t p = 0; p < n_points; ++p) {
    sgemm::pack_a(u.data() + p * pairs, channels, 1, out_channels, channels, 1.0f,
                  dst + p * per_point, nullptr);
  }
}

Conv::Conv(int64_t tile_, int64_t channels_, int64_t out_channels_, int64_t in_h_, int64_t in_w_,
           int64_t out_h_, int64_t out_w_, int64_t pad_h_, int64_t pad_w_)
    : tile(tile_), point_count(points(tile_)), channels(channels_), out_channels(out_channels_),
      in_h(in_h_), in_w(in_w_), out_h(out_h_), out_w(out_w_), pad_h(pad_h_), pad_w(pad_w_) {
  tiles_h = ceil_div(out_h, tile);
  tiles_w = ceil_div(out_w, tile);
  tiles = tiles_h * tiles_w;
  // As many tiles as fit, then the blocks evened out (49 tiles at most 48
  // a block: two of 32, not 48 and 1). Every block reads all of U, so
  // blocks may hold as many floats as U does when that is more: resnet18's
  // 14x14 layer3 (U 4 MB as F(2x2)) in one block, not four.
  const int64_t per_tile = point_count * (channels + out_channels);
  const int64_t budget = std::max(block_floats_budget(), point_count * channels * out_channels);
  const int64_t most = std::max<int64_t>(kLanes, budget / std::max<int64_t>(per_tile, 1) / kLanes * kLanes);
  const int64_t blocks = ceil_div(tiles, most);
  block = ceil_div(ceil_div(tiles, blocks), kLanes) * kLanes;
}

int64_t Conv::block_floats() const { return point_count * (v_floats() + m_floats()); }

// Whole blocks per thread when there are two blocks a thread at least
// (every block reads all of U: with fewer, the threads share each block's
// steps, and so U). Not where U is over the block budget (half of L2) and
// the layers before split their outputs by channels (planes whose rows are
// not line-aligned: sgemm::splits_columns_by_thread): a block each, every
// thread streams all of U from L3 for each block and reads half of its
// tiles' input from the other core; channel shares read half of U, which
// stays in L2, and transform the input where it lies. squeezenet1_1's 32 ->
// 128 layers on 27x27 (U 576 KB), 2 threads, Zen 2: the layer alone 0.32 ->
// 0.25 ms with the vCPUs ~30 ns apart; fire modules 6-7 1.23-1.27 ->
// 1.09-1.16 ms ~200-400 ns apart. Where the layers before split by pixels
// (unet_small's planes), the blocks keep each thread on the rows it wrote:
// unet_small went 5.8 -> 6.5 ms when it took channel shares too.
bool Conv::blocks_per_worker(int64_t workers) const {
  if (workers <= 1 || ceil_div(tiles, block) < 2 * workers) return false;
  const bool shares_keep_u = !sgemm::splits_columns_by_thread(in_h * in_w) &&
                             packed_weight_floats(tile, out_channels, channels) > block_floats_budget();
  return !(shares_keep_u && ceil_div(out_channels, 2 * sgemm::kMR) >= workers);
}

// Otherwise, when every thread gets a pair of A panels at least, each
// thread takes a share of the output channels (whole pairs: the block
// kernel's 12 rows) over every block, reading only its share of U and
// transforming only its own GEMM outputs. Sharing every step instead, the
// threads read each other's transformed input and GEMM outputs at each
// step (see run for what that cost).
bool Conv::channels_per_worker(int64_t workers) const {
  return workers > 1 && !blocks_per_worker(workers) &&
         ceil_div(out_channels, 2 * sgemm::kMR) >= workers;
}

int64_t Conv::share_floats(int64_t workers) const {
  return point_count * point_stride(ceil_div(ceil_div(out_channels, 2 * sgemm::kMR), workers) * 2 * sgemm::kMR * block);
}

int64_t Conv::rows_share(int64_t workers, int64_t w, int64_t* m0) const {
  const int64_t pairs = ceil_div(out_channels, 2 * sgemm::kMR);
  *m0 = pairs * w / workers * 2 * sgemm::kMR;
  return std::min(out_channels, pairs * (w + 1) / workers * 2 * sgemm::kMR) - *m0;
}

int64_t Conv::workspace_floats(int threads) const {
  const int64_t workers = std::max(1, threads);
  if (blocks_per_worker(workers)) return workers * block_floats();  // a block each
  if (!channels_per_worker(workers)) return block_floats();         // one, shared
  // The transformed input, shared, and the largest share's GEMM outputs
  // for each thread.
  return point_count * v_floats() + workers * share_floats(workers);
}

namespace {

// fn(begin, end) over [0, n): split across the pool, or inline without one.
template <typename F>
void each(ThreadPool* pool, int64_t n, int64_t min_chunk, F&& fn) {
  if (pool) {
    pool->parallel_for(n, min_chunk, fn);
  } else {
    fn(int64_t{0}, n);
  }
}

}  // namespace

void Conv::transform_input(int64_t t0, int64_t n, const float* x, float* v, ThreadPool* pool) const {
  const Level fns = level(tile);
  const int64_t in_plane = in_h * in_w;
  const int64_t groups = ceil_div(n, kLanes);
  each(pool, channels * groups, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t c = i / groups, col = i % groups * kLanes;
      fns.input(*this, x + c * in_plane, c, t0 + col, std::min(kLanes, n - col), col, v,
                v_floats());
    }
  });
}

void Conv::multiply_and_output(int64_t t0, int64_t n, int64_t m0, int64_t rows, const float* u,
                               const float* bias, const sgemm::Epilogue& epilogue, float* y,
                               const float* v, float* mb, ThreadPool* pool) const {
  const Level fns = level(tile);
  const int64_t out_plane = out_h * out_w;
  const int64_t u_point = sgemm::packed_a_floats(out_channels, channels);
  const float* u_rows = u + m0 * channels;  // m0: whole panels of kMR rows
  const int64_t m_point = point_stride(rows * block);  // the GEMM outputs of one point
  const int64_t groups = ceil_div(n, kLanes);
  each(pool, point_count, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      sgemm::gemm_packed(rows, n, channels, u_rows + p * u_point, v + p * v_floats(),
                         mb + p * m_point, block, nullptr, false, nullptr);
    }
  });
  each(pool, rows * groups, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i / groups, col = i % groups * kLanes, m = m0 + r;
      fns.output(*this, mb + r * block + col, m_point, t0 + col, std::min(kLanes, n - col),
                 bias ? bias[m] : 0.0f, epilogue, y + m * out_plane);
    }
  });
}

void Conv::run_block(int64_t t0, int64_t n, const float* x, const float* u, const float* bias,
                     const sgemm::Epilogue& epilogue, float* y, float* scratch,
                     ThreadPool* pool) const {
  float* v = scratch;
  transform_input(t0, n, x, v, pool);
  multiply_and_output(t0, n, 0, out_channels, u, bias, epilogue, y, v, v + point_count * v_floats(),
                      pool);
}

void Conv::run(const float* x, const float* u, const float* bias, const sgemm::Epilogue& epilogue,
               float* y, float* workspace, int slots, ThreadPool& pool) const {
  if (level(tile).input == nullptr) return;  // tile_for() said no: never planned
  const int64_t workers = std::min<int64_t>(pool.size(), std::max(1, slots));
  if (blocks_per_worker(workers)) {
    // Each thread runs whole blocks, all three steps on its own scratch,
    // which stays in its core's L2, with no barrier between the steps. The
    // blocks are the plan's (`block` tiles, a multiple of 16, the last one
    // shorter), claimed in order: each thread's share of them (for_each_task)
    // is the same band of tiles in every layer, and a thread that starts
    // late takes fewer. They were evened out to a multiple of the threads
    // (196 tiles on 2 threads: 14 blocks of 14), but a block costs the GEMMs
    // and transforms of whole 16-tile strips, so 14 tiles cost 16 tiles'
    // time: 13 blocks of 16 (shares of 96 and 100 tiles) ran a 16 -> 64
    // layer on 55x55 0.36-0.41 -> 0.31-0.36 ms, squeezenet1_1 6.2-6.4 ->
    // 6.1-6.2 ms, resnet18 18.1-19.1 -> 18.0-18.3 ms (2 threads, Zen 2).
    const int64_t blocks = ceil_div(tiles, block);
    pool.for_each_task(workers, blocks, [&](int64_t s, int64_t b) {
      const int64_t t0 = b * block, t1 = std::min(tiles, t0 + block);
      run_block(t0, t1 - t0, x, u, bias, epilogue, y, workspace + s * block_floats(), nullptr);
    });
    return;
  }
  if (channels_per_worker(workers)) {
    // The threads share each block's input transform, then each runs the
    // GEMMs and the output transform of its share of the output channels
    // on its own scratch. Sharing those steps too, each thread read half
    // of the GEMMs' inputs and of the output transform's inputs from the
    // other. Measured on a Zen 2 host, 2 threads, four 3x3 layers c -> c
    // on h x w (sharing every step / channel shares), vCPUs ~220 ns apart:
    // c 256 on 14x14 2.90 -> 2.63 ms, 128 on 14x14 0.98 -> 0.93, 64 on
    // 13x13 0.41 -> 0.43, 48 on 13x13 0.29 -> 0.29, squeezenet1_1's fire
    // modules 9-12 (48 or 64 -> 192 or 256 on 13x13) 1.68 -> 1.49; 30 ns
    // apart: 256 on 14x14 2.60 -> 2.50, 48 on 13x13 0.167 -> 0.170, fire
    // modules 9-12 1.01 -> 0.96. (Each thread transforming the input
    // itself, with no barrier, ran those fire modules in 1.43 ms with the
    // vCPUs far apart but 1.05-1.5 near, and c 256 in 3.43.)
    float* v = workspace;
    float* shares = workspace + point_count * v_floats();
    for (int64_t t = 0; t < tiles; t += block) {
      const int64_t n = std::min(block, tiles - t);
      transform_input(t, n, x, v, &pool);
      pool.for_each_task(workers, workers, [&](int64_t s, int64_t w) {
        int64_t m0 = 0;
        const int64_t rows = rows_share(workers, w, &m0);
        multiply_and_output(t, n, m0, rows, u, bias, epilogue, y, v, shares + s * share_floats(workers),
                            nullptr);
      });
    }
    return;
  }
  // Few tiles (many channels, a small image): the threads share each step.
  for (int64_t t = 0; t < tiles; t += block) {
    run_block(t, std::min(block, tiles - t), x, u, bias, epilogue, y, workspace,
              workers > 1 ? &pool : nullptr);
  }
}

}  // namespace kite::cpu::winograd
