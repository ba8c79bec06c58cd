#version 450
// Convolution for devices that run invocations as SIMD lanes of a CPU
// (lavapipe): the implicit GEMM of conv.comp without shared memory or
// barriers. Each invocation computes 16 output channels of one output
// position; per (ci, kh, kw) it loads one input value (neighbouring
// positions across lanes) and 16 weights at addresses that are the same in
// every lane. Groups: (ceil(OH*OW/64), ceil(Cout_g/16), N * G). Push
// constants as conv.comp.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_w, off_bias, off_y;
  uint cin_g, H, W;
  uint cout_g, OH, OW;
  uint KH, KW, sh, sw, dh, dw;
  int ph, pw;
  uint groups;
  uint has_bias;
  uint act;
  float act_a, act_b;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { FLOAT_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { FLOAT_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { FLOAT_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufY { FLOAT_T y[]; };

const uint R = 16u;

void main() {
  const uint n = gl_GlobalInvocationID.x;
  const uint N = p.OH * p.OW;
  if (n >= N) return;
  const uint m0 = gl_WorkGroupID.y * R;
  const uint image = gl_WorkGroupID.z / p.groups, g = gl_WorkGroupID.z % p.groups;
  const uint rows = min(R, p.cout_g - m0);
  const uint K = p.cin_g * p.KH * p.KW;
  const uint cin = p.cin_g * p.groups;
  const uint oh = n / p.OW, ow = n % p.OW;
  const int ih0 = int(oh * p.sh) - p.ph;
  const int iw0 = int(ow * p.sw) - p.pw;
  const uint base_x = p.off_x + (image * cin + g * p.cin_g) * p.H * p.W;
  const uint base_w = p.off_w + (g * p.cout_g + m0) * K;
  float acc[R];
  [[unroll]] for (uint i = 0u; i < R; ++i) acc[i] = 0.0;
  uint k = 0u;
  for (uint ci = 0u; ci < p.cin_g; ++ci) {
    const uint plane = base_x + ci * p.H * p.W;
    for (uint kh = 0u; kh < p.KH; ++kh) {
      const int ih = ih0 + int(kh * p.dh);
      const bool row_in = ih >= 0 && ih < int(p.H);
      for (uint kw = 0u; kw < p.KW; ++kw, ++k) {
        const int iw = iw0 + int(kw * p.dw);
        const float xv = (row_in && iw >= 0 && iw < int(p.W)) ? LD(x[plane + uint(ih) * p.W + uint(iw)]) : 0.0;
        [[unroll]] for (uint i = 0u; i < R; ++i) {
          if (i < rows) acc[i] += LD(w[base_w + i * K + k]) * xv;
        }
      }
    }
  }
  const uint cout = p.cout_g * p.groups;
  [[unroll]] for (uint i = 0u; i < R; ++i) {
    if (i >= rows) continue;
    const uint oc = g * p.cout_g + m0 + i;
    const float bv = p.has_bias != 0u ? LD(bias[p.off_bias + oc]) : 0.0;
    y[p.off_y + (image * cout + oc) * N + n] = ST(apply_op(p.act, acc[i] + bv, p.act_a, p.act_b));
  }
}
