// Cache-blocked float GEMM on packed operands, shared by Conv, ConvTranspose,
// Gemm and MatMul.
//
// A (m x k) is packed into panels of kMR rows, B (k x n) into panels of kNR
// columns; within a panel the k index is outermost, so a block of k values
// of one panel is contiguous. Panels are zero-padded to full width. Packing
// needs no workspace beyond the packed buffers themselves, which callers
// allocate at prepare time; weights are packed once, at prepare.
#pragma once

#include <algorithm>
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

// An activation applied to each tile of C in the store of its last k block
// (in registers on the AVX-512 level, in the copy from the tile buffer on
// the others), instead of a second pass over C.
// kRelu: x > 0 ? x : 0 (NaN gives 0); kClip: min then max against lo / hi
// as ONNX Clip (NaN passes). The same formulas as the fused activations'
// (fused_common.cpp), so both give the same bits.
//
// A hook on a finished tile of an output: rows x cols floats at c, ld
// apart (ctx: the hook's own data). The GEMM's Epilogue::tile, the
// depthwise bands' (depthwise::Channels::tile), a fused kernel's
// (Kernel::take_tile_hook).
using TileHook = void (*)(const void* ctx, float* c, int64_t ld, int64_t rows, int64_t cols);

// tile, when set, runs after that on each finished tile of C (rows x cols
// floats at c, ldc apart): a task's block on the AVX-512 level (up to 96
// rows by 256 columns, in L2), a panel's strip on the others, a range of
// the column for the GEMV, of the row for one-row products; every value
// of C once. An activation too long for the store's registers (SiLU,
// GELU: fused_common's activation_tile), or a fused MatMul's bias and
// activation. It must give a value's bits whatever tile it comes in.
struct Epilogue {
  enum Kind { kNone, kRelu, kClip };
  Kind kind = kNone;
  float lo = 0.0f, hi = 0.0f;
  TileHook tile = nullptr;
  const void* tile_ctx = nullptr;
};
// The epilogue on one value, the AVX-512 block kernel's formulas: Relu
// x > 0 ? x : 0, Clip (lo > x ? lo : x) then (hi < x ? hi : x); NaN passes
// Clip, Relu makes it 0. For the kernels that finish values one at a time (the GEMV,
// the lone column, the stem's scalar level).
inline float finish_value(const Epilogue& e, float v) {
  if (e.kind == Epilogue::kRelu) return v > 0.0f ? v : 0.0f;
  if (e.kind == Epilogue::kClip) {
    v = e.lo > v ? e.lo : v;
    return e.hi < v ? e.hi : v;
  }
  return v;
}

namespace detail {
// The column kernels' store of one A panel's k-block sums (sums[r], row r
// of panel ip; rows past m skipped), value by value as the block kernels
// store them: + C (add: a later k block, or accumulate) or + the row
// bias, then the epilogue after the last k block.
inline void store_column_panel(const float* sums, int64_t ip, int64_t m, float* y, int64_t ldy,
                               const float* row_bias, bool add, bool last, const Epilogue* epilogue) {
  const int64_t rows = std::min<int64_t>(kMR, m - ip * kMR);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = ip * kMR + r;
    float* out = y + i * ldy;
    float v = sums[r];
    if (add) {
      v = v + *out;
    } else if (row_bias) {
      v = v + row_bias[i];
    }
    *out = last && epilogue ? finish_value(*epilogue, v) : v;
  }
}
}  // namespace detail

// C(i, j) = c[i * ldc + j] gets A*B (+ row_bias[i] when given), or, with
// accumulate, C += A*B; then the epilogue, when given. pool null: runs on
// the calling thread.
// split_scratch: k_split_floats(m, n, k) floats, or null (no split; see
// k_split_at).
void gemm_packed(int64_t m, int64_t n, int64_t k, const float* packed_a, const float* packed_b,
                 float* c, int64_t ldc, const float* row_bias, bool accumulate,
                 ThreadPool* pool, const Epilogue* epilogue = nullptr,
                 float* split_scratch = nullptr);

