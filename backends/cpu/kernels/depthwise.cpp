// Depthwise convolution planes: the ISA levels and the choice between them.
#include "depthwise.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sgemm.h"

#if defined(__GNUC__) || defined(__clang__)
#define KITE_DW_VECTOR 1
#endif

namespace kite::cpu::depthwise {

#if KITE_DW_VECTOR
namespace portable {
#define KITE_DW_LANES 4
#include "depthwise_impl.inc"
#undef KITE_DW_LANES
}  // namespace portable

void detail::plane_portable(const Plane& p, float* scratch) { portable::plane(p, scratch); }
#else
void detail::plane_portable(const Plane& p, float*) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      float acc = p.bias;
      for (int64_t r = 0; r < p.kh; ++r) {
        const int64_t y = oy * p.stride_h - p.pad_h + r * p.dilation_h;
        if (y < 0 || y >= p.h) continue;
        for (int64_t t = 0; t < p.kw; ++t) {
          const int64_t x = ox * p.stride_w - p.pad_w + t;
          if (x >= 0 && x < p.w) acc += p.weights[r * p.kw + t] * p.in[y * p.w + x];
        }
      }
      p.out[oy * p.ow + ox] = acc;
    }
  }
}
#endif

// The x86 levels: the same source with the instructions enabled by a
// pragma (after every include, see sgemm_avx512.cpp for why).
#if KITE_DW_VECTOR && defined(__x86_64__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
#define KITE_DW_LANES 8
#include "depthwise_impl.inc"
#undef KITE_DW_LANES

#include "transpose8.inc"

inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(n, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Plane::Act's formulas (max_ps / min_ps return their second operand
// unless the first is strictly greater / smaller), with the activation and
// its bounds read once per call of pixels8: the stores go through may-alias
// vector types, so reading c.act beside them read it again after each.
struct Finish8 {
  Plane::Act act;
  __m256 lo, hi;
  explicit Finish8(const Channels& c)
      : act(c.act), lo(_mm256_set1_ps(c.lo)), hi(_mm256_set1_ps(c.hi)) {}
  __m256 operator()(__m256 v) const {
    if (act == Plane::kRelu) return _mm256_max_ps(v, _mm256_setzero_ps());
    if (act == Plane::kClip) return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    return v;
  }
};

// Where pixels8 finds the padded input row of tap row ky, at column at:
// a band's rows one after the other, or a ring's rows by pointer.
struct BandRows {
  const float* first;  // tap row 0
  int64_t row;         // floats between padded rows
  const float* operator()(int64_t ky, int64_t at) const { return first + ky * row + at; }
};
struct RingRows {
  const float* const* rows;  // per tap row
  const float* operator()(int64_t ky, int64_t at) const { return rows[ky] + at; }
};

// The AVX-512 path's pixels at eight lanes: Q output pixels of a row, Q
// accumulator chains, the weights read from wv (memory: with Q chains
// they do not all fit the 16 registers); rows(ky, at) the first window's
// tap rows.
template <int Q, typename Rows>
void pixels8(const Channels& c, const Rows& rows, int64_t at, int64_t sx, const __m256* wv, __m256 bias,
             float* o) {
  __m256 acc[Q];
  for (int q = 0; q < Q; ++q) acc[q] = bias;
  for (int64_t ky = 0; ky < c.kh; ++ky) {
    const float* r = rows(ky, at);
    for (int64_t kx = 0; kx < c.kw; ++kx) {
      const __m256 w = wv[ky * c.kw + kx];
      const float* at = r + kx * 8;
      for (int q = 0; q < Q; ++q) acc[q] = _mm256_fmadd_ps(_mm256_loadu_ps(at + q * sx), w, acc[q]);
    }
  }
  const Finish8 finish(c);
  for (int q = 0; q < Q; ++q) _mm256_storeu_ps(o + q * 8, finish(acc[q]));
}

// avx512::channels at eight lanes, for eight of the block's channels
// (lane0: the first of them within the block of sixteen): the same bands,
// padded buffer, taps in the same order (the same bits per output) and
// tile hook, with 8x8 transposes.
void channels8(const Channels& c, int64_t lane0, float* scratch) {
  const int64_t wp = padded_cols(c), band = band_rows(c);
  const __m256 zero = _mm256_setzero_ps();
  const int64_t taps = c.kh * c.kw;
  const int64_t count = std::min<int64_t>(8, c.count - lane0);
  alignas(32) __m256 wv[kChannelMaxTaps];
  if (c.lane_weights) {
    for (int64_t k = 0; k < taps; ++k) wv[k] = _mm256_loadu_ps(c.lane_weights + k * 16 + lane0);
  } else {
    for (int64_t k = 0; k < taps; ++k) {
      alignas(32) float lanes[8] = {};
      for (int64_t l = 0; l < count; ++l) lanes[l] = c.weights[(lane0 + l) * taps + k];
      wv[k] = _mm256_load_ps(lanes);
    }
  }
  const __m256 bias = c.bias ? _mm256_maskload_ps(c.bias + lane0, first_lanes(count)) : zero;
  const int64_t sx = c.stride_w * 8, row = wp * 8;
  const int64_t oy_end = c.oy_end < 0 ? c.oh : std::min(c.oh, c.oy_end);
  const int64_t w = c.w, pad_h = c.pad_h, pad_w = c.pad_w;
  const float* in[8];
  float* out[8];
  for (int64_t l = 0; l < 8; ++l) {
    in[l] = c.in + (lane0 + std::min(l, count - 1)) * c.in_stride;
    out[l] = c.out + (lane0 + std::min(l, count - 1)) * c.out_stride;
  }
  // One output row of the band from its tap rows (pointers into the
  // padded rows).
  auto output_row = [&](const auto& rows, float* orow) {
    int64_t ox = 0;
    for (; ox + 8 <= c.ow; ox += 8) pixels8<8>(c, rows, ox * sx, sx, wv, bias, orow + ox * 8);
    const int64_t at = ox * sx;
    float* d = orow + ox * 8;
    switch (c.ow - ox) {
      case 7: pixels8<7>(c, rows, at, sx, wv, bias, d); break;
      case 6: pixels8<6>(c, rows, at, sx, wv, bias, d); break;
      case 5: pixels8<5>(c, rows, at, sx, wv, bias, d); break;
      case 4: pixels8<4>(c, rows, at, sx, wv, bias, d); break;
      case 3: pixels8<3>(c, rows, at, sx, wv, bias, d); break;
      case 2: pixels8<2>(c, rows, at, sx, wv, bias, d); break;
      case 1: pixels8<1>(c, rows, at, sx, wv, bias, d); break;
      default: break;
    }
  };
  // Rows of eight pixels or more: the padded input rows in a ring of kh
  // rows, each transposed in just before the first output row that reads
  // it (its slot's last row is no longer read), so the taps read rows in
  // L1; the padding rows are one row of zeros. A band's padded rows
  // written in full first and read afterwards came from L2 (mobilenet_v2's
  // 96-channel 112x112 stride-2 layer spent 1.3 cycles a tap's FMA). Each
  // input row is transposed once. Narrower rows (7x7 planes): the band's
  // padded rows in full, eight pixels at a time across rows.
  const bool ring = w >= 8;
  float* const zero_row = scratch + c.kh * row;  // ring: kh rows, then this
  int64_t loaded = 0;  // ring: the padded rows below this one are transposed (or skipped)
  if (ring) {
    for (int64_t x = 0; x < wp; ++x) _mm256_storeu_ps(zero_row + x * 8, zero);
    for (int64_t k = 0; k < c.kh; ++k) {
      for (int64_t x = 0; x < pad_w; ++x) _mm256_storeu_ps(scratch + k * row + x * 8, zero);
      for (int64_t x = pad_w + w; x < wp; ++x) _mm256_storeu_ps(scratch + k * row + x * 8, zero);
    }
  }
  for (int64_t oy0 = std::max<int64_t>(0, c.oy_begin); oy0 < oy_end; oy0 += band) {
    const int64_t oy1 = std::min(oy_end, oy0 + band);
    const int64_t py0 = oy0 * c.stride_h, py1 = (oy1 - 1) * c.stride_h + c.kh;
    float* t = scratch;  // (py1 - py0) x wp x 8, or the ring
    float* o = ring ? zero_row + row : scratch + (py1 - py0) * row;  // (oy1 - oy0) x ow x 8
    if (ring) {
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        const float* taps_rows[kChannelMaxTaps];
        for (int64_t ky = 0; ky < c.kh; ++ky) {
          const int64_t py = oy * c.stride_h + ky;
          if (py < pad_h || py >= pad_h + c.h) {
            taps_rows[ky] = zero_row;
            continue;
          }
          float* slot = t + py % c.kh * row;
          taps_rows[ky] = slot;
          if (py < loaded) continue;
          loaded = py + 1;
          // Eight pixels of the eight channels at a time (the row's last
          // eight again, overlapping, when the width is not a multiple of
          // eight); lanes past count read the last channel again and
          // nothing stores them.
          float* dst = slot + pad_w * 8;
          const int64_t at = (py - pad_h) * w;
          for (int64_t x = 0; x < w; x += 8) {
            if (x + 8 > w) x = w - 8;
            __m256 r[8];
            for (int64_t l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(in[l] + at + x);
            transpose8(r);
            for (int64_t j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (x + j) * 8, r[j]);
          }
        }
        output_row(RingRows{taps_rows}, o + (oy - oy0) * c.ow * 8);
      }
    } else {
      auto zero_span = [&](int64_t y, int64_t x0, int64_t x1) {
        for (int64_t x = x0; x < x1; ++x) _mm256_storeu_ps(t + (y * wp + x) * 8, zero);
      };
      for (int64_t py = py0; py < py1; ++py) {
        if (py < pad_h || py >= pad_h + c.h) {
          zero_span(py - py0, 0, wp);
        } else {
          zero_span(py - py0, 0, pad_w);
          zero_span(py - py0, pad_w + w, wp);
        }
      }
      const int64_t y0 = std::max<int64_t>(0, py0 - pad_h), y1 = std::min(c.h, py1 - pad_h);
      int64_t y = y0, x = 0;
      for (int64_t i = y0 * w; i < y1 * w; i += 8) {
        const int64_t n = std::min<int64_t>(8, y1 * w - i);
        __m256 r[8];
        if (n == 8) {
          for (int64_t l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(in[l] + i);
        } else {
          const __m256i m = first_lanes(n);
          for (int64_t l = 0; l < 8; ++l) r[l] = _mm256_maskload_ps(in[l] + i, m);
        }
        transpose8(r);
        float* dst = t + ((y + pad_h - py0) * wp + x + pad_w) * 8;
        for (int64_t j = 0; j < n; ++j) {
          _mm256_storeu_ps(dst, r[j]);
          dst += 8;
          if (++x == w) {
            x = 0, ++y;
            dst = t + ((y + pad_h - py0) * wp + pad_w) * 8;
          }
        }
      }
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        output_row(BandRows{t + (oy * c.stride_h - py0) * row, row}, o + (oy - oy0) * c.ow * 8);
      }
    }
    if (c.tile) {
      const int64_t floats = (oy1 - oy0) * c.ow * 8;
      c.tile(c.tile_ctx, o, floats, 1, floats);
    }
    const int64_t out0 = oy0 * c.ow, out1 = oy1 * c.ow;
    for (int64_t i = out0; i < out1; i += 8) {
      const int64_t n = std::min<int64_t>(8, out1 - i);
      __m256 r[8];
      for (int64_t j = 0; j < 8; ++j) r[j] = j < n ? _mm256_loadu_ps(o + (i - out0 + j) * 8) : zero;
      transpose8(r);
      const __m256i m = first_lanes(n);
      for (int64_t l = 0; l < count; ++l) {
        if (n == 8) {
          _mm256_storeu_ps(out[l] + i, r[l]);
        } else {
          _mm256_maskstore_ps(out[l] + i, m, r[l]);
        }
      }
    }
  }
}
}  // namespace avx2
void detail::plane_avx2(const Plane& p, float* scratch) { avx2::plane(p, scratch); }
bool detail::channels_avx2(const Channels& c, float* scratch) {
  // The block's sixteen channels as two halves of eight.
  for (int64_t lane0 = 0; lane0 < c.count; lane0 += 8) avx2::channels8(c, lane0, scratch);
  return true;
}
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif
namespace avx512 {
#define KITE_DW_LANES 16
#include "depthwise_impl.inc"
#undef KITE_DW_LANES

#include "transpose16.inc"

inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// The formulas of Plane::Act: Relu x > 0 ? x : 0, Clip (x < lo ? lo : x)
// then (hi < v ? hi : v); max_ps / min_ps return their second operand
// unless the first is strictly greater / smaller. (Masked forms with
// all-ones masks: the plain ones pass an undefined operand that GCC 12 warns
// about, as in sgemm_avx512.cpp.)
// Read once per call of pixels, as Finish8 on AVX2.
struct Finish16 {
  Plane::Act act;
  __m512 lo, hi;
  Finish16(Plane::Act a, float l, float h) : act(a), lo(_mm512_set1_ps(l)), hi(_mm512_set1_ps(h)) {}
  explicit Finish16(const Channels& c) : Finish16(c.act, c.lo, c.hi) {}
  explicit Finish16(const Plane& p) : Finish16(p.act, p.lo, p.hi) {}
  __m512 operator()(__m512 v) const {
    constexpr __mmask16 kAll = 0xFFFF;
    if (act == Plane::kRelu) return _mm512_maskz_max_ps(kAll, v, _mm512_setzero_ps());
    if (act == Plane::kClip) {
      v = _mm512_maskz_max_ps(kAll, lo, v);
      return _mm512_maskz_min_ps(kAll, hi, v);
    }
    return v;
  }
};

// Q output pixels of a row from base (the window of the first), Q
// independent accumulator chains; sx: floats between neighbouring windows.
template <int Q>
void pixels(const Channels& c, const float* base, int64_t row, int64_t sx, const __m512* wv,
            __m512 bias, float* o) {
  __m512 acc[Q];
  for (int q = 0; q < Q; ++q) acc[q] = bias;
  for (int64_t ky = 0; ky < c.kh; ++ky) {
    const float* r = base + ky * row;
    for (int64_t kx = 0; kx < c.kw; ++kx) {
      const __m512 w = wv[ky * c.kw + kx];
      const float* at = r + kx * 16;
      for (int q = 0; q < Q; ++q) acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(at + q * sx), w, acc[q]);
    }
  }
  const Finish16 finish(c);
  for (int q = 0; q < Q; ++q) _mm512_storeu_ps(o + q * 16, finish(acc[q]));
}

