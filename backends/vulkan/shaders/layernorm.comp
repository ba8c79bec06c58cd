#version 450
// Row normalisation, one workgroup of 64 per row of `cols` values:
//   s = a (+ b);  y = (s - mean) / sqrt(var + eps) * scale (+ bias)
// LayerNormalization (scale/bias along the row), skip-LayerNorm (b, and the
// sum written to the second output when it is read elsewhere), and
// InstanceNormalization (rows = N*C planes, scale/bias per channel).
// Mean, then the mean of squared deviations: two passes, float32 sums
// combined in a tree (no catastrophic cancellation).
// Groups: rows spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_a, off_b, off_scale, off_bias, off_y, off_sum;
  uint rows, cols;
  uint flags;      // 1: b, 2: bias, 4: sum output, 8: per-channel scale/bias
  uint channels;   // per-channel mode: scale index = row % channels
  float epsilon;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufScale { float scale[]; };
layout(std430, set = 0, binding = 3) readonly buffer BufBias { float bias[]; };
layout(std430, set = 0, binding = 4) writeonly buffer BufY { float y[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BufSum { float sum_out[]; };

shared float partial[64];

float tree_sum(float v, uint tid) {
  partial[tid] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s) partial[tid] += partial[tid + s];
    barrier();
  }
  const float r = partial[0];
  barrier();
  return r;
}

float value(uint base, uint j) {
  float v = a[p.off_a + base + j];
  if ((p.flags & 1u) != 0u) v += b[p.off_b + base + j];
  return v;
}

void main() {
  const uint row = flat_group();
  if (row >= p.rows) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint base = row * p.cols;
  float s = 0.0;
  for (uint j = tid; j < p.cols; j += 64u) s += value(base, j);
  const float mean = tree_sum(s, tid) / float(p.cols);
  float q = 0.0;
  for (uint j = tid; j < p.cols; j += 64u) {
    const float d = value(base, j) - mean;
    q += d * d;
  }
  const float var = tree_sum(q, tid) / float(p.cols);
  const float inv = 1.0 / sqrt(var + p.epsilon);
  const bool per_channel = (p.flags & 8u) != 0u;
  const uint channel = per_channel ? row % p.channels : 0u;
  for (uint j = tid; j < p.cols; j += 64u) {
    const float v = value(base, j);
    const uint k = per_channel ? channel : j;
    float r = (v - mean) * inv * scale[p.off_scale + k];
    if ((p.flags & 2u) != 0u) r += bias[p.off_bias + k];
    if ((p.flags & 4u) != 0u) sum_out[p.off_sum + base + j] = v;
    y[p.off_y + base + j] = r;
  }
}
