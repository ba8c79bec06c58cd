// Softmax, normalisations, resize and attention.
#pragma once

#include "device.cuh"

// One block per row of `len` contiguous values (inner == 1).
KITE_KERNEL(kite_softmax_rows, SoftmaxParams) {
  using namespace kite_cuda;
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const float* x = p.x + row * p.len;
  float* y = p.y + row * p.len;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < p.len; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m, smem);
  float s = 0.0f;
  for (int j = threadIdx.x; j < p.len; j += blockDim.x) s += expf(x[j] - m);
  s = block_sum(s, smem);
  if (p.log) {
    const float shift = m + logf(s);
    for (int j = threadIdx.x; j < p.len; j += blockDim.x) y[j] = x[j] - shift;
  } else {
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < p.len; j += blockDim.x) y[j] = expf(x[j] - m) * inv;
  }
}

// One thread per (outer, inner) line along a strided axis.
KITE_KERNEL(kite_softmax_strided, SoftmaxParams) {
  using namespace kite_cuda;
  const int64_t lines = static_cast<int64_t>(p.outer) * p.inner;
  for (int64_t i = global_index(); i < lines; i += grid_stride()) {
    const int64_t o = i / p.inner, in = i % p.inner;
    const float* x = p.x + o * p.len * p.inner + in;
    float* y = p.y + o * p.len * p.inner + in;
    float m = -INFINITY;
    for (int j = 0; j < p.len; ++j) m = fmaxf(m, x[static_cast<int64_t>(j) * p.inner]);
    float s = 0.0f;
    for (int j = 0; j < p.len; ++j) s += expf(x[static_cast<int64_t>(j) * p.inner] - m);
    const float shift = m + logf(s), inv = 1.0f / s;
    for (int j = 0; j < p.len; ++j) {
      const float v = x[static_cast<int64_t>(j) * p.inner];
      y[static_cast<int64_t>(j) * p.inner] = p.log ? v - shift : expf(v - m) * inv;
    }
  }
}

// One block per row: mean, then the variance of the deviations (two passes
// over the row, which stays in L1/L2), then the normalised values.
KITE_KERNEL(kite_layernorm, NormParams) {
  using namespace kite_cuda;
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * p.cols;
  const float* x = p.x + base;
  const float* skip = p.skip ? p.skip + base : nullptr;
  float s = 0.0f;
  for (int j = threadIdx.x; j < p.cols; j += blockDim.x) {
    const float v = skip ? x[j] + skip[j] : x[j];
    if (p.sum) p.sum[base + j] = v;
    s += v;
  }
  const float mean = block_sum(s, smem) / static_cast<float>(p.cols);
  float q = 0.0f;
  for (int j = threadIdx.x; j < p.cols; j += blockDim.x) {
    const float d = (skip ? x[j] + skip[j] : x[j]) - mean;
    q += d * d;
  }
  const float var = block_sum(q, smem) / static_cast<float>(p.cols);
  const float inv = 1.0f / sqrtf(var + p.epsilon);
  const int channel = p.per_row ? static_cast<int>(row % p.channels) : 0;
  float* y = p.y + base;
  for (int j = threadIdx.x; j < p.cols; j += blockDim.x) {
    const float v = ((skip ? x[j] + skip[j] : x[j]) - mean) * inv;
    const int c = p.per_row ? channel : j;
    const float g = p.scale ? p.scale[c] : 1.0f;
    const float b = p.bias ? p.bias[c] : 0.0f;
    y[j] = v * g + b;
  }
}

