#version 450
// y = f(x), elementwise (activations and math; codes in common.glsl).
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint n, op;
  float alpha, beta;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { FLOAT_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { FLOAT_T y[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  y[p.off_y + i] = ST(apply_op(p.op, LD(x[p.off_x + i]), p.alpha, p.beta));
}
