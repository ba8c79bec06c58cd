// Depthwise 2-D convolution (one input channel per output channel), one
// output plane at a time: the plane is copied into a zero-padded scratch
// buffer, then each output row is computed in vectors across its columns,
// every tap summed in registers, bias included, the row written once
// (ConvKernel::run_direct keeps the general 3-D / column-dilated / wider-
// stride loop). The ISA level follows the GEMM's (sgemm::micro_kernel_in_use(), so
// KITE_CPU_SGEMM and the tests' force_micro_kernel choose it too).
#pragma once

#include <algorithm>
#include <cstdint>

namespace kite::cpu::depthwise {

struct Plane {
  const float* in;  // H x W
  int64_t h, w;
  float* out;  // oh x ow
  int64_t oh, ow;
  const float* weights;  // kh x kw
  int64_t kh, kw;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h;
  float bias;
  // Applied to each vector before it is stored (a fused Conv + Relu / Clip):
  // kRelu x > 0 ? x : 0 (NaN gives 0); kClip x < lo ? lo : x, then > hi ? hi
  // (NaN passes): the formulas of sgemm's epilogue and the fused activations.
  enum Act { kNone, kRelu, kClip };
  Act act = kNone;
  float lo = 0.0f, hi = 0.0f;
};

// Whether run_plane takes this geometry: column stride 1 or 2, no column
// dilation (rows may have any stride and dilation).
inline bool handles(int64_t stride_w, int64_t dilation_w) {
  return (stride_w == 1 || stride_w == 2) && dilation_w == 1;
}

// The zero-padded copy of the input plane the kernel reads: wide enough for
// whole vectors of up to kMaxLanes outputs (stride 2 reads one float past
// the last window), tall enough for every output row's window.
constexpr int64_t kMaxLanes = 16;
struct Padded {
  int64_t w, h;
};
inline Padded padded(const Plane& p) {
  const int64_t ow_up = (p.ow + kMaxLanes - 1) / kMaxLanes * kMaxLanes;
  const int64_t w_need = (ow_up - 1) * p.stride_w + p.kw + (p.stride_w == 2 ? 1 : 0);
  const int64_t h_need = (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dilation_h + 1;
  return {std::max(p.pad_w + p.w, w_need), std::max(p.pad_h + p.h, h_need)};
}
// Floats of scratch run_plane needs for p.
inline int64_t scratch_floats(const Plane& p) {
  const Padded d = padded(p);
  return d.w * d.h;
}

// Writes p.out; scratch: scratch_floats(p) floats, any content.
void run_plane(const Plane& p, float* scratch);

namespace detail {
// The same code built for each level (depthwise_impl.inc); the x86 ones only
// on x86-64 with GCC or Clang.
void plane_portable(const Plane& p, float* scratch);
void plane_avx2(const Plane& p, float* scratch);
void plane_avx512(const Plane& p, float* scratch);
}  // namespace detail

}  // namespace kite::cpu::depthwise
