// The SGEMM micro-kernel for 64-bit Arm (AArch64), with Advanced SIMD (NEON)
// intrinsics. AArch64 Linux always has Advanced SIMD (the ABI requires it),
// so on arm64 this kernel is selected unconditionally (sgemm.cpp asks
// cpu_has_neon()); elsewhere the stubs at the end say it is not there.
//
// Same contract and packed layouts as the portable kernel: a 6x8 tile, two
// 4-float registers per row, over kc values of k. Each step loads the 8
// values of B (two q registers) and the 6 values of A (one q register and
// one d register) and does 12 fused multiply-adds by lane
// (fmla vD.4s, vB.4s, vA.s[i]): no broadcast instructions, and the FMA
// rounds once, where the portable kernel (ISO C++, -ffp-contract=off)
// multiplies and adds separately.
//
// AArch64 has 32 vector registers: the pair kernel (two A panels against
// one B panel, 24 accumulators + 2 B + 2 A registers) keeps them all busy.
// The fp32 kernel needs nothing beyond Armv8.0-A; the dot-product and fp16
// extensions (Armv8.2-A) would only serve int8/fp16 kernels, which Kite's
// CPU backend does not have yet: arm_features() detects them at run time
// (never assumed from the build flags) and the CPU device's name reports
// them, so a kernel that wants them has the check ready.
#include <cstdint>

#include "sgemm.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif

namespace kite::cpu::sgemm::detail {

bool cpu_has_neon() { return true; }

ArmFeatures arm_features() {
  ArmFeatures f;
#if defined(__linux__)
  // The kernel's hardware capability bits (asm/hwcap.h): HWCAP_ASIMDHP is
  // bit 10, HWCAP_ASIMDDP bit 20.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  f.fp16_arithmetic = (hwcap & (1ul << 10)) != 0;
  f.dot_product = (hwcap & (1ul << 20)) != 0;
#endif
  return f;
}

void micro_kernel_neon(int64_t kc, const float* a, const float* b, float* acc) {
  static_assert(kMR == 6 && kNR == 8, "the NEON micro-kernel is written for 6x8 tiles");
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  float32x4_t c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < kc; ++p, a += kMR, b += kNR) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    const float32x4_t a03 = vld1q_f32(a);  // A rows 0..3 of this k
    const float32x2_t a45 = vld1_f32(a + 4);  // rows 4, 5
    c00 = vfmaq_laneq_f32(c00, b0, a03, 0);
    c01 = vfmaq_laneq_f32(c01, b1, a03, 0);
    c10 = vfmaq_laneq_f32(c10, b0, a03, 1);
    c11 = vfmaq_laneq_f32(c11, b1, a03, 1);
    c20 = vfmaq_laneq_f32(c20, b0, a03, 2);
    c21 = vfmaq_laneq_f32(c21, b1, a03, 2);
    c30 = vfmaq_laneq_f32(c30, b0, a03, 3);
    c31 = vfmaq_laneq_f32(c31, b1, a03, 3);
    c40 = vfmaq_lane_f32(c40, b0, a45, 0);
    c41 = vfmaq_lane_f32(c41, b1, a45, 0);
    c50 = vfmaq_lane_f32(c50, b0, a45, 1);
    c51 = vfmaq_lane_f32(c51, b1, a45, 1);
  }
  vst1q_f32(acc + 0 * kNR, c00);
  vst1q_f32(acc + 0 * kNR + 4, c01);
  vst1q_f32(acc + 1 * kNR, c10);
  vst1q_f32(acc + 1 * kNR + 4, c11);
  vst1q_f32(acc + 2 * kNR, c20);
  vst1q_f32(acc + 2 * kNR + 4, c21);
  vst1q_f32(acc + 3 * kNR, c30);
  vst1q_f32(acc + 3 * kNR + 4, c31);
  vst1q_f32(acc + 4 * kNR, c40);
  vst1q_f32(acc + 4 * kNR + 4, c41);
  vst1q_f32(acc + 5 * kNR, c50);
  vst1q_f32(acc + 5 * kNR + 4, c51);
}

