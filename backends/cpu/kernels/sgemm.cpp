#include "sgemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kite::cpu::sgemm {
namespace {

// k values per block: a kKC x kNR panel of B (8 KiB) stays in L1 while the
// A panels of one row block (kMCPanels x kMR x kKC floats, 96 KiB) sit in L2.
constexpr int64_t kKC = 256;
constexpr int64_t kMCPanels = 16;
constexpr int64_t kNCPanels = 32;

// The micro-kernel: a kMR x kNR tile of A*B over kc values of k, kept in
// registers (12 accumulators of 4 floats, which fits the 16 vector registers
// of baseline x86-64 and of Arm). GCC and Clang get the portable vector
// extension (no intrinsics, no target flags); other compilers the plain
// loops, which they may vectorise themselves.
#if defined(__GNUC__) || defined(__clang__)
typedef float Float4 __attribute__((vector_size(16)));

inline Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline Float4 broadcast4(float x) { return Float4{x, x, x, x}; }

void micro_kernel(int64_t kc, const float* __restrict a, const float* __restrict b,
                  float* __restrict acc) {
  static_assert(kMR == 6 && kNR == 8, "the micro-kernel is written for 6x8 tiles");
  Float4 c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {};
  Float4 c30 = {}, c31 = {}, c40 = {}, c41 = {}, c50 = {}, c51 = {};
  for (int64_t p = 0; p < kc; ++p, a += kMR, b += kNR) {
    const Float4 b0 = load4(b), b1 = load4(b + 4);
    Float4 ai = broadcast4(a[0]);
    c00 += ai * b0;
    c01 += ai * b1;
    ai = broadcast4(a[1]);
    c10 += ai * b0;
    c11 += ai * b1;
    ai = broadcast4(a[2]);
    c20 += ai * b0;
    c21 += ai * b1;
    ai = broadcast4(a[3]);
    c30 += ai * b0;
    c31 += ai * b1;
    ai = broadcast4(a[4]);
    c40 += ai * b0;
    c41 += ai * b1;
    ai = broadcast4(a[5]);
    c50 += ai * b0;
    c51 += ai * b1;
  }
  const Float4 rows[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                               {c30, c31}, {c40, c41}, {c50, c51}};
  std::memcpy(acc, rows, sizeof(rows));
}
#else
void micro_kernel(int64_t kc, const float* __restrict a, const float* __restrict b,
                         float* __restrict acc) {
  float t[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * kMR;
    const float* bp = b + p * kNR;
    for (int i = 0; i < kMR; ++i) {
      for (int j = 0; j < kNR; ++j) t[i][j] += ap[i] * bp[j];
    }
  }
  std::memcpy(acc, t, sizeof(t));
}
#endif

// Relu / Clip of the epilogue on one value (sgemm.h has the formulas).
template <int Kind>
inline float finish(float v, float lo, float hi) {
  if constexpr (Kind == Epilogue::kRelu) return v > 0.0f ? v : 0.0f;
  if constexpr (Kind == Epilogue::kClip) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
  }
  return v;
}

// Copies a tile from acc to C (+ bias, or added to C), with the epilogue
// Kind applied in the same store.
template <int Kind>
void store_tile_as(const float* acc, float* c, int64_t ldc, int64_t rows, int64_t cols,
                   const float* row_bias, bool add, float lo, float hi) {
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    const float* ai = acc + i * kNR;
    const float bias = row_bias && !add ? row_bias[i] : 0.0f;
    if (add) {
      for (int64_t j = 0; j < cols; ++j) ci[j] = finish<Kind>(ci[j] + ai[j], lo, hi);
    } else if (cols == kNR) {
#if defined(__GNUC__) || defined(__clang__)
      // A full row in two vectors; the vector ?: selects as the scalar one.
      for (int64_t h = 0; h < kNR; h += 4) {
        Float4 v = load4(ai + h) + bias;
        if constexpr (Kind == Epilogue::kRelu) {
          const Float4 zero = {};
          v = v > zero ? v : zero;
        } else if constexpr (Kind == Epilogue::kClip) {
          const Float4 l = broadcast4(lo), u = broadcast4(hi);
          v = v < l ? l : v;
          v = v > u ? u : v;
        }
        std::memcpy(ci + h, &v, sizeof v);
      }
#else
      for (int64_t j = 0; j < kNR; ++j) ci[j] = finish<Kind>(ai[j] + bias, lo, hi);
#endif
    } else {
      for (int64_t j = 0; j < cols; ++j) ci[j] = finish<Kind>(ai[j] + bias, lo, hi);
    }
  }
}

void store_tile(const float* acc, float* c, int64_t ldc, int64_t rows, int64_t cols,
                const float* row_bias, bool add, const Epilogue* e) {
  if (e == nullptr || e->kind == Epilogue::kNone) {
    return store_tile_as<Epilogue::kNone>(acc, c, ldc, rows, cols, row_bias, add, 0, 0);
  }
  if (e->kind == Epilogue::kRelu) {
    return store_tile_as<Epilogue::kRelu>(acc, c, ldc, rows, cols, row_bias, add, 0, 0);
  }
  store_tile_as<Epilogue::kClip>(acc, c, ldc, rows, cols, row_bias, add, e->lo, e->hi);
}

