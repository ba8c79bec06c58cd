// Vectorised float math shared by the kernels that must agree bit for bit
// (the unary Sigmoid and the fused activations' Sigmoid and SiLU, so a fused
// node and its decomposition give the same outputs).
#pragma once

#include <cstdint>

namespace kite::cpu::vmath {

// out[i] = sigmoid(in[i]) = 1 / (1 + exp(-in[i])), or with times_x
// in[i] * sigmoid(in[i]) (SiLU). In place is fine. exp is Cody-Waite range
// reduction (n = round(x / ln 2), r = x - n ln 2, |r| <= ln2 / 2) and a
// polynomial in r, scaled by 2^n (the exponent bits, or scalef at 16 lanes):
// at 4 lanes the degree-7 Taylor one (truncation r^8 / 8! < 6e-9 relative),
// at 8 and 16 a degree-5 minimax one (1.1e-7 relative, two FMAs fewer;
// vmath.cpp, exp16); its argument is clamped to [-87, 88] so
// 2^n stays a normal float. Measured against double precision over
// [-100, 100] (tests/unit/cpu_kernels_test.cpp, Vmath.*): sigmoid within
// kSigmoidRelError of the exact value, relative, where that value is a
// normal float; below about 1.6e-38 (x < -87) it returns about 1.6e-38
// instead of the tiny exact value. NaN stays NaN; sigmoid(+inf) = 1.
// 16 lanes where the SGEMM level in use is AVX-512 (sgemm.h's
// micro_kernel_in_use, which KITE_CPU_SGEMM caps), 8 where it is AVX2, else 4.
constexpr double kSigmoidRelError = 5e-7;  // measured: 1.4e-7 at 4 lanes, 2.3e-7 at 8 and 16
void sigmoid(const float* in, float* out, int64_t n, bool times_x);
// sigmoid in place on rows rows of n floats, v[r * ld + i]: one call, one
// dispatch and the constants loaded once, for a tile of a GEMM's output (a
// call of sigmoid a row of 32 floats made efficientnet_b0's 16 -> 96 layer
// a quarter slower on Zen 4). Each value's bits are sigmoid's. gelu_rows
// and hard_sigmoid_rows likewise.
void sigmoid_rows(float* v, int64_t ld, int64_t rows, int64_t n, bool times_x);

// out[i] = gelu(in[i]) = 0.5 x (1 + erf(x / sqrt 2)) (ONNX Gelu, approximate
// "none"), shared by the unary Gelu and the fused MatMul/Conv/Gemm + Gelu.
// On the AVX2 and 4-lane levels erf(z) = z P(z^2) / Q(z^2) with z clamped
// to [-4, 4] (P of degree 6, Q of degree 4: the rational minimax fit XLA
// and Eigen use for float erf, within 6.5e-8 of erf in exact arithmetic),
// then clamped to [-1, 1]: eleven FMAs and a division, no exp (on Zen 2,
// 3.7 ns per 8 floats against 6.0 for the form below). On the AVX-512
// level erf by Abramowitz and Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 +
// t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z), z >= 0, odd for
// z < 0, within 1.5e-7; exp as in sigmoid. Either way gelu's error is
// about 0.5 |x| times erf's, plus float rounding: measured against double
// precision over [-12, 12] (tests/unit/cpu_kernels_test.cpp, Vmath.Gelu*;
// every 16th float there: AVX2 2.05e-7, the 4-lane level without FMA
// 2.57e-7), within kGeluAbsError * max(1, |x|), and never of the other
// sign than x. NaN stays NaN; +inf gives +inf, -inf NaN (0 * inf, as the
// formula does in floats). 16 lanes on the AVX-512 level, 8 on AVX2, else
// 4, as sigmoid.
constexpr double kGeluAbsError = 3e-7;
void gelu(const float* in, float* out, int64_t n);
void gelu_rows(float* v, int64_t ld, int64_t rows, int64_t n);

// out[i] = max(0, min(1, alpha x + beta)) (ONNX HardSigmoid), with times_x
// x times that (HardSwish: alpha 1/6, beta 1/2): the scalar formula's bits
// on every level (16 lanes on the AVX-512 level, 8 on AVX2). In place is fine.
void hard_sigmoid(const float* in, float* out, int64_t n, float alpha, float beta, bool times_x);
void hard_sigmoid_rows(float* v, int64_t ld, int64_t rows, int64_t n, float alpha, float beta,
                       bool times_x);

// out[i] = a[i] + b[i]: arith (below) with both strides 1. The fused
// kernels' bias rows (convnext_tiny's MatMul biases, 10M floats a run).
void add(const float* a, const float* b, float* out, int64_t n);

// out[i] = a[i * sa] op b[i * sb] for i < n, with sa and sb each 0 (one
// value broadcast) or 1 (a row), not both 0: the elementwise Add, Sub, Mul
// and Div of float rows. One rounding each, so the scalar loop's bits; 16
// lanes on the AVX-512 level, 8 on AVX2, else 4. out may be a or b (the same floats,
// not a shifted overlap).
enum class Arith { kAdd, kSub, kMul, kDiv };
void arith(Arith op, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n);

// Softmax of n contiguous floats (y may be x): max, shifted exp, float sum,
// scale, as the scalar loops, with exp as in sigmoid (16 lanes on the
// AVX-512 level, 8 on AVX2, else 4) and the sum in lanes. A shifted value below -87
// gives about 1.6e-38 instead of its exact tiny exp (a -inf mask entry's
// probability is then ~1e-38 / sum, not 0). Measured against the exact
// softmax of the float differences x - max (Vmath.SoftmaxWithinItsStatedBound;
// that subtraction rounds as in the scalar loops): relative error per
// element within kSoftmaxRelError where the exact value is a normal float. NaN in
// the row gives NaN everywhere, as the scalar loops do.
constexpr double kSoftmaxRelError = 5e-7;  // measured: 1.7e-7 at 4 lanes, 2.3e-7 at 8 and 16
void softmax(const float* x, float* y, int64_t n);

}  // namespace kite::cpu::vmath
