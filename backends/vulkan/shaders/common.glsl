// Shared by the compute shaders: activation / elementwise formulas (the CPU
// kernels' formulas, so both backends agree closely), and the flat index of
// an invocation on a 2-D grid of 1-D workgroups (to pass 65535 groups).
#ifndef KITE_COMMON_GLSL
#define KITE_COMMON_GLSL

// Storage of float tensors. Each shader that takes float16 nodes is compiled
// twice (backends/vulkan/CMakeLists.txt): as float32, and with KITE_HALF,
// where every float binding holds 16-bit halves (VK_KHR_16bit_storage) and
// the arithmetic stays float32 (fp16 storage, fp32 arithmetic). Shaders
// declare float bindings as FLOAT_T, read them through LD() and write
// through ST(); raw 32-bit words (data movement) are WORD_T, which is a
// 16-bit unit in the half variant (offsets count units of the binding's
// element, see src/shaders.h).
#ifdef KITE_HALF
#extension GL_EXT_shader_16bit_storage : require
#define FLOAT_T uint16_t
#define WORD_T uint16_t
// half -> float is exact (every half is a float); a device may flush half
// subnormals (|x| < 2^-14) to zero, an absolute error below 6.2e-5.
#define LD(v) unpackHalf2x16(uint(v)).x
#define ST(v) uint16_t(kite_half_bits(v))
#define WORD(v) uint16_t(v)
#else
#define FLOAT_T float
#define WORD_T uint
#define LD(v) (v)
#define ST(v) (v)
#define WORD(v) (v)
#endif

// float -> half bits, rounded to nearest with ties to even, as the converter
// and the CPU backend round (kite/ops/half.h), whatever the device's own
// conversion does: overflow to infinity at 65520, subnormals, NaN kept.
uint kite_half_bits(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to 65536 or more
  if (ax < 0x38800000u) {
    // Below 2^-14: a subnormal half, f * 2^24 rounded (exact scaling).
    return sign | uint(roundEven(uintBitsToFloat(ax) * 16777216.0));
  }
  // Normal: drop 13 mantissa bits with ties to even, rebias the exponent.
  const uint r = ax + 0xfffu + ((ax >> 13) & 1u);
  return sign | ((r - 0x38000000u) >> 13);
}

// Codes shared with src/kernels/op_codes.h.
#define OP_NONE 0u
#define OP_RELU 1u
#define OP_CLIP 2u
#define OP_SIGMOID 3u
#define OP_SILU 4u
#define OP_HARD_SIGMOID 5u
#define OP_HARD_SWISH 6u
#define OP_LEAKY_RELU 7u
#define OP_TANH 8u
#define OP_GELU 9u
#define OP_GELU_TANH 10u
#define OP_SQRT 11u
#define OP_RECIPROCAL 12u
#define OP_EXP 13u
#define OP_LOG 14u
#define OP_ABS 15u
#define OP_NEG 16u
#define OP_ERF 17u
#define OP_ELU 18u
#define OP_SOFTPLUS 19u
#define OP_SIGN 20u
#define OP_CEIL 21u
#define OP_FLOOR 22u
#define OP_ROUND 23u
#define OP_SIN 24u
#define OP_COS 25u
#define OP_MISH 26u
#define OP_SCALE 27u

float kite_sigmoid(float x) {
  // Never exp of a large positive number: no inf/inf.
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  float e = exp(x);
  return e / (1.0 + e);
}

float kite_tanh(float x) {
  // tanh through exp(-2|x|), which cannot overflow (some drivers' tanh
  // returns NaN for large |x|).
  float t = exp(-2.0 * abs(x));
  float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}

float kite_erf(float x) {
  // Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7.
  float ax = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * ax);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp(-ax * ax);
  return x < 0.0 ? -y : y;
}

float kite_softplus(float x) {
  // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
  return max(x, 0.0) + log(1.0 + exp(-abs(x)));
}

// pow as C's: negative bases with integer exponents, zero bases, and the
// exponents 2 and 3 (squares in LayerNorm, cubes in GELU) by multiplication,
// which is what std::pow returns for them (correctly rounded).
float kite_pow(float x, float y) {
  if (y == 2.0) return x * x;
  if (y == 3.0) return x * x * x;
  if (y == 1.0) return x;
  if (y == 0.0) return 1.0;
  if (isnan(x) || isnan(y)) return x + y;
  const bool odd_integer = y == floor(y) && abs(mod(y, 2.0)) == 1.0;
  if (x == 0.0) {
    if (y > 0.0) return odd_integer ? x : 0.0;
    return odd_integer ? 1.0 / x : uintBitsToFloat(0x7f800000u);
  }
  const float r = exp2(y * log2(abs(x)));
  if (x > 0.0) return r;
  if (y != floor(y)) return uintBitsToFloat(0x7fc00000u);  // NaN
  return odd_integer ? -r : r;
}

float apply_op(uint op, float x, float a, float b) {
  switch (op) {
    case OP_NONE: return x;
    case OP_RELU: return x > 0.0 ? x : 0.0;
    case OP_CLIP: { float v = x < a ? a : x; return v > b ? b : v; }
    case OP_SIGMOID: return kite_sigmoid(x);
    case OP_SILU: return x * kite_sigmoid(x);
    case OP_HARD_SIGMOID: return max(0.0, min(1.0, a * x + b));
    case OP_HARD_SWISH: return x * max(0.0, min(1.0, a * x + b));
    case OP_LEAKY_RELU: return x >= 0.0 ? x : a * x;
    case OP_TANH: return kite_tanh(x);
    case OP_GELU: return 0.5 * x * (1.0 + kite_erf(x * 0.7071067811865476));
    case OP_GELU_TANH:
      return 0.5 * x * (1.0 + kite_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case OP_SQRT: return sqrt(x);
    case OP_RECIPROCAL: return 1.0 / x;
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_ABS: return abs(x);
    case OP_NEG: return -x;
    case OP_ERF: return kite_erf(x);
    case OP_ELU: return x > 0.0 ? x : a * (exp(x) - 1.0);
    case OP_SOFTPLUS: return kite_softplus(x);
    case OP_SIGN: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x);
    case OP_CEIL: return ceil(x);
    case OP_FLOOR: return floor(x);
    case OP_ROUND: return roundEven(x);
    case OP_SIN: return sin(x);
    case OP_COS: return cos(x);
    case OP_MISH: return x * kite_tanh(kite_softplus(x));
    case OP_SCALE: return x * a;
  }
  return x;
}

// Flat index of this invocation when the host spread the work over
// gl_NumWorkGroups.x * gl_NumWorkGroups.y groups of size local_x.
uint flat_index(uint local_x) {
  return gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * local_x;
}

// Flat workgroup index on a 2-D grid of groups.
uint flat_group() {
  return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

#endif
