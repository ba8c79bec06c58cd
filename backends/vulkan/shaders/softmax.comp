#version 450
// Softmax / LogSoftmax along one axis, the input viewed as [outer, N, inner]:
// max-shifted, float32 sums (as the CPU kernel). `rows` (inner == 1): one
// workgroup of 64 per line with shared-memory reductions; else one
// invocation per line, striding by inner.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint outer, N, inner;
  uint log_softmax;
  uint rows;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { float y[]; };

shared float partial[64];

void main() {
  if (p.rows != 0u) {
    const uint line = flat_group();
    if (line >= p.outer) return;
    const uint tid = gl_LocalInvocationID.x;
    const uint bx = p.off_x + line * p.N, by = p.off_y + line * p.N;
    float m = uintBitsToFloat(0xff800000u);
    for (uint j = tid; j < p.N; j += 64u) m = max(m, x[bx + j]);
    partial[tid] = m;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
      if (tid < s) partial[tid] = max(partial[tid], partial[tid + s]);
      barrier();
    }
    m = partial[0];
    barrier();
    float sum = 0.0;
    for (uint j = tid; j < p.N; j += 64u) sum += exp(x[bx + j] - m);
    partial[tid] = sum;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
      if (tid < s) partial[tid] += partial[tid + s];
      barrier();
    }
    sum = partial[0];
    if (p.log_softmax != 0u) {
      const float shift = m + log(sum);
      for (uint j = tid; j < p.N; j += 64u) y[by + j] = x[bx + j] - shift;
    } else {
      const float inv = 1.0 / sum;
      for (uint j = tid; j < p.N; j += 64u) y[by + j] = exp(x[bx + j] - m) * inv;
    }
    return;
  }
  const uint i = flat_index(64u);
  if (i >= p.outer * p.inner) return;
  const uint o = i / p.inner, in_ = i % p.inner;
  const uint bx = p.off_x + o * p.N * p.inner + in_, by = p.off_y + o * p.N * p.inner + in_;
  float m = uintBitsToFloat(0xff800000u);
  for (uint j = 0u; j < p.N; ++j) m = max(m, x[bx + j * p.inner]);
  float sum = 0.0;
  for (uint j = 0u; j < p.N; ++j) sum += exp(x[bx + j * p.inner] - m);
  if (p.log_softmax != 0u) {
    const float shift = m + log(sum);
    for (uint j = 0u; j < p.N; ++j) y[by + j * p.inner] = x[bx + j * p.inner] - shift;
  } else {
    const float inv = 1.0 / sum;
    for (uint j = 0u; j < p.N; ++j) y[by + j * p.inner] = exp(x[bx + j * p.inner] - m) * inv;
  }
}
