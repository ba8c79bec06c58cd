// The plan functions of every op family (one file each) and the GEMM
// building block that MatMul, Gemm and 1x1 convolutions share.
#pragma once

#include "plan_util.h"

namespace kite::vk {

// C = act(alpha * A.B + beta * bias) per batch, operands through strides
// (see shaders/gemm_params.glsl).
struct GemmDesc {
  uint32_t M = 0, N = 0, K = 0, batch = 1;
  uint32_t sam = 0, sak = 0, sbk = 0, sbn = 0, scm = 0;
  uint32_t sab = 0, sbb = 0, scb = 0;
  uint32_t sbias_m = 0, sbias_n = 0, sbias_b = 0;
  float alpha = 1.0f, beta = 1.0f;
  Activation act;
  uint32_t extra_a = 0, extra_b = 0, extra_bias = 0, extra_c = 0;
};
// Appends the GEMM dispatch (bias may be null); "" or why not.
std::string add_gemm(Kernel* k, const PlanContext& ctx, const kite_backend_tensor2* a,
                     const kite_backend_tensor2* b, const kite_backend_tensor2* bias,
                     const kite_backend_tensor2* c, const GemmDesc& g);

#define KITE_VK_PLAN(name) std::string name(const NodeView& n, const PlanContext& ctx, Kernel* k);
// gemm.cpp
KITE_VK_PLAN(plan_matmul)
KITE_VK_PLAN(plan_gemm)
KITE_VK_PLAN(plan_fused_matmul)
KITE_VK_PLAN(plan_fused_gemm)
// conv.cpp
KITE_VK_PLAN(plan_conv)
KITE_VK_PLAN(plan_fused_conv)
// elementwise.cpp
KITE_VK_PLAN(plan_binary)
KITE_VK_PLAN(plan_variadic)
KITE_VK_PLAN(plan_unary)
KITE_VK_PLAN(plan_fused_gelu)
// data.cpp
KITE_VK_PLAN(plan_copy)
KITE_VK_PLAN(plan_transpose)
KITE_VK_PLAN(plan_concat)
KITE_VK_PLAN(plan_split)
KITE_VK_PLAN(plan_slice)
KITE_VK_PLAN(plan_expand)
KITE_VK_PLAN(plan_gather)
KITE_VK_PLAN(plan_pad)
KITE_VK_PLAN(plan_cast)
KITE_VK_PLAN(plan_resize)
// pool.cpp
KITE_VK_PLAN(plan_pool)
KITE_VK_PLAN(plan_global_pool)
KITE_VK_PLAN(plan_reduce)
// norm.cpp
KITE_VK_PLAN(plan_softmax)
KITE_VK_PLAN(plan_layer_norm)
KITE_VK_PLAN(plan_instance_norm)
KITE_VK_PLAN(plan_batch_norm)
KITE_VK_PLAN(plan_fused_layer_norm)
KITE_VK_PLAN(plan_fused_skip_layer_norm)
KITE_VK_PLAN(plan_fused_attention)
#undef KITE_VK_PLAN

}  // namespace kite::vk
