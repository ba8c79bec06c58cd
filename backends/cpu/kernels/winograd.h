// Winograd F(4x4, 3x3) for 2-D 3x3 convolutions with stride 1 (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2015).
//
// Each 4x4 tile of the output comes from a 6x6 tile of the input: V = B^T d B
// per input channel, M = U . V summed over input channels (U = G g G^T, the
// weights transformed once), then Y = A^T M A. The sum over channels is 36
// independent GEMMs (one per point of the 6x6 transform domain) of
// (out_channels x channels) by (channels x tiles): 36 multiply-adds per tile
// and channel pair where the direct convolution takes 144, so 4x fewer.
//
// The transformed weights are 36 matrices in the GEMM's packed-A layout
// (weight_pack.h layout "wino43-a6"): 4x the bytes of the 3x3 weights, which
// is why small images (few tiles per weight) keep the im2col path.
//
// Error: the transforms have coefficients up to 8 (A^T) and 1/24 (G), so the
// float32 result is further from the exact one than the direct sum is:
// about 1e-5 of the output's largest magnitude for 64-channel layers where
// the direct sum is about 2e-7 (measured against float64 in the unit test,
// which bounds it). The model set's tolerance is 1e-4 of the largest output.
#pragma once

#include <cstdint>

#include "kite/ops/op_node.h"
#include "sgemm.h"
#include "thread_pool.h"

namespace kite::cpu::winograd {

constexpr int64_t kTile = 4;     // output tile edge
constexpr int64_t kAlpha = 6;    // input tile edge
constexpr int64_t kPoints = 36;  // kAlpha * kAlpha
constexpr int64_t kLanes = 16;   // tiles transformed together (two panels of the GEMM's B)

// Whether a Conv of this geometry (channels in, out_channels out, constant
// weights) runs as F(4x4, 3x3): 2-D, 3x3 kernel, stride 1, dilation 1, one
// group, and enough output tiles that the transformed weights are reused.
// The converter (packing offline) and the kernel ask the same question.
bool applies(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels);

// The transformed weights: kPoints matrices (out_channels x channels), each
// in packed-A layout, one after another.
int64_t packed_weight_floats(int64_t out_channels, int64_t channels);
// w: (out_channels, channels, 3, 3) row-major. Transformed in double.
void pack_weights(const float* w, int64_t out_channels, int64_t channels, float* dst);

// One convolution's plan: sizes, and the tiles per block (a multiple of
// kLanes) whose transformed input and GEMM output stay in the L2 cache.
class Conv {
 public:
  Conv() = default;
  Conv(int64_t channels, int64_t out_channels, int64_t in_h, int64_t in_w, int64_t out_h,
       int64_t out_w, int64_t pad_h, int64_t pad_w);
  // Scratch for a run with up to `threads` threads.
  int64_t workspace_floats(int threads) const;
  // y (out_channels, out_h, out_w) = conv(x (channels, in_h, in_w)) + bias,
  // then the epilogue. u: pack_weights' output; bias may be null; workspace:
  // workspace_floats(slots) floats (slots: the threads it was sized for).
  void run(const float* x, const float* u, const float* bias, const sgemm::Epilogue& epilogue,
           float* y, float* workspace, int slots, ThreadPool& pool) const;

  // Sizes, read by the transforms (winograd_impl.inc).
  int64_t channels = 0, out_channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t pad_h = 0, pad_w = 0;
  int64_t tiles_h = 0, tiles_w = 0, tiles = 0;
  int64_t block = 0;  // tiles per block
  int64_t v_floats() const { return sgemm::packed_b_floats(channels, block); }  // per point
  int64_t m_floats() const { return out_channels * block; }                     // per point
  int64_t block_floats() const;  // one block's scratch

 private:
  // The block of tiles t0 ...: input transform, GEMMs, output transform,
  // each split across pool (null: on the calling thread).
  void run_block(int64_t t0, const float* x, const float* u, const float* bias,
                 const sgemm::Epilogue& epilogue, float* y, float* scratch, ThreadPool* pool) const;
};

}  // namespace kite::cpu::winograd
