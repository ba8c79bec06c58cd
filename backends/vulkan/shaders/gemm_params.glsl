// Push constants of gemm.comp and gemm_small.comp (src/kernels/gemm.cpp
// fills them). C[m, n] = act(alpha * sum_k A[m, k] B[k, n] + beta * bias[m, n])
// for each batch z; every operand is addressed through element strides, so
// transposed operands, broadcast biases and NCHW convolution outputs need no
// copies.
layout(push_constant) uniform Params {
  uint off_a, off_b, off_bias, off_c;
  uint M, N, K;
  uint sam, sak;        // A(m, k) = a[off_a + z*sab + m*sam + k*sak]
  uint sbk, sbn;        // B(k, n)
  uint scm;             // C(m, n) = c[off_c + z*scb + m*scm + n]
  uint sab, sbb, scb;   // per batch z
  uint sbias_m, sbias_n, sbias_b;  // bias(m, n) (0: broadcast)
  uint has_bias;
  float alpha, beta;
  uint act;
  float act_a, act_b;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufA { FLOAT_T a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { FLOAT_T b[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { FLOAT_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufC { FLOAT_T c[]; };

void store_c(uint z, uint m, uint n, float acc) {
  float v = p.alpha * acc;
  if (p.has_bias != 0u) v += p.beta * LD(bias[p.off_bias + z * p.sbias_b + m * p.sbias_m + n * p.sbias_n]);
  c[p.off_c + z * p.scb + m * p.scm + n] = ST(apply_op(p.act, v, p.act_a, p.act_b));
}
