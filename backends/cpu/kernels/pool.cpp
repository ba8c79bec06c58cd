// MaxPool, AveragePool (float32, 1 to 3 spatial dims; pads, strides,
// dilations, ceil_mode through the window geometry; MaxPool's optional
// Indices output), GlobalAveragePool and GlobalMaxPool.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common.h"
#include "kernels.h"

#include "sgemm.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace kite::cpu {
namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KITE_POOL_AVX512 1
#endif

// Vector helpers (GCC/Clang vector extensions: SSE on x86-64's baseline,
// NEON on arm64). Max keeps std::max's NaN rule, a < b ? b : a: a NaN
// sample is skipped, a NaN already in the output stays.
#if defined(__GNUC__) || defined(__clang__)
#define KITE_POOL_VECTOR 1
typedef float F4 __attribute__((vector_size(16)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, F4 v) { std::memcpy(p, &v, sizeof v); }
inline F4 max4(F4 a, F4 b) { return a < b ? b : a; }
#endif

// out[o] = max(out[o], src[2 o]) for o in [lo, hi): two loads and an even
// shuffle per four outputs. The vector loop reads src[2 o .. 2 o + 7], so
// it stops while 2 o + 7 <= 2 (hi - 1), the last sample the range allows.
void max_stride2(float* out, const float* src, int64_t lo, int64_t hi) {
  int64_t o = lo;
#ifdef KITE_POOL_VECTOR
  for (; o + 5 <= hi; o += 4) {
    const F4 a = load4(src + 2 * o), b = load4(src + 2 * o + 4);
    const F4 v = __builtin_shufflevector(a, b, 0, 2, 4, 6);
    store4(out + o, max4(load4(out + o), v));
  }
#endif
  for (; o < hi; ++o) out[o] = std::max(out[o], src[2 * o]);
}

// Sum and max of n floats with 16 independent lanes (the order of the
// additions differs from a single running sum; float rounding only).
float sum_floats(const float* x, int64_t n) {
  int64_t i = 0;
  float sum = 0.0f;
#ifdef KITE_POOL_VECTOR
  F4 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  for (; i + 16 <= n; i += 16) {
    a0 += load4(x + i);
    a1 += load4(x + i + 4);
    a2 += load4(x + i + 8);
    a3 += load4(x + i + 12);
  }
  const F4 a = (a0 + a1) + (a2 + a3);
  sum = (a[0] + a[1]) + (a[2] + a[3]);
#endif
  for (; i < n; ++i) sum += x[i];
  return sum;
}

float max_floats(const float* x, int64_t n) {
  int64_t i = 0;
  float best = -std::numeric_limits<float>::infinity();
#ifdef KITE_POOL_VECTOR
  F4 m0 = best - F4{}, m1 = m0, m2 = m0, m3 = m0;
  for (; i + 16 <= n; i += 16) {
    m0 = max4(m0, load4(x + i));
    m1 = max4(m1, load4(x + i + 4));
    m2 = max4(m2, load4(x + i + 8));
    m3 = max4(m3, load4(x + i + 12));
  }
  const F4 m = max4(max4(m0, m1), max4(m2, m3));
  for (int k = 0; k < 4; ++k) best = std::max(best, m[k]);
#endif
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

// Per spatial axis and output position: the kernel taps [lo, hi) that land
// inside the input, the input position of tap 0, and the number of taps
// inside the padded extent (AveragePool's count_include_pad divisor).
// Also, per tap, the output positions [tap_lo, tap_hi) whose tap lands
// inside the input (for the row-wise loops over the last axis).
struct AxisWindows {
  int64_t in = 1, out = 1, kernel = 1, stride = 1, dilation = 1, pad_begin = 0;
  std::vector<int64_t> lo, hi, start, padded;
  std::vector<int64_t> tap_lo, tap_hi;
};

AxisWindows axis_windows(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                         int64_t dilation, int64_t pad_begin, int64_t pad_end) {
  AxisWindows w;
  w.in = in;
  w.out = out;
  w.kernel = kernel;
  w.stride = stride;
  w.dilation = dilation;
  w.pad_begin = pad_begin;
  for (int64_t t = 0; t < kernel; ++t) {
    // o*stride + offset in [0, in)  <=>  o in [ceil(-offset/stride), floor((in-1-offset)/stride)]
    const int64_t offset = t * dilation - pad_begin;
    const int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const int64_t last_excl = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
    const int64_t lo = std::min(first, out);
    w.tap_lo.push_back(lo);
    w.tap_hi.push_back(std::max(lo, std::min(last_excl, out)));
  }
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * stride - pad_begin;
    int64_t lo = 0, hi = 0, padded = 0;
    bool any = false;
    for (int64_t t = 0; t < kernel; ++t) {
      const int64_t pos = start + t * dilation;
      if (pos >= -pad_begin && pos < in + pad_end) ++padded;
      if (pos >= 0 && pos < in) {
        if (!any) lo = t;
        hi = t + 1;
        any = true;
      }
    }
    w.lo.push_back(lo);
    w.hi.push_back(hi);
    w.start.push_back(start);
    w.padded.push_back(padded);
  }
  return w;
}

#ifdef KITE_POOL_AVX512
// The floats of the padded row max_plane_avx512 reads (from the row's
// start, the left padding included): its last step across reads up to
// row[2 o + 34) at stride 2, row[o + kw + 15) at stride 1, o the first
// output of that step.
int64_t avx512_row_floats(int64_t width, int64_t out_w, int64_t s, int64_t kw) {
  const int64_t last = (out_w - 1) / 16 * 16;
  return std::max(width, s == 2 ? 2 * last + 34 : last + kw + 15);
}

// out[o .. o + 16) = v, masked past n (whole-vector stores but for a row's
// last part: on Zen 4 a masked store costs more).
__attribute__((target("avx512f"))) inline void store_outputs(float* out, int64_t o, int64_t n, __m512 v) {
  if (o + 16 <= n) {
    _mm512_storeu_ps(out + o, v);
  } else {
    _mm512_mask_storeu_ps(out + o, static_cast<__mmask16>((1u << (n - o)) - 1u), v);
  }
}

// A whole plane of max_rows_separable sixteen lanes at a time (AVX-512F,
// chosen at run time with the GEMM's level), `batch` output rows at a time:
// the max down each output row's window into a padded row of its own (rows
// `pitch` floats apart, 64-byte aligned, pitch a multiple of sixteen; each
// -inf past the plane as far as avx512_row_floats; mid = row + pad_begin),
// then across kw neighbours, both with the row's last step masked. Stride 1
// (any kw), or stride 2 with kw 2 or 3; ah.kernel <= 16. The batch keeps the
// loads across from waiting on the stores down they overlap (a failed
// store-to-load forward a load): a row at a time, by two calls from the
// portable loop, squeezenet's 27x27 and 13x13 pools (Zen 4) took three
// times onnxruntime's time. max_ps(v, m) is v > m ? v : m: the fold m = m <
// v ? v : m exactly (a NaN v leaves m, a tie keeps m). (Masked forms with
// all-ones masks: the plain ones pass an undefined operand that GCC 12
// warns about, as in sgemm_avx512.cpp.)
__attribute__((target("avx512f"))) void max_plane_avx512(const AxisWindows& ah,
                                                         const AxisWindows& aw, const float* x,
                                                         float* y, float* rows, int64_t pitch,
                                                         int64_t batch, int64_t row_begin,
                                                         int64_t row_end) {
  constexpr __mmask16 kAll = 0xFFFF;
  auto lanes = [](int64_t n) {
    return n >= 16 ? kAll : static_cast<__mmask16>((1u << n) - 1u);
  };
  const int64_t W = aw.in, OW = aw.out, s = aw.stride, kw = aw.kernel;
  const __m512 low = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  // Every row -inf, once: the steps down write only its [pad_begin,
  // pad_begin + W).
  for (int64_t i = 0; i < batch * pitch; i += 16) _mm512_store_ps(rows + i, low);
  for (int64_t oh0 = row_begin; oh0 < row_end; oh0 += batch) {
    const int64_t oh1 = std::min(row_end, oh0 + batch);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* src[16];
      int64_t count = 0;
      for (int64_t th = ah.lo[oh]; th < ah.hi[oh]; ++th) {
        src[count++] = x + (ah.start[oh] + th * ah.dilation) * W;
      }
      float* mid = rows + (oh - oh0) * pitch + aw.pad_begin;
      // Whole vectors, then the row's last part masked: masked loads and
      // stores on every vector (and across, below) cost Zen 4 a quarter of
      // the plane (squeezenet's pools, kite-run --profile, 1 thread:
      // 64x111x111 0.147 -> 0.111 ms, 128x55x55 0.083 -> 0.066, 256x27x27
      // 0.059 -> 0.046).
      int64_t i = 0;
      for (; i + 16 <= W; i += 16) {
        __m512 m = low;
        for (int64_t r = 0; r < count; ++r) m = _mm512_maskz_max_ps(kAll, _mm512_loadu_ps(src[r] + i), m);
        _mm512_storeu_ps(mid + i, m);
      }
      if (i < W) {
        const __mmask16 k = lanes(W - i);
        __m512 m = low;
        for (int64_t r = 0; r < count; ++r) m = _mm512_maskz_max_ps(kAll, _mm512_maskz_loadu_ps(k, src[r] + i), m);
        _mm512_mask_storeu_ps(mid + i, k, m);
      }
    }
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* row = rows + (oh - oh0) * pitch;
      float* out = y + oh * OW;
      if (s == 2 && kw == 2) {
        for (int64_t o = 0; o < OW; o += 16) {
          const float* r = row + 2 * o;
          const __m512 a = _mm512_loadu_ps(r), b = _mm512_loadu_ps(r + 16);
          const __m512 t0 = _mm512_maskz_permutex2var_ps(kAll, a, even, b);
          const __m512 t1 = _mm512_maskz_permutex2var_ps(kAll, a, odd, b);
          store_outputs(out, o, OW, _mm512_maskz_max_ps(kAll, t1, t0));
        }
      } else if (s == 2) {
        for (int64_t o = 0; o < OW; o += 16) {
          const float* r = row + 2 * o;
          const __m512 a = _mm512_loadu_ps(r), b = _mm512_loadu_ps(r + 16);
          const __m512 c = _mm512_loadu_ps(r + 2), d = _mm512_loadu_ps(r + 18);
          const __m512 t0 = _mm512_maskz_permutex2var_ps(kAll, a, even, b);
          const __m512 t1 = _mm512_maskz_permutex2var_ps(kAll, a, odd, b);
          const __m512 t2 = _mm512_maskz_permutex2var_ps(kAll, c, even, d);
          store_outputs(out, o, OW, _mm512_maskz_max_ps(kAll, t2, _mm512_maskz_max_ps(kAll, t1, t0)));
        }
      } else {
        for (int64_t o = 0; o < OW; o += 16) {
          __m512 m = _mm512_loadu_ps(row + o);
          for (int64_t t = 1; t < kw; ++t) m = _mm512_maskz_max_ps(kAll, _mm512_loadu_ps(row + o + t), m);
          store_outputs(out, o, OW, m);
        }
      }
    }
  }
}
// The floats of the padded row max_plane_avx2 reads and writes (from the
// row's start): the steps down store whole vectors up to pad_begin + W
// rounded up to 8; the last step across reads up to row[2 o + 18) at
// stride 2, row[o + kw + 7) at stride 1, o its first output.
int64_t avx2_row_floats(int64_t pad_begin, int64_t width, int64_t in_w, int64_t out_w, int64_t s,
                        int64_t kw) {
  const int64_t last = (out_w - 1) / 8 * 8;
  return std::max({width, pad_begin + (in_w + 7) / 8 * 8, s == 2 ? 2 * last + 18 : last + kw + 7});
}

