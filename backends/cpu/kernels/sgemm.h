// Cache-blocked float GEMM on packed operands, shared by Conv, ConvTranspose,
// Gemm and MatMul.
//
// A (m x k) is packed into panels of kMR rows, B (k x n) into panels of kNR
// columns; within a panel the k index is outermost, so a block of k values
// of one panel is contiguous. Panels are zero-padded to full width. Packing
// needs no workspace beyond the packed buffers themselves, which callers
// allocate at prepare time; weights are packed once, at prepare.
#pragma once

#include <cstdint>

#include "thread_pool.h"

namespace kite::cpu::sgemm {

constexpr int64_t kMR = 6;
constexpr int64_t kNR = 8;

inline int64_t packed_a_floats(int64_t m, int64_t k) { return (m + kMR - 1) / kMR * kMR * k; }
inline int64_t packed_b_floats(int64_t k, int64_t n) { return (n + kNR - 1) / kNR * kNR * k; }

// A(i, p) = a[i * row_stride + p * col_stride] * alpha.
void pack_a(const float* a, int64_t row_stride, int64_t col_stride, int64_t m, int64_t k,
            float alpha, float* packed, ThreadPool* pool);
// B(p, j) = b[p * row_stride + j * col_stride].
void pack_b(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
            float* packed, ThreadPool* pool);

// C(i, j) = c[i * ldc + j] gets A*B (+ row_bias[i] when given), or, with
// accumulate, C += A*B. pool null: runs on the calling thread.
void gemm_packed(int64_t m, int64_t n, int64_t k, const float* packed_a, const float* packed_b,
                 float* c, int64_t ldc, const float* row_bias, bool accumulate,
                 ThreadPool* pool);

}  // namespace kite::cpu::sgemm
