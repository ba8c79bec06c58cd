#version 450
// Gather along one axis with indices from a tensor (int32 or int64, read as
// 32-bit words): out[o, j, i] = data[o, idx[j], i] with the data viewed as
// [outer, axis_len, inner words]. Negative indices count from the end; an
// index outside [-axis_len, axis_len) writes zeros and records the node and
// the value in the status buffer, which the host turns into an error.
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_data, off_idx, off_out, off_status;
  uint n;           // output words
  uint axis_len, inner, n_idx;
  uint idx_words;   // 1: int32, 2: int64
  uint node;        // reported in the status buffer
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufData { WORD_T data[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufIdx { uint idx[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BufOut { WORD_T outv[]; };
layout(std430, set = 0, binding = 3) buffer BufStatus { uint status[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  const uint inner = i % p.inner;
  const uint j = (i / p.inner) % p.n_idx;
  const uint o = i / (p.inner * p.n_idx);
  const uint lo = idx[p.off_idx + j * p.idx_words];
  const int hi = p.idx_words == 2u ? int(idx[p.off_idx + j * 2u + 1u]) : (int(lo) < 0 ? -1 : 0);
  // In range: hi is 0 and lo < axis_len, or hi is -1 and lo >= 2^32 - axis_len.
  int k = -1;
  if (hi == 0 && lo < p.axis_len) k = int(lo);
  else if (hi == -1 && lo >= 0u - p.axis_len && p.axis_len > 0u) k = int(lo + p.axis_len);
  if (k < 0) {
    outv[p.off_out + i] = WORD(0u);
    if (atomicCompSwap(status[p.off_status], 0u, 1u) == 0u) {
      status[p.off_status + 1u] = p.node;
      status[p.off_status + 2u] = lo;
      status[p.off_status + 3u] = uint(hi);
    }
    return;
  }
  outv[p.off_out + i] = data[p.off_data + (o * p.axis_len + uint(k)) * p.inner + inner];
}