// max_plane_avx512 on AVX2: eight lanes, the even and odd columns of a
// stride-2 row by shufps and a 64-bit permute (no two-source permute), and
// no masked stores (slower on Zen 3 than the copies they save): the
// steps down store whole vectors, -inf in the lanes past the plane (the
// padding's value anyway), and the last vector of an output row is copied
// out. max_ps(v, m) is v > m ? v : m, the fold's formula (as there).
__attribute__((target("avx2"))) void max_plane_avx2(const AxisWindows& ah, const AxisWindows& aw,
                                                    const float* x, float* y, float* rows,
                                                    int64_t pitch, int64_t batch, int64_t row_begin,
                                                    int64_t row_end) {
  const int64_t W = aw.in, OW = aw.out, s = aw.stride, kw = aw.kernel;
  const __m256 low = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  // -inf where the steps down never store: before pad_begin and from
  // pad_begin + W on (whole aligned vectors; the steps down overwrite any
  // plane columns these cover). All of every row cost as much as an eighth
  // of the pool's maxima on 111x111 planes (Zen 2).
  const int64_t tail0 = (aw.pad_begin + W) / 8 * 8;
  for (int64_t b = 0; b < batch; ++b) {
    float* r = rows + b * pitch;
    for (int64_t i = 0; i < aw.pad_begin; i += 8) _mm256_store_ps(r + i, low);
    for (int64_t i = tail0; i < pitch; i += 8) _mm256_store_ps(r + i, low);
  }
  const int64_t w_full = W / 8 * 8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(W - w_full)), iota);
  for (int64_t oh0 = row_begin; oh0 < row_end; oh0 += batch) {
    const int64_t oh1 = std::min(row_end, oh0 + batch);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* src[16];
      int64_t count = 0;
      for (int64_t th = ah.lo[oh]; th < ah.hi[oh]; ++th) {
        src[count++] = x + (ah.start[oh] + th * ah.dilation) * W;
      }
      float* mid = rows + (oh - oh0) * pitch + aw.pad_begin;
      int64_t i = 0;
      if (count == 3) {
        // The common window (3 rows, none in the padding), its rows named:
        // the loop over a count kept them in memory and cost twice the
        // maxima (squeezenet1_1's pools, Zen 2).
        const float *r0 = src[0], *r1 = src[1], *r2 = src[2];
        for (; i < w_full; i += 8) {
          const __m256 m = _mm256_max_ps(_mm256_loadu_ps(r2 + i),
                                         _mm256_max_ps(_mm256_loadu_ps(r1 + i), _mm256_max_ps(_mm256_loadu_ps(r0 + i), low)));
          _mm256_storeu_ps(mid + i, m);
        }
      }
      for (; i < w_full; i += 8) {
        __m256 m = low;
        for (int64_t r = 0; r < count; ++r) m = _mm256_max_ps(_mm256_loadu_ps(src[r] + i), m);
        _mm256_storeu_ps(mid + i, m);
      }
      if (i < W && W >= 8) {
        // The row's last eight columns again, overlapping the vector
        // before (the same maxima): no masked loads, and nothing stored
        // past W, whose -inf stays.
        __m256 m = low;
        for (int64_t r = 0; r < count; ++r) m = _mm256_max_ps(_mm256_loadu_ps(src[r] + W - 8), m);
        _mm256_storeu_ps(mid + W - 8, m);
      } else if (i < W) {
        __m256 m = low;
        for (int64_t r = 0; r < count; ++r) {
          m = _mm256_max_ps(_mm256_blendv_ps(low, _mm256_maskload_ps(src[r] + i, tail), _mm256_castsi256_ps(tail)), m);
        }
        _mm256_storeu_ps(mid + i, m);
      }
    }
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* row = rows + (oh - oh0) * pitch;
      float* out = y + oh * OW;
      for (int64_t o = 0; o < OW; o += 8) {
        // The row's last vector, when it would be partial, is its last
        // eight outputs instead (overlapping the one before, the same
        // values): a whole store, no copy through memory.
        if (o + 8 > OW && OW >= 8) o = OW - 8;
        __m256 m;
        if (s == 2) {
          // The maxima in shufps' order (pairs 0, 2, 1, 3), one 64-bit
          // permute for all taps: a permute a tap was the loop's cost on
          // Zen 2, where it is two micro-ops.
          const float* r = row + 2 * o;
          const __m256 a = _mm256_loadu_ps(r), b = _mm256_loadu_ps(r + 8);
          __m256 t = _mm256_max_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)),
                                   _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
          if (kw == 3) {
            t = _mm256_max_ps(
                _mm256_shuffle_ps(_mm256_loadu_ps(r + 2), _mm256_loadu_ps(r + 10), _MM_SHUFFLE(2, 0, 2, 0)), t);
          }
          m = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
        } else {
          m = _mm256_loadu_ps(row + o);
          for (int64_t t = 1; t < kw; ++t) m = _mm256_max_ps(_mm256_loadu_ps(row + o + t), m);
        }
        if (o + 8 <= OW) {
          _mm256_storeu_ps(out + o, m);
        } else {
          alignas(32) float part[8];
          _mm256_store_ps(part, m);
          std::memcpy(out + o, part, sizeof(float) * static_cast<size_t>(OW - o));
        }
      }
    }
  }
}
#endif