// The tile hook on a finished tile, when there is one.
inline void finish_tile(const Epilogue* e, float* c, int64_t ldc, int64_t rows, int64_t cols) {
  if (e && e->tile && rows > 0 && cols > 0) e->tile(e->tile_ctx, c, ldc, rows, cols);
}

// The epilogue over C in place (rows x cols at c): the k = 0 case, where
// no tile is stored.
void apply_epilogue(const Epilogue& e, float* c, int64_t ldc, int64_t rows, int64_t cols) {
  if (e.kind != Epilogue::kNone) {
    for (int64_t i = 0; i < rows; ++i) {
      float* ci = c + i * ldc;
      for (int64_t j = 0; j < cols; ++j) {
        ci[j] = e.kind == Epilogue::kRelu ? finish<Epilogue::kRelu>(ci[j], 0.0f, 0.0f)
                                          : finish<Epilogue::kClip>(ci[j], e.lo, e.hi);
      }
    }
  }
  finish_tile(&e, c, ldc, rows, cols);
}

// The kernel level gemm_packed uses: forced by a test (kForcedNone when not),
// else the best the processor offers, capped by KITE_CPU_SGEMM.
constexpr int kForcedNone = -1;
std::atomic<int> g_forced{kForcedNone};

MicroKernel best_level() {
  static const MicroKernel level = [] {
    MicroKernel cap = MicroKernel::kAvx512;
    if (const char* env = std::getenv("KITE_CPU_SGEMM")) {
      if (std::strcmp(env, "portable") == 0) cap = MicroKernel::kPortable;
      if (std::strcmp(env, "avx2") == 0) cap = MicroKernel::kAvx2Fma;
    }
    if (cap == MicroKernel::kPortable) return MicroKernel::kPortable;
    if (detail::cpu_has_neon()) return MicroKernel::kNeon;
    if (cap >= MicroKernel::kAvx512 && detail::cpu_supports_avx512f()) return MicroKernel::kAvx512;
    if (cap >= MicroKernel::kAvx2Fma && detail::cpu_supports_avx2_fma()) return MicroKernel::kAvx2Fma;
    return MicroKernel::kPortable;
  }();
  return level;
}

MicroKernel active_level() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced == kForcedNone ? best_level() : static_cast<MicroKernel>(forced);
}

struct Job {
  detail::MicroKernelFn micro;
  detail::MicroKernelPairFn micro_pair;
  // A block kernel writing C itself (AVX-512, AVX2) instead of micro /
  // micro_pair; column: the kernel for a last lone column (null: none).
  decltype(&detail::block_kernel_avx512) block;
  decltype(&detail::column_avx512) column;
  int64_t m, n, k;
  // The k values this job sums, [k_begin, k_end) of k (a half of k for a
  // split GEMM, k_split_at); the packed panels' strides stay k's.
  int64_t k_begin, k_end;
  const float* pa;
  const float* pb;
  int64_t ldb;  // > 0: pb is a row-major B read in place (block kernels only), else packed
  float* c;
  int64_t ldc;
  const float* row_bias;
  bool accumulate;
  const Epilogue* epilogue;  // null: none
  int64_t m_panels, n_panels;
  int64_t row_block, col_block;  // panels per task
  int64_t row_tasks;
  // col_shares > 0: the columns in that many shares, one a thread (each a
  // whole number of panel pairs), each in share_blocks column blocks;
  // col_block unused.
  int64_t col_shares = 0, share_blocks = 1;
};

// The block kernels' path: blocks of up to 2 A panels by 4 B panels,
// written to C by the kernel itself. The 4 B panels of a k block (kKCBlock x 32 floats,
// 32 KiB) stay in L1 (48 KiB on the Xeons here) beside the A panels
// streaming through; 256 rather than 128 halves the C tile's reloads
// between k blocks (with the k loop unrolled by 4, 3-5% on the GEMM alone,
// 128x784x576 150 -> 160 GFLOP/s on an Intel Xeon, 1-2% on the models).
constexpr int64_t kKCBlock = 256;
// A B read in place (a pointwise convolution's input) is kc rows, one
// stream each, 128 bytes of each per strip of 32 columns: more streams
// than the hardware prefetcher follows, so every strip waited on L3 (the
// 112x112 layers of mobilenet_v2 ran at half the speed of the same GEMM on
// warm buffers). The first A block of each strip prefetches its rows two
// strips ahead. Measured on an AMD EPYC (Zen 4), 1 thread: mobilenet_v2's
// 32 -> 16 layer 0.39 -> 0.27 ms, 16 -> 96 0.98 -> 0.75 ms; one strip
// ahead and four measured no better.
constexpr int64_t kDirectPrefetch = 64;
// The most last columns of a strip that the AVX-512 level gives job.column
// (run_blocks); 9-12 measured slower than the block kernel's tile (96 x
// 169 x 64 21.2 -> 23.0 us, 128 x 12 x 256 9.9 -> 11.8).
constexpr int64_t kColumnTail = 8;