// Two 6x8 tiles that share the B panel: each B load serves 12 rows, and 24
// independent accumulators hide the FMA latency.
void micro_kernel_neon_x2(int64_t kc, const float* a0, const float* a1, const float* b,
                          float* acc0, float* acc1) {
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  float32x4_t c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  float32x4_t d00 = c00, d01 = c00, d10 = c00, d11 = c00, d20 = c00, d21 = c00;
  float32x4_t d30 = c00, d31 = c00, d40 = c00, d41 = c00, d50 = c00, d51 = c00;
  for (int64_t p = 0; p < kc; ++p, a0 += kMR, a1 += kMR, b += kNR) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    const float32x4_t x03 = vld1q_f32(a0), y03 = vld1q_f32(a1);
    const float32x2_t x45 = vld1_f32(a0 + 4), y45 = vld1_f32(a1 + 4);
    c00 = vfmaq_laneq_f32(c00, b0, x03, 0);
    c01 = vfmaq_laneq_f32(c01, b1, x03, 0);
    c10 = vfmaq_laneq_f32(c10, b0, x03, 1);
    c11 = vfmaq_laneq_f32(c11, b1, x03, 1);
    c20 = vfmaq_laneq_f32(c20, b0, x03, 2);
    c21 = vfmaq_laneq_f32(c21, b1, x03, 2);
    c30 = vfmaq_laneq_f32(c30, b0, x03, 3);
    c31 = vfmaq_laneq_f32(c31, b1, x03, 3);
    c40 = vfmaq_lane_f32(c40, b0, x45, 0);
    c41 = vfmaq_lane_f32(c41, b1, x45, 0);
    c50 = vfmaq_lane_f32(c50, b0, x45, 1);
    c51 = vfmaq_lane_f32(c51, b1, x45, 1);
    d00 = vfmaq_laneq_f32(d00, b0, y03, 0);
    d01 = vfmaq_laneq_f32(d01, b1, y03, 0);
    d10 = vfmaq_laneq_f32(d10, b0, y03, 1);
    d11 = vfmaq_laneq_f32(d11, b1, y03, 1);
    d20 = vfmaq_laneq_f32(d20, b0, y03, 2);
    d21 = vfmaq_laneq_f32(d21, b1, y03, 2);
    d30 = vfmaq_laneq_f32(d30, b0, y03, 3);
    d31 = vfmaq_laneq_f32(d31, b1, y03, 3);
    d40 = vfmaq_lane_f32(d40, b0, y45, 0);
    d41 = vfmaq_lane_f32(d41, b1, y45, 0);
    d50 = vfmaq_lane_f32(d50, b0, y45, 1);
    d51 = vfmaq_lane_f32(d51, b1, y45, 1);
  }
  vst1q_f32(acc0 + 0 * kNR, c00);
  vst1q_f32(acc0 + 0 * kNR + 4, c01);
  vst1q_f32(acc0 + 1 * kNR, c10);
  vst1q_f32(acc0 + 1 * kNR + 4, c11);
  vst1q_f32(acc0 + 2 * kNR, c20);
  vst1q_f32(acc0 + 2 * kNR + 4, c21);
  vst1q_f32(acc0 + 3 * kNR, c30);
  vst1q_f32(acc0 + 3 * kNR + 4, c31);
  vst1q_f32(acc0 + 4 * kNR, c40);
  vst1q_f32(acc0 + 4 * kNR + 4, c41);
  vst1q_f32(acc0 + 5 * kNR, c50);
  vst1q_f32(acc0 + 5 * kNR + 4, c51);
  vst1q_f32(acc1 + 0 * kNR, d00);
  vst1q_f32(acc1 + 0 * kNR + 4, d01);
  vst1q_f32(acc1 + 1 * kNR, d10);
  vst1q_f32(acc1 + 1 * kNR + 4, d11);
  vst1q_f32(acc1 + 2 * kNR, d20);
  vst1q_f32(acc1 + 2 * kNR + 4, d21);
  vst1q_f32(acc1 + 3 * kNR, d30);
  vst1q_f32(acc1 + 3 * kNR + 4, d31);
  vst1q_f32(acc1 + 4 * kNR, d40);
  vst1q_f32(acc1 + 4 * kNR + 4, d41);
  vst1q_f32(acc1 + 5 * kNR, d50);
  vst1q_f32(acc1 + 5 * kNR + 4, d51);
}

}  // namespace kite::cpu::sgemm::detail

#else

namespace kite::cpu::sgemm::detail {

bool cpu_has_neon() { return false; }
ArmFeatures arm_features() { return ArmFeatures{}; }
void micro_kernel_neon(int64_t, const float*, const float*, float*) {}
void micro_kernel_neon_x2(int64_t, const float*, const float*, const float*, float*, float*) {}

}  // namespace kite::cpu::sgemm::detail

#endif
