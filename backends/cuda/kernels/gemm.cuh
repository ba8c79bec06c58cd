// Matrix products with the epilogue fused: y = act(alpha * A.B + beta * bias);
// float32, or float16 storage with float32 arithmetic (the _f16 kernels).
//  - kite_gemm_tiled: 64x64 output tiles, 16-deep K slices in shared memory,
//    4x4 values per thread (as kite_conv_igemm); any strides, so transposed
//    operands and broadcast batches need no copies.
//  - kite_gemm_simple: one thread per output value, for products too small
//    to fill tiles (batch-1 classifiers: M = 1).
#pragma once

#include "device.cuh"

namespace kite_cuda {
template <typename T>
KITE_DEV float gemm_epilogue(const GemmParams& p, const T* bias, float acc, int m, int n) {
  float v = p.alpha * acc;
  if (bias) v += p.beta * load(bias, static_cast<int64_t>(m) * p.sbias_m + static_cast<int64_t>(n) * p.sbias_n);
  return apply_act(v, p.act);
}

// grid (ceil(N / 64), ceil(M / 64), nb1 * nb2), 256 threads. The tiles in
// shared memory hold floats whatever T is.
template <typename T>
KITE_DEV void gemm_tiled(const GemmParams& p) {
  __shared__ float As[16][64];
  __shared__ float Bs[16][64];
  const int tid = threadIdx.x;
  const int tx = tid & 15, ty = tid >> 4;
  const int b1 = blockIdx.z / p.nb2, b2 = blockIdx.z % p.nb2;
  const T* A = as<T>(p.a) + b1 * p.sa1 + b2 * p.sa2;
  const T* B = as<T>(p.b) + b1 * p.sb1 + b2 * p.sb2;
  const T* bias = p.bias ? as<T>(p.bias) + b1 * p.sbias1 + b2 * p.sbias2 : nullptr;
  T* Y = as<T>(p.y) + static_cast<int64_t>(blockIdx.z) * p.M * p.N;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;

  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < p.K; k0 += 16) {
    for (int r = 0; r < 4; ++r) {
      const int idx = tid + r * 256;
      // Consecutive threads walk the operand's contiguous axis.
      int kk, mm;
      if (p.sak == 1) {
        kk = idx & 15;
        mm = idx >> 4;
      } else {
        mm = idx & 63;
        kk = idx >> 6;
      }
      const int m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < p.M && k < p.K) ? load(A, static_cast<int64_t>(m) * p.sam + static_cast<int64_t>(k) * p.sak) : 0.0f;
    }
    for (int r = 0; r < 4; ++r) {
      const int idx = tid + r * 256;
      int kk, nn;
      if (p.sbn == 1) {
        nn = idx & 63;
        kk = idx >> 6;
      } else {
        kk = idx & 15;
        nn = idx >> 4;
      }
      const int n = n0 + nn, k = k0 + kk;
      Bs[kk][nn] = (n < p.N && k < p.K) ? load(B, static_cast<int64_t>(k) * p.sbk + static_cast<int64_t>(n) * p.sbn) : 0.0f;
    }
    __syncthreads();
    tile_fma(As, Bs, tx, ty, acc);
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= p.M) continue;
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n < p.N) store(Y, static_cast<int64_t>(m) * p.N + n, gemm_epilogue(p, bias, acc[i][j], m, n));
    }
  }
}

// grid-stride over batch * M * N outputs; consecutive threads take
// consecutive n (coalesced reads of a row-major B).
template <typename T>
KITE_DEV void gemm_simple(const GemmParams& p) {
  const int64_t per_batch = static_cast<int64_t>(p.M) * p.N;
  const int64_t total = per_batch * p.nb1 * p.nb2;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t batch = i / per_batch;
    const int m = static_cast<int>((i % per_batch) / p.N), n = static_cast<int>(i % p.N);
    const int b1 = static_cast<int>(batch / p.nb2), b2 = static_cast<int>(batch % p.nb2);
    const T* A = as<T>(p.a) + b1 * p.sa1 + b2 * p.sa2 + static_cast<int64_t>(m) * p.sam;
    const T* B = as<T>(p.b) + b1 * p.sb1 + b2 * p.sb2 + static_cast<int64_t>(n) * p.sbn;
    const T* bias = p.bias ? as<T>(p.bias) + b1 * p.sbias1 + b2 * p.sbias2 : nullptr;
    float acc = 0.0f;
    for (int k = 0; k < p.K; ++k) {
      acc += load(A, static_cast<int64_t>(k) * p.sak) * load(B, static_cast<int64_t>(k) * p.sbk);
    }
    store(as<T>(p.y), i, gemm_epilogue(p, bias, acc, m, n));
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_gemm_tiled, GemmParams) { kite_cuda::gemm_tiled<float>(p); }
KITE_KERNEL(kite_gemm_tiled_f16, GemmParams) { kite_cuda::gemm_tiled<kite_cuda::Half>(p); }
KITE_KERNEL(kite_gemm_simple, GemmParams) { kite_cuda::gemm_simple<float>(p); }
KITE_KERNEL(kite_gemm_simple_f16, GemmParams) { kite_cuda::gemm_simple<kite_cuda::Half>(p); }