// The AVX-512 GEMV over row panels [ip0, ip1), x(p) at x[p * x_stride].
// A strided x is copied contiguous first when it fits 16 KiB: the GEMV's
// gathers cost more than its FMAs on Zen 4 (m 320, k 960, x 49 floats
// apart: 0.06 -> 0.02 ms).
void gemv(int64_t ip0, int64_t ip1, int64_t m, int64_t k, const float* packed_a, const float* x,
          int64_t x_stride, float* y, int64_t ldy, const float* row_bias, bool accumulate,
          const Epilogue* epilogue) {
  constexpr int64_t kColumnMax = 4096;
  alignas(64) float column[kColumnMax];
  if (x_stride != 1 && k <= kColumnMax) {
    for (int64_t p = 0; p < k; ++p) column[p] = x[p * x_stride];
    x = column;
    x_stride = 1;
  }
  detail::gemv_panels_avx512(ip0, ip1, m, k, packed_a, x, x_stride, y, ldy, row_bias, accumulate,
                             epilogue);
}

// own_end: where the calling thread's columns of C end (its share of a
// column split, else n): the tiles fetch C's lines ahead for writing only
// before it.
void run_blocks(const Job& job, int64_t ip0, int64_t ip1, int64_t jp0, int64_t jp1, int64_t own_end) {
  // The last columns of a strip of 16 that they fill only in part go to
  // job.column, a vector of six rows a step sharing the loads of A, with
  // the block kernel's arithmetic (the same bits), instead of a tile of 16
  // lanes: on AVX-512 up to eight of them (196 = 6 x 32 + 4, the 14x14
  // planes: 112 x 196 x 672 in place, Zen 4, 1 thread, 298 -> 288 us,
  // 49 = 3 x 16 + 1, the 7x7 planes: 320 x 960 x 49 0.37 -> 0.31 ms). On
  // AVX2 (whose tiles are 16 columns too) only a lone last column, and the
  // last of 9 (13x13 and 27x27 planes: 169 = 160 + 9, 729 = 720 + 9), whose
  // 8 before it then go to its 12x8 tile (block_kernel_avx2), where a 6x16
  // tile had 9 useful lanes of 16 (squeezenet1_1's classifier alone, 1000 x
  // 169 x 512, B packed, Zen 2: 1.86 -> 1.82 ms).
  // B panels a strip: 8 (64 columns, one A panel a block) on AVX-512, whose
  // 6x64 block waits less on broadcasts than 12x32 (Zen 4, 1 thread, B
  // packed: 256 x 784 x 256 106 -> 112 GFLOP/s, 1000 x 169 x 512 103 ->
  // 108; convnext_tiny, whose MLPs pack B, 0.956); 4 on AVX2.
  const int64_t strip = job.block == detail::block_kernel_avx512 ? 8 : 4;
  const int64_t j_end = std::min(jp1 * kNR, job.n);
  const int64_t last_strip = jp0 + (jp1 - jp0 - 1) / strip * strip;
  const int64_t tail = (j_end - last_strip * kNR) % 16;
  int64_t tail_cols = 0;
  if (job.column && job.block == detail::block_kernel_avx2) {
    tail_cols = tail == 1 || tail == 9 ? 1 : 0;
  } else if (job.column) {
    // Past four columns only for long sums: the column kernel's store goes
    // value by value, and on short ones it cost more than the FMAs saved
    // (Zen 4: 576 x 56 x 64 45.7 -> 47.2 us, 24 x 40 x 16 0.5 -> 0.6;
    // 128 x 8 x 256 9.9 -> 7.5, 64 x 5 x 64 1.3 -> 0.9).
    const int64_t most = job.k_end - job.k_begin >= 128 ? kColumnTail : 4;
    tail_cols = tail <= most ? tail : 0;
  }
  const int64_t block_end = j_end - tail_cols;
  for (int64_t k0 = job.k_begin; k0 < job.k_end; k0 += kKCBlock) {
    const int64_t kc = std::min(kKCBlock, job.k_end - k0);
    const bool add = job.accumulate || k0 > job.k_begin;
    const Epilogue* epi = k0 + kc == job.k_end ? job.epilogue : nullptr;
    for (int64_t jp = jp0; jp < jp1; jp += strip) {
      const int64_t j = jp * kNR;
      const int64_t cols = std::min<int64_t>(strip * kNR, block_end - j);
      if (cols <= 0) break;
      const int64_t nb = (cols + kNR - 1) / kNR;
      const float* b[8];
      for (int64_t q = 0; q < 8; ++q) {
        b[q] = job.ldb > 0 ? job.pb + jp * kNR + k0 * job.ldb
                           : job.pb + (jp + std::min(q, nb - 1)) * job.k * kNR + k0 * kNR;
      }
      const int nz = static_cast<int>((cols + 15) / 16);
      // B in place: the rows of this k block that a strip of 16 columns
      // from its last strip's start may read whole: row r (of B) ends its
      // read at r * ldb + j + 16 * nz, B at (k - 1) * ldb + n.
      int64_t whole_rows = 0;
      if (job.ldb > 0) {
        const int64_t over = j + 16 * nz - job.n;  // floats past B's last column
        const int64_t skip = over <= 0 ? 0 : (over + job.ldb - 1) / job.ldb;  // B's last rows that may not
        whole_rows = std::max<int64_t>(0, std::min(kc, job.k - skip - k0));
      }
      const int64_t step = nz > 2 ? 1 : 2;  // A panels a block
      for (int64_t ip = ip0; ip < ip1; ip += step) {
        const int na = step == 2 && ip + 1 < ip1 ? 2 : 1;
        const int64_t i = ip * kMR;
        const float* a0 = job.pa + ip * job.k * kMR + k0 * kMR;
        const int64_t rows = std::min(na * kMR, job.m - i);
        const int64_t prefetch = job.ldb > 0 && ip == ip0 ? kDirectPrefetch : 0;
        // The first strip of a k block fetches the next pair's A ahead.
        const float* a_next = jp == jp0 && ip + step < ip1 ? a0 + step * job.k * kMR : nullptr;
        job.block(na, nz, kc, a0, na == 2 ? a0 + job.k * kMR : a0, b, job.ldb, prefetch, whole_rows,
                  job.c + i * job.ldc + j, job.ldc, rows, cols, job.row_bias ? job.row_bias + i : nullptr,
                  add, epi, a_next, own_end - j);
      }
    }
  }
  if (tail_cols > 0) {
    const int64_t j = j_end - tail_cols;  // in one B panel: j % 16 is 0 or (AVX2) 8
    const float* x = job.ldb > 0 ? job.pb + j : job.pb + j / kNR * job.k * kNR + j % kNR;
    job.column(ip0, ip1, job.m, job.k, job.k_begin, job.k_end, kKCBlock, job.pa, x,
               job.ldb > 0 ? job.ldb : kNR, job.c + j,
               job.ldc, job.row_bias, job.accumulate, job.epilogue, tail_cols);
  }
  // The task's block of C is final: the tile hook while it is in L2.
  const int64_t i0 = ip0 * kMR, j0 = jp0 * kNR;
  finish_tile(job.epilogue, job.c + i0 * job.ldc + j0, job.ldc, std::min(ip1 * kMR, job.m) - i0, j_end - j0);
}

