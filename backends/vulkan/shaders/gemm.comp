#version 450
// Tiled GEMM: a 16x16 workgroup computes a 64x64 tile of C, each invocation
// 4x4 outputs (rows ty + 16i, columns tx + 16j), with A and B staged through
// shared memory in slices of 16 along K. Groups: (ceil(N/64), ceil(M/64), batch).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gemm_params.glsl"

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

const uint TM = 64u;
const uint TN = 64u;
const uint TK = 16u;
shared float As[TK][TM + 1u];
shared float Bs[TK][TN + 1u];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint t = ty * 16u + tx;
  const uint z = gl_WorkGroupID.z;
  const uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN;
  const uint base_a = p.off_a + z * p.sab;
  const uint base_b = p.off_b + z * p.sbb;
  // Consecutive invocations read consecutive addresses where the operand's
  // layout allows: along K for row-major A, along M for transposed A.
  const bool a_k_fast = p.sak == 1u || p.sam != 1u;
  const bool b_n_fast = p.sbn == 1u || p.sbk != 1u;
  float acc[4][4];
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < p.K; k0 += TK) {
    for (uint r = 0u; r < 4u; ++r) {
      const uint e = t + 256u * r;
      uint row, kk;
      if (a_k_fast) { row = e / TK; kk = e % TK; } else { row = e % TM; kk = e / TM; }
      const uint m = m0 + row, k = k0 + kk;
      As[kk][row] = (m < p.M && k < p.K) ? LD(a[base_a + m * p.sam + k * p.sak]) : 0.0;
      uint col, kb;
      if (b_n_fast) { col = e % TN; kb = e / TN; } else { col = e / TK; kb = e % TK; }
      const uint n = n0 + col, k2 = k0 + kb;
      Bs[kb][col] = (n < p.N && k2 < p.K) ? LD(b[base_b + k2 * p.sbk + n * p.sbn]) : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < TK; ++kk) {
      float av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = As[kk][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (uint i = 0u; i < 4u; ++i) {
    const uint m = m0 + ty + 16u * i;
    if (m >= p.M) continue;
    for (uint j = 0u; j < 4u; ++j) {
      const uint n = n0 + tx + 16u * j;
      if (n < p.N) store_c(z, m, n, acc[i][j]);
    }
  }
}
