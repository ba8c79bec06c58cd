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
}  // namespace avx2
void detail::plane_avx2(const Plane& p, float* scratch) { avx2::plane(p, scratch); }
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

// Padded input rows of wp vectors (one channel per lane), then the output.
void channels(const Channels& c, float* scratch) {
  const int64_t hp = padded_rows(c), wp = padded_cols(c);
  float* t = scratch;                 // hp x wp x 16
  float* o = scratch + hp * wp * 16;  // oh x ow x 16
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < hp * wp; ++i) _mm512_storeu_ps(t + i * 16, zero);
  // Lane l reads plane l; lanes past count read plane 0 (their results are
  // never stored).
  alignas(64) int32_t offsets[16];
  for (int64_t l = 0; l < 16; ++l) {
    offsets[l] = static_cast<int32_t>((l < c.count ? l : 0) * c.in_stride);
  }
  const __m512i idx = _mm512_load_si512(offsets);
  // (Masked forms with all-ones masks: the plain ones pass an undefined
  // operand that GCC 12 warns about, as in sgemm_avx512.cpp.)
  constexpr __mmask16 kAll = 0xFFFF;
  for (int64_t y = 0; y < c.h; ++y) {
    float* row = t + ((y + c.pad_h) * wp + c.pad_w) * 16;
    const float* src = c.in + y * c.w;
    for (int64_t x = 0; x < c.w; ++x) {
      _mm512_storeu_ps(row + x * 16, _mm512_mask_i32gather_ps(zero, kAll, idx, src + x, 4));
    }
  }
  const int64_t taps = c.kh * c.kw;
  __m512 wv[kChannelMaxTaps];
  for (int64_t k = 0; k < taps; ++k) {
    alignas(64) float lanes[16] = {};
    for (int64_t l = 0; l < c.count; ++l) lanes[l] = c.weights[l * taps + k];
    wv[k] = _mm512_load_ps(lanes);
  }
  alignas(64) float bias_lanes[16] = {};
  if (c.bias) {
    for (int64_t l = 0; l < c.count; ++l) bias_lanes[l] = c.bias[l];
  }
  const __m512 bias = _mm512_load_ps(bias_lanes);
  const __m512 lo = _mm512_set1_ps(c.lo), hi = _mm512_set1_ps(c.hi);
  auto finish = [&](__m512 v) {
    // The formulas of Plane::Act: Relu x > 0 ? x : 0, Clip (x < lo ? lo : x)
    // then (hi < v ? hi : v); max_ps / min_ps return their second operand
    // unless the first is strictly greater / smaller.
    if (c.act == Plane::kRelu) return _mm512_maskz_max_ps(kAll, v, zero);
    if (c.act == Plane::kClip) {
      v = _mm512_maskz_max_ps(kAll, lo, v);
      return _mm512_maskz_min_ps(kAll, hi, v);
    }
    return v;
  };
  const int64_t sx = c.stride_w * 16;
  for (int64_t oy = 0; oy < c.oh; ++oy) {
    float* orow = o + oy * c.ow * 16;
    const float* base = t + oy * c.stride_h * wp * 16;
    int64_t ox = 0;
    // Eight output pixels at a time: eight accumulator chains.
    for (; ox + 8 <= c.ow; ox += 8) {
      __m512 acc[8];
      for (int q = 0; q < 8; ++q) acc[q] = bias;
      for (int64_t ky = 0; ky < c.kh; ++ky) {
        const float* r = base + (ky * wp + ox * c.stride_w) * 16;
        for (int64_t kx = 0; kx < c.kw; ++kx) {
          const __m512 w = wv[ky * c.kw + kx];
          const float* at = r + kx * 16;
          for (int q = 0; q < 8; ++q) acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(at + q * sx), w, acc[q]);
        }
      }
      for (int q = 0; q < 8; ++q) _mm512_storeu_ps(orow + (ox + q) * 16, finish(acc[q]));
    }
    for (; ox < c.ow; ++ox) {
      __m512 acc = bias;
      for (int64_t ky = 0; ky < c.kh; ++ky) {
        const float* r = base + (ky * wp + ox * c.stride_w) * 16;
        for (int64_t kx = 0; kx < c.kw; ++kx) {
          acc = _mm512_fmadd_ps(_mm512_loadu_ps(r + kx * 16), wv[ky * c.kw + kx], acc);
        }
      }
      _mm512_storeu_ps(orow + ox * 16, finish(acc));
    }
  }
  const int64_t pixels = c.oh * c.ow;
  for (int64_t l = 0; l < c.count; ++l) {
    float* dst = c.out + l * c.out_stride;
    const float* src = o + l;
    for (int64_t i = 0; i < pixels; ++i) dst[i] = src[i * 16];
  }
}
}  // namespace avx512
void detail::plane_avx512(const Plane& p, float* scratch) { avx512::plane(p, scratch); }
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

bool channels_handle(int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t dilation_h,
                     int64_t dilation_w) {
  return sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512 && dilation_h == 1 &&
         dilation_w == 1 && h * w <= kChannelMaxPixels && kh * kw <= kChannelMaxTaps;
}

int64_t channel_scratch_floats(int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                               int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  Channels c{};
  c.h = h, c.w = w, c.oh = oh, c.ow = ow, c.kh = kh, c.kw = kw;
  c.stride_h = stride_h, c.stride_w = stride_w, c.pad_h = pad_h, c.pad_w = pad_w;
  return (padded_rows(c) * padded_cols(c) + oh * ow) * kChannelLanes;
}

bool run_channels(const Channels& c, float* scratch) {
  if (sgemm::micro_kernel_in_use() != sgemm::MicroKernel::kAvx512 || c.kh * c.kw > kChannelMaxTaps) {
    return false;
  }
  return detail::channels_avx512(c, scratch);
}

}  // namespace kite::cpu::depthwise
