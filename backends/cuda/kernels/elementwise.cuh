// Elementwise kernels: unary ops, broadcasting binary ops, the bias +
// activation epilogue, channel affine (BatchNormalization) and casts.
// Grid-stride loops: any grid size covers any n.
#pragma once

#include "device.cuh"

namespace kite_cuda {
template <typename T>
KITE_DEV void unary(const UnaryParams& p) {
  const T* x = as<T>(p.x);
  T* y = as<T>(p.y);
  for (int64_t i = global_index(); i < p.n; i += grid_stride()) {
    store(y, i, apply_op(load(x, i), p.act.op, p.act.alpha, p.act.beta));
  }
}

template <typename T>
KITE_DEV void binary(const BinaryParams& p) {
  const T* a = as<T>(p.a);
  const T* b = as<T>(p.b);
  T* y = as<T>(p.y);
  for (int64_t i = global_index(); i < p.n; i += grid_stride()) {
    if (p.contiguous) {
      store(y, i, apply_binary(load(a, i), load(b, i), p.op));
      continue;
    }
    int64_t ia, ib;
    unravel2(i, p.rank, p.shape, p.sa, p.sb, &ia, &ib);
    store(y, i, apply_binary(load(a, ia), load(b, ib), p.op));
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_unary, UnaryParams) { kite_cuda::unary<float>(p); }
KITE_KERNEL(kite_unary_f16, UnaryParams) { kite_cuda::unary<kite_cuda::Half>(p); }
KITE_KERNEL(kite_binary, BinaryParams) { kite_cuda::binary<float>(p); }
KITE_KERNEL(kite_binary_f16, BinaryParams) { kite_cuda::binary<kite_cuda::Half>(p); }

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
constexpr int kDtFloat32 = 1, kDtInt64 = 2, kDtInt32 = 3, kDtBool = 4, kDtFloat16 = 5, kDtInt8 = 6, kDtUint8 = 7;

KITE_DEV double load_as_double(const void* x, int64_t i, int dtype) {
  switch (dtype) {
    case kDtFloat32: return static_cast<const float*>(x)[i];
    case kDtFloat16: return to_float(static_cast<const Half*>(x)[i]);
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
// toward zero as C does). To float16 through float: every source value
// that double -> float rounds is beyond half's range (2^24 and up), so the
// result is the one rounding of the value to half.
KITE_KERNEL(kite_cast, CastParams) {
  using namespace kite_cuda;
  for (int64_t i = global_index(); i < p.n; i += grid_stride()) {
    if (p.from == kDtInt64) {
      const int64_t v = static_cast<const int64_t*>(p.x)[i];
      switch (p.to) {
        case kDtFloat32: static_cast<float*>(p.y)[i] = static_cast<float>(v); break;
        case kDtFloat16: store(static_cast<Half*>(p.y), i, static_cast<float>(v)); break;
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
    // float32 -> float16 rounds once (not through double).
    if (p.from == kDtFloat32 && p.to == kDtFloat16) {
      store(static_cast<Half*>(p.y), i, static_cast<const float*>(p.x)[i]);
      continue;
    }
    const double v = load_as_double(p.x, i, p.from);
    switch (p.to) {
      case kDtFloat32: static_cast<float*>(p.y)[i] = static_cast<float>(v); break;
      case kDtFloat16: store(static_cast<Half*>(p.y), i, static_cast<float>(v)); break;
      case kDtInt32: static_cast<int32_t*>(p.y)[i] = static_cast<int32_t>(v); break;
      case kDtInt64: static_cast<int64_t*>(p.y)[i] = static_cast<int64_t>(v); break;
      case kDtInt8: static_cast<int8_t*>(p.y)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
      case kDtUint8: static_cast<uint8_t*>(p.y)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
      case kDtBool: static_cast<uint8_t*>(p.y)[i] = v != 0.0; break;
      default: break;
    }
  }
}
