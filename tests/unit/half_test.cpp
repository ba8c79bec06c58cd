// kite/ops/half.h against independent computations:
// - half -> float for all 65536 halves, against a decode written with
//   std::ldexp from the IEEE 754 binary16 definition;
// - float -> half at every rounding boundary: the exact midpoint between
//   each pair of neighbouring finite halves (ties go to the even one) and
//   the floats just below and above it, plus the overflow threshold, the
//   subnormal range, signed zeros, infinities and NaN payloads;
// - float -> half for a spread of float bit patterns over the whole range,
//   against a reference that rounds in double with std::nearbyint.
// Everything is exact: conversions are correctly rounded or they are wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "kite/ops/half.h"

namespace {

float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint32_t BitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// binary16: sign, 5-bit exponent (bias 15), 10-bit fraction. Subnormals
// are fraction * 2^-24; normals (1 + fraction / 1024) * 2^(exponent - 15).
double ReferenceDecode(uint16_t h) {
  const int sign = h >> 15;
  const int exponent = (h >> 10) & 0x1f;
  const int fraction = h & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), -24);
  } else if (exponent == 31) {
    magnitude = fraction == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<double>(1024 + fraction), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(Half, EveryHalfDecodesExactly) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const double want = ReferenceDecode(h);
    const float got = kite::half_to_float(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "half 0x" << std::hex << bits;
      // The payload moves into the float's top fraction bits, sign kept.
      ASSERT_EQ(BitsOf(got) & 0x7fffffu, (bits & 0x3ffu) << 13) << std::hex << bits;
      ASSERT_EQ(BitsOf(got) >> 31, bits >> 15) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "half 0x" << std::hex << bits;
      ASSERT_EQ(std::signbit(got), (bits & 0x8000u) != 0) << "half 0x" << std::hex << bits;
    }
  }
}

TEST(Half, EveryFiniteHalfRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const uint16_t back = kite::float_to_half(kite::half_to_float(h));
    if (IsHalfNaN(h)) {
      ASSERT_TRUE(IsHalfNaN(back)) << std::hex << bits;
    } else {
      ASSERT_EQ(back, h) << "half 0x" << std::hex << bits;
    }
  }
}

// Midpoints between neighbouring halves need at most 12 significant bits,
// so they are exact floats: the rounding boundaries themselves.
TEST(Half, EveryRoundingBoundaryTiesToEven) {
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t lo = 0; lo < 0x7bffu; ++lo) {  // pairs (lo, lo + 1) of finite halves
      const uint16_t a = static_cast<uint16_t>(sign | lo), b = static_cast<uint16_t>(sign | (lo + 1));
      const double da = ReferenceDecode(a), db = ReferenceDecode(b);
      const float mid = static_cast<float>((da + db) / 2);
      ASSERT_EQ(static_cast<double>(mid), (da + db) / 2) << "midpoint not exact at " << lo;
      const uint16_t even = (lo & 1u) == 0 ? a : b;
      ASSERT_EQ(kite::float_to_half(mid), even) << "tie above half 0x" << std::hex << a;
      const float toward_a = std::nextafter(mid, static_cast<float>(da));
      const float toward_b = std::nextafter(mid, static_cast<float>(db));
      ASSERT_EQ(kite::float_to_half(toward_a), a) << "just inside half 0x" << std::hex << a;
      ASSERT_EQ(kite::float_to_half(toward_b), b) << "just inside half 0x" << std::hex << b;
    }
  }
}

