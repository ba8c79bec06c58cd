#version 450
// Cast between float16 and float32 (the casts kite-convert --precision
// inserts at the boundaries between fp16 and fp32 nodes). Compiled twice:
// cast_widen (float16 -> float32, exact) and, with KITE_NARROW, cast_narrow
// (float32 -> float16, rounded to nearest even as kite_half_bits does).
// Offsets count each binding's elements. Groups: ceil(n/256) over x and y.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint off_x, off_y;
  uint n;
} p;

#ifdef KITE_NARROW
layout(std430, set = 0, binding = 0) readonly buffer BufX { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { uint16_t y[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer BufX { uint16_t x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufY { float y[]; };
#endif

void main() {
  const uint i = flat_index(256u);
  if (i >= p.n) return;
#ifdef KITE_NARROW
  y[p.off_y + i] = uint16_t(kite_half_bits(x[p.off_x + i]));
#else
  y[p.off_y + i] = unpackHalf2x16(uint(x[p.off_x + i])).x;
#endif
}
