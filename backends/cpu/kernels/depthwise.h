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
#include "kite/ops/op_node.h"
#include "sgemm.h"

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
// Stride 2: each padded row is kept as its even columns then its odd ones,
// half_width(d) floats each, so every tap reads whole vectors (depthwise_impl.inc).
inline int64_t half_width(const Padded& d) { return (d.w + 1) / 2; }
// Floats of scratch run_plane needs for p.
inline int64_t scratch_floats(const Plane& p) {
  const Padded d = padded(p);
  return p.stride_w == 2 ? 2 * half_width(d) * d.h : d.w * d.h;
}

// Writes p.out; scratch: scratch_floats(p) floats, any content.
void run_plane(const Plane& p, float* scratch);

// Sixteen channels at a time (AVX-512; AVX2 as two halves of eight): the
// sixteen input planes are
// transposed into a zero-padded buffer with one channel per lane ((h + pads)
// x (w + pads) vectors), every output pixel is then its taps' FMAs with a
// weight vector per tap, and the result is transposed back to the sixteen
// output planes. A small plane is too small for the per-plane kernel's
// setup (a 7x7 plane is one 16-lane vector a row, its padded copy costs
// more than the taps), and on larger ones the per-plane kernel's row
// blocks and padded copy cost more than two 16x16 transposes per 256
// floats; the buffer stays in L2 (kChannelBandFloats).
struct Channels {
  const float* in;  // count planes of H x W, in_stride floats apart
  int64_t in_stride, h, w;
  float* out;  // count planes of oh x ow, out_stride floats apart
  int64_t out_stride, oh, ow;
  const float* weights;  // count x kh x kw
  int64_t kh, kw, stride_h, stride_w, pad_h, pad_w;
  const float* bias;  // count values, or null
  int64_t count;      // 1 to kChannelLanes
  // When set, the same weights one vector a tap (kh * kw x kChannelLanes,
  // arrange_channel_weights): the task starts without gathering them.
  const float* lane_weights = nullptr;
  // The output rows to write, [oy_begin, oy_end) (oy_end < 0: to oh): a
  // few planes split by rows across threads.
  int64_t oy_begin = 0, oy_end = -1;
  Plane::Act act = Plane::kNone;
  float lo = 0.0f, hi = 0.0f;
  // When set, runs on each band's outputs, after act, before they go back
  // to the planes (rows 1, cols the band's floats, contiguous: an
  // activation the registers do not take); lanes past count hold values
  // nobody stores.
  sgemm::TileHook tile = nullptr;
  const void* tile_ctx = nullptr;
};
constexpr int64_t kChannelLanes = 16;
// The padded buffer's columns: every window inside.
inline int64_t padded_cols(const Channels& c) {
  return std::max(c.pad_w + c.w, (c.ow - 1) * c.stride_w + c.kw);
}
// The buffer holds a band of output rows at a time, its padded input rows
// and its output rows, at most this many floats (256 KiB, a quarter of Zen
// 4's L2), so the planes stream through it. Measured on an AMD EPYC (Zen
// 4), 1 thread, mobilenet_v2: the 32-channel 112x112 stride-1 layer, by
// planes before (its whole-plane buffer was 1.6 MiB), 0.29 -> 0.25 ms; the
// 96-channel 112x112 stride-2 one 0.42 ms by planes, 0.28 as one 1 MiB
// band and the same in bands; 128 KiB and 512 KiB bands measured the same.
constexpr int64_t kChannelBandFloats = 64 * 1024;
constexpr int64_t kChannelMaxTaps = 64;  // kernels up to 8x8
// A band's floats for rows output rows, and the rows of a band.
int64_t band_floats(const Channels& c, int64_t rows);
int64_t band_rows(const Channels& c);
// Floats of scratch run_channels needs.
int64_t channel_scratch_floats(int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                               int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w);
// Whether a Conv runs its planes as Channels at this level: depthwise (one
// input and one output channel a group), 1-D or 2-D planes (a 3-D one of
// depth 1), the per-plane kernel's strides (handles), no dilation, a
// one-row band within kChannelBandFloats; the level AVX-512 or AVX2 (eight
// lanes, each block of sixteen as two halves).
bool channels_take(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels,
                   sgemm::MicroKernel level);
// Writes the count output planes; false (nothing written) when the level
// is neither AVX-512 nor AVX2 (the tests force levels).
bool run_channels(const Channels& c, float* scratch);
// Channels' lane_weights for every block of sixteen of `channels` channels
// (weights: channels x taps): block b's taps at dst + b * taps *
// kChannelLanes, lanes past the last channel 0; lane_weight_floats(...)
// floats. The weight_pack layout "dw-c16".
int64_t lane_weight_floats(int64_t channels, int64_t taps);
void arrange_channel_weights(const float* weights, int64_t channels, int64_t taps, float* dst);

namespace detail {
// The same code built for each level (depthwise_impl.inc); the x86 ones only
// on x86-64 with GCC or Clang.
void plane_portable(const Plane& p, float* scratch);
void plane_avx2(const Plane& p, float* scratch);
void plane_avx512(const Plane& p, float* scratch);
bool channels_avx512(const Channels& c, float* scratch);  // false off x86-64
bool channels_avx2(const Channels& c, float* scratch);    // eight lanes; false off x86-64
}  // namespace detail

}  // namespace kite::cpu::depthwise
