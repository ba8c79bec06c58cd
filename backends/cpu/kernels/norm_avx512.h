// AVX-512F and AVX2 rows of the normalisations (LayerNormalization,
// InstanceNormalization, SkipLayerNormalization) for x86-64, chosen at run
// time with the GEMM's level (norm_avx512.cpp; false, nothing done, where
// the processor or the build lacks it). common.h's moments() and
// normalize_row() try them first on x86-64.
#pragma once

#include <cstdint>

namespace kite::cpu::avx512 {

// Mean and 1 / sqrt(var + eps) of n floats: the scalar moments()' two
// passes with double sums, sixteen floats a step into two vectors of eight
// double accumulators (only the order of the double additions differs).
bool moments(const float* x, int64_t n, float epsilon, float* mean_out, float* inv_out);
// y = (x - mean) * inv * scale (+ bias), sixteen lanes at a time, the
// scalar formula's roundings (no fused multiply-add). y may be x.
bool normalize_row(const float* x, int64_t n, float mean, float inv, const float* scale,
                   const float* bias, float* y);

}  // namespace kite::cpu::avx512
