#version 450
// Strided copy of 32-bit words over an index space of up to 6 dims:
// dst[off_dst + sum idx_d * dst_stride_d] = src[off_src + sum idx_d * src_stride_d].
// Transpose, Slice (negative steps as negative strides), Concat and Split
// (one dispatch per part), Expand (stride 0), Reshape between distinct
// places; 64-bit elements as an innermost dim of 2 words.
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_src, off_dst;
  uint n, rank;
  uint dims[6];
  int src_stride[6];
  int dst_stride[6];
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufSrc { WORD_T src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufDst { WORD_T dst[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  uint rest = i;
  int is = int(p.off_src), id = int(p.off_dst);
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    const uint idx = rest % p.dims[d];
    rest /= p.dims[d];
    is += int(idx) * p.src_stride[d];
    id += int(idx) * p.dst_stride[d];
  }
  dst[uint(id)] = src[uint(is)];
}
