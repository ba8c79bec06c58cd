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
// per vector of outputs. Even, so that a split row's halves are equal.
int64_t padded_cols(const Geometry& g) {
  const int64_t ow_up = (g.ow + kLanes - 1) / kLanes * kLanes;
  const int64_t wp = std::max(g.pad_left + g.w, g.stride * ow_up + g.kw);
  return (wp + 1) / 2 * 2;
}

// The zero-padded copy of x, rows of one channel after another; rows split
// over the pool. Split: each row as its even columns, then its odd ones
// (wp / 2 each), so that a stride-2 kernel reads tap kx's inputs of
// consecutive outputs as consecutive floats (the AVX2 kernel: it has no
// two-source permute to pick every other float of two vectors).
void pad_input(const Geometry& g, const float* x, float* dst, bool split, ThreadPool& pool) {
  const int64_t hp = padded_rows(g), wp = padded_cols(g), half = wp / 2;
  // Rows in the order y, then channel: thread i pads the band of rows
  // (of every channel) that its output rows read (stem::run splits by rows).
  pool.parallel_for(g.c * hp, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r % g.c, yp = r / g.c, y = yp - g.pad_top;
      float* row = dst + (c * hp + yp) * wp;
      if (y < 0 || y >= g.h) {
        std::fill(row, row + wp, 0.0f);
        continue;
      }
      const float* src = x + (c * g.h + y) * g.w;
      if (split) {
        // Padded column i = 2 j + parity is input column i - pad_left.
        for (int64_t parity = 0; parity < 2; ++parity) {
          float* d = row + parity * half;
          const int64_t off = parity - g.pad_left;  // input column of j = 0
          const int64_t j0 = std::min(half, std::max<int64_t>(0, (1 - off) / 2));
          const int64_t j1 = std::max(j0, std::min(half, (g.w - off + 1) / 2));
          std::fill(d, d + j0, 0.0f);
          for (int64_t j = j0; j < j1; ++j) d[j] = src[2 * j + off];
          std::fill(d + j1, d + half, 0.0f);
        }
        continue;
      }
      std::fill(row, row + g.pad_left, 0.0f);
      std::memcpy(row + g.pad_left, src, sizeof(float) * static_cast<size_t>(g.w));
      std::fill(row + g.pad_left + g.w, row + wp, 0.0f);
    }
  });
}

// Every output of rows [row0, row1) of task order (oy, channel block), one
// value at a time: the level below AVX-512 (and the tests' forced levels).
void run_scalar(const Geometry& g, const float* pad, const float* weights, const float* bias,
                const sgemm::Epilogue& e, float* y, int64_t task0, int64_t task1, bool split) {
  const int64_t hp = padded_rows(g), wp = padded_cols(g), half = wp / 2;
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
            const float* row = pad + (c * hp + oy * g.stride + ky) * wp;
            for (int64_t kx = 0; kx < g.kw; ++kx, ++tap) {
              const int64_t at = ox * g.stride + kx;
              acc += wb[tap * kChannelBlock + i] * (split ? row[(at & 1) * half + (at >> 1)] : row[at]);
            }
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
bool run_avx2(const Geometry& g, const float* pad, const float* weights, const float* bias,
              const sgemm::Epilogue& e, float* y, int64_t task0, int64_t task1);
}

bool takes(const kite::ops::WindowGeometry& g, int64_t channels, sgemm::MicroKernel level) {
  if ((level != sgemm::MicroKernel::kAvx512 && level != sgemm::MicroKernel::kAvx2Fma) ||
      g.group != 1 || channels < 1 || channels > kMaxChannels) {
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
  const sgemm::MicroKernel level = sgemm::micro_kernel_in_use();
  const bool split = (level == sgemm::MicroKernel::kAvx2Fma || level == sgemm::MicroKernel::kAvx512) && g.stride == 2;
  pad_input(g, x, scratch, split, pool);
  const int64_t blocks = (g.m + kChannelBlock - 1) / kChannelBlock;
  const int64_t tasks = g.oh * blocks;
  // A task is one output row of eight channels: 8 * ow * taps FMAs, some
  // 50K for a 3x3 stem with 112 outputs a row; 4 a chunk at least.
  pool.parallel_for(tasks, 4, [&](int64_t begin, int64_t end) {
    if (level == sgemm::MicroKernel::kAvx512 && detail::run_avx512(g, scratch, weights, bias, e, y, begin, end)) {
      return;
    }
    if (level == sgemm::MicroKernel::kAvx2Fma && detail::run_avx2(g, scratch, weights, bias, e, y, begin, end)) {
      return;
    }
    run_scalar(g, scratch, weights, bias, e, y, begin, end, split);
  });
}

}  // namespace kite::cpu::stem