class PoolKernel : public Kernel {
 public:
  enum class Mode { kMax, kAverage };

  PoolKernel(Mode mode, int64_t planes, AxisWindows axes[3], bool include_pad,
             bool column_major_indices, const float* x, float* y, int64_t* indices)
      : mode_(mode), planes_(planes), include_pad_(include_pad),
        column_major_(column_major_indices), x_(x), y_(y), indices_(indices) {
    for (int a = 0; a < 3; ++a) axes_[a] = axes[a];
  }

  void run(ThreadPool& pool) override {
    const int64_t in_plane = axes_[0].in * axes_[1].in * axes_[2].in;
    const int64_t out_plane = axes_[0].out * axes_[1].out * axes_[2].out;
    if (planes_ == 0 || out_plane == 0) return;
    // 2-D pools without indices go band of output rows by band, each band
    // over every plane: thread i's share (parallel_for) is then the rows of
    // the pixels that the layers around it, split by pixels, gave it and
    // will take from it, in its own core's caches (squeezenet1_1's pools
    // on a Zen 2 host whose vCPUs were ~220 ns apart, split by planes, ran
    // no faster on 2 threads than on 1). Except planes whose rows of floats
    // do not start on cache lines and that no stem made (under 96 rows):
    // the GEMMs there split by channels (sgemm::splits_columns_by_thread),
    // so the pool does too. Same host, vCPUs ~180 ns apart, 2 threads,
    // squeezenet1_1's 55x55 and 27x27 pools 0.125 -> 0.081 and 0.126 ->
    // 0.066 ms (their 1-thread times 0.10 and 0.07), the model 6.34 ->
    // 6.11 ms; its 111x111 pool, after the stem (split by output rows),
    // was 0.14 by bands and 0.17 by planes.
    const int64_t oh = axes_[1].out;
    const bool by_pixels = sgemm::splits_columns_by_thread(axes_[1].in * axes_[2].in) || axes_[1].in >= 96;
    const int64_t bands = indices_ == nullptr && axes_[0].out == 1 && by_pixels
                              ? std::min<int64_t>(pool.size(), oh)
                              : 1;
    pool.parallel_for(planes_ * bands, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t band = t / planes_, plane = t % planes_;
        const float* x = x_ + plane * in_plane;
        float* y = y_ + plane * out_plane;
        int64_t* idx = indices_ ? indices_ + plane * out_plane : nullptr;
        const int64_t row_begin = band * oh / bands, row_end = (band + 1) * oh / bands;
        if (idx) {
          max_plane(x, y, idx, plane * in_plane);
        } else if (!max_rows_separable(x, y, row_begin, row_end)) {
          rows_plane(x, y, row_begin, row_end);
        }
      }
    });
  }

 private:
  void max_plane(const float* x, float* y, int64_t* idx, int64_t plane_offset) const {
    const AxisWindows &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
    const int64_t H = ah.in, W = aw.in, D = ad.in;
    int64_t o = 0;
    for (int64_t od = 0; od < ad.out; ++od) {
      for (int64_t oh = 0; oh < ah.out; ++oh) {
        for (int64_t ow = 0; ow < aw.out; ++ow, ++o) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t best_pos = -1;
          for (int64_t td = ad.lo[od]; td < ad.hi[od]; ++td) {
            const int64_t id = ad.start[od] + td * ad.dilation;
            for (int64_t th = ah.lo[oh]; th < ah.hi[oh]; ++th) {
              const int64_t ih = ah.start[oh] + th * ah.dilation;
              const float* row = x + (id * H + ih) * W;
              for (int64_t tw = aw.lo[ow]; tw < aw.hi[ow]; ++tw) {
                const int64_t iw = aw.start[ow] + tw * aw.dilation;
                const float v = row[iw];
                if (v > best || best_pos < 0) {
                  best = v;
                  best_pos = column_major_ ? (iw * H + ih) * D + id : (id * H + ih) * W + iw;
                }
              }
            }
          }
          y[o] = best;
          if (idx) idx[o] = best_pos < 0 ? -1 : plane_offset + best_pos;
        }
      }
    }
  }

  // 2-D MaxPool without indices, column dilation 1: per output row, the
  // max down the window's rows once per input column (into a row padded
  // with -inf on both sides), then the max across kernel-width neighbours
  // of that row: kh + kw steps per output instead of kh * kw read-modify-
  // writes of the output row (squeezenet's three 3x3 stride-2 pools: 1.31
  // -> 0.43 ms, resnet18's 0.47 -> 0.36; AMD EPYC Zen 4, 1 thread; the
  // same loops through GCC's vector extensions instead of SSE intrinsics
  // were slower than rows_plane: the shuffles went through the stack). Same result as
  // rows_plane: both are the max of the window's non-NaN samples (-inf
  // when there are none); only which of +0 / -0 wins a tie of the two may
  // differ. False (nothing written) when the geometry is not this one.
  // Output rows [row_begin, row_end) of the plane.
  bool max_rows_separable(const float* x, float* y, int64_t row_begin, int64_t row_end) const {
    const AxisWindows &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
    constexpr int64_t kRow = 4096;  // floats of the padded row, on the stack
    const int64_t W = aw.in, OW = aw.out, s = aw.stride, kw = aw.kernel;
    const int64_t width = std::max(aw.pad_begin + W, (OW - 1) * s + kw);
    if (mode_ != Mode::kMax || ad.in != 1 || ad.out != 1 || ad.kernel != 1 || aw.dilation != 1 ||
        width + 16 > kRow) {
      return false;
    }
#ifdef KITE_POOL_AVX512
    // Sixteen lanes: on squeezenet's 111x111 pools (Zen 4) the four-lane
    // loops took twice onnxruntime's time. Eight on AVX2: on a Zen 3
    // (1 thread) squeezenet's three pools against the four-lane loops
    // 0.69 -> 0.26, 0.37 -> 0.13 and 0.20 -> 0.10 ms (kite-run --profile).
    const sgemm::MicroKernel level = sgemm::micro_kernel_in_use();
    const bool shape = ah.kernel <= 16 && (s == 1 || (s == 2 && (kw == 2 || kw == 3)));
    const bool avx512 = level == sgemm::MicroKernel::kAvx512 && shape;
    const bool avx2 = level == sgemm::MicroKernel::kAvx2Fma && shape;
    const int64_t filled = avx512 ? std::max(width + 16, avx512_row_floats(width, OW, s, kw))
                           : avx2 ? std::max(width + 16, avx2_row_floats(aw.pad_begin, width, W, OW, s, kw))
                                  : width + 16;
#else
    const int64_t filled = width + 16;
#endif
    if (filled > kRow) return false;
    constexpr float kLow = -std::numeric_limits<float>::infinity();
    alignas(64) float row[kRow];
#ifdef KITE_POOL_AVX512
    if (avx512) {
      // As many padded rows as fit, eight at most, each a whole number of
      // cache lines apart.
      const int64_t pitch = (filled + 15) / 16 * 16;
      const int64_t batch = std::max<int64_t>(1, std::min<int64_t>({8, ah.out, kRow / pitch}));
      max_plane_avx512(ah, aw, x, y, row, pitch, batch, row_begin, row_end);
      return true;
    }
    if (avx2) {
      const int64_t pitch = (filled + 7) / 8 * 8;
      const int64_t batch = std::max<int64_t>(1, std::min<int64_t>({8, ah.out, kRow / pitch}));
      max_plane_avx2(ah, aw, x, y, row, pitch, batch, row_begin, row_end);
      return true;
    }
#endif
    for (int64_t i = 0; i < aw.pad_begin; ++i) row[i] = kLow;
    for (int64_t i = aw.pad_begin + W; i < filled; ++i) row[i] = kLow;
    float* mid = row + aw.pad_begin;
    for (int64_t oh = row_begin; oh < row_end; ++oh) {
      // Down the rows, one row at a time over the whole width: max(a, b) =
      // a < b ? b : a from -inf, the rows_plane fold (a NaN sample never
      // replaces the running value).
      for (int64_t i = 0; i < W; ++i) mid[i] = kLow;
      for (int64_t th = ah.lo[oh]; th < ah.hi[oh]; ++th) {
        const float* src = x + (ah.start[oh] + th * ah.dilation) * W;
        int64_t iw = 0;
#ifdef KITE_POOL_VECTOR
        for (; iw + 4 <= W; iw += 4) store4(mid + iw, max4(load4(mid + iw), load4(src + iw)));
#endif
        for (; iw < W; ++iw) mid[iw] = std::max(mid[iw], src[iw]);
      }
      // Across: output o's window is row[o * s .. o * s + kw).
      float* out = y + oh * OW;
      int64_t o = 0;
#if defined(__SSE2__)
      if (s == 2 && kw == 3) {
        // Even, odd and even-from-2 columns by shufps; maxps(b, a) is
        // a < b ? b : a, the fold's formula, NaN and signed zeros included.
        for (; o + 4 <= OW; o += 4) {
          const float* r = row + 2 * o;
          const __m128 a = _mm_loadu_ps(r), b = _mm_loadu_ps(r + 4);
          const __m128 c = _mm_loadu_ps(r + 2), d = _mm_loadu_ps(r + 6);
          const __m128 t0 = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
          const __m128 t1 = _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
          const __m128 t2 = _mm_shuffle_ps(c, d, _MM_SHUFFLE(2, 0, 2, 0));
          _mm_storeu_ps(out + o, _mm_max_ps(t2, _mm_max_ps(t1, t0)));
        }
      }
#endif
#ifdef KITE_POOL_VECTOR
      if (s == 1) {
        for (; o + 4 <= OW; o += 4) {
          F4 m = load4(row + o);
          for (int64_t t = 1; t < kw; ++t) m = max4(m, load4(row + o + t));
          store4(out + o, m);
        }
      }
#endif
      for (; o < OW; ++o) {
        float m = row[o * s];
        for (int64_t t = 1; t < kw; ++t) m = std::max(m, row[o * s + t]);
        out[o] = m;
      }
    }
    return true;
  }

  // Max or average without indices: for each output row, each kernel tap
  // updates the whole row (contiguous for stride 1, so it vectorises).
  // Output rows [row_begin, row_end) of every depth of the plane (bands
  // of rows come only with one depth).
  void rows_plane(const float* x, float* y, int64_t row_begin, int64_t row_end) const {
    const AxisWindows &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
    const int64_t H = ah.in, W = aw.in, OW = aw.out, s = aw.stride;
    const bool is_max = mode_ == Mode::kMax;
    for (int64_t od = 0; od < ad.out; ++od) {
      for (int64_t oh = row_begin; oh < row_end; ++oh) {
        float* out = y + (od * ah.out + oh) * OW;
        const float init = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
        for (int64_t ow = 0; ow < OW; ++ow) out[ow] = init;
        for (int64_t td = ad.lo[od]; td < ad.hi[od]; ++td) {
          const int64_t id = ad.start[od] + td * ad.dilation;
          for (int64_t th = ah.lo[oh]; th < ah.hi[oh]; ++th) {
            const int64_t ih = ah.start[oh] + th * ah.dilation;
            const float* row = x + (id * H + ih) * W;
            for (int64_t tw = 0; tw < aw.kernel; ++tw) {
              const int64_t lo = aw.tap_lo[tw], hi = aw.tap_hi[tw];
              const float* src = row + tw * aw.dilation - aw.pad_begin;
              if (is_max && s == 1) {
                for (int64_t ow = lo; ow < hi; ++ow) out[ow] = std::max(out[ow], src[ow]);
              } else if (is_max && s == 2) {
                max_stride2(out, src, lo, hi);
              } else if (is_max) {
                for (int64_t ow = lo; ow < hi; ++ow) out[ow] = std::max(out[ow], src[ow * s]);
              } else if (s == 1) {
                for (int64_t ow = lo; ow < hi; ++ow) out[ow] += src[ow];
              } else {
                for (int64_t ow = lo; ow < hi; ++ow) out[ow] += src[ow * s];
              }
            }
          }
        }
        if (is_max) continue;
        const int64_t count_dh =
            include_pad_ ? ad.padded[od] * ah.padded[oh]
                         : (ad.hi[od] - ad.lo[od]) * (ah.hi[oh] - ah.lo[oh]);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t count =
              count_dh * (include_pad_ ? aw.padded[ow] : aw.hi[ow] - aw.lo[ow]);
          out[ow] = count > 0 ? out[ow] / static_cast<float>(count) : 0.0f;
        }
      }
    }
  }

  Mode mode_;
  int64_t planes_;
  AxisWindows axes_[3];
  bool include_pad_;
  bool column_major_;
  const float* x_;
  float* y_;
  int64_t* indices_;
};

