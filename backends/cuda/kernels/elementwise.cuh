// Elementwise kernels: unary ops, broadcasting binary ops, the bias +
// activation epilogue, channel affine (BatchNormalization) and casts.
// Grid-stride loops: any grid size covers any n.
#pragma once

#include "device.cuh"

KITE_KERNEL(kite_unary, UnaryParams) {
  for (int64_t i = kite_cuda::global_index(); i < p.n; i += kite_cuda::grid_stride()) {
    p.y[i] = kite_cuda::apply_op(p.x[i], p.act.op, p.act.alpha, p.act.beta);
  }
}

KITE_KERNEL(kite_binary, BinaryParams) {
  for (int64_t i = kite_cuda::global_index(); i < p.n; i += kite_cuda::grid_stride()) {
    if (p.contiguous) {
      p.y[i] = kite_cuda::apply_binary(p.a[i], p.b[i], p.op);
      continue;
    }
    int64_t ia, ib;
    kite_cuda::unravel2(i, p.rank, p.shape, p.sa, p.sb, &ia, &ib);
    p.y[i] = kite_cuda::apply_binary(p.a[ia], p.b[ib], p.op);
  }
}

KITE_KERNEL(kite_bias_act, BiasActParams) {
  for (int64_t i = kite_cuda::global_index(); i < p.n; i += kite_cuda::grid_stride()) {
    float v = p.y[i];
    if (p.bias) v += p.bias[(i / p.inner) % p.channels];
    p.y[i] = kite_cuda::apply_act(v, p.act);
  }
}

KITE_KERNEL(kite_channel_affine, ChannelAffineParams) {
  for (int64_t i = kite_cuda::global_index(); i < p.n; i += kite_cuda::grid_stride()) {
    const int64_t c = (i / p.inner) % p.channels;
    p.y[i] = p.x[i] * p.scale[c] + p.shift[c];
  }
}

namespace kite_cuda {
// kite_dtype codes (kite.h) the cast kernel knows.
constexpr int kDtFloat32 = 1, kDtInt64 = 2, kDtInt32 = 3, kDtBool = 4, kDtInt8 = 6, kDtUint8 = 7;

KITE_DEV double load_as_double(const void* x, int64_t i, int dtype) {
  switch (dtype) {
    case kDtFloat32: return static_cast<const float*>(x)[i];
    case kDtUint8: return static_cast<const uint8_t*>(x)[i];
    case kDtInt8: return static_cast<const int8_t*>(x)[i];
    case kDtInt32: return static_cast<const int32_t*>(x)[i];
    case kDtBool: return static_cast<const uint8_t*>(x)[i] != 0 ? 1.0 : 0.0;
    default: return 0.0;
  }
}
}  // namespace kite_cuda

// Values go through double (exact for every source but int64, which is
// converted directly, and float, whose conversion to an integer truncates
// toward zero as C does).
KITE_KERNEL(kite_cast, CastParams) {
  using namespace kite_cuda;
  for (int64_t i = global_index(); i < p.n; i += grid_stride()) {
    if (p.from == kDtInt64) {
      const int64_t v = static_cast<const int64_t*>(p.x)[i];
      switch (p.to) {
        case kDtFloat32: static_cast<float*>(p.y)[i] = static_cast<float>(v); break;
        case kDtInt32: static_cast<int32_t*>(p.y)[i] = static_cast<int32_t>(v); break;
        case kDtInt64: static_cast<int64_t*>(p.y)[i] = v; break;
        case kDtInt8: static_cast<int8_t*>(p.y)[i] = static_cast<int8_t>(v); break;
        case kDtUint8: static_cast<uint8_t*>(p.y)[i] = static_cast<uint8_t>(v); break;
        case kDtBool: static_cast<uint8_t*>(p.y)[i] = v != 0; break;
        default: break;
      }
      continue;
    }
    if (p.from == kDtFloat32 && p.to == kDtFloat32) {
      static_cast<float*>(p.y)[i] = static_cast<const float*>(p.x)[i];
      continue;
    }
    const double v = load_as_double(p.x, i, p.from);
    switch (p.to) {
      case kDtFloat32: static_cast<float*>(p.y)[i] = static_cast<float>(v); break;
      case kDtInt32: static_cast<int32_t*>(p.y)[i] = static_cast<int32_t>(v); break;
      case kDtInt64: static_cast<int64_t*>(p.y)[i] = static_cast<int64_t>(v); break;
      case kDtInt8: static_cast<int8_t*>(p.y)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
      case kDtUint8: static_cast<uint8_t*>(p.y)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
      case kDtBool: static_cast<uint8_t*>(p.y)[i] = v != 0.0; break;
      default: break;
    }
  }
}
