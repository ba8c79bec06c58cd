#version 450
// GEMM for devices that run invocations as SIMD lanes of a CPU (lavapipe):
// no shared memory and no barriers; each invocation computes 16 rows of one
// output column. Per k it loads one B value (consecutive columns across
// lanes) and 16 A values at addresses that are the same in every lane, so
// they are scalar loads; 16 FMAs per lane and load.
// Groups: (ceil(N/64), ceil(M/16), batch). Push constants: gemm_params.glsl.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "gemm_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

const uint R = 16u;

void main() {
  const uint n = gl_GlobalInvocationID.x;
  const uint m0 = gl_WorkGroupID.y * R;
  const uint z = gl_WorkGroupID.z;
  if (n >= p.N) return;
  const uint rows = min(R, p.M - m0);
  float acc[R];
  [[unroll]] for (uint i = 0u; i < R; ++i) acc[i] = 0.0;
  uint ib = p.off_b + z * p.sbb + n * p.sbn;
  const uint ia0 = p.off_a + z * p.sab + m0 * p.sam;
  if (rows == R) {
    for (uint k = 0u; k < p.K; ++k) {
      const float bv = LD(b[ib]);
      ib += p.sbk;
      const uint ia = ia0 + k * p.sak;
      [[unroll]] for (uint i = 0u; i < R; ++i) acc[i] += LD(a[ia + i * p.sam]) * bv;
    }
  } else {
    for (uint k = 0u; k < p.K; ++k) {
      const float bv = LD(b[ib]);
      ib += p.sbk;
      const uint ia = ia0 + k * p.sak;
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        if (i < rows) acc[i] += LD(a[ia + i * p.sam]) * bv;
      }
    }
  }
  [[unroll]] for (uint i = 0u; i < R; ++i) {
    if (i < rows) store_c(z, m0 + i, n, acc[i]);
  }
}
