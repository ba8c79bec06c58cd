// Advanced SIMD (NEON) paths of the CPU backend's elementwise hot loops, for
// AArch64 (softmax_neon.cpp). Declared on every architecture; the callers
// use them under `#if defined(__aarch64__)` only.
#pragma once

#include <cstdint>

namespace kite::cpu::neon {

// Softmax (log = false) or LogSoftmax (log = true) of n contiguous floats
// (nothing for n <= 0; y may be x); the same maths as the scalar loops in
// softmax.cpp (max, shifted exp, sum, scale), four lanes at a time, exp by
// range reduction and a polynomial (relative error ~1e-7 over the softmax
// domain x - max <= 0).
void softmax_contiguous(const float* x, float* y, int64_t n, bool log);

}  // namespace kite::cpu::neon
