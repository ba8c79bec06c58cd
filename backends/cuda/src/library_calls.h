// The library calls: a cuDNN convolution (with its bias and ReLU fused by
// cudnnConvolutionBiasActivationForward where cuDNN allows) and a cuBLASLt
// matmul (with bias / ReLU / GELU(tanh) epilogues). Each is set up at
// prepare: descriptors, the algorithm (cuDNN: measured with
// cudnnFindConvolutionForwardAlgorithmEx on the session's own buffers;
// cuBLASLt: the heuristic's first choice, then timed), its workspace size.
#pragma once

#include <memory>
#include <string>

#include "kernel.h"

namespace kite::cuda {

struct ConvShape {
  int n = 0, c = 0, h = 0, w = 0;      // input
  int m = 0, kh = 0, kw = 0;           // weights [m, c / groups, kh, kw]
  int oh = 0, ow = 0;
  int sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int groups = 1;
};

// Sets up a cuDNN convolution y = act(conv(x, w) + bias) with act Relu or
// identity fused when `fuse` (else the caller adds the epilogue). Null with
// why when cuDNN cannot do it (or at supports time: checks only).
std::shared_ptr<LibraryCall> make_cudnn_conv(Backend& backend, const ConvShape& s, const Operand& x,
                                             const Operand& w, const Operand& bias, const Operand& y,
                                             bool relu, bool fuse_bias, float* measured_ms, std::string* why);

// y = act(alpha * a.b + beta * c) through cuBLASLt, row-major operands
// described by their strides (one of each pair must be 1), `batch`
// matrices `sa`, `sb`, `sy` elements apart (0: shared). epilogue: 0 none,
// 1 bias, 2 bias + ReLU, 3 bias + GELU (tanh form). c (optional) is a full
// [M, N] matrix added with beta; bias a vector of N.
struct LtShape {
  int64_t M = 0, N = 0, K = 0;
  int64_t sam = 0, sak = 0, sbk = 0, sbn = 0;
  int64_t batch = 1, sa = 0, sb = 0, sy = 0;
  float alpha = 1.0f, beta = 0.0f;
  int epilogue = 0;
};
std::shared_ptr<LibraryCall> make_lt_matmul(Backend& backend, const LtShape& s, const Operand& a, const Operand& b,
                                            const Operand* c, const Operand* bias, const Operand& y, float* measured_ms,
                                            std::string* why);

}  // namespace kite::cuda