// Bands of output rows (band_rows(c) at a time): the band's padded input
// rows as wp vectors each (one channel per lane), then its output rows,
// then those back to the planes.
void channels(const Channels& c, float* scratch) {
  const int64_t wp = padded_cols(c), band = band_rows(c);
  const __m512 zero = _mm512_setzero_ps();
  const int64_t taps = c.kh * c.kw;
  __m512 wv[kChannelMaxTaps];
  if (c.lane_weights) {
    // Arranged offline (or at prepare): gathering them here (sixteen scalar
    // stores, then a vector load that waits for them all) was 7% of
    // mobilenet_v3_small's samples, whose small planes make short tasks.
    for (int64_t k = 0; k < taps; ++k) wv[k] = _mm512_loadu_ps(c.lane_weights + k * 16);
  } else {
    for (int64_t k = 0; k < taps; ++k) {
      alignas(64) float lanes[16] = {};
      for (int64_t l = 0; l < c.count; ++l) lanes[l] = c.weights[l * taps + k];
      wv[k] = _mm512_load_ps(lanes);
    }
  }
  const __mmask16 live = static_cast<__mmask16>((1u << c.count) - 1);
  const __m512 bias = c.bias ? _mm512_maskz_loadu_ps(live, c.bias) : zero;
  const int64_t sx = c.stride_w * 16, row = wp * 16;
  const int64_t oy_end = c.oy_end < 0 ? c.oh : std::min(c.oh, c.oy_end);
  // The fields the transposes use on every chunk, and the planes' starts,
  // in locals: the vector stores may alias c, so each chunk reloaded them
  // (with the per-pixel place below, the scalar work was half of the
  // samples on mobilenet_v2's 32-channel 112x112 layer, Zen 4).
  const int64_t count = c.count, w = c.w, pad_h = c.pad_h, pad_w = c.pad_w;
  const float* in[16];
  float* out[16];
  for (int64_t l = 0; l < 16; ++l) {
    in[l] = c.in + std::min(l, count - 1) * c.in_stride;
    out[l] = c.out + std::min(l, count - 1) * c.out_stride;
  }
  for (int64_t oy0 = std::max<int64_t>(0, c.oy_begin); oy0 < oy_end; oy0 += band) {
    const int64_t oy1 = std::min(oy_end, oy0 + band);
    // Padded rows [py0, py1) hold every window of the band.
    const int64_t py0 = oy0 * c.stride_h, py1 = (oy1 - 1) * c.stride_h + c.kh;
    float* t = scratch;                       // (py1 - py0) x wp x 16
    float* o = scratch + (py1 - py0) * row;   // (oy1 - oy0) x ow x 16
    // The padding: whole rows above and below the plane, columns left and
    // right of it (the plane's pixels are all written below).
    auto zero_span = [&](int64_t y, int64_t x0, int64_t x1) {
      for (int64_t x = x0; x < x1; ++x) _mm512_storeu_ps(t + (y * wp + x) * 16, zero);
    };
    for (int64_t py = py0; py < py1; ++py) {
      if (py < c.pad_h || py >= c.pad_h + c.h) {
        zero_span(py - py0, 0, wp);
      } else {
        zero_span(py - py0, 0, c.pad_w);
        zero_span(py - py0, c.pad_w + c.w, wp);
      }
    }
    // The band's input rows [y0, y1), sixteen pixels of the sixteen planes
    // at a time (a plane is contiguous, so rows need not be whole),
    // transposed to sixteen pixel vectors, each stored at its padded place.
    // Lanes past count stay zero.
    const int64_t y0 = std::max<int64_t>(0, py0 - c.pad_h), y1 = std::min(c.h, py1 - c.pad_h);
    int64_t y = y0, x = 0;
    for (int64_t i = y0 * w; i < y1 * w; i += 16) {
      const int64_t n = std::min<int64_t>(16, y1 * w - i);
      const __mmask16 m = first_lanes(n);
      __m512 r[16];
      for (int64_t l = 0; l < 16; ++l) r[l] = l < count ? _mm512_maskz_loadu_ps(m, in[l] + i) : zero;
      transpose16(r);
      float* dst = t + ((y + pad_h - py0) * wp + x + pad_w) * 16;
      for (int64_t j = 0; j < n; ++j) {
        _mm512_storeu_ps(dst, r[j]);
        dst += 16;
        if (++x == w) {
          x = 0, ++y;
          dst = t + ((y + pad_h - py0) * wp + pad_w) * 16;
        }
      }
    }
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      float* orow = o + (oy - oy0) * c.ow * 16;
      const float* base = t + (oy * c.stride_h - py0) * row;
      int64_t ox = 0;
      // Eight output pixels at a time, eight accumulator chains; the row's
      // tail as one block of fewer (a 7-pixel row is one block of 7, not
      // seven chains that wait on their own FMAs).
      for (; ox + 8 <= c.ow; ox += 8) pixels<8>(c, base + ox * sx, row, sx, wv, bias, orow + ox * 16);
      const float* b = base + ox * sx;
      float* d = orow + ox * 16;
      switch (c.ow - ox) {
        case 7: pixels<7>(c, b, row, sx, wv, bias, d); break;
        case 6: pixels<6>(c, b, row, sx, wv, bias, d); break;
        case 5: pixels<5>(c, b, row, sx, wv, bias, d); break;
        case 4: pixels<4>(c, b, row, sx, wv, bias, d); break;
        case 3: pixels<3>(c, b, row, sx, wv, bias, d); break;
        case 2: pixels<2>(c, b, row, sx, wv, bias, d); break;
        case 1: pixels<1>(c, b, row, sx, wv, bias, d); break;
        default: break;
      }
    }
    if (c.tile) {
      const int64_t floats = (oy1 - oy0) * c.ow * 16;
      c.tile(c.tile_ctx, o, floats, 1, floats);
    }
    // Back to the planes: sixteen pixel vectors transposed to sixteen
    // channel rows of sixteen pixels.
    const int64_t out0 = oy0 * c.ow, out1 = oy1 * c.ow;
    for (int64_t i = out0; i < out1; i += 16) {
      const int64_t n = std::min<int64_t>(16, out1 - i);
      __m512 r[16];
      for (int64_t j = 0; j < 16; ++j) r[j] = j < n ? _mm512_loadu_ps(o + (i - out0 + j) * 16) : zero;
      transpose16(r);
      const __mmask16 m = first_lanes(n);
      for (int64_t l = 0; l < count; ++l) _mm512_mask_storeu_ps(out[l] + i, m, r[l]);
    }
  }
}
// The by-planes kernels' row access: sixteen floats of a row from x, zeros
// past its `w` (the right padding); a vector of outputs from ox, only those
// before `ow`.
inline __m512 load_row(const float* row, int64_t x, int64_t w) {
  const int64_t left = w - x;
  if (left >= 16) return _mm512_loadu_ps(row + x);
  return left <= 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(first_lanes(left), row + x);
}
inline void store_row(float* out, int64_t ox, int64_t ow, __m512 v) {
  const int64_t n = ow - ox;
  if (n >= 16) {
    _mm512_storeu_ps(out + ox, v);
  } else {
    _mm512_mask_storeu_ps(out + ox, first_lanes(n), v);
  }
}
// A two-row step of the by-planes kernels (s2k3, s1k3): outputs ox .. ox +
// 31 of row 0 (a00, a01) and, when two, of row 1 (a10, a11), those before
// ow, finished.
inline void store_step(float* out0, float* out1, bool two, int64_t ox, int64_t ow, const Finish16& finish,
                       __m512 a00, __m512 a01, __m512 a10, __m512 a11) {
  const bool second = ox + 16 < ow;
  store_row(out0, ox, ow, finish(a00));
  if (second) store_row(out0, ox + 16, ow, finish(a01));
  if (!two) return;
  store_row(out1, ox, ow, finish(a10));
  if (second) store_row(out1, ox + 16, ow, finish(a11));
}
// v shifted one lane up, lane 0 from before's lane 15 (the column before),
// or one lane down, lane 15 from after's lane 0 (the column after).
inline __m512 column_before(__m512 v, __m512 before) {
  return _mm512_castsi512_ps(
      _mm512_maskz_alignr_epi32(0xFFFF, _mm512_castps_si512(v), _mm512_castps_si512(before), 15));
}
inline __m512 column_after(__m512 v, __m512 after) {
  return _mm512_castsi512_ps(
      _mm512_maskz_alignr_epi32(0xFFFF, _mm512_castps_si512(after), _mm512_castps_si512(v), 1));
}

