// Depthwise convolution planes: the ISA levels and the choice between them.
#include "depthwise.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sgemm.h"

#if defined(__GNUC__) || defined(__clang__)
#define KITE_DW_VECTOR 1
#endif

namespace kite::cpu::depthwise {

#if KITE_DW_VECTOR
namespace portable {
#define KITE_DW_LANES 4
#include "depthwise_impl.inc"
#undef KITE_DW_LANES
}  // namespace portable

void detail::plane_portable(const Plane& p, float* scratch) { portable::plane(p, scratch); }
#else
void detail::plane_portable(const Plane& p, float*) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      float acc = p.bias;
      for (int64_t r = 0; r < p.kh; ++r) {
        const int64_t y = oy * p.stride_h - p.pad_h + r * p.dilation_h;
        if (y < 0 || y >= p.h) continue;
        for (int64_t t = 0; t < p.kw; ++t) {
          const int64_t x = ox * p.stride_w - p.pad_w + t;
          if (x >= 0 && x < p.w) acc += p.weights[r * p.kw + t] * p.in[y * p.w + x];
        }
      }
      p.out[oy * p.ow + ox] = acc;
    }
  }
}
#endif

// The x86 levels: the same source with the instructions enabled by a
// pragma (after every include, see sgemm_avx512.cpp for why).
#if KITE_DW_VECTOR && defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
#define KITE_DW_LANES 8
#include "depthwise_impl.inc"
#undef KITE_DW_LANES
}  // namespace avx2
void detail::plane_avx2(const Plane& p, float* scratch) { avx2::plane(p, scratch); }
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif
namespace avx512 {
#define KITE_DW_LANES 16
#include "depthwise_impl.inc"
#undef KITE_DW_LANES
}  // namespace avx512
void detail::plane_avx512(const Plane& p, float* scratch) { avx512::plane(p, scratch); }
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
void detail::plane_avx2(const Plane& p, float* scratch) { detail::plane_portable(p, scratch); }
void detail::plane_avx512(const Plane& p, float* scratch) { detail::plane_portable(p, scratch); }
#endif

void run_plane(const Plane& p, float* scratch) {
  switch (sgemm::micro_kernel_in_use()) {
    case sgemm::MicroKernel::kAvx512:
      return detail::plane_avx512(p, scratch);
    case sgemm::MicroKernel::kAvx2Fma:
      return detail::plane_avx2(p, scratch);
    default:
      return detail::plane_portable(p, scratch);
  }
}

}  // namespace kite::cpu::depthwise
