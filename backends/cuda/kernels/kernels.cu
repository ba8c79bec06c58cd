// The fatbin's one translation unit: every kernel of kernel_list.h, compiled
// by nvcc for the architectures of KITE_CUDA_ARCHITECTURES.
#include "conv.cuh"
#include "data.cuh"
#include "elementwise.cuh"
#include "gemm.cuh"
#include "norm.cuh"
#include "pool.cuh"