// Where share s of `shares` begins (s = shares: n_panels), on an even
// panel: the shares are whole pairs of panels, 16 floats, so that no line
// of C is written by two threads where C's rows start on lines.
inline int64_t share_edge(int64_t n_panels, int64_t s, int64_t shares) {
  return s >= shares ? n_panels : (n_panels * s / shares + 1) / 2 * 2;
}

void run_task(const Job& job, int64_t task) {
  // Column blocks outer: the pool gives thread i the i-th contiguous share
  // of the tasks, so it writes (and the next layer, split the same way,
  // reads) the same columns of every row: pixels, in a convolution.
  const int64_t cb = task / job.row_tasks;
  const int64_t rb = task % job.row_tasks;
  const int64_t ip0 = rb * job.row_block;
  const int64_t ip1 = std::min(job.m_panels, ip0 + job.row_block);
  int64_t jp0 = cb * job.col_block;
  int64_t jp1 = std::min(job.n_panels, jp0 + job.col_block);
  int64_t own_end = job.n;
  if (job.col_shares > 0) {
    const int64_t share = cb / job.share_blocks, block = cb % job.share_blocks;
    const int64_t s0 = share_edge(job.n_panels, share, job.col_shares);
    const int64_t s1 = share_edge(job.n_panels, share + 1, job.col_shares);
    jp0 = s0 + (s1 - s0) * block / job.share_blocks / 2 * 2;
    jp1 = block + 1 == job.share_blocks ? s1 : s0 + (s1 - s0) * (block + 1) / job.share_blocks / 2 * 2;
    own_end = std::min(job.n, s1 * kNR);
  }
  if (job.block) {
    run_blocks(job, ip0, ip1, jp0, jp1, own_end);
    return;
  }
  alignas(64) float acc[2][kMR * kNR];
  for (int64_t k0 = 0; k0 < job.k; k0 += kKC) {
    const int64_t kc = std::min(kKC, job.k - k0);
    const bool add = job.accumulate || k0 > 0;
    const Epilogue* epi = k0 + kc == job.k ? job.epilogue : nullptr;
    for (int64_t jp = jp0; jp < jp1; ++jp) {
      const float* b = job.pb + jp * job.k * kNR + k0 * kNR;
      const int64_t j = jp * kNR;
      const int64_t cols = std::min(kNR, job.n - j);
      auto store = [&](const float* tile, int64_t ip) {
        const int64_t i = ip * kMR;
        const int64_t rows = std::min(kMR, job.m - i);
        store_tile(tile, job.c + i * job.ldc + j, job.ldc, rows, cols,
                   job.row_bias ? job.row_bias + i : nullptr, add, epi);
      };
      int64_t ip = ip0;
      if (job.micro_pair) {
        for (; ip + 1 < ip1; ip += 2) {
          const float* a = job.pa + ip * job.k * kMR + k0 * kMR;
          job.micro_pair(kc, a, a + job.k * kMR, b, acc[0], acc[1]);
          store(acc[0], ip);
          store(acc[1], ip + 1);
        }
      }
      for (; ip < ip1; ++ip) {
        job.micro(kc, job.pa + ip * job.k * kMR + k0 * kMR, b, acc[0]);
        store(acc[0], ip);
      }
      const int64_t i0 = ip0 * kMR;
      finish_tile(epi, job.c + i0 * job.ldc + j, job.ldc, std::min(ip1 * kMR, job.m) - i0, cols);
    }
  }
}

}  // namespace