// 3x3, stride 2, padding 1 (the downsampling depthwise layers): each output
// row from its three input rows as they lie in the plane, no scratch copy.
// Sixteen outputs read 32 input columns, two loads, split by two-source
// permutes into the even columns (tap 1) and the odd (tap 2), and the odd
// shifted one lane right with the previous sixteen's last (tap 0): three
// shuffles an input row where the channel blocks' transposes took about
// twenty for the same outputs (mobilenet_v3_small's 72-channel 56x56
// layer, Zen 4). Taps in the channel blocks' order, so the same bits.
//
// Two output rows (five input rows, the middle one shared) by 32 outputs
// at a time: four accumulator chains. One chain of nine dependent FMAs a
// vector waited on the FMA latency, ~37 cycles a vector. Zen 4, 1 thread,
// in the model (kite-run --profile, libraries alternately): mobilenet_v2's
// 96-channel 112x112 layer 0.194 -> 0.152 ms, 144-channel 56x56 0.095 ->
// 0.065; that 72-channel layer alone 0.040 -> 0.032.
struct S2Taps {
  __m512 before, even, odd;
};
inline S2Taps s2_taps(const float* row, int64_t x, int64_t w, __m512i even_idx, __m512i odd_idx, __m512& prev) {
  const __m512 a = load_row(row, x, w), b = load_row(row, x + 16, w);
  S2Taps t;
  t.even = _mm512_permutex2var_ps(a, even_idx, b);
  t.odd = _mm512_permutex2var_ps(a, odd_idx, b);
  t.before = column_before(t.odd, prev);
  prev = t.odd;
  return t;
}
inline __m512 fma3(const __m512* w, __m512 l, __m512 c, __m512 r, __m512 acc) {
  acc = _mm512_fmadd_ps(l, w[0], acc);
  acc = _mm512_fmadd_ps(c, w[1], acc);
  return _mm512_fmadd_ps(r, w[2], acc);
}

