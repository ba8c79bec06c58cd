// Helpers the plan functions share: dtype and constant checks, shapes,
// activations of fused nodes, and the declarations of every plan function.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "kernel.h"
#include "kite/abi/plan_helpers.h"
#include "kite/ops/resolve.h"

namespace kite::cuda {

using namespace kite::abi::plan;  // Shape, numel, strides_of, primitive, expect_output ...

// The checks of kite/abi/device_node.h, naming this backend.
inline std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes) {
  return abi::expect_dtype(n, i, dtypes, "CUDA");
}
inline std::string expect_constant(const NodeView& n, size_t i, const char* what) {
  return abi::expect_constant(n, i, what, "CUDA");
}
inline std::string reduce_axes_of(const NodeView& n, std::vector<int64_t>* axes) {
  return abi::reduce_axes_of(n, axes, "CUDA");
}

// fp16 storage, fp32 arithmetic: a node whose float ("T") tensors are all
// float16 runs on the _f16 twins of Kite's kernels (kernels/kernel_list.h),
// which read halves, compute in float and round the result to half (ties to
// even). The library paths (cuDNN, cuBLASLt) stay float32: float16 nodes
// always get Kite's own kernels.
//
// The storage of the node's float tensors: the present inputs `inputs` and
// every float output, all float32 (*half false) or all float16 (*half true).
// An input of another dtype, or float16 mixed with float32, is why not.
std::string float_storage(const NodeView& n, const std::vector<size_t>& inputs, bool* half);
// float_storage over every input.
std::string float_storage_all(const NodeView& n, bool* half);
// The kernel for the storage: the float32 kernel or its _f16 twin.
inline KernelId storage_kernel(bool half, KernelId f32, KernelId f16) { return half ? f16 : f32; }

// The fused node's activation (attributes activation, activation_alpha,
// activation_beta); the pattern must end with "+<activation>".
// optional: absent means none.
std::string parse_activation(const NodeView& n, bool optional, kite_cuda::Act* out);

// Launch helpers.
// half: float16 storage (kite_unary_f16).
void add_unary(Kernel* k, const kite_backend_tensor2* x, const kite_backend_tensor2* y, int64_t n,
               kite_cuda::Act act, bool half);
// y[i] = act(y[i] + bias[(i / inner) % channels]) in place (bias may be null).
void add_bias_act(Kernel* k, const kite_backend_tensor2* y, const kite_backend_tensor2* bias, int64_t n,
                  int64_t channels, int64_t inner, kite_cuda::Act act);
// A plain copy of `bytes` from src (+src_extra) to dst (+dst_extra),
// dropped at bind when both are the same bytes.
void add_copy(Kernel* k, const kite_backend_tensor2* src, uint64_t src_extra, const kite_backend_tensor2* dst,
              uint64_t dst_extra, uint64_t bytes);
// A strided copy (shape and element strides on both sides); "" or why not.
std::string add_strided_copy(Kernel* k, const kite_backend_tensor2* src, uint64_t src_extra,
                             const kite_backend_tensor2* dst, uint64_t dst_extra, const Shape& shape,
                             const Shape& src_strides, const Shape& dst_strides, size_t elem_size);

// GEMM on Kite's own kernels: y = act(alpha * A.B + beta * bias), batched.
struct GemmDesc {
  int64_t M = 0, N = 0, K = 0;
  int64_t sam = 0, sak = 0, sbk = 0, sbn = 0;
  int64_t nb1 = 1, nb2 = 1;
  int64_t sa1 = 0, sa2 = 0, sb1 = 0, sb2 = 0;
  int64_t sbias1 = 0, sbias2 = 0, sbias_m = 0, sbias_n = 0;
  float alpha = 1.0f, beta = 1.0f;
  kite_cuda::Act act{kite_cuda::kOpIdentity, 0.0f, 0.0f};
  bool half = false;  // float16 storage: the _f16 kernels
};
void add_own_gemm(Kernel* k, const kite_backend_tensor2* a, const kite_backend_tensor2* b,
                  const kite_backend_tensor2* bias, const kite_backend_tensor2* y, const GemmDesc& g);

// The kernel a library-backed node gets (conv=auto|cudnn, gemm=auto|
// cublaslt): without the library's call (lib null, lib_why saying why)
// Kite's own, or an error when the library is forced; with it, the library's
// when forced, else whichever of the two measured faster on b (lib_ms: the
// library's time, < 0 when unknown). `lib_name` names the library in the
// log lines. "" or the error.
std::string pick_faster(Backend& b, Kernel* k, Kernel* own, Kernel* lib, const std::string& lib_why,
                        bool forced, float lib_ms, const char* lib_name);

#define KITE_CUDA_PLAN(name) std::string name(const NodeView& n, const PlanContext& ctx, Kernel* k);
// plan_elementwise.cpp
KITE_CUDA_PLAN(plan_unary)
KITE_CUDA_PLAN(plan_binary)
KITE_CUDA_PLAN(plan_variadic)
KITE_CUDA_PLAN(plan_batch_norm)
KITE_CUDA_PLAN(plan_cast)
KITE_CUDA_PLAN(plan_fused_gelu)
// plan_data.cpp
KITE_CUDA_PLAN(plan_copy)
KITE_CUDA_PLAN(plan_transpose)
KITE_CUDA_PLAN(plan_concat)
KITE_CUDA_PLAN(plan_split)
KITE_CUDA_PLAN(plan_slice)
KITE_CUDA_PLAN(plan_expand)
KITE_CUDA_PLAN(plan_gather)
KITE_CUDA_PLAN(plan_pad)
KITE_CUDA_PLAN(plan_resize)
// plan_conv.cpp
KITE_CUDA_PLAN(plan_conv)
KITE_CUDA_PLAN(plan_fused_conv)
// plan_gemm.cpp
KITE_CUDA_PLAN(plan_matmul)
KITE_CUDA_PLAN(plan_gemm)
KITE_CUDA_PLAN(plan_fused_matmul)
KITE_CUDA_PLAN(plan_fused_gemm)
// plan_pool.cpp
KITE_CUDA_PLAN(plan_pool)
KITE_CUDA_PLAN(plan_global_pool)
KITE_CUDA_PLAN(plan_reduce)
// plan_norm.cpp
KITE_CUDA_PLAN(plan_softmax)
KITE_CUDA_PLAN(plan_layer_norm)
KITE_CUDA_PLAN(plan_instance_norm)
KITE_CUDA_PLAN(plan_fused_layer_norm)
KITE_CUDA_PLAN(plan_fused_skip_layer_norm)
KITE_CUDA_PLAN(plan_fused_attention)
#undef KITE_CUDA_PLAN

}  // namespace kite::cuda
