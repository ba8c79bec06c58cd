// What the kernels share: the few CUDA built-ins they use, made to compile
// both with nvcc (the fatbin) and as host C++ for the emulator
// (emu/emu_runtime.h), the block reductions and the elementwise formulas.
// Every kernel runs with at most 256 threads per block (launch bounds).
// Kernels use only: threadIdx/blockIdx/blockDim/gridDim, static __shared__
// arrays, __syncthreads, __shfl_xor_sync over whole warps with every thread
// of the block taking part, and atomicCAS on status words.
#pragma once

#include <math.h>
#include <stdint.h>

#include "params.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define KITE_KERNEL(name, P) extern "C" __global__ void __launch_bounds__(256) name(const kite_cuda::P p)
#define KITE_DEV __device__ __forceinline__
#define KITE_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#else
#include "emu_runtime.h"
#include "kite/ops/half.h"
#define KITE_KERNEL(name, P) inline void name(const kite_cuda::P p)
#define KITE_DEV inline
#define KITE_SHFL_XOR(v, m) kite_emu::shfl_xor((v), (m))
#endif

namespace kite_cuda {

// Storage types. A kernel templated on T reads and writes T (float, or
// Half for float16 tensors) and computes in float: fp16 storage, fp32
// arithmetic. load() widens exactly; store() rounds to nearest, ties to even
// (cuda_fp16.h's __float2half_rn on the device; the same conversion of
// kite/ops/half.h in the emulator, bit for bit).
struct Half {
  uint16_t bits;
};

KITE_DEV float to_float(float v) { return v; }
KITE_DEV float to_float(Half h) {
#if defined(__CUDACC__)
  return __half2float(__ushort_as_half(h.bits));
#else
  return kite::half_to_float(h.bits);
#endif
}
KITE_DEV void from_float(float v, float* out) { *out = v; }
KITE_DEV void from_float(float v, Half* out) {
#if defined(__CUDACC__)
  out->bits = __half_as_ushort(__float2half_rn(v));
#else
  out->bits = kite::float_to_half(v);
#endif
}
template <typename T>
KITE_DEV float load(const T* p, int64_t i) {
  return to_float(p[i]);
}
template <typename T>
KITE_DEV void store(T* p, int64_t i, float v) {
  from_float(v, &p[i]);
}
// A parameter struct's float pointer as the kernel's storage type (the
// structs of params.h declare float; a float16 kernel gets halves there).
template <typename T>
KITE_DEV const T* as(const float* p) {
  return reinterpret_cast<const T*>(p);
}
template <typename T>
KITE_DEV T* as(float* p) {
  return reinterpret_cast<T*>(p);
}

KITE_DEV int imin(int a, int b) { return a < b ? a : b; }
KITE_DEV int imax(int a, int b) { return a > b ? a : b; }

// Global index of this thread in a 1-D launch, and the grid's stride.
KITE_DEV int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
KITE_DEV int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The element offsets of row-major index i of `shape` (rank dims) in two
// strided layouts (element strides sa and sb).
KITE_DEV void unravel2(int64_t i, int rank, const int32_t* shape, const int32_t* sa, const int32_t* sb,
                       int64_t* a, int64_t* b) {
  int64_t rest = i, ia = 0, ib = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t c = rest % shape[d];
    rest /= shape[d];
    ia += c * sa[d];
    ib += c * sb[d];
  }
  *a = ia;
  *b = ib;
}

// The inner step of the 64x64 register tiles (kite_gemm_tiled,
// kite_conv_igemm): 16 k of As (k x 64 rows) and Bs (k x 64 columns) into
// this thread's 4x4 values, rows ty + 16 i and columns tx + 16 j.
KITE_DEV void tile_fma(const float (&As)[16][64], const float (&Bs)[16][64], int tx, int ty, float (&acc)[4][4]) {
  for (int kk = 0; kk < 16; ++kk) {
    float a[4], b[4];
    for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
    for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
  }
}

KITE_DEV float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += KITE_SHFL_XOR(v, o);
  return v;
}
KITE_DEV float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, KITE_SHFL_XOR(v, o));
  return v;
}

// Sum / max over the block (blockDim.x a multiple of 32, every thread
// calling); every thread gets the result. smem: 32 floats.
KITE_DEV float block_sum(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // smem may still be read by a previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? smem[lane] : 0.0f);
}
KITE_DEV float block_max(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? smem[lane] : -INFINITY);
}

KITE_DEV float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

KITE_DEV float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// The unary formulas, shared by kite_unary and every fused epilogue. They
// follow the CPU backend's (backends/cpu/kernels/unary.cpp).
KITE_DEV float apply_op(float x, int op, float alpha, float beta) {
  switch (op) {
    case kOpIdentity: return x;
    case kOpRelu: return x > 0.0f ? x : 0.0f;
    case kOpClip: return fminf(fmaxf(x, alpha), beta);
    case kOpSigmoid: return sigmoid(x);
    case kOpSiLU: return x * sigmoid(x);
    case kOpHardSigmoid: return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case kOpHardSwish: return x * fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case kOpLeakyRelu: return x >= 0.0f ? x : alpha * x;
    case kOpTanh: return tanhf(x);
    case kOpGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kOpGeluTanh: {
      const float c = 0.79788456080286536f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
    }
    case kOpSqrt: return sqrtf(x);
    case kOpReciprocal: return 1.0f / x;
    case kOpExp: return expf(x);
    case kOpLog: return logf(x);
    case kOpAbs: return fabsf(x);
    case kOpNeg: return -x;
    case kOpErf: return erff(x);
    case kOpElu: return x > 0.0f ? x : alpha * (expf(x) - 1.0f);
    case kOpSoftplus: return softplus(x);
    case kOpSign: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x == 0.0f ? 0.0f : x));
    case kOpCeil: return ceilf(x);
    case kOpFloor: return floorf(x);
    case kOpRound: return rintf(x);  // halves to even, as ONNX says
    case kOpSin: return sinf(x);
    case kOpCos: return cosf(x);
    case kOpMish: return x * tanhf(softplus(x));
    case kOpScale: return x * alpha + beta;
    case kOpSelu: return x > 0.0f ? beta * x : beta * alpha * (expf(x) - 1.0f);
    case kOpSoftsign: return x / (1.0f + fabsf(x));
    default: return x;
  }
}

KITE_DEV float apply_act(float x, const Act& a) {
  return a.op == kOpIdentity ? x : apply_op(x, a.op, a.alpha, a.beta);
}

KITE_DEV float apply_binary(float a, float b, int op) {
  switch (op) {
    case kOpAdd: return a + b;
    case kOpSub: return a - b;
    case kOpMul: return a * b;
    case kOpDiv: return a / b;
    case kOpPow: return powf(a, b);
    case kOpPRelu: return a < 0.0f ? a * b : a;
    case kOpMax: return (a != a || b != b) ? NAN : fmaxf(a, b);
    case kOpMin: return (a != a || b != b) ? NAN : fminf(a, b);
    default: return a;
  }
}

}  // namespace kite_cuda