void s2k3(const Plane& p) {
  const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512 w[9];
  for (int k = 0; k < 9; ++k) w[k] = _mm512_set1_ps(p.weights[k]);
  const __m512 bias = _mm512_set1_ps(p.bias);
  const Finish16 finish(p);
  for (int64_t oy = 0; oy < p.oh; oy += 2) {
    const bool two = oy + 1 < p.oh;
    // Input rows 2oy - 1 .. 2oy + 3 (null: padding, or past the last
    // output row); output row oy reads the first three, oy + 1 the last.
    const float* rows[5];
    for (int k = 0; k < 5; ++k) {
      const int64_t iy = 2 * oy - 1 + k;
      rows[k] = iy >= 0 && iy < p.h && (k < 3 || two) ? p.in + iy * p.w : nullptr;
    }
    // Each row's odd columns of the sixteen outputs before (the padding's
    // zero before the first).
    __m512 prev[5];
    for (int k = 0; k < 5; ++k) prev[k] = _mm512_setzero_ps();
    float* out0 = p.out + oy * p.ow;
    float* out1 = out0 + p.ow;
    for (int64_t ox = 0; ox < p.ow; ox += 32) {
      // The second sixteen may lie past the row: their loads give zeros
      // and they are not stored.
      __m512 a00 = bias, a01 = bias, a10 = bias, a11 = bias;
      for (int k = 0; k < 5; ++k) {
        if (rows[k] == nullptr) continue;
        const S2Taps t0 = s2_taps(rows[k], 2 * ox, p.w, even_idx, odd_idx, prev[k]);
        const S2Taps t1 = s2_taps(rows[k], 2 * ox + 32, p.w, even_idx, odd_idx, prev[k]);
        if (k < 3) {
          a00 = fma3(w + k * 3, t0.before, t0.even, t0.odd, a00);
          a01 = fma3(w + k * 3, t1.before, t1.even, t1.odd, a01);
        }
        if (k >= 2) {
          a10 = fma3(w + (k - 2) * 3, t0.before, t0.even, t0.odd, a10);
          a11 = fma3(w + (k - 2) * 3, t1.before, t1.even, t1.odd, a11);
        }
      }
      store_step(out0, out1, two, ox, p.ow, finish, a00, a01, a10, a11);
    }
  }
}

