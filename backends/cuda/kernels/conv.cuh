// Convolutions (NCHW; float32, or float16 storage with float32 arithmetic:
// the _f16 kernels) with the bias and activation fused in:
//  - kite_conv_direct: one thread per output value, the whole window in a
//    loop. Serves depthwise convolutions (few channels per group) and odd
//    shapes.
//  - kite_conv_igemm: implicit GEMM per group, Y_g[M_g, N*OH*OW] =
//    W_g[M_g, K] x im2col(X)[K, N*OH*OW] with K = C_g*KH*KW, 64x64 tiles of
//    the output, 16-deep slices of K staged in shared memory, 4x4 values per
//    thread (rows ty + 16 i, columns tx + 16 j: conflict-free shared reads,
//    coalesced stores). im2col is never materialised: each thread gathers
//    its B values from X as it loads the tile.
#pragma once

#include "device.cuh"

namespace kite_cuda {
template <typename T>
KITE_DEV void conv_direct(const ConvParams& p) {
  const T* X = as<T>(p.x);
  const T* Wt = as<T>(p.w);
  const T* bias = as<T>(p.bias);
  T* Y = as<T>(p.y);
  const int64_t total = static_cast<int64_t>(p.N) * p.M * p.OH * p.OW;
  const int mg = p.M / p.groups, cg = p.C / p.groups;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int ow = static_cast<int>(i % p.OW);
    const int oh = static_cast<int>((i / p.OW) % p.OH);
    const int m = static_cast<int>((i / (static_cast<int64_t>(p.OW) * p.OH)) % p.M);
    const int n = static_cast<int>(i / (static_cast<int64_t>(p.OW) * p.OH * p.M));
    const int g = m / mg;
    float acc = bias ? load(bias, m) : 0.0f;
    const T* w = Wt + static_cast<int64_t>(m) * cg * p.KH * p.KW;
    const int ih0 = oh * p.SH - p.PH, iw0 = ow * p.SW - p.PW;
    for (int c = 0; c < cg; ++c) {
      const T* x = X + (static_cast<int64_t>(n) * p.C + g * cg + c) * p.H * p.W;
      for (int kh = 0; kh < p.KH; ++kh) {
        const int ih = ih0 + kh * p.DH;
        if (ih < 0 || ih >= p.H) continue;
        for (int kw = 0; kw < p.KW; ++kw) {
          const int iw = iw0 + kw * p.DW;
          if (iw < 0 || iw >= p.W) continue;
          acc += load(x, ih * p.W + iw) * load(w, (c * p.KH + kh) * p.KW + kw);
        }
      }
    }
    store(Y, i, apply_act(acc, p.act));
  }
}

// grid (ceil(N*OH*OW / 64), ceil(M_g / 64), groups), 256 threads. The
// tiles in shared memory hold floats whatever T is.
template <typename T>
KITE_DEV void conv_igemm(const ConvParams& p) {
  __shared__ float As[16][64];
  __shared__ float Bs[16][64];
  const int tid = threadIdx.x;
  const int tx = tid & 15, ty = tid >> 4;
  const int g = blockIdx.z;
  const int mg = p.M / p.groups, cg = p.C / p.groups;
  const int khw = p.KH * p.KW;
  const int K = cg * khw;
  const int ohw = p.OH * p.OW;
  const int P = p.N * ohw;
  const int m0 = blockIdx.y * 64, p0 = blockIdx.x * 64;
  const T* w = as<T>(p.w) + static_cast<int64_t>(g) * mg * K;
  const T* bias_g = as<T>(p.bias);
  T* Y = as<T>(p.y);

  // This thread's B column (fixed over the K loop: 256 % 64 == 0).
  const int col = tid & 63;
  const int pc = p0 + col;
  const bool col_ok = pc < P;
  const int img = col_ok ? pc / ohw : 0;
  const int rem = col_ok ? pc % ohw : 0;
  const int ih0 = (rem / p.OW) * p.SH - p.PH;
  const int iw0 = (rem % p.OW) * p.SW - p.PW;
  const T* x = as<T>(p.x) + (static_cast<int64_t>(img) * p.C + g * cg) * p.H * p.W;

  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += 16) {
    // A: 64 rows x 16 k; consecutive threads read consecutive k.
    for (int r = 0; r < 4; ++r) {
      const int idx = tid + r * 256;
      const int kk = idx & 15, mm = idx >> 4;
      const int m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < mg && k < K) ? load(w, static_cast<int64_t>(m) * K + k) : 0.0f;
    }
    // B: 16 k x 64 columns.
    for (int r = 0; r < 4; ++r) {
      const int kk = (tid >> 6) + r * 4;
      const int k = k0 + kk;
      float v = 0.0f;
      if (col_ok && k < K) {
        const int c = k / khw, kr = k % khw;
        const int ih = ih0 + (kr / p.KW) * p.DH, iw = iw0 + (kr % p.KW) * p.DW;
        if (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W) v = load(x, (static_cast<int64_t>(c) * p.H + ih) * p.W + iw);
      }
      Bs[kk][col] = v;
    }
    __syncthreads();
    tile_fma(As, Bs, tx, ty, acc);
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= mg) continue;
    const int mo = g * mg + m;
    const float bias = bias_g ? load(bias_g, mo) : 0.0f;
    for (int j = 0; j < 4; ++j) {
      const int pp = p0 + tx + 16 * j;
      if (pp >= P) continue;
      const int n = pp / ohw, q = pp % ohw;
      store(Y, (static_cast<int64_t>(n) * p.M + mo) * ohw + q, apply_act(acc[i][j] + bias, p.act));
    }
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_conv_direct, ConvParams) { kite_cuda::conv_direct<float>(p); }
KITE_KERNEL(kite_conv_direct_f16, ConvParams) { kite_cuda::conv_direct<kite_cuda::Half>(p); }
KITE_KERNEL(kite_conv_igemm, ConvParams) { kite_cuda::conv_igemm<float>(p); }
KITE_KERNEL(kite_conv_igemm_f16, ConvParams) { kite_cuda::conv_igemm<kite_cuda::Half>(p); }
