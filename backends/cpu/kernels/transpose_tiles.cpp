#include "transpose_tiles.h"

#include <algorithm>

#include "sgemm.h"

namespace kite::cpu {
namespace {

constexpr int64_t kTile = 16;

// Tiles of kTile x kTile, each read as kTile runs of contiguous input and
// written as kTile runs of contiguous output, so every cache line fetched
// is used whole: the element-by-element walk of an NHWC -> NCHW permute
// read one float per input line and came back to each line once per
// channel (convnext_tiny's permutes ran at 1.6 ns a float on Zen 4, 4x
// onnxruntime's). Tiles go along c, a row of tiles at a time, so the kTile
// input lines of each c stay in L1 for the next row of tiles.
template <typename T>
void run(const T* in, T* out, int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols,
         int64_t col_stride, sgemm::MicroKernel level, ThreadPool& pool) {
  auto tile = [&](int64_t b, int64_t r0, int64_t c0) {
    const int64_t nr = std::min(kTile, rows - r0), nc = std::min(kTile, cols - c0);
    const T* src = in + b * batch_stride + r0 + c0 * col_stride;
    T* dst = out + (b * rows + r0) * cols + c0;
    if constexpr (sizeof(T) == sizeof(float)) {
      if (level != sgemm::MicroKernel::kPortable && nr == kTile && nc == kTile) {
        const float* s = reinterpret_cast<const float*>(src);
        float* d = reinterpret_cast<float*>(dst);
        if (level == sgemm::MicroKernel::kAvx512 && detail::transpose_tile16_avx512(s, col_stride, d, cols)) return;
        if (level == sgemm::MicroKernel::kAvx2Fma && detail::transpose_tile16_avx2(s, col_stride, d, cols)) return;
      }
    }
    // The tile's kTile input lines stay in L1 while its rows are written.
    for (int64_t r = 0; r < nr; ++r) {
      for (int64_t c = 0; c < nc; ++c) dst[r * cols + c] = src[c * col_stride + r];
    }
  };
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  // Tasks: rows of tiles, cut into strips of at most 256 tiles (64K
  // elements); at least 8K elements a task.
  const int64_t strip = std::min<int64_t>(col_tiles, 256);
  const int64_t strips = (col_tiles + strip - 1) / strip;
  const int64_t task_elements = kTile * std::min(cols, strip * kTile);
  pool.parallel_for(batch * row_tiles * strips, std::max<int64_t>(1, 8192 / task_elements),
                    [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (row_tiles * strips);
      const int64_t r0 = t / strips % row_tiles * kTile;
      const int64_t w0 = t % strips * strip, w1 = std::min(col_tiles, w0 + strip);
      for (int64_t w = w0; w < w1; ++w) tile(b, r0, w * kTile);
    }
  });
}

}  // namespace

bool transpose_tiles(const void* in, void* out, size_t element_size, int64_t batch,
                     int64_t batch_stride, int64_t rows, int64_t cols, int64_t col_stride,
                     ThreadPool& pool) {
  const sgemm::MicroKernel level = sgemm::micro_kernel_in_use();
  constexpr sgemm::MicroKernel kScalar = sgemm::MicroKernel::kPortable;
  switch (element_size) {
    case 1:
      run(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), batch, batch_stride, rows,
          cols, col_stride, kScalar, pool);
      return true;
    case 2:
      run(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), batch, batch_stride, rows,
          cols, col_stride, kScalar, pool);
      return true;
    case 4:
      run(static_cast<const float*>(in), static_cast<float*>(out), batch, batch_stride, rows, cols,
          col_stride, level, pool);
      return true;
    case 8:
      run(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out), batch, batch_stride, rows,
          cols, col_stride, kScalar, pool);
      return true;
    default:
      return false;
  }
}

}  // namespace kite::cpu

// The AVX-512 tile, the instructions enabled by a pragma after every
// include (see sgemm_avx512.cpp for why).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace kite::cpu::detail {
namespace {
#include "transpose16.inc"
}  // namespace

bool transpose_tile16_avx512(const float* src, int64_t col_stride, float* dst, int64_t cols) {
  __m512 v[16];
  for (int c = 0; c < 16; ++c) v[c] = _mm512_loadu_ps(src + c * col_stride);
  transpose16(v);
  for (int r = 0; r < 16; ++r) _mm512_storeu_ps(dst + r * cols, v[r]);
  return true;
}

}  // namespace kite::cpu::detail
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace kite::cpu::detail {
namespace {
#include "transpose8.inc"
}  // namespace

// The AVX2 tile: four 8 x 8 register transposes. On a Zen 3 (1 thread,
// kite-run --profile) convnext_tiny's permutes 8.6 -> 4.1 ms per run
// (onnxruntime's Transposes 3.7); element by element they were 2.4x that.
bool transpose_tile16_avx2(const float* src, int64_t col_stride, float* dst, int64_t cols) {
  for (int c0 = 0; c0 < 16; c0 += 8) {
    for (int r0 = 0; r0 < 16; r0 += 8) {
      __m256 v[8];
      for (int c = 0; c < 8; ++c) v[c] = _mm256_loadu_ps(src + (c0 + c) * col_stride + r0);
      transpose8(v);
      for (int r = 0; r < 8; ++r) _mm256_storeu_ps(dst + (r0 + r) * cols + c0, v[r]);
    }
  }
  return true;
}

}  // namespace kite::cpu::detail
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
namespace kite::cpu::detail {
bool transpose_tile16_avx512(const float*, int64_t, float*, int64_t) { return false; }
bool transpose_tile16_avx2(const float*, int64_t, float*, int64_t) { return false; }
}  // namespace kite::cpu::detail
#endif