// 3x3, stride 1, padding 1: two output rows by 32 outputs at a time (four
// accumulator chains, as s2k3; with two, mobilenet_v2's 144-channel 56x56
// layer took 0.123 ms, now 0.110) from their four input rows as they lie in
// the plane; each input row's sixteen floats one load, its neighbours left
// and right by alignr against the sixteen before and after (two shuffles),
// shared by the output rows that read it. Taps in the channel blocks'
// order, so the same bits.
void s1k3(const Plane& p) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 w[9];
  for (int k = 0; k < 9; ++k) w[k] = _mm512_set1_ps(p.weights[k]);
  const __m512 bias = _mm512_set1_ps(p.bias);
  const Finish16 finish(p);
  for (int64_t oy = 0; oy < p.oh; oy += 2) {
    const bool two = oy + 1 < p.oh;
    // Input rows oy - 1 .. oy + 2 (null: padding); output row oy reads the
    // first three, oy + 1 the last three.
    const float* rows[4];
    __m512 prev[4], cur[4];
    for (int k = 0; k < 4; ++k) {
      const int64_t iy = oy - 1 + k;
      rows[k] = iy >= 0 && iy < p.h && (k < 3 || two) ? p.in + iy * p.w : nullptr;
      prev[k] = zero;
      cur[k] = rows[k] ? load_row(rows[k], 0, p.w) : zero;
    }
    float* out0 = p.out + oy * p.ow;
    float* out1 = out0 + p.ow;
    for (int64_t ox = 0; ox < p.ow; ox += 32) {
      __m512 a00 = bias, a01 = bias, a10 = bias, a11 = bias;
      for (int k = 0; k < 4; ++k) {
        if (rows[k] == nullptr) continue;
        const __m512 next = load_row(rows[k], ox + 16, p.w), next2 = load_row(rows[k], ox + 32, p.w);
        const __m512 l0 = column_before(cur[k], prev[k]), r0 = column_after(cur[k], next);
        const __m512 l1 = column_before(next, cur[k]), r1 = column_after(next, next2);
        if (k < 3) {
          a00 = fma3(w + k * 3, l0, cur[k], r0, a00);
          a01 = fma3(w + k * 3, l1, next, r1, a01);
        }
        if (k > 0) {
          a10 = fma3(w + (k - 1) * 3, l0, cur[k], r0, a10);
          a11 = fma3(w + (k - 1) * 3, l1, next, r1, a11);
        }
        prev[k] = next;
        cur[k] = next2;
      }
      store_step(out0, out1, two, ox, p.ow, finish, a00, a01, a10, a11);
    }
  }
}

