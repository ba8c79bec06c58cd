#version 450
// GEMM for few rows (a classifier's M = 1): one output per invocation, the
// K loop in registers; no shared memory. Groups: (ceil(N/64), M, batch).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gemm_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

void main() {
  const uint n = gl_GlobalInvocationID.x;
  const uint m = gl_WorkGroupID.y;
  const uint z = gl_WorkGroupID.z;
  if (n >= p.N || m >= p.M) return;
  uint ia = p.off_a + z * p.sab + m * p.sam;
  uint ib = p.off_b + z * p.sbb + n * p.sbn;
  float acc = 0.0;
  for (uint k = 0u; k < p.K; ++k) {
    acc += LD(a[ia]) * LD(b[ib]);
    ia += p.sak;
    ib += p.sbk;
  }
  store_c(z, m, n, acc);
}
