// Direct convolution for few input channels (stem.h).
#include "stem.h"

#include <algorithm>
#include <cstring>

namespace kite::cpu::stem {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kGroupPixels = 3 * kLanes;  // output pixels per step of the vector loop

int64_t padded_rows(const Geometry& g) {
  return std::max(g.pad_top + g.h, (g.oh - 1) * g.stride + g.kh);
}
// Wide enough for the vector loop's last step: it reads whole vectors of
// outputs, up to ow rounded up to 16, and at stride 2 two vectors of input
// per vector of outputs.
int64_t padded_cols(const Geometry& g) {
  const int64_t ow_up = (g.ow + kLanes - 1) / kLanes * kLanes;
  return std::max(g.pad_left + g.w, g.stride * ow_up + g.kw);
}

// The zero-padded copy of x, rows of one channel after another; rows split
// over the pool.
void pad_input(const Geometry& g, const float* x, float* dst, ThreadPool& pool) {
  const int64_t hp = padded_rows(g), wp = padded_cols(g);
  pool.parallel_for(g.c * hp, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r / hp, y = r % hp - g.pad_top;
      float* row = dst + r * wp;
      if (y < 0 || y >= g.h) {
        std::fill(row, row + wp, 0.0f);
        continue;
      }
      std::fill(row, row + g.pad_left, 0.0f);
      std::memcpy(row + g.pad_left, x + (c * g.h + y) * g.w, sizeof(float) * static_cast<size_t>(g.w));
      std::fill(row + g.pad_left + g.w, row + wp, 0.0f);
    }
  });
}

// Every output of rows [row0, row1) of task order (oy, channel block), one
// value at a time: the level below AVX-512 (and the tests' forced levels).
void run_scalar(const Geometry& g, const float* pad, const float* weights, const float* bias,
                const sgemm::Epilogue& e, float* y, int64_t task0, int64_t task1) {
  const int64_t hp = padded_rows(g), wp = padded_cols(g);
  const int64_t blocks = (g.m + kChannelBlock - 1) / kChannelBlock;
  const int64_t taps = g.c * g.kh * g.kw;
  for (int64_t t = task0; t < task1; ++t) {
    const int64_t oy = t / blocks, mb = t % blocks;
    const float* wb = weights + mb * taps * kChannelBlock;
    const int64_t count = std::min(kChannelBlock, g.m - mb * kChannelBlock);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t m = mb * kChannelBlock + i;
      float* out = y + (m * g.oh + oy) * g.ow;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float acc = 0.0f;
        int64_t tap = 0;
        for (int64_t c = 0; c < g.c; ++c) {
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            const float* row = pad + (c * hp + oy * g.stride + ky) * wp + ox * g.stride;
            for (int64_t kx = 0; kx < g.kw; ++kx, ++tap) acc += wb[tap * kChannelBlock + i] * row[kx];
          }
        }
        out[ox] = sgemm::finish_value(e, bias ? acc + bias[m] : acc);
      }
    }
    if (e.tile) e.tile(e.tile_ctx, y + (mb * kChannelBlock * g.oh + oy) * g.ow, g.oh * g.ow, count, g.ow);
  }
}

}  // namespace

namespace detail {
bool run_avx512(const Geometry& g, const float* pad, const float* weights, const float* bias,
                const sgemm::Epilogue& e, float* y, int64_t task0, int64_t task1);
}

bool takes(const kite::ops::WindowGeometry& g, int64_t channels, sgemm::MicroKernel level) {
  if (level != sgemm::MicroKernel::kAvx512 || g.group != 1 || channels < 1 || channels > kMaxChannels) {
    return false;
  }
  if (g.input.size() != 2 || g.output.size() != 2 || g.kernel.size() != 2 || g.strides.size() != 2 ||
      g.dilations.size() != 2 || g.pads_begin.size() != 2) {
    return false;
  }
  if (g.kernel[0] * g.kernel[1] == 1) return false;  // pointwise: the GEMM reads its input in place
  return g.kernel[0] <= kMaxKernel && g.kernel[1] <= kMaxKernel && g.strides[0] == g.strides[1] &&
         (g.strides[0] == 1 || g.strides[0] == 2) && g.dilations[0] == 1 && g.dilations[1] == 1;
}

