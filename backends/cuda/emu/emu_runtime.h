// The CUDA built-ins the kernels use, for compiling them as host C++ in
// the emulator (kernels/device.cuh includes this when not under nvcc).
// One emulated thread block runs at a time on the calling OS thread:
// kernels without __syncthreads run their threads one after another;
// kernels that synchronise run each thread as a fiber (ucontext) that
// yields at every barrier, so shared memory (function-static here, since
// blocks never overlap) and barriers behave as on a GPU.
#pragma once

#include <math.h>
#include <stdint.h>

namespace kite_emu {

struct Dim3 {
  unsigned int x = 1, y = 1, z = 1;
};

struct ThreadState {
  Dim3 thread, block, block_dim, grid_dim;
};

ThreadState& state();
// __syncthreads(): the calling fiber waits until every thread of the block
// reached the barrier (or finished). Aborts in a kernel registered without
// synchronisation (kernels/kernel_list.h), which would be a list error.
void barrier();
// __shfl_xor_sync over full warps, every thread of the block calling.
float shfl_xor(float v, int lane_mask);
int atomic_cas(int* address, int compare, int value);

}  // namespace kite_emu

#define threadIdx (kite_emu::state().thread)
#define blockIdx (kite_emu::state().block)
#define blockDim (kite_emu::state().block_dim)
#define gridDim (kite_emu::state().grid_dim)
#define __syncthreads() kite_emu::barrier()
#define __shared__ static
#define atomicCAS(address, compare, value) kite_emu::atomic_cas((address), (compare), (value))
