#version 450
// Pad of 32-bit elements over up to 6 dims: constant (value), reflect or
// edge. out index -> input index per dim: inside [begin, begin + in) maps
// straight; outside, constant writes the value, edge clamps and reflect
// mirrors (without repeating the edge).
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint n, rank, mode;  // 0 constant, 1 reflect, 2 edge
  uint value;          // the constant's bits
  uint out_dims[6];
  uint in_dims[6];
  int begin[6];
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { WORD_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { WORD_T y[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  uint rest = i, src = 0u, stride = 1u;
  bool outside = false;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    const uint o = rest % p.out_dims[d];
    rest /= p.out_dims[d];
    int k = int(o) - p.begin[d];
    const int len = int(p.in_dims[d]);
    if (k < 0 || k >= len) {
      if (p.mode == 0u || len == 0) {
        outside = true;
      } else if (p.mode == 2u) {
        k = clamp(k, 0, len - 1);
      } else if (len == 1) {
        k = 0;
      } else {
        const int period = 2 * (len - 1);
        int m = k % period;
        if (m < 0) m += period;
        k = m < len ? m : period - m;
      }
    }
    src += uint(max(k, 0)) * stride;
    stride *= p.in_dims[d];
  }
  // Branches, not a select: a 16-bit temporary would need the Int16
  // capability, which 16-bit storage alone does not give.
  if (outside) {
    y[p.off_y + i] = WORD(p.value);
  } else {
    y[p.off_y + i] = x[p.off_x + src];
  }
}