Geometry geometry(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels) {
  Geometry s;
  s.c = channels, s.h = g.input[0], s.w = g.input[1];
  s.m = out_channels, s.oh = g.output[0], s.ow = g.output[1];
  s.kh = g.kernel[0], s.kw = g.kernel[1];
  s.stride = g.strides[0];
  s.pad_top = g.pads_begin[0], s.pad_left = g.pads_begin[1];
  return s;
}

int64_t weight_floats(const Geometry& g) {
  return (g.m + kChannelBlock - 1) / kChannelBlock * kChannelBlock * g.c * g.kh * g.kw;
}

void arrange_weights(const Geometry& g, const float* w, float* dst) {
  const int64_t taps = g.c * g.kh * g.kw;
  const int64_t blocks = (g.m + kChannelBlock - 1) / kChannelBlock;
  for (int64_t mb = 0; mb < blocks; ++mb) {
    for (int64_t tap = 0; tap < taps; ++tap) {
      for (int64_t i = 0; i < kChannelBlock; ++i) {
        const int64_t m = mb * kChannelBlock + i;
        dst[(mb * taps + tap) * kChannelBlock + i] = m < g.m ? w[m * taps + tap] : 0.0f;
      }
    }
  }
}

int64_t scratch_floats(const Geometry& g) { return g.c * padded_rows(g) * padded_cols(g); }

void run(const Geometry& g, const float* x, const float* weights, const float* bias,
         const sgemm::Epilogue& e, float* y, float* scratch, ThreadPool& pool) {
  if (g.m <= 0 || g.oh <= 0 || g.ow <= 0) return;
  pad_input(g, x, scratch, pool);
  const int64_t blocks = (g.m + kChannelBlock - 1) / kChannelBlock;
  const int64_t tasks = g.oh * blocks;
  // A task is one output row of eight channels: 8 * ow * taps FMAs, some
  // 50K for a 3x3 stem with 112 outputs a row; 4 a chunk at least.
  const bool vector = sgemm::micro_kernel_in_use() == sgemm::MicroKernel::kAvx512;
  pool.parallel_for(tasks, 4, [&](int64_t begin, int64_t end) {
    if (vector && detail::run_avx512(g, scratch, weights, bias, e, y, begin, end)) return;
    run_scalar(g, scratch, weights, bias, e, y, begin, end);
  });
}

}  // namespace kite::cpu::stem

