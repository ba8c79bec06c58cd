// IEEE 754 binary16 ("half", KITE_DTYPE_FLOAT16) <-> float32, the one
// implementation for the converter, the CPU kernels, the tools and the GPU
// backends.
//
// Header-only and free of the rest of kite_ops on purpose: a GPU plugin
// (Vulkan, CUDA) or a tool that links only the C runtime includes it through
// the kite_half CMake target without linking the C++ op library. The
// functions are constexpr-free plain bit manipulation, so nvcc can compile
// them for the device too (KITE_HALF_FN adds __host__ __device__ there).
//
// float -> half rounds to nearest, ties to even, like the hardware
// conversions (F16C's vcvtps2ph with rounding mode 0, CUDA's __float2half_rn):
// magnitudes from 65520 up become infinity, values below 2^-25 become zero,
// subnormal halves are produced exactly, a NaN stays a NaN (quiet, with the
// top payload bits kept) and the sign of zero is kept. half -> float is
// exact for every one of the 65536 halves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KITE_HALF_FN __host__ __device__ inline
#else
#define KITE_HALF_FN inline
#endif

// The array forms below use x86's F16C conversions (vcvtph2ps, vcvtps2ph
// with round-to-nearest-even) when the CPU has them: the same results bit
// for bit, except that a signalling NaN half becomes a quiet NaN float (same
// sign and payload, quiet bit set), which tests/unit/half_test.cpp checks.
#if !defined(__CUDACC__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define KITE_HALF_F16C 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kite {

namespace half_detail {

KITE_HALF_FN uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

KITE_HALF_FN float bits_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace half_detail

// Exact: every half is a float.
KITE_HALF_FN float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {  // infinity, or NaN with its payload
    return half_detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias 15 -> 127
    return half_detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return half_detail::bits_float(sign);  // signed zero
  // Subnormal m * 2^-24: shift the leading 1 up to the implicit bit; each
  // shift lowers the float exponent by one from that of 2^-14 (113).
  uint32_t float_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --float_exponent;
  }
  return half_detail::bits_float(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

// Round to nearest, ties to even.
KITE_HALF_FN uint16_t float_to_half(float f) {
  const uint32_t bits = half_detail::float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet, keeping the payload's top bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = 0x477ff000 is halfway between 65504 (the largest half, odd
  // mantissa) and 2^16: it and everything above round to infinity.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    // 2^-25 (0x33000000) is halfway between 0 and the smallest subnormal
    // 2^-24 and rounds to the even 0, like everything below it.
    if (magnitude <= 0x33000000u) return sign;
    const uint32_t exponent = magnitude >> 23;                      // 102 .. 112
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;                         // 14 .. 24
    uint32_t half = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (half & 1u) != 0)) ++half;
    return static_cast<uint16_t>(sign | half);  // 0x400 here is the smallest normal: right
  }
  // Normal: rebias 127 -> 15 and drop 13 mantissa bits, rounding; a carry
  // out of the mantissa moves into the exponent, which is the right result
  // (up to 0x7bff + 1 = infinity, excluded above).
  uint32_t half = (magnitude - 0x38000000u) >> 13;
  const uint32_t remainder = magnitude & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u) != 0)) ++half;
  return static_cast<uint16_t>(sign | half);
}

#if !defined(__CUDACC__)
namespace half_detail {
#if defined(KITE_HALF_F16C)
__attribute__((target("avx,f16c"))) inline void widen_f16c(const uint16_t* h, float* f, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) f[i] = half_to_float(h[i]);
}
__attribute__((target("avx,f16c"))) inline void narrow_f16c(const float* f, uint16_t* h, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) h[i] = float_to_half(f[i]);
}
// Read from CPUID rather than __builtin_cpu_supports: clang 14 (the
// sanitizer builds) rejects the "f16c" feature string. F16C needs AVX and
// an OS that saves the YMM registers (OSXSAVE, then XCR0 bits 1 and 2).
inline bool detect_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool osxsave = (ecx >> 27) & 1u, avx = (ecx >> 28) & 1u, f16c = (ecx >> 29) & 1u;
  if (!(osxsave && avx && f16c)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  return (xcr0_lo & 0x6u) == 0x6u;
}
inline bool has_f16c() {
  static const bool yes = detect_f16c();
  return yes;
}
#endif
}  // namespace half_detail

// n halves -> floats, exactly as half_to_float.
inline void halves_to_floats(const uint16_t* h, float* f, size_t n) {
#if defined(KITE_HALF_F16C)
  if (half_detail::has_f16c()) return half_detail::widen_f16c(h, f, n);
#endif
  for (size_t i = 0; i < n; ++i) f[i] = half_to_float(h[i]);
}

// n floats -> halves, exactly as float_to_half.
inline void floats_to_halves(const float* f, uint16_t* h, size_t n) {
#if defined(KITE_HALF_F16C)
  if (half_detail::has_f16c()) return half_detail::narrow_f16c(f, h, n);
#endif
  for (size_t i = 0; i < n; ++i) h[i] = float_to_half(f[i]);
}
#endif  // !__CUDACC__

}  // namespace kite