TEST(Half, Limits) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kite::float_to_half(65504.0f), 0x7bffu);  // the largest finite half
  EXPECT_EQ(kite::float_to_half(-65504.0f), 0xfbffu);
  // 65520 is halfway between 65504 (odd fraction) and 2^16 (not finite):
  // it and everything above round to infinity, just below to 65504.
  EXPECT_EQ(kite::float_to_half(65520.0f), 0x7c00u);
  EXPECT_EQ(kite::float_to_half(-65520.0f), 0xfc00u);
  EXPECT_EQ(kite::float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(kite::float_to_half(65536.0f), 0x7c00u);
  EXPECT_EQ(kite::float_to_half(std::numeric_limits<float>::max()), 0x7c00u);
  EXPECT_EQ(kite::float_to_half(inf), 0x7c00u);
  EXPECT_EQ(kite::float_to_half(-inf), 0xfc00u);
  EXPECT_EQ(kite::half_to_float(0x7c00u), inf);
  EXPECT_EQ(kite::half_to_float(0xfc00u), -inf);
  // Subnormals: the smallest is 2^-24; 2^-25 is the tie between it and 0
  // and goes to the even 0; anything above 2^-25 rounds up to it.
  EXPECT_EQ(kite::float_to_half(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(kite::float_to_half(std::ldexp(1.0f, -25)), 0x0000u);
  EXPECT_EQ(kite::float_to_half(-std::ldexp(1.0f, -25)), 0x8000u);
  EXPECT_EQ(kite::float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(kite::float_to_half(std::ldexp(1.5f, -24)), 0x0002u);  // tie 1.5 -> even 2
  EXPECT_EQ(kite::float_to_half(std::ldexp(2.5f, -24)), 0x0002u);  // tie 2.5 -> even 2
  EXPECT_EQ(kite::float_to_half(std::ldexp(1023.0f, -24)), 0x03ffu);  // largest subnormal
  EXPECT_EQ(kite::float_to_half(std::ldexp(1.0f, -14)), 0x0400u);     // smallest normal
  // Halfway from the largest subnormal to the smallest normal: tie to even.
  EXPECT_EQ(kite::float_to_half(std::ldexp(1023.5f, -24)), 0x0400u);
  // Float subnormals and the smallest floats flush to a signed zero.
  EXPECT_EQ(kite::float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_EQ(kite::float_to_half(-std::numeric_limits<float>::min()), 0x8000u);
  // Signed zero both ways.
  EXPECT_EQ(kite::float_to_half(0.0f), 0x0000u);
  EXPECT_EQ(kite::float_to_half(-0.0f), 0x8000u);
  EXPECT_TRUE(std::signbit(kite::half_to_float(0x8000u)));
  EXPECT_EQ(kite::half_to_float(0x8000u), 0.0f);
  EXPECT_EQ(kite::float_to_half(1.0f), 0x3c00u);
  EXPECT_EQ(kite::float_to_half(-2.0f), 0xc000u);
  // 1 + 2^-11 is the tie between 1 and 1 + 2^-10: even (1); 1 + 3 * 2^-11
  // is the tie between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(kite::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);
  EXPECT_EQ(kite::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
}

TEST(Half, NaNStaysNaN) {
  // Quiet and signalling NaNs, payloads in the high and only in the low
  // fraction bits (which a plain shift would lose), both signs.
  const uint32_t payloads[] = {0x400000u, 0x000001u, 0x001fffu, 0x002000u, 0x7fffffu, 0x155555u};
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t payload : payloads) {
      const float nan = FloatFromBits(sign | 0x7f800000u | payload);
      ASSERT_TRUE(std::isnan(nan));
      const uint16_t h = kite::float_to_half(nan);
      EXPECT_TRUE(IsHalfNaN(h)) << std::hex << payload << " -> " << h;
      EXPECT_EQ(h >> 15, sign >> 31) << std::hex << payload;
      // The payload's top bits that fit survive.
      EXPECT_EQ(h & 0x1ffu, (payload >> 13) & 0x1ffu) << std::hex << payload;
      EXPECT_TRUE(std::isnan(kite::half_to_float(h)));
    }
  }
}

// Round to nearest even by scaling to a grid of half ulps in double (exact:
// a float has 24 significant bits) and std::nearbyint (ties to even in the
// default rounding mode), then look the value up among all halves.
uint16_t ReferenceEncode(float f, const std::map<double, uint16_t>& by_value) {
  if (std::isnan(f)) return 0x7e00u;
  const double x = f;
  const double magnitude = std::fabs(x);
  if (magnitude >= 65520.0) return x < 0 ? 0xfc00u : 0x7c00u;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  const int ulp_exponent = std::max(exponent - 1, -14) - 10;
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(magnitude, -ulp_exponent)), ulp_exponent);
  const uint16_t h = by_value.at(rounded);
  return static_cast<uint16_t>(h | (std::signbit(x) ? 0x8000u : 0u));
}

TEST(Half, EncodeMatchesReferenceAcrossTheFloatRange) {
  std::map<double, uint16_t> by_value;
  for (uint32_t bits = 0; bits <= 0x7c00u; ++bits) {
    by_value[ReferenceDecode(static_cast<uint16_t>(bits))] = static_cast<uint16_t>(bits);
  }
  // A stride prime to 2^32 visits about a million patterns of every
  // exponent and both signs.
  int checked = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099) {
    const float f = FloatFromBits(static_cast<uint32_t>(bits));
    const uint16_t got = kite::float_to_half(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(IsHalfNaN(got)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(got, ReferenceEncode(f, by_value)) << "float bits 0x" << std::hex << bits;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
}

// The array forms (F16C where the CPU has it) give the scalar functions
// results bit for bit: every half, and a million float patterns of every
// exponent, NaNs with payloads included (odd lengths exercise the tails).
// The one allowed difference: F16C quiets a signalling NaN half (sets the
// float's quiet bit, 0x400000), keeping sign and payload.
TEST(Half, ArrayFormsMatchTheScalarOnes) {
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t b = 0; b <= 0xffffu; ++b) halves[b] = static_cast<uint16_t>(b);
  std::vector<float> wide(halves.size());
  kite::halves_to_floats(halves.data(), wide.data(), halves.size());
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const uint32_t want = BitsOf(kite::half_to_float(static_cast<uint16_t>(b)));
    if (IsHalfNaN(static_cast<uint16_t>(b))) {
      ASSERT_EQ(BitsOf(wide[b]) | 0x400000u, want | 0x400000u) << std::hex << b;
    } else {
      ASSERT_EQ(BitsOf(wide[b]), want) << std::hex << b;
    }
  }
  std::vector<float> floats;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099) floats.push_back(FloatFromBits(static_cast<uint32_t>(bits)));
  for (uint32_t nan : {0x7f800001u, 0xffc00000u, 0x7fbfffffu, 0x7fc02000u}) floats.push_back(FloatFromBits(nan));
  floats.push_back(65520.0f);
  floats.push_back(-std::ldexp(1.0f, -25));
  std::vector<uint16_t> narrow(floats.size());
  kite::floats_to_halves(floats.data(), narrow.data(), floats.size());
  for (size_t k = 0; k < floats.size(); ++k) {
    ASSERT_EQ(narrow[k], kite::float_to_half(floats[k])) << "float bits 0x" << std::hex << BitsOf(floats[k]);
  }
}

}  // namespace
