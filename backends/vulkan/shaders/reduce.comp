#version 450
// Reductions with the input viewed as [outer, R, inner] (the reduced axes
// are one contiguous block; the host collapses them). Two layouts, chosen by
// the host: `rows` (inner == 1): one workgroup per output, its 64
// invocations stride over R and combine in shared memory; `columns`: one
// invocation per output, looping over R (consecutive invocations read
// consecutive addresses). Accumulates in float32.
// Groups: rows: outer spread over x and y; columns: ceil(outer*inner/64).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint outer, R, inner;
  uint op;     // 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 l1, 6 l2, 7 sum square, 8 log-sum-exp
  uint rows;   // 1: a workgroup per output
  float scale; // output multiplier (1/R for a mean)
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { float y[]; };

shared float partial[64];

float identity() {
  if (p.op == 2u || p.op == 8u) return uintBitsToFloat(0xff800000u);  // -inf
  if (p.op == 3u) return uintBitsToFloat(0x7f800000u);                 // +inf
  if (p.op == 4u) return 1.0;
  return 0.0;
}

float combine(float acc, float v) {
  switch (p.op) {
    case 2u: case 8u: return max(acc, v);
    case 3u: return min(acc, v);
    case 4u: return acc * v;
    default: return acc + v;
  }
}

// The value one element contributes (before combining).
float term(float v, float shift) {
  switch (p.op) {
    case 5u: return abs(v);
    case 6u: case 7u: return v * v;
    default: return v;
  }
}

float finish(float acc, float shift) {
  if (p.op == 6u) return sqrt(acc);
  if (p.op == 8u) return shift + log(acc);
  return acc * p.scale;
}

float reduce_shared(float v, uint tid, bool is_max) {
  partial[tid] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s) partial[tid] = is_max ? max(partial[tid], partial[tid + s]) : combine(partial[tid], partial[tid + s]);
    barrier();
  }
  const float r = partial[0];
  barrier();
  return r;
}

void main() {
  if (p.rows != 0u) {
    const uint o = flat_group();
    if (o >= p.outer) return;  // uniform per workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint base = p.off_x + o * p.R;
    float shift = 0.0;
    if (p.op == 8u) {
      float m = uintBitsToFloat(0xff800000u);
      for (uint r = tid; r < p.R; r += 64u) m = max(m, x[base + r]);
      shift = reduce_shared(m, tid, true);
      if (isinf(shift)) shift = 0.0;
    }
    float acc = p.op == 8u ? 0.0 : identity();
    for (uint r = tid; r < p.R; r += 64u) {
      const float v = x[base + r];
      acc = p.op == 8u ? acc + exp(v - shift) : combine(acc, term(v, shift));
    }
    if (p.op == 8u) {
      partial[tid] = acc;
      barrier();
      for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        barrier();
      }
      acc = partial[0];
    } else {
      acc = reduce_shared(acc, tid, false);
    }
    if (tid == 0u) y[p.off_y + o] = finish(acc, shift);
    return;
  }
  const uint i = flat_index(64u);
  if (i >= p.outer * p.inner) return;
  const uint o = i / p.inner, in_ = i % p.inner;
  const uint base = p.off_x + o * p.R * p.inner + in_;
  float shift = 0.0;
  if (p.op == 8u) {
    float m = uintBitsToFloat(0xff800000u);
    for (uint r = 0u; r < p.R; ++r) m = max(m, x[base + r * p.inner]);
    shift = isinf(m) ? 0.0 : m;
  }
  float acc = p.op == 8u ? 0.0 : identity();
  for (uint r = 0u; r < p.R; ++r) {
    const float v = x[base + r * p.inner];
    acc = p.op == 8u ? acc + exp(v - shift) : combine(acc, term(v, shift));
  }
  y[p.off_y + i] = finish(acc, shift);
}