// Where a GEMM of m rows and k sums k in two halves when its caller gives
// it the scratch (0: it does not): the first half's sums into C, the
// second's into the scratch (k_split_floats: m x n floats), then C =
// scratch + C and the epilogue. On two threads each thread sums one half.
// For a pointwise projection on a small plane, whose input (B, k channels)
// comes from a depthwise layer that split its channels between the
// threads: each thread then reads the channels its core wrote, and only C
// (at most half the size of B: 2m <= k) crosses between the cores; each
// half has 128 values of k at least; the AVX2 and AVX-512 levels. The
// split depends on m and k alone, and on whether the caller passes the
// scratch (conv.cpp: from the plane's width, the same for a band of the
// plane as for the whole), never on the threads: a value's bits are the
// same on any number of threads.
int64_t k_split_at(int64_t m, int64_t k);
inline int64_t k_split_floats(int64_t m, int64_t n, int64_t k) {
  return k_split_at(m, k) > 0 ? m * n : 0;
}

// Whether this process's GEMM level reads a row-major B in place
// (gemm_direct_b) and, for a GEMM of m rows and n columns, gains by it:
// the AVX-512 level always, the AVX2 one below a number of rows, not for
// short rows of B under many rows of A and not for rows a multiple of 2
// KiB apart (sgemm.cpp); the others need B packed.
bool reads_b_in_place(int64_t m, int64_t n);
// Whether a GEMM on several threads may give each thread a band of C's
// columns (sgemm.cpp, run_gemm): only where C's rows, ldc floats apart,
// start on 64-byte lines, so that no line of C is written by two threads.
// Kernels around a convolution's GEMM split its planes the same way
// (conv.cpp's depthwise channel blocks).
inline bool splits_columns_by_thread(int64_t ldc) { return ldc % 16 == 0; }
// As gemm_packed with B (k x n) read where it lies, row p at b + p * ldb
// (ldb >= n): a pointwise convolution's input is its B, so it needs no
// packing pass. On the AVX-512 and AVX2 levels (whatever m); false
// (nothing done) on the others.
bool gemm_direct_b(int64_t m, int64_t n, int64_t k, const float* packed_a, const float* b,
                   int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool accumulate,
                   ThreadPool* pool, const Epilogue* epilogue = nullptr,
                   float* split_scratch = nullptr);

// The micro-kernel in use: the portable one, or the best one the processor
// offers (AVX-512F, else AVX2+FMA on x86-64; NEON on AArch64), chosen once at
// first use. KITE_CPU_SGEMM=portable|avx2|avx512 in the environment caps the
// choice (for A/B measurements; a level the CPU lacks is not used; on
// AArch64 only "portable" changes anything).
enum class MicroKernel { kPortable, kAvx2Fma, kAvx512, kNeon };
MicroKernel micro_kernel_in_use();
// Tests only: run the portable kernel (true) or the best available (false).
// Not thread-safe against running GEMMs.
void force_portable_micro_kernel(bool portable);
// Tests only: run this kernel until the next force_*; false (and nothing
// changes) when the processor lacks it. force_portable_micro_kernel(false)
// goes back to the best available.
bool force_micro_kernel(MicroKernel kernel);

