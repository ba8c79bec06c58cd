// The parameters of every Kite CUDA kernel: one plain struct per kernel,
// passed by value as the kernel's only argument. The same header is read by
// nvcc (device code), by the plugin's host code (which fills the structs and
// hands them to cuLaunchKernel) and by the host emulator of the tests, so it
// holds only fixed-width types and raw pointers: its layout is the same on
// both sides. Indices are 32-bit: the planner declines tensors of 2^31
// elements or more. The tensors' pointers are declared float; the _f16
// kernels (kernel_list.h) read and write float16 through them (device.cuh's
// as<T>).
#pragma once

#include <stdint.h>

namespace kite_cuda {

constexpr int kMaxRank = 8;      // strided copies, pads
constexpr int kMaxBinaryRank = 6;
constexpr int kBlock = 256;      // threads per block of the elementwise kernels

// Elementwise operation codes (unary ops, fused activations, binary ops).
enum OpCode : int32_t {
  kOpIdentity = 0,
  kOpRelu, kOpClip, kOpSigmoid, kOpSiLU, kOpHardSigmoid, kOpHardSwish, kOpLeakyRelu, kOpTanh,
  kOpGelu, kOpGeluTanh, kOpSqrt, kOpReciprocal, kOpExp, kOpLog, kOpAbs, kOpNeg, kOpErf, kOpElu,
  kOpSoftplus, kOpSign, kOpCeil, kOpFloor, kOpRound, kOpSin, kOpCos, kOpMish, kOpScale,
  kOpSelu, kOpSoftsign,
  // binary
  kOpAdd = 64, kOpSub, kOpMul, kOpDiv, kOpPow, kOpPRelu, kOpMax, kOpMin,
};

// An activation applied in an epilogue (alpha/beta as the op needs them).
struct Act {
  int32_t op;
  float alpha, beta;
};

struct UnaryParams {
  const float* x;
  float* y;
  int32_t n;
  Act act;
};

// y = a (op) b with numpy broadcasting; shapes merged to at most 6 dims.
// contiguous: a and b have y's shape (no index arithmetic).
struct BinaryParams {
  const float* a;
  const float* b;
  float* y;
  int32_t n;
  int32_t rank;
  int32_t op;
  int32_t contiguous;
  int32_t shape[kMaxBinaryRank];
  int32_t sa[kMaxBinaryRank];   // element strides, 0 along broadcast axes
  int32_t sb[kMaxBinaryRank];
};

// y[i] = act(y[i] + bias[(i / inner) % channels]) in place (bias may be null).
struct BiasActParams {
  float* y;
  const float* bias;
  int32_t n;
  int32_t channels;
  int32_t inner;
  Act act;
};

// dst[i over shape] = src[...] with element strides on both sides (a
// transpose, slice, expand, a concat part, a split part). elem_size 1, 2, 4, 8.
struct CopyParams {
  const char* src;
  char* dst;
  int32_t n;
  int32_t rank;
  int32_t elem_size;
  int32_t shape[kMaxRank];
  int32_t src_strides[kMaxRank];
  int32_t dst_strides[kMaxRank];
};

// Pad (float32): mode 0 constant, 1 reflect, 2 edge.
struct PadParams {
  const float* x;
  float* y;
  int32_t n;
  int32_t rank;
  int32_t mode;
  float value;
  int32_t in_shape[kMaxRank];
  int32_t out_shape[kMaxRank];
  int32_t pad_begin[kMaxRank];
};

// Status words a kernel writes when it meets a bad run-time value:
// [0] = 1 + node index of the first failure, [1] = the value (low 32 bits).
constexpr int kStatusWords = 4;

// Gather along an axis: data viewed as [outer, axis_dim, inner] (inner in
// bytes); indices int32 or int64, negative counts from the end.
struct GatherParams {
  const char* data;
  const void* indices;
  char* y;
  int32_t outer;
  int32_t axis_dim;
  int32_t inner_bytes;
  int32_t count;          // number of indices
  int32_t index_is_64;
  int32_t node;           // for the status record
  int32_t* status;
};

// Cast between dtypes (kite_dtype codes of kite.h: float32, int32, int64,
// int8, uint8, bool).
struct CastParams {
  const void* x;
  void* y;
  int32_t n;
  int32_t from;
  int32_t to;
};

// Convolution, NCHW (1-D convolutions as H = 1). Weights [M, C/group, KH, KW].
struct ConvParams {
  const float* x;
  const float* w;
  const float* bias;     // may be null
  float* y;
  int32_t N, C, H, W;
  int32_t M, OH, OW;
  int32_t KH, KW, SH, SW, PH, PW, DH, DW;
  int32_t groups;
  Act act;
};

// C = act(alpha * A.B + beta * bias) for batched, strided A [M, K] and
// B [K, N]; Y is contiguous [batch, M, N]. The batch index is split into
// two levels (b1 < nb1, b2 < nb2), each with its own strides, so numpy
// broadcasting of MatMul's batch dims works (stride 0).
struct GemmParams {
  const float* a;
  const float* b;
  const float* bias;     // may be null
  float* y;
  int32_t M, N, K;
  int32_t sam, sak, sbk, sbn;
  int32_t nb1, nb2;
  int64_t sa1, sa2, sb1, sb2;
  int64_t sbias1, sbias2;
  int32_t sbias_m, sbias_n;
  float alpha, beta;
  Act act;
};

// 2-D pooling on NCHW. mode 0 max, 1 average.
struct PoolParams {
  const float* x;
  float* y;
  int32_t N, C, H, W, OH, OW;
  int32_t KH, KW, SH, SW, PH, PW, DH, DW;
  int32_t PHE, PWE;      // pads at the end (count_include_pad)
  int32_t mode;
  int32_t count_include_pad;
};

// Reductions over [outer, r, inner]: op codes below. rows_mode: inner == 1,
// one block per row.
enum ReduceOp : int32_t {
  kReduceSum = 0, kReduceMean, kReduceMax, kReduceMin, kReduceProd, kReduceL1, kReduceL2,
  kReduceSumSquare, kReduceLogSumExp
};
struct ReduceParams {
  const float* x;
  float* y;
  int32_t outer, r, inner;
  int32_t op;
};

// Softmax / LogSoftmax along an axis of length len with stride inner.
struct SoftmaxParams {
  const float* x;
  float* y;
  int32_t outer, len, inner;
  int32_t log;
};

// LayerNormalization over rows of `cols` values: y = (x [+ skip] - mean) /
// sqrt(var + eps) * scale + bias. scale/bias per column, or per row modulo
// `channels` when per_row (InstanceNormalization). sum (may be null)
// receives x + skip.
struct NormParams {
  const float* x;
  const float* skip;
  const float* scale;
  const float* bias;
  float* y;
  float* sum;
  int32_t rows, cols;
  int32_t per_row;
  int32_t channels;
  float epsilon;
};

// BatchNormalization (inference) folded into y = x * scale[c] + shift[c].
struct ChannelAffineParams {
  const float* x;
  const float* scale;
  const float* shift;
  float* y;
  int32_t n, channels, inner;
};

// Resize of the last two axes of a [planes, IH, IW] tensor through tap
// tables (offsets into the input row/column and weights), built on the host.
struct ResizeParams {
  const float* x;
  float* y;
  const int32_t* h_offset;   // [OH * taps_h]
  const float* h_weight;
  const int32_t* w_offset;   // [OW * taps_w]
  const float* w_weight;
  int32_t planes, IH, IW, OH, OW;
  int32_t taps_h, taps_w;
};

// Attention: y[b, i, :] = softmax(q[b, i, :] . kt[b] * scale + mask) . v[b]
// for q [B, S, D], kt [B, D, T], v [B, T, Dv]; the mask broadcasts to
// [lead..., S, T] (lead dims up to 4, with their own strides; 0: broadcast).
constexpr int kAttentionMaxLead = 4;
constexpr int kAttentionMaxD = 256;    // q row kept in shared memory
constexpr int kAttentionMaxDv = 512;   // per-thread accumulators: Dv / block
struct AttentionParams {
  const float* q;
  const float* kt;
  const float* v;
  const float* mask;     // may be null
  float* y;
  int32_t B, S, D, T, Dv;
  float scale;
  int32_t lead_rank;
  int32_t lead_dims[kAttentionMaxLead];
  int32_t mask_lead_strides[kAttentionMaxLead];
  int32_t mask_row_stride, mask_col_stride;
  int32_t nan_to_zero;   // 1: a NaN probability counts as 0 (Hugging Face's guard)
};

}  // namespace kite_cuda