class GlobalPoolKernel : public Kernel {
 public:
  GlobalPoolKernel(bool max, int64_t planes, int64_t plane_size, const float* x, float* y)
      : max_(max), planes_(planes), plane_size_(plane_size), x_(x), y_(y) {}

  void run(ThreadPool& pool) override {
    pool.parallel_for(planes_, rows_per_chunk(plane_size_), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const float* x = x_ + p * plane_size_;
        if (max_) {
          y_[p] = max_floats(x, plane_size_);
        } else {
          y_[p] = plane_size_ > 0 ? sum_floats(x, plane_size_) / static_cast<float>(plane_size_) : 0.0f;
        }
      }
    });
  }

 private:
  bool max_;
  int64_t planes_, plane_size_;
  const float* x_;
  float* y_;
};

std::string check_pool_input(const OpNode& op, int min_rank, int max_rank) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  std::string why = expect_dtype(op, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const int r = op.inputs[0].rank();
  if (r < min_rank || r > max_rank) {
    return input_label(op, 0) + " has " + std::to_string(r) + " dims, the CPU kernel takes " +
           std::to_string(min_rank) + " to " + std::to_string(max_rank);
  }
  return "";
}

}  // namespace

std::string check_pool(const OpNode& op) {
  return check_pool_input(op, 3, 5);
}

