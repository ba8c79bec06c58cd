// Pooling and reductions.
//  - kite_pool2d: one thread per output of MaxPool / AveragePool (2-D);
//    kite_pool2d_f16 the same on float16 storage (float32 arithmetic).
//  - kite_reduce_rows: [outer, r] with inner == 1, one block per row
//    (GlobalAveragePool, ReduceMean over trailing axes).
//  - kite_reduce_cols: [outer, r, inner], one thread per (outer, inner),
//    consecutive threads on consecutive inner values.
#pragma once

#include "device.cuh"

namespace kite_cuda {
template <typename T>
KITE_DEV void pool2d(const PoolParams& p) {
  const T* X = as<T>(p.x);
  const int64_t total = static_cast<int64_t>(p.N) * p.C * p.OH * p.OW;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int ow = static_cast<int>(i % p.OW);
    const int oh = static_cast<int>((i / p.OW) % p.OH);
    const int64_t plane = i / (static_cast<int64_t>(p.OW) * p.OH);
    const T* x = X + plane * p.H * p.W;
    const int ih0 = oh * p.SH - p.PH, iw0 = ow * p.SW - p.PW;
    float acc = p.mode == 0 ? -INFINITY : 0.0f;
    int count = 0;
    for (int kh = 0; kh < p.KH; ++kh) {
      const int ih = ih0 + kh * p.DH;
      for (int kw = 0; kw < p.KW; ++kw) {
        const int iw = iw0 + kw * p.DW;
        const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
        if (p.mode == 0) {
          if (inside) {
            const float v = load(x, ih * p.W + iw);
            acc = (v > acc || v != v) ? v : acc;
          }
        } else {
          if (inside) {
            acc += load(x, ih * p.W + iw);
            ++count;
          } else if (p.count_include_pad && ih < p.H + p.PHE && iw < p.W + p.PWE) {
            ++count;  // a padded position (not one past the padding, with ceil_mode)
          }
        }
      }
    }
    store(as<T>(p.y), i, p.mode == 0 ? acc : (count > 0 ? acc / static_cast<float>(count) : 0.0f));
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_pool2d, PoolParams) { kite_cuda::pool2d<float>(p); }
KITE_KERNEL(kite_pool2d_f16, PoolParams) { kite_cuda::pool2d<kite_cuda::Half>(p); }

namespace kite_cuda {
KITE_DEV float reduce_init(int op) {
  switch (op) {
    case kReduceMax: return -INFINITY;
    case kReduceMin: return INFINITY;
    case kReduceProd: return 1.0f;
    default: return 0.0f;
  }
}
KITE_DEV float reduce_step(int op, float acc, float v, float shift) {
  switch (op) {
    case kReduceMax: return (v > acc || v != v) ? v : acc;
    case kReduceMin: return (v < acc || v != v) ? v : acc;
    case kReduceProd: return acc * v;
    case kReduceL1: return acc + fabsf(v);
    case kReduceL2:
    case kReduceSumSquare: return acc + v * v;
    case kReduceLogSumExp: return acc + expf(v - shift);
    default: return acc + v;
  }
}
KITE_DEV float reduce_finish(int op, float acc, int r, float shift) {
  switch (op) {
    case kReduceMean: return acc / static_cast<float>(r);
    case kReduceL2: return sqrtf(acc);
    case kReduceLogSumExp: return shift + logf(acc);
    default: return acc;
  }
}
}  // namespace kite_cuda

// grid (outer), blockDim a multiple of 32.
KITE_KERNEL(kite_reduce_rows, ReduceParams) {
  using namespace kite_cuda;
  __shared__ float smem[32];
  const float* x = p.x + static_cast<int64_t>(blockIdx.x) * p.r;
  float shift = 0.0f;
  if (p.op == kReduceLogSumExp) {
    float m = -INFINITY;
    for (int j = threadIdx.x; j < p.r; j += blockDim.x) m = fmaxf(m, x[j]);
    shift = block_max(m, smem);
    if (shift == -INFINITY || shift == INFINITY) shift = 0.0f;
  }
  const bool ordered = p.op == kReduceMax || p.op == kReduceMin || p.op == kReduceProd;
  float acc = reduce_init(p.op);
  for (int j = threadIdx.x; j < p.r; j += blockDim.x) acc = reduce_step(p.op, acc, x[j], shift);
  float total;
  if (!ordered) {
    total = block_sum(acc, smem);
  } else if (p.op == kReduceProd) {
    // Rare: gather the partial products through shared memory in turn.
    __shared__ float parts[256];
    parts[threadIdx.x] = acc;
    __syncthreads();
    total = 1.0f;
    for (int t = 0; t < static_cast<int>(blockDim.x); ++t) total *= parts[t];
    __syncthreads();
  } else if (p.op == kReduceMax) {
    total = block_max(acc, smem);
  } else {
    total = -block_max(-acc, smem);
  }
  if (threadIdx.x == 0) p.y[blockIdx.x] = reduce_finish(p.op, total, p.r, shift);
}

KITE_KERNEL(kite_reduce_cols, ReduceParams) {
  using namespace kite_cuda;
  const int64_t total = static_cast<int64_t>(p.outer) * p.inner;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t o = i / p.inner, in = i % p.inner;
    const float* x = p.x + o * p.r * p.inner + in;
    float shift = 0.0f;
    if (p.op == kReduceLogSumExp) {
      float m = -INFINITY;
      for (int j = 0; j < p.r; ++j) m = fmaxf(m, x[static_cast<int64_t>(j) * p.inner]);
      shift = (m == -INFINITY || m == INFINITY) ? 0.0f : m;
    }
    float acc = reduce_init(p.op);
    for (int j = 0; j < p.r; ++j) acc = reduce_step(p.op, acc, x[static_cast<int64_t>(j) * p.inner], shift);
    p.y[i] = reduce_finish(p.op, acc, p.r, shift);
  }
}
