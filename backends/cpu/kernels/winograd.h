// Winograd F(4x4, 3x3) and F(2x2, 3x3) for 2-D 3x3 convolutions with stride
// 1 (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
// 2015).
//
// Each m x m tile of the output (m = 4 or 2) comes from an (m+2) x (m+2)
// tile of the input: V = B^T d B per input channel, M = U . V summed over
// input channels (U = G g G^T, the weights transformed once), then
// Y = A^T M A. The sum over channels is (m+2)^2 independent GEMMs (one per
// point of the transform domain) of (out_channels x channels) by (channels x
// tiles): per output pixel and channel pair, 36/16 = 2.25 multiply-adds for
// F(4x4) and 16/4 = 4 for F(2x2) where the direct convolution takes 9.
//
// The transformed weights are (m+2)^2 matrices in the GEMM's packed-A
// layout (weight_pack.h layouts "wino43-a6", "wino23-a6"): 4x (F(4x4)) or
// 1.8x (F(2x2)) the bytes of the 3x3 weights, read once per run. Large
// images take F(4x4); small ones (14x14, 7x7: few tiles per weight, where
// streaming 4x the weights would cost more than the arithmetic saved) take
// F(2x2); tiny ones keep im2col.
//
// Error: the transforms have coefficients up to 8 (F(4x4)'s A^T) and 1/24
// (its G), so the float32 result is further from the exact one than the
// direct sum is: about 1e-5 of the output's largest magnitude for 64-channel
// layers where the direct sum is about 2e-7; F(2x2)'s coefficients are 0, 1
// and 1/2 and its error stays near the direct sum's. The unit test bounds
// both against float64; the model set's tolerance is 1e-4 of the largest
// output.
#pragma once

#include <cstdint>

#include "kite/ops/op_node.h"
#include "sgemm.h"
#include "thread_pool.h"

namespace kite::cpu::winograd {

// F(4x4, 3x3)'s sizes (the AVX-512 gather and scatter are written for it).
constexpr int64_t kTile = 4;     // output tile edge
constexpr int64_t kAlpha = 6;    // input tile edge
constexpr int64_t kPoints = 36;  // kAlpha * kAlpha
constexpr int64_t kLanes = 16;   // tiles transformed together (two panels of the GEMM's B)

// The output tile edge a Conv of this geometry (channels in, out_channels
// out, constant weights) runs with: 4 (F(4x4, 3x3)), 2 (F(2x2, 3x3)) or 0
// (not Winograd: im2col). Winograd needs 2-D, a 3x3 kernel, stride 1,
// dilation 1, one group and two input channels or more. The converter
// (packing offline) and the kernel ask the same question.
int64_t tile_for(const kite::ops::WindowGeometry& g, int64_t channels, int64_t out_channels);
inline int64_t points(int64_t tile) { return (tile + 2) * (tile + 2); }
// "wino43-a6" or "wino23-a6".
const char* layout_name(int64_t tile);

// The transformed weights: points(tile) matrices (out_channels x channels),
// each in packed-A layout, one after another.
int64_t packed_weight_floats(int64_t tile, int64_t out_channels, int64_t channels);
// w: (out_channels, channels, 3, 3) row-major. Transformed in double.
void pack_weights(int64_t tile, const float* w, int64_t out_channels, int64_t channels, float* dst);

// One convolution's plan: sizes, and the tiles per block (a multiple of
// kLanes) whose transformed input and GEMM output stay in the L2 cache.
class Conv {
 public:
  Conv() = default;
  Conv(int64_t tile, int64_t channels, int64_t out_channels, int64_t in_h, int64_t in_w,
       int64_t out_h, int64_t out_w, int64_t pad_h, int64_t pad_w);
  // Scratch for a run with up to `threads` threads.
  int64_t workspace_floats(int threads) const;
  // y (out_channels, out_h, out_w) = conv(x (channels, in_h, in_w)) + bias,
  // then the epilogue. u: pack_weights' output; bias may be null; workspace:
  // workspace_floats(slots) floats (slots: the threads it was sized for).
  void run(const float* x, const float* u, const float* bias, const sgemm::Epilogue& epilogue,
           float* y, float* workspace, int slots, ThreadPool& pool) const;

  // Sizes, read by the transforms (winograd_impl.inc).
  int64_t tile = 4, point_count = 36;
  int64_t channels = 0, out_channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t pad_h = 0, pad_w = 0;
  int64_t tiles_h = 0, tiles_w = 0, tiles = 0;
  int64_t block = 0;  // tiles per block
  // Floats from one point's matrix to the next: at least `floats`, an odd
  // number of 64-byte lines. The transforms touch a line of every point at
  // once (36 streams); with a whole number of 4 KiB between points (64
  // channels by 16 tiles) they all fell in one set of an L1 with 4 KiB per
  // way, and the output transform read from L2 (see winograd.cpp).
  static int64_t point_stride(int64_t floats) {
    const int64_t lines = (floats + 15) / 16;
    return (lines | 1) * 16;
  }
  int64_t v_floats() const { return point_stride(sgemm::packed_b_floats(channels, block)); }  // per point
  int64_t m_floats() const { return point_stride(out_channels * block); }                     // per point
  int64_t block_floats() const;  // one block's scratch

 private:
  // Whether a run on `workers` threads gives each whole blocks of tiles
  // (and scratch of its own), rather than sharing each step of each block.
  bool blocks_per_worker(int64_t workers) const;
  // Else whether each thread takes a share of the output channels.
  bool channels_per_worker(int64_t workers) const;
  // Thread w's share of the output channels: *m0 (whole pairs of A panels)
  // and the count returned.
  int64_t rows_share(int64_t workers, int64_t w, int64_t* m0) const;
  // The GEMM outputs of the largest share.
  int64_t share_floats(int64_t workers) const;
  // The n (<= block) tiles from t0: input transform, GEMMs, output
  // transform, each split across pool (null: on the calling thread).
  void run_block(int64_t t0, int64_t n, const float* x, const float* u, const float* bias,
                 const sgemm::Epilogue& epilogue, float* y, float* scratch, ThreadPool* pool) const;
  // Its steps: the transformed input of the tiles into v (points *
  // v_floats()); then output channels m0 .. m0 + rows - 1 (m0 a multiple
  // of sgemm::kMR): the GEMMs into mb (points * rows * block) and the
  // output transform into y.
  void transform_input(int64_t t0, int64_t n, const float* x, float* v, ThreadPool* pool) const;
  void multiply_and_output(int64_t t0, int64_t n, int64_t m0, int64_t rows, const float* u,
                           const float* bias, const sgemm::Epilogue& epilogue, float* y, const float* v,
                           float* mb, ThreadPool* pool) const;
};

}  // namespace kite::cpu::winograd