void pack_a(const float* a, int64_t row_stride, int64_t col_stride, int64_t m, int64_t k,
            float alpha, float* packed, ThreadPool* pool) {
  const int64_t panels = (m + kMR - 1) / kMR;
  // Rows contiguous along k: full panels sixteen columns at a time by
  // AVX-512 permutes (the same bits). In convnext_tiny's MLPs (the
  // activations are A) the scalar loop was a tenth of the run (perf, AMD
  // EPYC Zen 4, 1 thread); the permutes, 2.5%. On AVX2, eight columns at a
  // time by a transpose.
  const MicroKernel level = active_level();
  const bool vector = col_stride == 1 && (level == MicroKernel::kAvx512 || level == MicroKernel::kAvx2Fma);
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t ip = begin; ip < end; ++ip) {
      float* dst = packed + ip * k * kMR;
      const int64_t i0 = ip * kMR;
      const int64_t rows = std::min(kMR, m - i0);
      int64_t p = 0;
      if (vector && rows == kMR) {
        p = level == MicroKernel::kAvx512
                ? detail::pack_a_panel_avx512(a + i0 * row_stride, row_stride, k, alpha, dst)
                : detail::pack_a_panel_avx2(a + i0 * row_stride, row_stride, k, alpha, dst);
      }
      for (; p < k; ++p) {
        float* d = dst + p * kMR;
        for (int64_t r = 0; r < rows; ++r) d[r] = a[(i0 + r) * row_stride + p * col_stride] * alpha;
        for (int64_t r = rows; r < kMR; ++r) d[r] = 0.0f;
      }
    }
  };
  if (pool) {
    pool->parallel_for(panels, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k)), body);
  } else {
    body(0, panels);
  }
}

void pack_b(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
            float* packed, ThreadPool* pool) {
  const int64_t panels = (n + kNR - 1) / kNR;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t jp = begin; jp < end; ++jp) {
      float* dst = packed + jp * k * kNR;
      const int64_t j0 = jp * kNR;
      const int64_t cols = std::min(kNR, n - j0);
      if (col_stride == 1 && cols == kNR) {
        for (int64_t p = 0; p < k; ++p) {
          const float* s = b + p * row_stride + j0;
          float* d = dst + p * kNR;
          for (int64_t c = 0; c < kNR; ++c) d[c] = s[c];
        }
        continue;
      }
      for (int64_t p = 0; p < k; ++p) {
        float* d = dst + p * kNR;
        for (int64_t c = 0; c < cols; ++c) d[c] = b[p * row_stride + (j0 + c) * col_stride];
        for (int64_t c = cols; c < kNR; ++c) d[c] = 0.0f;
      }
    }
  };
  if (pool) {
    pool->parallel_for(panels, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k)), body);
  } else {
    body(0, panels);
  }
}

