// Advanced SIMD (NEON) rows of the normalisations (LayerNormalization,
// InstanceNormalization, SkipLayerNormalization), for AArch64
// (norm_neon.cpp; other architectures compile nothing there). common.h's
// moments() and normalize_row() call them under `#if defined(__aarch64__)`.
#pragma once

#include <cstdint>

namespace kite::cpu::neon {

// Mean and 1 / sqrt(var + eps) of n floats: the same two passes with double
// sums as the scalar moments(), four floats a time into two float64x2
// accumulators (only the order of the double additions differs).
void moments(const float* x, int64_t n, float epsilon, float* mean_out, float* inv_out);
// y = (x - mean) * inv * scale (+ bias), four lanes at a time. y may be x.
void normalize_row(const float* x, int64_t n, float mean, float inv, const float* scale,
                   const float* bias, float* y);

}  // namespace kite::cpu::neon
