// Batched 2-D transposes in tiles: Transpose's kernel (shape_ops.cpp) runs
// the permutes that collapse to one (NCHW <-> NHWC and the like) here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "thread_pool.h"

namespace kite::cpu {

// out[b][r][c] = in[b * batch_stride + r + c * col_stride] for b < batch,
// r < rows, c < cols (out contiguous, rows x cols per b), elements of
// element_size bytes (1, 2, 4 or 8; false, nothing done, for another size).
bool transpose_tiles(const void* in, void* out, size_t element_size, int64_t batch,
                     int64_t batch_stride, int64_t rows, int64_t cols, int64_t col_stride,
                     ThreadPool& pool);

namespace detail {
// One full 16 x 16 tile of floats by register transposes (AVX-512F):
// dst[r * cols + c] = src[c * col_stride + r]. false (nothing done) where
// the processor or the build lacks AVX-512.
bool transpose_tile16_avx512(const float* src, int64_t col_stride, float* dst, int64_t cols);
// The same by four 8 x 8 transposes (AVX2).
bool transpose_tile16_avx2(const float* src, int64_t col_stride, float* dst, int64_t cols);
}  // namespace detail

}  // namespace kite::cpu