std::unique_ptr<Kernel> prepare_pool(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  kite::ops::WindowGeometry g;
  std::string why;
  if (!kite::ops::window_geometry(op, &g, &why)) {
    *err = why;
    return nullptr;
  }
  const Shape& x = op.inputs[0].shape;
  const size_t r = g.input.size();
  if (r < 1 || r > 3 || g.output.size() != r || g.kernel.size() != r || g.strides.size() != r ||
      g.dilations.size() != r || g.pads_begin.size() != r || g.pads_end.size() != r) {
    return prepare_error(err, op, "window geometry has an unexpected rank");
  }
  Shape expected = {x[0], x[1]};
  expected.insert(expected.end(), g.output.begin(), g.output.end());
  if (!has_output(args, 0) || output_shape(args, 0) != expected) {
    return prepare_error(err, op, "output shape disagrees with the window geometry " +
                                      kite::ops::shape_string(expected));
  }
  AxisWindows axes[3];
  const size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    axes[lead + i] = axis_windows(g.input[i], g.output[i], g.kernel[i], g.strides[i],
                                  g.dilations[i], g.pads_begin[i], g.pads_end[i]);
  }
  for (size_t i = 0; i < lead; ++i) axes[i] = axis_windows(1, 1, 1, 1, 1, 0, 0);
  const bool is_max = op.op == "MaxPool";
  int64_t* indices = nullptr;
  if (is_max && has_output(args, 1)) {
    if (output_dtype(args, 1) != KITE_DTYPE_INT64 || output_shape(args, 1) != expected) {
      return prepare_error(err, op, "Indices output must be int64 " +
                                        kite::ops::shape_string(expected));
    }
    indices = static_cast<int64_t*>(args.output_data(1));
  }
  const bool column_major = is_max && op.attr_int("storage_order", 0) != 0;
  return std::make_unique<PoolKernel>(
      is_max ? PoolKernel::Mode::kMax : PoolKernel::Mode::kAverage, x[0] * x[1], axes,
      op.attr_int("count_include_pad", 0) != 0, column_major,
      static_cast<const float*>(args.input_data(0)), static_cast<float*>(args.output_data(0)),
      indices);
}

std::string check_global_pool(const OpNode& op) { return check_pool_input(op, 3, KITE_MAX_RANK); }

std::unique_ptr<Kernel> prepare_global_pool(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  Shape expected(x.size(), 1);
  expected[0] = x[0];
  expected[1] = x[1];
  if (!has_output(args, 0) || output_shape(args, 0) != expected) {
    return prepare_error(err, op, "output shape is not " + kite::ops::shape_string(expected));
  }
  return std::make_unique<GlobalPoolKernel>(op.op == "GlobalMaxPool", x[0] * x[1],
                                            product(x, 2, x.size()),
                                            static_cast<const float*>(args.input_data(0)),
                                            static_cast<float*>(args.output_data(0)));
}

}  // namespace kite::cpu
