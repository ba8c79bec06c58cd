#version 450
// Attention for one (batch, query row) per workgroup of 64:
//   s_j = scale * sum_k q[k] kt[k, j] (+ mask);  p = softmax(s);  out[c] = sum_j p_j v[j, c]
// q [B, S, D], kt [B, D, T], v [B, T, Dv] (B = the leading dims, collapsed),
// the mask broadcast through strides per leading dim (up to 4) and along
// rows and columns. Scores live in shared memory (T <= 2048, checked by the
// host). Groups: B * S spread over x and y. nan_to_zero is the CPU kernel's
// guard: a NaN probability (every score -inf, say) counts as 0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_q, off_kt, off_v, off_mask, off_out;
  uint B, S, D, T, Dv;
  float scale;
  uint has_mask;
  uint mask_row, mask_col;      // mask strides along S and T
  uint lead_rank;               // leading dims (<= 4), innermost last
  uint lead_dims[4];
  uint lead_mask_strides[4];
  uint nan_to_zero;             // 1: a NaN probability counts as 0 (Hugging Face's guard)
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufQ { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufKt { float kt[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufV { float v[]; };
layout(std430, set = 0, binding = 3) readonly buffer BufMask { float mask[]; };
layout(std430, set = 0, binding = 4) writeonly buffer BufOut { float outv[]; };

const uint MAX_T = 2048u;
shared float scores[MAX_T];
shared float partial[64];

void main() {
  const uint r = flat_group();
  if (r >= p.B * p.S) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint bi = r / p.S, i = r % p.S;
  const uint qb = p.off_q + r * p.D;
  const uint kb = p.off_kt + bi * p.D * p.T;
  const uint vb = p.off_v + bi * p.T * p.Dv;
  uint mb = p.off_mask + i * p.mask_row;
  if (p.has_mask != 0u) {
    uint rest = bi;
    for (int d = int(p.lead_rank) - 1; d >= 0; --d) {
      mb += (rest % p.lead_dims[d]) * p.lead_mask_strides[d];
      rest /= p.lead_dims[d];
    }
  }
  float m = uintBitsToFloat(0xff800000u);
  for (uint j = tid; j < p.T; j += 64u) {
    float s = 0.0;
    for (uint k = 0u; k < p.D; ++k) s += q[qb + k] * kt[kb + k * p.T + j];
    s *= p.scale;
    if (p.has_mask != 0u) s += mask[mb + j * p.mask_col];
    scores[j] = s;
    m = max(m, s);
  }
  partial[tid] = m;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s) partial[tid] = max(partial[tid], partial[tid + s]);
    barrier();
  }
  m = partial[0];
  barrier();
  float sum = 0.0;
  for (uint j = tid; j < p.T; j += 64u) {
    const float e = exp(scores[j] - m);
    scores[j] = e;
    sum += e;
  }
  partial[tid] = sum;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s) partial[tid] += partial[tid + s];
    barrier();
  }
  const float inv = 1.0 / partial[0];
  const uint ob = p.off_out + r * p.Dv;
  for (uint c = tid; c < p.Dv; c += 64u) {
    float acc = 0.0;
    for (uint j = 0u; j < p.T; ++j) {
      float pj = scores[j] * inv;
      // NaN by its bits, whatever a driver's isnan does under fast math.
      if (p.nan_to_zero != 0u && (floatBitsToUint(pj) & 0x7fffffffu) > 0x7f800000u) pj = 0.0;
      acc += pj * v[vb + j * p.Dv + c];
    }
    outv[ob + c] = acc;
  }
}