bool takes_s1k3(const Plane& p) {
  return p.kh == 3 && p.kw == 3 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 1 && p.pad_w == 1 &&
         p.dilation_h == 1 && p.ow == p.w && p.oh == p.h;
}

bool takes_s2k3(const Plane& p) {
  return p.kh == 3 && p.kw == 3 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 1 && p.pad_w == 1 &&
         p.dilation_h == 1 && p.ow == (p.w - 1) / 2 + 1 && p.oh == (p.h - 1) / 2 + 1;
}
}  // namespace avx512
void detail::plane_avx512(const Plane& p, float* scratch) {
  if (avx512::takes_s2k3(p)) return avx512::s2k3(p);
  if (avx512::takes_s1k3(p)) return avx512::s1k3(p);
  avx512::plane(p, scratch);
}
bool detail::channels_avx512(const Channels& c, float* scratch) {
  avx512::channels(c, scratch);
  return true;
}
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
void detail::plane_avx2(const Plane& p, float* scratch) { detail::plane_portable(p, scratch); }
void detail::plane_avx512(const Plane& p, float* scratch) { detail::plane_portable(p, scratch); }
bool detail::channels_avx512(const Channels&, float*) { return false; }
bool detail::channels_avx2(const Channels&, float*) { return false; }
#endif

void run_plane(const Plane& p, float* scratch) {
  switch (sgemm::micro_kernel_in_use()) {
    case sgemm::MicroKernel::kAvx512:
      return detail::plane_avx512(p, scratch);
    case sgemm::MicroKernel::kAvx2Fma:
      return detail::plane_avx2(p, scratch);
    default:
      return detail::plane_portable(p, scratch);
  }
}

