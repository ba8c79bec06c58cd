#version 450
// MaxPool / AveragePool over up to 3 spatial axes (D, H, W; unused axes have
// size 1), pads, strides, dilations; AveragePool divides by the taps inside
// the input, or with count_include_pad by the taps inside the padded extent
// (as the CPU kernel). An empty window gives -inf (max) or 0 (average).
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint n, mode;          // 0 max, 1 average, 2 average with count_include_pad
  uint in_[3], out_[3], k[3], s[3], d[3];
  int pb[3], pe[3];
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { FLOAT_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { FLOAT_T y[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  uint rest = i;
  const uint ow = rest % p.out_[2]; rest /= p.out_[2];
  const uint oh = rest % p.out_[1]; rest /= p.out_[1];
  const uint od = rest % p.out_[0]; rest /= p.out_[0];
  const uint plane = rest;
  const uint base = p.off_x + plane * p.in_[0] * p.in_[1] * p.in_[2];
  const int s0 = int(od * p.s[0]) - p.pb[0];
  const int s1 = int(oh * p.s[1]) - p.pb[1];
  const int s2 = int(ow * p.s[2]) - p.pb[2];
  const bool is_max = p.mode == 0u;
  float acc = is_max ? uintBitsToFloat(0xff800000u) : 0.0;
  uint inside0 = 0u, inside1 = 0u, inside2 = 0u, padded0 = 0u, padded1 = 0u, padded2 = 0u;
  for (uint t = 0u; t < p.k[0]; ++t) {
    const int a = s0 + int(t * p.d[0]);
    if (a >= -p.pb[0] && a < int(p.in_[0]) + p.pe[0]) ++padded0;
    if (a >= 0 && a < int(p.in_[0])) ++inside0;
  }
  for (uint t = 0u; t < p.k[1]; ++t) {
    const int a = s1 + int(t * p.d[1]);
    if (a >= -p.pb[1] && a < int(p.in_[1]) + p.pe[1]) ++padded1;
    if (a >= 0 && a < int(p.in_[1])) ++inside1;
  }
  for (uint t = 0u; t < p.k[2]; ++t) {
    const int a = s2 + int(t * p.d[2]);
    if (a >= -p.pb[2] && a < int(p.in_[2]) + p.pe[2]) ++padded2;
    if (a >= 0 && a < int(p.in_[2])) ++inside2;
  }
  for (uint t0 = 0u; t0 < p.k[0]; ++t0) {
    const int a0 = s0 + int(t0 * p.d[0]);
    if (a0 < 0 || a0 >= int(p.in_[0])) continue;
    for (uint t1 = 0u; t1 < p.k[1]; ++t1) {
      const int a1 = s1 + int(t1 * p.d[1]);
      if (a1 < 0 || a1 >= int(p.in_[1])) continue;
      const uint row = base + (uint(a0) * p.in_[1] + uint(a1)) * p.in_[2];
      for (uint t2 = 0u; t2 < p.k[2]; ++t2) {
        const int a2 = s2 + int(t2 * p.d[2]);
        if (a2 < 0 || a2 >= int(p.in_[2])) continue;
        const float v = LD(x[row + uint(a2)]);
        acc = is_max ? max(acc, v) : acc + v;
      }
    }
  }
  if (!is_max) {
    const uint count = p.mode == 2u ? padded0 * padded1 * padded2 : inside0 * inside1 * inside2;
    acc = count > 0u ? acc / float(count) : 0.0;
  }
  y[p.off_y + i] = ST(acc);
}
