#version 450
// c = act(a OP b) with numpy broadcasting: the output's shape (collapsed to
// at most 6 dims by the host) and each input's element strides (0 along a
// broadcast axis). Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_a, off_b, off_c;
  uint n, op, rank;
  uint dims[6];
  uint sa[6];
  uint sb[6];
  uint act;
  float act_a, act_b;
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufA { FLOAT_T a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { FLOAT_T b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BufC { FLOAT_T c[]; };

#define BIN_ADD 0u
#define BIN_SUB 1u
#define BIN_MUL 2u
#define BIN_DIV 3u
#define BIN_POW 4u
#define BIN_MAX 5u
#define BIN_MIN 6u
#define BIN_PRELU 7u

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  uint rest = i, ia = p.off_a, ib = p.off_b;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    const uint idx = rest % p.dims[d];
    rest /= p.dims[d];
    ia += idx * p.sa[d];
    ib += idx * p.sb[d];
  }
  const float x = LD(a[ia]), y = LD(b[ib]);
  float r;
  switch (p.op) {
    case BIN_ADD: r = x + y; break;
    case BIN_SUB: r = x - y; break;
    case BIN_MUL: r = x * y; break;
    case BIN_DIV: r = x / y; break;
    case BIN_POW: r = kite_pow(x, y); break;
    case BIN_MAX: r = (x != x || y != y) ? x + y : max(x, y); break;
    case BIN_MIN: r = (x != x || y != y) ? x + y : min(x, y); break;
    case BIN_PRELU: r = x < 0.0 ? x * y : x; break;
    default: r = x; break;
  }
  c[p.off_c + i] = ST(apply_op(p.act, r, p.act_a, p.act_b));
}