namespace {

// C = (the second half's sums, in scratch, s[i * n + j]) + C over rows
// [r0, r1), the block kernels' store of a later k block (sums + C), then
// the epilogue (apply_epilogue: the activation's formulas, the tile hook)
// on those rows while they are in L1.
void add_second_half(const float* s, float* c, int64_t ldc, int64_t n, int64_t r0, int64_t r1,
                     const Epilogue* epilogue) {
  for (int64_t i = r0; i < r1; ++i) {
    float* __restrict ci = c + i * ldc;
    const float* __restrict si = s + i * n;
    for (int64_t j = 0; j < n; ++j) ci[j] = si[j] + ci[j];
  }
  if (epilogue) apply_epilogue(*epilogue, c + r0 * ldc, ldc, r1 - r0, n);
}

void run_gemm(int64_t m, int64_t n, int64_t k, const float* packed_a, const float* b, int64_t ldb,
              float* c, int64_t ldc, const float* row_bias, bool accumulate, ThreadPool* pool,
              const Epilogue* epilogue, float* split_scratch) {
  if (m <= 0 || n <= 0) return;
  if (epilogue && epilogue->kind == Epilogue::kNone && epilogue->tile == nullptr) epilogue = nullptr;
  if (k <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) {
        const float v = row_bias ? row_bias[i] : 0.0f;
        std::fill(c + i * ldc, c + i * ldc + n, v);
      }
    }
    if (epilogue) apply_epilogue(*epilogue, c, ldc, m, n);
    return;
  }
  const MicroKernel level = active_level();
  if (n == 1 && level == MicroKernel::kAvx512) {
    // One column (a pointwise convolution of a 1x1 plane: the squeeze-and-
    // excitation layers of mobilenet_v3 and efficientnet): the GEMV, split
    // by row panels when there is enough work for a second thread.
    // Measured on an AMD EPYC (Zen 4), 1 thread: efficientnet_b0's
    // 48 -> 1152 layers 0.06 -> 0.02 ms.
    const int64_t x_stride = ldb > 0 ? ldb : kNR;
    const int64_t panels = (m + kMR - 1) / kMR;
    auto body = [&](int64_t begin, int64_t end) {
      gemv(begin, end, m, k, packed_a, b, x_stride, c, ldc, row_bias, accumulate, epilogue);
      finish_tile(epilogue, c + begin * kMR * ldc, ldc, std::min(end * kMR, m) - begin * kMR, 1);
    };
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(1.0e6 / (2.0 * kMR * k)));
    if (pool && pool->size() > 1 && panels > grain) {
      pool->parallel_for(panels, grain, body);
    } else {
      body(0, panels);
    }
    return;
  }
  if (m == 1 && ldb == 0 && (level == MicroKernel::kAvx512 || level == MicroKernel::kAvx2Fma)) {
    // One row from packed B (a fully connected layer at batch 1): the row
    // kernel, 64 columns a step, split by column groups when there is
    // enough work for a second thread. Measured on an AMD EPYC (Zen 4),
    // 1 thread, in the model: mobilenet_v2's 1280 -> 1000 classifier 0.33
    // -> 0.26 ms, efficientnet_b0's 0.44 -> 0.29. On AVX2 (row_avx2; Zen 3,
    // 1 thread, kite-run --profile, libraries alternately, 4 pairs):
    // mobilenet_v3_small's 576 -> 1024 and 1024 -> 1000 layers 0.30-0.34
    // -> 0.13-0.21 and 0.43-0.49 -> 0.22-0.36 ms, mobilenet_v2's
    // classifier 0.49-0.62 -> 0.33-0.44, efficientnet_b0's 0.44-0.47 ->
    // 0.30-0.34 (onnxruntime's: 0.23, 0.40, 0.39, 0.20).
    const int64_t panels = (n + kNR - 1) / kNR;
    auto body = [&](int64_t begin, int64_t end) {
      const int64_t jp0 = begin * 8, jp1 = std::min(panels, end * 8);
      (level == MicroKernel::kAvx512 ? detail::row_avx512 : detail::row_avx2)(
          jp0, jp1, n, k, kKCBlock, packed_a, b, c, row_bias, accumulate, epilogue);
      const int64_t j0 = jp0 * kNR;
      finish_tile(epilogue, c + j0, ldc, 1, std::min(jp1 * kNR, n) - j0);
    };
    const int64_t groups = (panels + 7) / 8;
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(2.0e5 / (2.0 * 64 * k)));
    if (pool && pool->size() > 1 && groups > grain) {
      pool->parallel_for(groups, grain, body);
    } else {
      body(0, groups);
    }
    return;
  }
  // (The x86 levels run their block kernels; micro / micro_pair serve the
  // portable and NEON levels.)
  Job job{level == MicroKernel::kNeon ? detail::micro_kernel_neon : micro_kernel,
          level == MicroKernel::kNeon ? detail::micro_kernel_neon_x2 : nullptr,
          level == MicroKernel::kAvx512    ? detail::block_kernel_avx512
          : level == MicroKernel::kAvx2Fma ? detail::block_kernel_avx2
                                           : nullptr,
          level == MicroKernel::kAvx512    ? detail::column_avx512
          : level == MicroKernel::kAvx2Fma ? detail::column_avx2
                                           : nullptr,
          m, n, k, 0, k, packed_a, b, ldb, c, ldc,
          row_bias, accumulate, epilogue, 0, 0, 0, 0, 0};
  job.m_panels = (m + kMR - 1) / kMR;
  job.n_panels = (n + kNR - 1) / kNR;
  job.row_block = std::min(job.m_panels, kMCPanels);
  job.col_block = std::min(job.n_panels, kNCPanels);
  // k in two halves (k_split_at) where the caller gave the scratch and the
  // level has block kernels (which take a k range): each half's tasks on
  // half of the threads, as a GEMM of its own.
  const int64_t k_half = split_scratch && job.block ? k_split_at(m, k) : 0;
  // A GEMM under kMinSplitFlops runs on the calling thread: its halves
  // would take ~5 us each, and the handoff, the second thread's reads of
  // the activations the layer before left on the first (and the next
  // layer's of its output) cost that much or more. The transformers'
  // layers (32 tokens x 64 features, MLP 256) are 0.26-1.05 MFLOP. Zen 4,
  // 2 threads, split / not: vCPUs ~28 ns apart (ab_libs.py --alternate),
  // text_transformer 0.1145 -> 0.1119 ms, vit_small 0.0741 -> 0.0706
  // (kite-run --profile: the MLP's second layer 13.7 -> 11.3 us, the GELU
  // one 12.0 -> 14.9); ~170 ns apart with every run spread (--profile, the
  // run chooser off), 0.295 -> 0.139 and 0.200 -> 0.142.
  // The convolutional models' layers are all above it (no change).
  // The sum's order does not depend on it (a k split runs its halves in
  // turn on one thread), so neither do the bits.
  constexpr double kMinSplitFlops = 1.5e6;
  if (2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kMinSplitFlops) {
    pool = nullptr;
  }
  const int64_t pool_threads = pool ? pool->size() : 1;
  const int64_t threads = k_half > 0 ? std::max<int64_t>(1, pool_threads / 2) : pool_threads;
  auto tasks_for = [&](int64_t rb, int64_t cb) {
    const int64_t col_tasks = job.col_shares > 0 ? job.col_shares * job.share_blocks : (job.n_panels + cb - 1) / cb;
    return ((job.m_panels + rb - 1) / rb) * col_tasks;
  };
  // Enough tasks to keep every thread busy: split columns first (B panels
  // are the larger operand in convolutions), then rows.
  // Eight tasks per thread at least: with three, resnet18's 7x7 layers (86
  // row panels in 6 tasks) left one thread waiting on the other's last task;
  // eight measured 4% faster at 2 threads on resnet18 and mobilenet_v2.
  // A small GEMM gets fewer tasks (at least kMinTaskFlops each, and one per
  // thread at least): each task re-reads its whole row block of A and
  // column block of B, and on squeezenet's 13x13 pointwise layers eight
  // tiny tasks a thread made 2 threads slower than 1. Which dimension is
  // split first follows the larger operand: columns (each task then reads
  // only its columns of B) unless A has more rows than B has columns.
  constexpr int64_t kTasksPerThread = 8;
  constexpr double kMinTaskFlops = 1.0e6;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t per_thread = std::max<int64_t>(
      1, std::min<int64_t>(kTasksPerThread, static_cast<int64_t>(flops / (kMinTaskFlops * threads))));
  const int64_t want = per_thread * threads;
  // First a column block for every thread where that splits the columns
  // evenly (eight panels a thread at least: one panel more or less is then
  // an eighth of a share) and C's rows start on cache lines (ldc a multiple
  // of 16): tasks go column block by column block (run_task), so thread
  // i's share is a band of columns, pixels in a convolution, which the
  // layers before and after it, split the same way, write and read on the
  // same core; the blocks are whole pairs of panels, so no line of C is
  // written by two threads. Measured on a Zen 2 host whose vCPUs were
  // ~220 ns apart, 2 threads: 8 pointwise 64->64 layers on 56x56 2.78 ->
  // 1.39 ms (1 thread 2.40). Where C's rows are not line-aligned (14x14,
  // 13x13, 7x7 planes) every row of C would have a line written by both
  // threads, and that cost more than the rows split: the GEMM 384 x 196 x
  // 384 alone 0.45 ms split by columns, 0.34 by rows (1 thread 0.65); a
  // 14x14 stack of 384-channel pointwise and depthwise layers 2.52 -> 2.00.
  // The shares' edges are the column blocks' (share_edge): with blocks of
  // kNCPanels from column 0 instead, a 28x28 plane's 98 panels went 64 to
  // one thread and 34 to the other, which took the end of the first's
  // share and so read and wrote pixels the layers around left on the
  // other core (mobilenet_v2's 28x28 blocks ran slower on 2 threads than
  // on 1).
  constexpr int64_t kMinPanelsPerThread = 8;
  const bool shares = threads > 1 && job.n_panels >= kMinPanelsPerThread * threads && splits_columns_by_thread(ldc);
  const int64_t share = (job.n_panels + threads - 1) / threads;
  if (shares) {
    job.col_shares = threads;
    job.share_blocks = (share + kNCPanels - 1) / kNCPanels;
  }
  // Panels per column block (a share's blocks: about that many).
  auto col_panels = [&] { return shares ? share / job.share_blocks : job.col_block; };
  const bool rows_first = m > n;
  while (threads > 1 && tasks_for(job.row_block, job.col_block) < want) {
    // A share's blocks stay four panels wide at least.
    const bool cols_can = shares ? share / (2 * job.share_blocks) >= 4 : job.col_block > 1;
    if (!cols_can && job.row_block == 1) break;
    bool rows = rows_first ? job.row_block > 2 || col_panels() <= 4 : !(col_panels() > 4 || job.row_block == 1);
    if (rows && job.row_block == 1) rows = false;
    if (!rows && !cols_can) rows = true;
    if (rows) {
      job.row_block = (job.row_block + 1) / 2;
    } else if (shares) {
      job.share_blocks *= 2;
    } else {
      job.col_block = (job.col_block + 1) / 2;
    }
  }
  job.row_tasks = (job.m_panels + job.row_block - 1) / job.row_block;
  const int64_t tasks = tasks_for(job.row_block, job.col_block);
  if (k_half > 0) {
    // The first half into C (with the bias, or onto C when accumulating),
    // the second from zero into the scratch; then C = scratch + C and the
    // epilogue, rows split across the threads. The first half's tasks
    // first: on 2 threads, thread 0 sums k below k_half, thread 1 the rest.
    Job first = job, second = job;
    first.k_end = k_half;
    first.epilogue = nullptr;
    second.k_begin = k_half;
    second.c = split_scratch;
    second.ldc = n;
    second.row_bias = nullptr;
    second.accumulate = false;
    second.epilogue = nullptr;
    auto half_task = [&](int64_t t) { t < tasks ? run_task(first, t) : run_task(second, t - tasks); };
    auto add = [&](int64_t r0, int64_t r1) { add_second_half(split_scratch, c, ldc, n, r0, r1, epilogue); };
    if (pool && pool_threads > 1) {
      pool->for_each_task(pool_threads, 2 * tasks, [&](int64_t, int64_t t) { half_task(t); });
      pool->parallel_for(m, std::max<int64_t>(1, 2048 / n), add);
    } else {
      for (int64_t t = 0; t < 2 * tasks; ++t) half_task(t);
      add(0, m);
    }
    return;
  }
  if (pool && tasks > 1 && pool->size() > 1) {
    // One task at a time (for_each_task: each thread its share, then the
    // ends of the others'): parallel_for's chunks of several tasks left a
    // thread up to a chunk behind (squeezenet's classifier, 21 tasks in
    // chunks of 3: 12 to 9).
    pool->for_each_task(pool->size(), tasks, [&job](int64_t, int64_t t) { run_task(job, t); });
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_task(job, t);
  }
}

}  // namespace