// One thread per output value: the sum over the taps of both axes (float
// weights; T the storage of x and y).
namespace kite_cuda {
template <typename T>
KITE_DEV void resize(const ResizeParams& p) {
  const int64_t total = static_cast<int64_t>(p.planes) * p.OH * p.OW;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int ow = static_cast<int>(i % p.OW);
    const int oh = static_cast<int>((i / p.OW) % p.OH);
    const int64_t plane = i / (static_cast<int64_t>(p.OW) * p.OH);
    const T* x = as<T>(p.x) + plane * p.IH * p.IW;
    float acc = 0.0f;
    for (int th = 0; th < p.taps_h; ++th) {
      const float wh = p.h_weight[oh * p.taps_h + th];
      const T* xr = x + p.h_offset[oh * p.taps_h + th];
      float line = 0.0f;
      for (int tw = 0; tw < p.taps_w; ++tw) {
        line += p.w_weight[ow * p.taps_w + tw] * load(xr, p.w_offset[ow * p.taps_w + tw]);
      }
      acc += wh * line;
    }
    store(as<T>(p.y), i, acc);
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_resize, ResizeParams) { kite_cuda::resize<float>(p); }
KITE_KERNEL(kite_resize_f16, ResizeParams) { kite_cuda::resize<kite_cuda::Half>(p); }

// Attention without the score matrix: one block (128 threads) per query row
// (b, i). Keys are visited in tiles of blockDim.x; each thread scores one
// key of the tile (kt is [D, T], so consecutive threads read consecutive
// keys), the tile's maximum and sum update a running (online) softmax, and
// the tile's probabilities, held in shared memory, weight the rows of v into
// per-thread accumulators over the output columns c = tid, tid + blockDim...
// Only one tile of scores ever exists, in shared memory.
KITE_KERNEL(kite_attention, AttentionParams) {
  using namespace kite_cuda;
  __shared__ float qs[kAttentionMaxD];
  __shared__ float probs[256];
  __shared__ float smem[32];
  const int tid = threadIdx.x, threads = blockDim.x;
  const int64_t row = blockIdx.x;  // b * S + i
  const int64_t b = row / p.S;
  const int i = static_cast<int>(row % p.S);
  const float* q = p.q + row * p.D;
  const float* kt = p.kt + b * p.D * p.T;
  const float* v = p.v + b * p.T * p.Dv;
  for (int k = tid; k < p.D; k += threads) qs[k] = q[k];
  const float* mask = nullptr;
  if (p.mask) {
    int64_t offset = static_cast<int64_t>(i) * p.mask_row_stride, rest = b;
    for (int d = p.lead_rank - 1; d >= 0; --d) {
      offset += (rest % p.lead_dims[d]) * p.mask_lead_strides[d];
      rest /= p.lead_dims[d];
    }
    mask = p.mask + offset;
  }
  __syncthreads();
  constexpr int kCols = kAttentionMaxDv / 128;  // accumulators per thread
  float acc[kCols];
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  float run_max = -INFINITY, run_sum = 0.0f;
  for (int t0 = 0; t0 < p.T; t0 += threads) {
    const int j = t0 + tid;
    float s = -INFINITY;
    if (j < p.T) {
      float dot = 0.0f;
      for (int k = 0; k < p.D; ++k) dot += qs[k] * kt[static_cast<int64_t>(k) * p.T + j];
      s = dot * p.scale;
      if (mask) s += mask[static_cast<int64_t>(j) * p.mask_col_stride];
    }
    const float tile_max = block_max(s, smem);
    const float new_max = fmaxf(run_max, tile_max);
    // exp(-inf - -inf) would be NaN: a fully masked prefix contributes 0.
    const float correction = run_max == -INFINITY ? 0.0f : expf(run_max - new_max);
    const float e = (j < p.T && new_max != -INFINITY) ? expf(s - new_max) : 0.0f;
    probs[tid] = e;
    const float tile_sum = block_sum(e, smem);
    run_sum = run_sum * correction + tile_sum;
    run_max = new_max;
    __syncthreads();  // probs complete
    const int count = imin(threads, p.T - t0);
    for (int c = 0; c < kCols; ++c) {
      const int col = tid + c * threads;
      float a = acc[c] * correction;
      if (col < p.Dv) {
        for (int jj = 0; jj < count; ++jj) a += probs[jj] * v[static_cast<int64_t>(t0 + jj) * p.Dv + col];
      }
      acc[c] = a;
    }
    __syncthreads();  // probs reused by the next tile
  }
  float* y = p.y + row * p.Dv;
  // The probabilities are e * inv with every e in [0, 1] while run_sum is a
  // number > 0, so they are NaN (all of them) exactly when run_sum is NaN (a
  // NaN or +inf score) or 0 (every score -inf: 0 * inf), as in the CPU
  // kernel. With the nan_to_zero guard they then count as 0: y = sum_j 0 * v.
  if (p.nan_to_zero && !(run_sum > 0.0f)) {
    for (int col = tid; col < p.Dv; col += threads) {
      float a = 0.0f;
      for (int j = 0; j < p.T; ++j) a += 0.0f * v[static_cast<int64_t>(j) * p.Dv + col];
      y[col] = a;
    }
    return;
  }
  const float inv = 1.0f / run_sum;
  for (int c = 0; c < kCols; ++c) {
    const int col = tid + c * threads;
    if (col < p.Dv) y[col] = acc[c] * inv;
  }
}
