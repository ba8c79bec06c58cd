// Data movement: strided copies (Transpose, Slice, Expand, Concat and Split
// parts), Pad and Gather. Copies and Gather move elements of any size;
// Pad has a float32 and a float16 kernel.
#pragma once

#include "device.cuh"

namespace kite_cuda {
template <typename T>
KITE_DEV void strided_copy(const CopyParams& p) {
  const T* src = reinterpret_cast<const T*>(p.src);
  T* dst = reinterpret_cast<T*>(p.dst);
  for (int64_t i = global_index(); i < p.n; i += grid_stride()) {
    int64_t s, d;
    unravel2(i, p.rank, p.shape, p.src_strides, p.dst_strides, &s, &d);
    dst[d] = src[s];
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_copy, CopyParams) {
  switch (p.elem_size) {
    case 1: kite_cuda::strided_copy<uint8_t>(p); break;
    case 2: kite_cuda::strided_copy<uint16_t>(p); break;
    case 4: kite_cuda::strided_copy<uint32_t>(p); break;
    default: kite_cuda::strided_copy<uint64_t>(p); break;
  }
}

namespace kite_cuda {
template <typename T>
KITE_DEV void pad(const PadParams& p) {
  const T* x = as<T>(p.x);
  T* y = as<T>(p.y);
  for (int64_t i = global_index(); i < p.n; i += grid_stride()) {
    int64_t rest = i, src = 0, stride = 1;
    bool outside = false;
    for (int k = p.rank - 1; k >= 0; --k) {
      const int64_t o = rest % p.out_shape[k];
      rest /= p.out_shape[k];
      const int64_t len = p.in_shape[k];
      int64_t c = o - p.pad_begin[k];
      if (c < 0 || c >= len) {
        if (p.mode == 0 || len == 0) {
          outside = true;
        } else if (p.mode == 1) {
          // reflect without repeating the edge: period 2 * (len - 1)
          if (len == 1) {
            c = 0;
          } else {
            const int64_t period = 2 * (len - 1);
            c = c % period;
            if (c < 0) c += period;
            if (c >= len) c = period - c;
          }
        } else {
          c = c < 0 ? 0 : len - 1;
        }
      }
      src += c * stride;
      stride *= len;
    }
    if (outside) store(y, i, p.value);
    else y[i] = x[src];
  }
}
}  // namespace kite_cuda

KITE_KERNEL(kite_pad, PadParams) { kite_cuda::pad<float>(p); }
KITE_KERNEL(kite_pad_f16, PadParams) { kite_cuda::pad<kite_cuda::Half>(p); }

// One thread per output element; an index out of range writes the node and
// the value into the status words once and leaves the element as zero.
KITE_KERNEL(kite_gather, GatherParams) {
  using namespace kite_cuda;
  const int64_t total = static_cast<int64_t>(p.outer) * p.count * p.inner_bytes;
  const int inner_bytes = p.inner_bytes;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t byte = i % inner_bytes;
    const int64_t rest = i / inner_bytes;
    const int64_t j = rest % p.count;
    const int64_t o = rest / p.count;
    const int64_t raw = p.index_is_64 ? static_cast<const int64_t*>(p.indices)[j]
                                      : static_cast<const int32_t*>(p.indices)[j];
    const int64_t index = raw < 0 ? raw + p.axis_dim : raw;
    if (index < 0 || index >= p.axis_dim) {
      if (atomicCAS(&p.status[0], 0, p.node + 1) == 0) p.status[1] = static_cast<int32_t>(raw);
      p.y[i] = 0;
      continue;
    }
    p.y[i] = p.data[(o * p.axis_dim + index) * inner_bytes + byte];
  }
}
