// Every kernel of kernels/kernel_list.h compiled as host C++, in a table
// the emulated cuModuleGetFunction looks names up in.
#include <cstring>

#include "../kernels/conv.cuh"
#include "../kernels/data.cuh"
#include "../kernels/elementwise.cuh"
#include "../kernels/gemm.cuh"
#include "../kernels/kernel_list.h"
#include "../kernels/norm.cuh"
#include "../kernels/pool.cuh"
#include "emu_exec.h"

namespace kite_emu {

namespace {
const KernelEntry kKernels[] = {
#define KITE_EMU_ENTRY(name, P, sync) \
  {#name, (sync) != 0, sizeof(kite_cuda::P), [](const void* p) { name(*static_cast<const kite_cuda::P*>(p)); }},
    KITE_CUDA_KERNELS(KITE_EMU_ENTRY)
#undef KITE_EMU_ENTRY
};
}  // namespace

const KernelEntry* find_kernel(const char* name) {
  for (const KernelEntry& k : kKernels) {
    if (std::strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

}  // namespace kite_emu
