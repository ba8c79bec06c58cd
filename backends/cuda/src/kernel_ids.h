// Ids and names of the fatbin's kernels (kernels/kernel_list.h).
#pragma once

#include <cstring>

#include "../kernels/kernel_list.h"

namespace kite::cuda {

enum class KernelId : int {
#define KITE_CUDA_KERNEL_ID(name, params, sync) name,
  KITE_CUDA_KERNELS(KITE_CUDA_KERNEL_ID)
#undef KITE_CUDA_KERNEL_ID
};

constexpr int kKernelCount = 0
#define KITE_CUDA_KERNEL_COUNT(name, params, sync) +1
    KITE_CUDA_KERNELS(KITE_CUDA_KERNEL_COUNT)
#undef KITE_CUDA_KERNEL_COUNT
    ;

inline const char* kernel_name(KernelId id) {
  static const char* const names[] = {
#define KITE_CUDA_KERNEL_NAME(name, params, sync) #name,
      KITE_CUDA_KERNELS(KITE_CUDA_KERNEL_NAME)
#undef KITE_CUDA_KERNEL_NAME
  };
  return names[static_cast<int>(id)];
}

// An _f16 twin: float16 storage, float32 arithmetic (kernel_list.h).
inline bool is_f16_kernel(KernelId id) {
  const char* name = kernel_name(id);
  const size_t n = std::strlen(name);
  return n > 4 && std::strcmp(name + n - 4, "_f16") == 0;
}

}  // namespace kite::cuda