void gemm_packed(int64_t m, int64_t n, int64_t k, const float* packed_a, const float* packed_b,
                 float* c, int64_t ldc, const float* row_bias, bool accumulate,
                 ThreadPool* pool, const Epilogue* epilogue, float* split_scratch) {
  run_gemm(m, n, k, packed_a, packed_b, 0, c, ldc, row_bias, accumulate, pool, epilogue, split_scratch);
}

namespace {

bool level_reads_b_in_place(MicroKernel level) {
  return level == MicroKernel::kAvx512 || level == MicroKernel::kAvx2Fma;
}

// On AVX2, a B read in place serves GEMMs with fewer rows than this; with
// more, each 16-column strip of B (kc rows, one or two cache lines each, at
// unaligned addresses ldb apart) is read again for every pair of A panels
// and from beyond L1 (32 KiB on Zen 3), and packing it once, contiguous,
// costs less. Measured on an AMD EPYC (Zen 3), 1 thread, the convolution
// alone (m x k, n pixels; packed / in place): 1000 x 512, 169: 0.90;
// 1280 x 320, 49: 0.90; 960 x 160, 49: 0.95; 576 x 96, 196: 1.12;
// 384 x 64, 784: 1.07; 144 x 24, 3136: 1.12; 24 x 96, 3136: 1.35. In
// squeezenet1_1 (kite-run --profile) its classifier 3.08 -> 2.61 ms.
constexpr int64_t kInPlaceMaxRowsAvx2 = 768;
// Likewise B rows shorter than kInPlaceMinColumnsAvx2 (7x7 planes, 49
// floats: rows 196 bytes apart, so most of a strip's loads straddle two
// cache lines) under kShortRowsMinRowsAvx2 rows of A or more.
// Measured on an AMD EPYC (Zen 2), 1 thread, the GEMM alone, packing
// included (m x n x k; packed / in place): 320 x 49 x 960 0.90, 160 x 49 x
// 960 0.93, 1024 x 49 x 160 0.94, 120 x 49 x 480 0.97, 96 x 49 x 576 1.00,
// and with rows of 169 or 196 floats 0.98 to 1.10.
constexpr int64_t kInPlaceMinColumnsAvx2 = 128;
constexpr int64_t kShortRowsMinRowsAvx2 = 160;
// And B rows a multiple of 2 KiB apart from 4 KiB up (planes of 32x32,
// 64x64, 128x128): a strip's rows then fall in one or two of L1's 64 sets,
// eight lines each, so the strip is fetched from L2 again for every pair
// of A panels. Zen 2, 1 thread, 96 x n x 32 / x 128 in place against
// packed (packing included), GFLOP/s: n 1024 40 / 45 against 65 / 72,
// 2048 58 / 53 against 65 / 70, 4096 59 / 53 against 65 / 70, 1536 74 /
// 67 against 72 / 83; n 512, 576 and 768 were faster in place. With fewer
// rows of A the strip is read again less often than packing costs (32 x
// 4096 x 32: 0.14 in place, 0.18 packed; a 16-to-2 head on a 128x128
// plane 0.06 against 0.12 ms): from kSharedSetsMinRowsAvx2 rows.
constexpr int64_t kSharedSetsMinRowsAvx2 = 64;
// k_split_at: halves of this many k values at least, split at a multiple
// of kSplitStep (the depthwise kernels' blocks of 16 channels, which the
// layer before a projection splits between the threads).
constexpr int64_t kMinSplitHalf = 128;
constexpr int64_t kSplitStep = 16;
inline bool rows_share_l1_sets(int64_t n) { return n >= 1024 && n % 512 == 0; }

}  // namespace

