#version 450
// Resize of the two innermost axes (every outer axis keeps its size), with
// per-axis tap tables the host computed with the CPU kernel's formulas:
// for each output row (then column) index, `taps` (input index, weight)
// pairs. y = sum_th wh * (sum_tw ww * x[ih, iw]), in the CPU's order.
// Tables: [OH * taps_h] (index, weight bits) then [OW * taps_w].
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y, off_table;
  uint n, H, W, OH, OW;
  uint taps_h, taps_w;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { FLOAT_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { FLOAT_T y[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufTable { uint table[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  const uint ow = i % p.OW;
  const uint oh = (i / p.OW) % p.OH;
  const uint plane = i / (p.OW * p.OH);
  const uint base = p.off_x + plane * p.H * p.W;
  const uint th0 = p.off_table + 2u * oh * p.taps_h;
  const uint tw0 = p.off_table + 2u * p.OH * p.taps_h + 2u * ow * p.taps_w;
  float sum = 0.0;
  for (uint th = 0u; th < p.taps_h; ++th) {
    const uint ih = table[th0 + 2u * th];
    const float wh = uintBitsToFloat(table[th0 + 2u * th + 1u]);
    float line = 0.0;
    for (uint tw = 0u; tw < p.taps_w; ++tw) {
      const uint iw = table[tw0 + 2u * tw];
      line += uintBitsToFloat(table[tw0 + 2u * tw + 1u]) * LD(x[base + ih * p.W + iw]);
    }
    sum += wh * line;
  }
  y[p.off_y + i] = ST(sum);
}
