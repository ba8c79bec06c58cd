#version 450
// Depthwise convolution (group = input channels; output channel oc reads
// input channel oc / multiplier), NCHW, direct: one output per invocation.
// Groups: (ceil(OH*OW/64) spread over x and y, N * Cout).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_w, off_bias, off_y;
  uint cin, H, W;
  uint cout, OH, OW;
  uint KH, KW, sh, sw, dh, dw;
  int ph, pw;
  uint multiplier;
  uint has_bias;
  uint act;
  float act_a, act_b;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { FLOAT_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { FLOAT_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { FLOAT_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufY { FLOAT_T y[]; };

void main() {
  const uint n = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * 64u;
  if (n >= p.OH * p.OW) return;
  const uint plane = gl_WorkGroupID.z;  // image * cout + oc
  const uint image = plane / p.cout, oc = plane % p.cout;
  const uint ci = oc / p.multiplier;
  const uint oh = n / p.OW, ow = n % p.OW;
  const uint base_x = p.off_x + (image * p.cin + ci) * p.H * p.W;
  const uint base_w = p.off_w + oc * p.KH * p.KW;
  float acc = 0.0;
  for (uint kh = 0u; kh < p.KH; ++kh) {
    const int ih = int(oh * p.sh + kh * p.dh) - p.ph;
    if (ih < 0 || ih >= int(p.H)) continue;
    for (uint kw = 0u; kw < p.KW; ++kw) {
      const int iw = int(ow * p.sw + kw * p.dw) - p.pw;
      if (iw < 0 || iw >= int(p.W)) continue;
      acc += LD(x[base_x + uint(ih) * p.W + uint(iw)]) * LD(w[base_w + kh * p.KW + kw]);
    }
  }
  if (p.has_bias != 0u) acc += LD(bias[p.off_bias + oc]);
  y[p.off_y + plane * p.OH * p.OW + n] = ST(apply_op(p.act, acc, p.act_a, p.act_b));
}