// The AVX-512 level: the instructions enabled by a pragma after every
// include (see sgemm_avx512.cpp for why).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// The AVX2 level: eight output pixels a vector, each task's eight channels
// as two halves of four. Four channels by three vectors (24 pixels) are
// twelve accumulators: per tap three loads of inputs (a split row at
// stride 2, pad_input) and four broadcast weights for twelve FMAs, so the
// FMAs, not the loads, set the pace.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,prfchw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,prfchw")
#endif
namespace kite::cpu::stem::detail {
namespace {

constexpr int64_t kLanes8 = 8;
constexpr int kHalf = kChannelBlock / 2;  // channels a pass

// One tap for four channels (weights wb[0..3]) and Q vectors of inputs.
template <int Q>
__attribute__((always_inline)) inline void tap(const float* in, const float* wb, __m256 (&acc)[kHalf][Q]) {
  __m256 v[Q];
#pragma GCC unroll 3
  for (int q = 0; q < Q; ++q) v[q] = _mm256_loadu_ps(in + 8 * q);
#pragma GCC unroll 4
  for (int i = 0; i < kHalf; ++i) {
    const __m256 w = _mm256_broadcast_ss(wb + i);
#pragma GCC unroll 3
    for (int q = 0; q < Q; ++q) acc[i][q] = _mm256_fmadd_ps(v[q], w, acc[i][q]);
  }
}

// Three vectors: the sixteen registers exactly (twelve accumulators, three
// inputs, one weight), where GCC 12 kept three accumulators on the stack
// and the 3x3 stems ran 1.4x slower than at two vectors; so the tap is
// written out, the inputs and weight in ymm12-15.
template <>
__attribute__((always_inline)) inline void tap<3>(const float* in, const float* wb, __m256 (&acc)[kHalf][3]) {
#define KITE_STEM_FMA3(i) \
  "vbroadcastss " #i "*4(%[w]), %%ymm15\n\t" \
  "vfmadd231ps %%ymm12, %%ymm15, %[a" #i "0]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[a" #i "1]\n\t" \
  "vfmadd231ps %%ymm14, %%ymm15, %[a" #i "2]\n\t"
  asm("vmovups (%[in]), %%ymm12\n\t"
      "vmovups 32(%[in]), %%ymm13\n\t"
      "vmovups 64(%[in]), %%ymm14\n\t"
      KITE_STEM_FMA3(0) KITE_STEM_FMA3(1) KITE_STEM_FMA3(2) KITE_STEM_FMA3(3)
      : [a00] "+x"(acc[0][0]), [a01] "+x"(acc[0][1]), [a02] "+x"(acc[0][2]),
        [a10] "+x"(acc[1][0]), [a11] "+x"(acc[1][1]), [a12] "+x"(acc[1][2]),
        [a20] "+x"(acc[2][0]), [a21] "+x"(acc[2][1]), [a22] "+x"(acc[2][2]),
        [a30] "+x"(acc[3][0]), [a31] "+x"(acc[3][1]), [a32] "+x"(acc[3][2])
      : [in] "r"(in), [w] "r"(wb), "m"(*(const float(*)[24])in), "m"(*(const float(*)[4])wb)
      : "xmm12", "xmm13", "xmm14", "xmm15");
#undef KITE_STEM_FMA3
}

// Q vectors (8 Q output pixels from ox) of channels m0 .. m0 + count - 1
// (count <= 4; wb: their weights, 8 apart per tap), row oy; valid: how many
// of the 8 Q pixels exist.
// K > 0: a K x K kernel, its loops unrolled (the 3x3 stems: 27 taps a call
// whose loop control and epilogue cost about a third of the FMAs' time).
template <int Q, int S, int K = 0>
void pixels8(const Geometry& g, const float* pad, int64_t hp, int64_t wp, const float* wb,
             const float* bias, int64_t m0, int64_t count, const sgemm::Epilogue& e, float* y,
             int64_t oy, int64_t ox, int64_t valid) {
  const int64_t kh = K > 0 ? K : g.kh, kw = K > 0 ? K : g.kw;
  // The outputs' lines fetched for writing while the taps run (as the
  // AVX-512 kernel does: each channel's row is in a plane of its own), and
  // a line of the next step's to give it longer, when the row has one.
  const bool next = ox + 8 * Q < g.ow;
  for (int64_t i = 0; i < count; ++i) {
    const float* out = y + ((m0 + i) * g.oh + oy) * g.ow + ox;
    _mm_prefetch(reinterpret_cast<const char*>(out), _MM_HINT_ET0);
    if (Q > 2) _mm_prefetch(reinterpret_cast<const char*>(out + 16), _MM_HINT_ET0);
    if (next) _mm_prefetch(reinterpret_cast<const char*>(out + 8 * Q + 8), _MM_HINT_ET0);
  }
  __m256 acc[kHalf][Q];
  for (int i = 0; i < kHalf; ++i) {
    for (int q = 0; q < Q; ++q) acc[i][q] = _mm256_setzero_ps();
  }
  const int64_t half = wp / 2;
  for (int64_t c = 0; c < g.c; ++c) {
#pragma GCC unroll 4
    for (int64_t ky = 0; ky < kh; ++ky) {
      const float* row = pad + (c * hp + oy * S + ky) * wp + ox;
      if (S == 1) {
#pragma GCC unroll 4
        for (int64_t kx = 0; kx < kw; ++kx, wb += kChannelBlock) tap<Q>(row + kx, wb, acc);
        continue;
      }
      // Stride 2: tap kx reads input column 2 (ox + j) + kx of the split
      // row, column ox + j + kx / 2 of its even or odd half.
      const float* odd = row + half;
      int64_t kx = 0;
#pragma GCC unroll 2
      for (; kx + 1 < kw; kx += 2, wb += 2 * kChannelBlock) {
        tap<Q>(row + kx / 2, wb, acc);
        tap<Q>(odd + kx / 2, wb + kChannelBlock, acc);
      }
      if (kx < kw) {
        tap<Q>(row + kx / 2, wb, acc);
        wb += kChannelBlock;
      }
    }
  }
  // The epilogue's kind read once: beside the may-alias vector stores a
  // read of e.kind was repeated after each store.
  const sgemm::Epilogue::Kind kind = e.kind;
  const __m256 lo = _mm256_set1_ps(e.lo), hi = _mm256_set1_ps(e.hi);
  // (Constant bounds, unrolled: acc indexed by a variable would live in
  // memory, and every FMA above with it.)
#pragma GCC unroll 4
  for (int i = 0; i < kHalf; ++i) {
    if (i >= count) break;
    float* out = y + ((m0 + i) * g.oh + oy) * g.ow + ox;
#pragma GCC unroll 3
    for (int q = 0; q < Q; ++q) {
      __m256 v = acc[i][q];
      // The bias after the sum, as the GEMM's store adds it; max / min with
      // the operands in the order of the scalar formulas (sgemm.h).
      if (bias) v = _mm256_add_ps(v, _mm256_set1_ps(bias[m0 + i]));
      if (kind == sgemm::Epilogue::kRelu) {
        v = _mm256_max_ps(v, _mm256_setzero_ps());
      } else if (kind == sgemm::Epilogue::kClip) {
        v = _mm256_max_ps(lo, v);
        v = _mm256_min_ps(hi, v);
      }
      const int64_t left = valid - kLanes8 * q;
      if (left >= kLanes8) {
        _mm256_storeu_ps(out + kLanes8 * q, v);
      } else {
        // The row's last vector: copied out (a masked store costs more on
        // Zen 3 than the copy).
        alignas(32) float part[kLanes8];
        _mm256_store_ps(part, v);
        std::memcpy(out + kLanes8 * q, part, sizeof(float) * static_cast<size_t>(left));
      }
    }
  }
}

template <int S, int K>
void row8(const Geometry& g, const float* pad, const float* weights, const float* bias,
          const sgemm::Epilogue& e, float* y, int64_t oy, int64_t mb) {
  const int64_t hp = padded_rows(g), wp = padded_cols(g);
  const int64_t taps = g.c * g.kh * g.kw;
  const int64_t m0 = mb * kChannelBlock, count = std::min(kChannelBlock, g.m - m0);
  constexpr int64_t kStep = 3 * kLanes8;
  // Each step of 24 pixels for both halves in turn: the inputs the second
  // half reads again are in L1. Measured on an AMD EPYC (Zen 2), 1 thread,
  // against 16-pixel steps with the kernel's loops rolled: squeezenet1_1's
  // 3x3 stem 0.77 -> 0.71 ms (onnxruntime 0.56), resnet18's 7x7 one 3.23
  // -> 2.72 (2.65).
  for (int64_t ox = 0; ox < g.ow; ox += kStep) {
    const int64_t left = std::min(kStep, g.ow - ox);
    for (int64_t h = 0; h * kHalf < count; ++h) {
      const float* wb = weights + mb * taps * kChannelBlock + h * kHalf;
      const int64_t mh = m0 + h * kHalf, ch = std::min<int64_t>(kHalf, count - h * kHalf);
      if (left > 16) {
        pixels8<3, S, K>(g, pad, hp, wp, wb, bias, mh, ch, e, y, oy, ox, left);
      } else if (left > 8) {
        pixels8<2, S, K>(g, pad, hp, wp, wb, bias, mh, ch, e, y, oy, ox, left);
      } else {
        pixels8<1, S, K>(g, pad, hp, wp, wb, bias, mh, ch, e, y, oy, ox, left);
      }
    }
  }
  // The row of the eight channels is final: the tile hook while in L1.
  if (e.tile) e.tile(e.tile_ctx, y + (m0 * g.oh + oy) * g.ow, g.oh * g.ow, count, g.ow);
}

}  // namespace

bool run_avx2(const Geometry& g, const float* pad, const float* weights, const float* bias,
              const sgemm::Epilogue& e, float* y, int64_t task0, int64_t task1) {
  const int64_t blocks = (g.m + kChannelBlock - 1) / kChannelBlock;
  for (int64_t t = task0; t < task1; ++t) {
    const bool k3 = g.kh == 3 && g.kw == 3;
    if (g.stride == 1) {
      (k3 ? row8<1, 3> : row8<1, 0>)(g, pad, weights, bias, e, y, t / blocks, t % blocks);
    } else {
      (k3 ? row8<2, 3> : row8<2, 0>)(g, pad, weights, bias, e, y, t / blocks, t % blocks);
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
  const int64_t half = wp / 2;
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      // Stride 2: the row is split (pad_input), tap kx's inputs of
      // consecutive outputs are column ox + j + kx / 2 of its even or odd
      // half: one load a vector, where two loads and a two-source permute
      // of the plain row cost the FMAs' pipes a permute per three FMAs
      // (Zen 4, 1 thread, kite-run --profile: squeezenet1_1's stem 0.579
      // -> 0.538 ms, mobilenet_v2's 0.301 -> 0.278, efficientnet_b0's
      // 0.416 -> 0.387).
      const float* row = pad + (c * hp + oy * S + ky) * wp + ox;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const float* at = S == 1 ? row + kx : row + (kx & 1) * half + kx / 2;
        __m512 v[Q];
        for (int q = 0; q < Q; ++q) v[q] = _mm512_loadu_ps(at + 16 * q);
        for (int i = 0; i < kChannelBlock; ++i) {
          const __m512 w = _mm512_set1_ps(wb[i]);
          for (int q = 0; q < Q; ++q) acc[i][q] = _mm512_fmadd_ps(v[q], w, acc[i][q]);
        }
        wb += kChannelBlock;
      }
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  const sgemm::Epilogue::Kind kind = e.kind;  // read once (as on AVX2)
  const __m512 lo = _mm512_set1_ps(e.lo), hi = _mm512_set1_ps(e.hi);
  for (int64_t i = 0; i < count; ++i) {
    float* out = y + ((m0 + i) * g.oh + oy) * g.ow + ox;
    for (int q = 0; q < Q; ++q) {
      __m512 v = acc[i][q];
      // The bias after the sum, as the GEMM's store adds it.
      if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[m0 + i]));
      if (kind == sgemm::Epilogue::kRelu) {
        v = _mm512_maskz_max_ps(kAll, v, zero);
      } else if (kind == sgemm::Epilogue::kClip) {
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
bool run_avx2(const Geometry&, const float*, const float*, const float*, const sgemm::Epilogue&,
              float*, int64_t, int64_t) {
  return false;
}
}  // namespace kite::cpu::stem::detail
#endif
