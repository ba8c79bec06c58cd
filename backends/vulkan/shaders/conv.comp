#version 450
// Convolution (NCHW, 2-D; 1-D as H = 1) as an implicit GEMM per image and
// group: Y[m, n] = act(sum_k W[m, k] X'(k, n) + bias[m]) with m the output
// channel within the group, n = oh * OW + ow and k = (ci, kh, kw); X' is read
// straight from the input (zero outside it), no im2col buffer. Tiles as in
// gemm.comp. Groups: (ceil(OH*OW/64), ceil(Cout_g/64), N * G).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_w, off_bias, off_y;
  uint cin_g, H, W;        // input channels per group, input size
  uint cout_g, OH, OW;     // output channels per group, output size
  uint KH, KW, sh, sw, dh, dw;
  int ph, pw;              // leading pads
  uint groups;
  uint has_bias;
  uint act;
  float act_a, act_b;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { FLOAT_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { FLOAT_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { FLOAT_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufY { FLOAT_T y[]; };

const uint TM = 64u;
const uint TN = 64u;
const uint TK = 16u;
shared float As[TK][TM + 1u];
shared float Bs[TK][TN + 1u];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint t = ty * 16u + tx;
  const uint image = gl_WorkGroupID.z / p.groups, g = gl_WorkGroupID.z % p.groups;
  const uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN;
  const uint K = p.cin_g * p.KH * p.KW;
  const uint khw = p.KH * p.KW;
  const uint N = p.OH * p.OW;
  const uint cin = p.cin_g * p.groups;
  const uint base_x = p.off_x + (image * cin + g * p.cin_g) * p.H * p.W;
  const uint base_w = p.off_w + g * p.cout_g * K;
  float acc[4][4];
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < K; k0 += TK) {
    for (uint r = 0u; r < 4u; ++r) {
      const uint e = t + 256u * r;
      // Weights: row-major [cout, cin_g*KH*KW], consecutive along k.
      const uint row = e / TK, kk = e % TK;
      const uint m = m0 + row, k = k0 + kk;
      As[kk][row] = (m < p.cout_g && k < K) ? LD(w[base_w + m * K + k]) : 0.0;
      // Input: consecutive along n (output x), so along the input's rows.
      const uint col = e % TN, kb = e / TN;
      const uint n = n0 + col, k2 = k0 + kb;
      float v = 0.0;
      if (n < N && k2 < K) {
        const uint ci = k2 / khw, rem = k2 % khw;
        const uint kh = rem / p.KW, kw = rem % p.KW;
        const uint oh = n / p.OW, ow = n % p.OW;
        const int ih = int(oh * p.sh + kh * p.dh) - p.ph;
        const int iw = int(ow * p.sw + kw * p.dw) - p.pw;
        if (ih >= 0 && ih < int(p.H) && iw >= 0 && iw < int(p.W)) {
          v = LD(x[base_x + (ci * p.H + uint(ih)) * p.W + uint(iw)]);
        }
      }
      Bs[kb][col] = v;
    }
    barrier();
    for (uint kk = 0u; kk < TK; ++kk) {
      float av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = As[kk][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  const uint cout = p.cout_g * p.groups;
  for (uint i = 0u; i < 4u; ++i) {
    const uint m = m0 + ty + 16u * i;
    if (m >= p.cout_g) continue;
    const uint oc = g * p.cout_g + m;
    const float b = p.has_bias != 0u ? LD(bias[p.off_bias + oc]) : 0.0;
    for (uint j = 0u; j < 4u; ++j) {
      const uint n = n0 + tx + 16u * j;
      if (n < N) y[p.off_y + (image * cout + oc) * N + n] = ST(apply_op(p.act, acc[i][j] + b, p.act_a, p.act_b));
    }
  }
}
