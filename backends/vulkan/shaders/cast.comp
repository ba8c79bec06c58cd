#version 450
// Cast between float32, int32 and int64 (int64 as two 32-bit words, low
// first; no shaderInt64 needed). Float to integer truncates toward zero, as
// C++ does (the CPU kernel); out-of-range values saturate.
// Groups: ceil(n/256) spread over x and y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint n, from, to;  // 0 float32, 1 int32, 2 int64
} p;

layout(std430, set = 0, binding = 0) readonly buffer BufX { uint x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { uint y[]; };

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
  // Read as a float and as a (high, low) integer pair.
  float f = 0.0;
  int hi = 0;
  uint lo = 0u;
  if (p.from == 0u) {
    f = uintBitsToFloat(x[p.off_x + i]);
  } else if (p.from == 1u) {
    lo = x[p.off_x + i];
    hi = int(lo) < 0 ? -1 : 0;
  } else {
    lo = x[p.off_x + 2u * i];
    hi = int(x[p.off_x + 2u * i + 1u]);
  }
  if (p.to == 0u) {
    if (p.from == 1u) {
      f = float(int(lo));
    } else if (p.from == 2u) {
      // The magnitude's halves, then the sign: exact below 2^24, and off by
      // at most one rounding above (two roundings instead of one).
      uint mlo = lo, mhi = uint(hi);
      const bool negative = hi < 0;
      if (negative) {
        mlo = ~lo + 1u;
        mhi = ~uint(hi) + (mlo == 0u ? 1u : 0u);
      }
      f = mhi == 0u ? float(mlo) : float(mhi) * 4294967296.0 + float(mlo);
      if (negative) f = -f;
    }
    y[p.off_y + i] = floatBitsToUint(f);
    return;
  }
  if (p.from == 0u) {
    const float t = f != f ? 0.0 : trunc(f);  // NaN gives 0
    if (p.to == 1u) {
      int v;
      if (t >= 2147483648.0) v = 2147483647;
      else if (t <= -2147483648.0) v = int(0x80000000u);
      else v = int(t);
      y[p.off_y + i] = uint(v);
      return;
    }
    uint ulo, uhi;
    if (t >= 9223372036854775807.0) {
      ulo = 0xffffffffu; uhi = 0x7fffffffu;
    } else if (t <= -9223372036854775808.0) {
      ulo = 0u; uhi = 0x80000000u;
    } else {
      // |t| < 2^63 is an integer in float: split it into 32-bit halves exactly.
      const float a = abs(t);
      const float h = floor(a * 2.3283064365386963e-10)  /* 2^-32, exact */;
      uhi = uint(h);
      ulo = uint(a - h * 4294967296.0);
      if (t < 0.0) {  // two's complement of (uhi, ulo)
        ulo = ~ulo + 1u;
        uhi = ~uhi + (ulo == 0u ? 1u : 0u);
      }
    }
    y[p.off_y + 2u * i] = ulo;
    y[p.off_y + 2u * i + 1u] = uhi;
    return;
  }
  if (p.to == 1u) {
    y[p.off_y + i] = lo;
  } else {
    y[p.off_y + 2u * i] = lo;
    y[p.off_y + 2u * i + 1u] = uint(hi);
  }
}