namespace detail {
// acc (kMR x kNR, row-major) = A panel (kc x kMR) * B panel (kc x kNR).
using MicroKernelFn = void (*)(int64_t kc, const float* a, const float* b, float* acc);
bool cpu_supports_avx2_fma();
// Two A panels against one B panel (acc0 from a0, acc1 from a1).
using MicroKernelPairFn = void (*)(int64_t kc, const float* a0, const float* a1, const float* b,
                                   float* acc0, float* acc1);
// AVX2 and FMA: block_kernel_avx512's contract (a full tile prefetches its
// rows' lines 128 floats on for writing, as a full AVX-512 strip does), in
// tiles of one A panel by 16 columns (12 of the 16 vector
// registers accumulate), so a column's bits are the micro-kernel path's:
// FMAs in k order from zero, then + C or + the row bias, then the epilogue.
// The edges in tiles of their own with the same arithmetic: a last strip
// of 1-8 columns under two panels 12 x 8, a last panel of 1-2 rows under
// 32 columns 2 x 32, of 3-4 rows 4 x 16.
// a_next (null: none): the next block's first A panel at the same k (its
// second as far from it as a1 from a0), fetched into L1 as this block's
// first 16 columns run: the first column strip of a k block reads each A
// panel from beyond L2 (a large weight matrix, cold at each run).
// c_room: the floats of each row of C, from c, that the calling thread
// writes (to its share's end in a column split, sgemm.cpp, else to the
// row's); a full tile prefetches its rows' lines ahead for writing only
// within them. Past a share lie another thread's columns: fetched there, its
// lines went back and forth between the cores, and a 192 x 784 x 32 GEMM
// ran at 1.2x its 1-thread speed on 2 threads whose vCPUs were ~230 ns
// apart.
void block_kernel_avx2(int na, int nz, int64_t kc, const float* a0, const float* a1,
                       const float* const* b, int64_t ldb, int64_t prefetch, int64_t whole_rows,
                       float* c, int64_t ldc, int64_t rows, int64_t cols, const float* row_bias,
                       bool add, const Epilogue* epilogue, const float* a_next, int64_t c_room);
// column_avx512's contract on AVX2 (a panel's six rows a vector, four
// panels at a time): block_kernel_avx2's bits for that column. A GEMM's
// last lone column (49 = 3 x 16 + 1: the 7x7 planes) and n = 1 (the
// squeeze-and-excitation layers) go there instead of a 16-column tile of
// one useful column.
void column_avx2(int64_t ip0, int64_t ip1, int64_t m, int64_t k, int64_t k_begin,
                 int64_t k_end, int64_t kc_block,
                 const float* packed_a, const float* x, int64_t x_stride, float* y, int64_t ldy,
                 const float* row_bias, bool accumulate, const Epilogue* epilogue, int64_t cols);
// pack_a_panel_avx512's contract eight columns at a time (an 8x8 transpose
// in registers); 0 off x86-64 builds.
int64_t pack_a_panel_avx2(const float* a, int64_t lda, int64_t k, float alpha, float* dst);
// AVX-512F: a block of na (1 or 2) A panels by 2 * nz (nz = 1 or 2; 3 or
// 4 with na = 1) B panels,
// b[0..2*nz-1]; a B panel past the end may alias another, since its columns
// are past cols. ldb > 0: B is not packed but row-major, the block's row p
// at b[0] + p * ldb (only b[0] is read). Writes rows x cols of C: C = A*B
// (+ row_bias[i]), or with add, C += A*B; then the epilogue (null: none) in
// the registers. prefetch > 0 (row-major B only): each row's floats that
// far ahead (two cache lines) are prefetched into L1 as the row is read.
// whole_rows (row-major B only): how many of the block's first rows may be
// read as whole vectors from a strip's first column past cols (the rest of
// the row, the next row's first floats: B goes on that far); the others
// only within cols.
bool cpu_supports_avx512f();
// a_next: block_kernel_avx2's. whole_rows: not used here (a full strip's
// rows are read as whole vectors, a narrower one's masked).
void block_kernel_avx512(int na, int nz, int64_t kc, const float* a0, const float* a1,
                         const float* const* b, int64_t ldb, int64_t prefetch, int64_t whole_rows,
                         float* c, int64_t ldc, int64_t rows, int64_t cols, const float* row_bias,
                         bool add, const Epilogue* epilogue, const float* a_next, int64_t c_room);
// One full A panel (kMR rows of a, lda floats apart, k columns contiguous)
// times alpha into dst (k x kMR), sixteen columns at a time by permutes:
// the bits of the portable loop's a[i][p] * alpha. Columns past the last
// multiple of 16 go the portable way (the caller's).  Returns the columns
// done (0 off AVX-512 builds).
int64_t pack_a_panel_avx512(const float* a, int64_t lda, int64_t k, float alpha, float* dst);
// C = A * x for one column (n = 1): panels [ip0, ip1) of packed A, x(p) =
// x[p * x_stride], y(i) = y[i * ldy], rows past m skipped; the bias,
// accumulation and epilogue as block_kernel_avx512's. Eight k a step: the
// panel's 48 floats in three loads, x's eight values spread to the panel's
// order by three permutes, three FMAs, so every lane does useful work (the
// block kernel gives a 1-column B a 16-lane FMA per row and k). No-op off
// AVX-512 builds.
void gemv_panels_avx512(int64_t ip0, int64_t ip1, int64_t m, int64_t k, const float* packed_a,
                        const float* x, int64_t x_stride, float* y, int64_t ldy,
                        const float* row_bias, bool add, const Epilogue* epilogue);
// One column of C (x(p) = x[p * x_stride], y(i) = y[i * ldy]) over row
// panels [ip0, ip1), with the block kernel's arithmetic step for step: k in
// blocks of kc_block, each block's FMAs in k order from zero, then + C or +
// the row bias, then the epilogue: the bits block_kernel_avx512 gives that
// column, so a column's value does not depend on how many columns are
// computed with it (the memory budget's spatial splits rely on that).
// cols columns side by side (x + c, y + c, c < cols), up to eight sharing
// each k step's loads of A: a GEMM's last few columns (196 = 6 x 32 + 4:
// the 14x14 planes) cost a 16-lane FMA per 12 rows and k each here, where
// a block kernel tile spends twelve on them whatever their number.
void column_avx512(int64_t ip0, int64_t ip1, int64_t m, int64_t k, int64_t k_begin,
                   int64_t k_end, int64_t kc_block,
                   const float* packed_a, const float* x, int64_t x_stride, float* y, int64_t ldy,
                   const float* row_bias, bool accumulate, const Epilogue* epilogue, int64_t cols);
// One row of C (m = 1: a fully connected layer at batch 1, x times packed
// weights) over B panels [jp0, jp1) packed, c the row: 64 columns a step,
// four 16-lane accumulators fed by one broadcast of x(p) each k, with the
// block kernel's arithmetic step for step (k blocks of kc_block, each
// block's FMAs in k order from zero, then + C or + the row bias, then the
// epilogue), so the same bits; the block kernel spends six rows of FMAs
// (a panel of A) on this one.
void row_avx512(int64_t jp0, int64_t jp1, int64_t n, int64_t k, int64_t kc_block, const float* packed_a,
                const float* packed_b, float* c, const float* row_bias, bool accumulate,
                const Epilogue* epilogue);
// row_avx512's contract on AVX2: 64 columns a step, eight 8-lane
// accumulators (one per B panel) fed by one broadcast of x(p) each k, the
// block kernel's bits.
void row_avx2(int64_t jp0, int64_t jp1, int64_t n, int64_t k, int64_t kc_block, const float* packed_a,
              const float* packed_b, float* c, const float* row_bias, bool accumulate,
              const Epilogue* epilogue);
// AArch64 Advanced SIMD (sgemm_neon.cpp); stubs elsewhere.
bool cpu_has_neon();
// Armv8.2-A extensions, detected at run time (AT_HWCAP on Linux): fp16
// vector arithmetic (asimdhp) and the dot product (asimddp). All false off
// AArch64. No kernel uses them yet (no fp16-arithmetic or int8 kernels).
struct ArmFeatures {
  bool fp16_arithmetic = false;
  bool dot_product = false;
};
ArmFeatures arm_features();
void micro_kernel_neon(int64_t kc, const float* a, const float* b, float* acc);
void micro_kernel_neon_x2(int64_t kc, const float* a0, const float* a1, const float* b,
                          float* acc0, float* acc1);
}  // namespace detail

}  // namespace kite::cpu::sgemm