int64_t k_split_at(int64_t m, int64_t k) {
  if (!level_reads_b_in_place(active_level())) return 0;  // the block kernels' levels only
  if (m < 1 || k < 2 * kMinSplitHalf || 2 * m > k) return 0;
  return k / 2 / kSplitStep * kSplitStep;
}

bool reads_b_in_place(int64_t m, int64_t n) {
  const MicroKernel level = active_level();
  if (level == MicroKernel::kAvx2Fma &&
      (m >= kInPlaceMaxRowsAvx2 || (n < kInPlaceMinColumnsAvx2 && m >= kShortRowsMinRowsAvx2) ||
       (m >= kSharedSetsMinRowsAvx2 && rows_share_l1_sets(n)))) {
    return false;
  }
  return level_reads_b_in_place(level);
}

bool gemm_direct_b(int64_t m, int64_t n, int64_t k, const float* packed_a, const float* b,
                   int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool accumulate,
                   ThreadPool* pool, const Epilogue* epilogue, float* split_scratch) {
  if (!level_reads_b_in_place(active_level()) || ldb < n || ldb <= 0) return false;
  run_gemm(m, n, k, packed_a, b, ldb, c, ldc, row_bias, accumulate, pool, epilogue, split_scratch);
  return true;
}

MicroKernel micro_kernel_in_use() { return active_level(); }

void force_portable_micro_kernel(bool portable) {
  g_forced.store(portable ? static_cast<int>(MicroKernel::kPortable) : kForcedNone);
}

bool force_micro_kernel(MicroKernel kernel) {
  const bool have = kernel == MicroKernel::kPortable ||
                    (kernel == MicroKernel::kAvx2Fma && detail::cpu_supports_avx2_fma()) ||
                    (kernel == MicroKernel::kAvx512 && detail::cpu_supports_avx512f()) ||
                    (kernel == MicroKernel::kNeon && detail::cpu_has_neon());
  if (have) g_forced.store(static_cast<int>(kernel));
  return have;
}

}  // namespace kite::cpu::sgemm
