#version 450
// BatchNormalization (inference) over NC...: per channel c,
//   m = scale[c] / sqrt(var[c] + eps);  y = x * m + (B[c] - mean[c] * m)
// (the CPU kernel's formula). Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_scale, off_b, off_mean, off_var, off_y;
  uint n, channels, plane;
  float epsilon;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufScale { float scale[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufB { float bb[]; };
layout(std430, set = 0, binding = 3) readonly buffer BufMean { float mean[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufVar { float var[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BufY { float y[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  const uint c = (i / p.plane) % p.channels;
  const float m = scale[p.off_scale + c] / sqrt(var[p.off_var + c] + p.epsilon);
  const float add = bb[p.off_b + c] - mean[p.off_mean + c] * m;
  y[p.off_y + i] = x[p.off_x + i] * m + add;
}
