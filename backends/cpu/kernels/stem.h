// Convolutions with few input channels (a network's stem: 3 colour
// channels into 16 to 64), computed directly, without im2col.
//
// Through im2col a stem is a GEMM with K = C * kh * kw (27 for a 3x3 on
// RGB): the im2col matrix (K x pixels, 1.3 MB for 112x112 outputs) is
// written and read back for a GEMM that stores a tile of C every 27 k
// steps. Here each task is one output row by eight output channels: the
// input rows (a zero-padded copy, so no bounds checks) are read in place,
// 48 output pixels at a time in three vectors, and every tap is eight
// broadcast weights times those three vectors: 24 FMAs per tap with the
// accumulators in registers, stored once with the bias and the fused
// Relu / Clip. On AVX2 (8 lanes, 16 registers) the eight channels are two
// passes of four over 24 pixels (12 FMAs per tap), and a stride-2 input
// row is copied as its even columns then its odd ones.
#pragma once

#include <cstdint>

#include "kite/ops/op_node.h"
#include "sgemm.h"
#include "thread_pool.h"

namespace kite::cpu::stem {

struct Geometry {
  int64_t c = 0, h = 0, w = 0;    // input planes
  int64_t m = 0, oh = 0, ow = 0;  // output planes
  int64_t kh = 0, kw = 0;
  int64_t stride = 1;  // the same on both axes, 1 or 2
  int64_t pad_top = 0, pad_left = 0;
};

constexpr int64_t kMaxChannels = 4;   // input channels
constexpr int64_t kMaxKernel = 11;    // kh and kw
constexpr int64_t kChannelBlock = 8;  // output channels per task

// Whether a Conv runs here rather than through im2col + GEMM: 2-D, group 1,
// dilation 1, both strides 1 or both 2, at most kMaxChannels input channels,
// a kernel of at most kMaxKernel on each axis, and the GEMM level AVX-512 or
// AVX2 (the other levels have only the scalar loop, kept for the tests'
// forced levels). One rule for the kernel and for the weights' packed form
// (weight_pack's "stem-w8").
bool takes(const kite::ops::WindowGeometry& g, int64_t channels, sgemm::MicroKernel level);
// The kernel's geometry of such a Conv.
Geometry geometry(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels);

// Floats of the weights in the kernel's order (weights()): per block of
// kChannelBlock output channels, per tap (c, ky, kx), the block's eight
// weights (zero past m).
int64_t weight_floats(const Geometry& g);
// w: M x C x kh x kw (ONNX). dst: weight_floats(g) floats.
void arrange_weights(const Geometry& g, const float* w, float* dst);

// Floats of scratch run needs: the zero-padded input of one batch item.
int64_t scratch_floats(const Geometry& g);

// y (M x OH x OW) = conv(x (C x H x W)) + bias (null: none), then the
// epilogue (its tile hook on each output row of eight channels). weights:
// arrange_weights' output. AVX-512 or AVX2 when that is the GEMM level in
// use, else a scalar loop over the same padded copy.
void run(const Geometry& g, const float* x, const float* weights, const float* bias,
         const sgemm::Epilogue& epilogue, float* y, float* scratch, ThreadPool& pool);

}  // namespace kite::cpu::stem
