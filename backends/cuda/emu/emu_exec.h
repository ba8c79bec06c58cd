// Running one emulated kernel launch (emu_exec.cpp) and the table of
// kernels compiled as host code (emu_kernels.cpp).
#pragma once

#include <cstddef>

#include "emu_runtime.h"

namespace kite_emu {

struct KernelEntry {
  const char* name;
  bool sync;              // uses __syncthreads / warp shuffles: run as fibers
  size_t params_size;     // sizeof of its parameter struct
  void (*call)(const void* params);
};

const KernelEntry* find_kernel(const char* name);

// Runs grid x block threads of `kernel` on this OS thread.
void launch(const KernelEntry& kernel, Dim3 grid, Dim3 block, const void* params);

}  // namespace kite_emu