// The AVX-512 level: the instructions enabled by a pragma after every
// include (see sgemm_avx512.cpp for why).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma,prfchw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma,prfchw")
#endif
namespace kite::cpu::stem::detail {
namespace {

inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// Q vectors (16 Q output pixels from ox) of the eight channels of block
// wb, row oy; valid: how many of the 16 Q pixels exist.
template <int Q, int S>
void pixels(const Geometry& g, const float* pad, int64_t hp, int64_t wp, const float* wb,
            const float* bias, int64_t m0, int64_t count, const sgemm::Epilogue& e, float* y,
            int64_t oy, int64_t ox, int64_t valid) {
  // (Masked forms with all-ones masks: the plain ones pass an undefined
  // operand that GCC 12 warns about, as in sgemm_avx512.cpp.)
  constexpr __mmask16 kAll = 0xFFFF;
  alignas(64) static const int32_t kEven[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  const __m512i even = _mm512_load_si512(kEven);
  // The outputs' lines are fetched for writing while the taps run: each of
  // the eight rows is in its own output plane, and the stores otherwise
  // waited on every line's read for ownership (squeezenet's 64-channel
  // stem, 3 MB out: pixels<3, 2> spent half its samples on them, Zen 4).
  for (int64_t i = 0; i < count; ++i) {
    const float* out = y + ((m0 + i) * g.oh + oy) * g.ow + ox;
    for (int q = 0; q < Q; ++q) _mm_prefetch(reinterpret_cast<const char*>(out + 16 * q), _MM_HINT_ET0);
  }
  __m512 acc[kChannelBlock][Q];
  for (int i = 0; i < kChannelBlock; ++i) {
    for (int q = 0; q < Q; ++q) acc[i][q] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const float* row = pad + (c * hp + oy * S + ky) * wp + ox * S;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        __m512 v[Q];
        for (int q = 0; q < Q; ++q) {
          if (S == 1) {
            v[q] = _mm512_loadu_ps(row + kx + 16 * q);
          } else {
            const __m512 lo = _mm512_loadu_ps(row + kx + 32 * q);
            const __m512 hi = _mm512_loadu_ps(row + kx + 32 * q + 16);
            v[q] = _mm512_mask_permutex2var_ps(lo, kAll, even, hi);
          }
        }
        for (int i = 0; i < kChannelBlock; ++i) {
          const __m512 w = _mm512_set1_ps(wb[i]);
          for (int q = 0; q < Q; ++q) acc[i][q] = _mm512_fmadd_ps(v[q], w, acc[i][q]);
        }
        wb += kChannelBlock;
      }
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(e.lo), hi = _mm512_set1_ps(e.hi);
  for (int64_t i = 0; i < count; ++i) {
    float* out = y + ((m0 + i) * g.oh + oy) * g.ow + ox;
    for (int q = 0; q < Q; ++q) {
      __m512 v = acc[i][q];
      // The bias after the sum, as the GEMM's store adds it.
      if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[m0 + i]));
      if (e.kind == sgemm::Epilogue::kRelu) {
        v = _mm512_maskz_max_ps(kAll, v, zero);
      } else if (e.kind == sgemm::Epilogue::kClip) {
        v = _mm512_maskz_max_ps(kAll, lo, v);
        v = _mm512_maskz_min_ps(kAll, hi, v);
      }
      _mm512_mask_storeu_ps(out + 16 * q, first_lanes(valid - 16 * q), v);
    }
  }
}

template <int S>
void row(const Geometry& g, const float* pad, const float* weights, const float* bias,
         const sgemm::Epilogue& e, float* y, int64_t oy, int64_t mb) {
  const int64_t hp = padded_rows(g), wp = padded_cols(g);
  const int64_t taps = g.c * g.kh * g.kw;
  const float* wb = weights + mb * taps * kChannelBlock;
  const int64_t m0 = mb * kChannelBlock, count = std::min(kChannelBlock, g.m - m0);
  int64_t ox = 0;
  for (; ox + kGroupPixels <= g.ow; ox += kGroupPixels) {
    pixels<3, S>(g, pad, hp, wp, wb, bias, m0, count, e, y, oy, ox, kGroupPixels);
  }
  const int64_t left = g.ow - ox;
  if (left > 32) {
    pixels<3, S>(g, pad, hp, wp, wb, bias, m0, count, e, y, oy, ox, left);
  } else if (left > 16) {
    pixels<2, S>(g, pad, hp, wp, wb, bias, m0, count, e, y, oy, ox, left);
  } else if (left > 0) {
    pixels<1, S>(g, pad, hp, wp, wb, bias, m0, count, e, y, oy, ox, left);
  }
  // The row of the eight channels is final: the tile hook while in L1.
  if (e.tile) e.tile(e.tile_ctx, y + (m0 * g.oh + oy) * g.ow, g.oh * g.ow, count, g.ow);
}

}  // namespace

bool run_avx512(const Geometry& g, const float* pad, const float* weights, const float* bias,
                const sgemm::Epilogue& e, float* y, int64_t task0, int64_t task1) {
  const int64_t blocks = (g.m + kChannelBlock - 1) / kChannelBlock;
  for (int64_t t = task0; t < task1; ++t) {
    if (g.stride == 1) {
      row<1>(g, pad, weights, bias, e, y, t / blocks, t % blocks);
    } else {
      row<2>(g, pad, weights, bias, e, y, t / blocks, t % blocks);
    }
  }
  return true;
}

}  // namespace kite::cpu::stem::detail
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
namespace kite::cpu::stem::detail {
bool run_avx512(const Geometry&, const float*, const float*, const float*, const sgemm::Epilogue&,
                float*, int64_t, int64_t) {
  return false;
}
}  // namespace kite::cpu::stem::detail
#endif