int64_t band_floats(const Channels& c, int64_t rows) {
  return (((rows - 1) * c.stride_h + c.kh) * padded_cols(c) + rows * c.ow) * kChannelLanes;
}

int64_t band_rows(const Channels& c) {
  if (c.oh <= 1) return 1;
  // The most rows within kChannelBandFloats (band_floats grows with rows).
  const int64_t per_row = (c.stride_h * padded_cols(c) + c.ow) * kChannelLanes;
  const int64_t fixed = band_floats(c, 1) - per_row;
  return std::max<int64_t>(1, std::min(c.oh, (kChannelBandFloats - fixed) / per_row));
}

int64_t channel_scratch_floats(int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                               int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  Channels c{};
  c.h = h, c.w = w, c.oh = oh, c.ow = ow, c.kh = kh, c.kw = kw;
  c.stride_h = stride_h, c.stride_w = stride_w, c.pad_h = pad_h, c.pad_w = pad_w;
  return band_floats(c, band_rows(c));
}

bool channels_take(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels,
                   sgemm::MicroKernel level) {
  const size_t r = g.input.size();
  if ((level != sgemm::MicroKernel::kAvx512 && level != sgemm::MicroKernel::kAvx2Fma) || r < 1 || r > 3 || g.output.size() != r ||
      g.kernel.size() != r || g.strides.size() != r || g.dilations.size() != r ||
      g.pads_begin.size() != r || g.group != channels || out_channels != channels) {
    return false;
  }
  for (int64_t d : g.dilations) {
    if (d != 1) return false;
  }
  // The last two axes are the plane's (one row for 1-D); a leading depth
  // axis must be trivial.
  if (r == 3 && (g.input[0] != 1 || g.output[0] != 1 || g.kernel[0] != 1)) return false;
  const size_t x = r - 1;
  const bool rows = r >= 2;
  const int64_t h = rows ? g.input[x - 1] : 1, oh = rows ? g.output[x - 1] : 1;
  const int64_t kh = rows ? g.kernel[x - 1] : 1, sh = rows ? g.strides[x - 1] : 1;
  const int64_t ph = rows ? g.pads_begin[x - 1] : 0;
  // 3x3 layers of stride 1 or 2 with rows of 28 outputs or more go by
  // planes on AVX-512 (s1k3, s2k3 above), whose one or two shuffles an
  // input row cost less than the blocks' transposes. Zen 4, 1 thread:
  // mobilenet_v2's 32-channel 112x112 layer 0.185 -> 0.126 ms, 96-channel
  // 112x112 stride 2 0.228 -> 0.183, 144-channel 56x56 0.197 -> 0.161,
  // mobilenet_v3_small's 72-channel 56x56 stride 2 0.045 -> 0.038; 28x28
  // inputs 0.92-0.99x; on 14x14 and 7x7 ones (rows of one vector) the
  // blocks stay faster (by planes 1.1-2.1x slower).
  if (level == sgemm::MicroKernel::kAvx512 && rows && kh == 3 && g.kernel[x] == 3 && sh == g.strides[x] &&
      (sh == 1 || sh == 2) && ph == 1 && g.pads_begin[x] == 1 && g.output[x] >= 28) {
    return false;
  }
  // Any plane whose one-row band fits the limit.
  return handles(g.strides[x], 1) && kh * g.kernel[x] <= kChannelMaxTaps &&
         channel_scratch_floats(h, g.input[x], oh, g.output[x], kh, g.kernel[x], sh, g.strides[x], ph,
                                g.pads_begin[x]) <= kChannelBandFloats;
}

int64_t lane_weight_floats(int64_t channels, int64_t taps) {
  return (channels + kChannelLanes - 1) / kChannelLanes * taps * kChannelLanes;
}

void arrange_channel_weights(const float* weights, int64_t channels, int64_t taps, float* dst) {
  std::fill(dst, dst + lane_weight_floats(channels, taps), 0.0f);
  for (int64_t m = 0; m < channels; ++m) {
    const int64_t b = m / kChannelLanes, l = m % kChannelLanes;
    for (int64_t k = 0; k < taps; ++k) dst[(b * taps + k) * kChannelLanes + l] = weights[m * taps + k];
  }
}

bool run_channels(const Channels& c, float* scratch) {
  if (c.kh * c.kw > kChannelMaxTaps) return false;
  switch (sgemm::micro_kernel_in_use()) {
    case sgemm::MicroKernel::kAvx512:
      return detail::channels_avx512(c, scratch);
    case sgemm::MicroKernel::kAvx2Fma:
      return detail::channels_avx2(c, scratch);
    default:
      return false;
  }
}

}  // namespace kite::cpu::depthwise
