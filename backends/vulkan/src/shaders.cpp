#include "shaders.h"

#include "spirv.h"

namespace kite::vk {

namespace {

ShaderInfo make(const char* name, uint32_t bindings, const uint32_t* code, size_t words) {
  return ShaderInfo{name, bindings, code, words};
}

}  // namespace

const ShaderInfo& shader_info(ShaderId id) {
  // Indexed by ShaderId; binding counts match the shaders' declarations.
  static const ShaderInfo table[kShaderCount] = {
      make("gemm", 4, spirv::gemm, spirv::gemm_words),
      make("gemm_small", 4, spirv::gemm_small, spirv::gemm_small_words),
      make("conv", 4, spirv::conv, spirv::conv_words),
      make("conv_depthwise", 4, spirv::conv_depthwise, spirv::conv_depthwise_words),
      make("binary", 3, spirv::binary, spirv::binary_words),
      make("unary", 2, spirv::unary, spirv::unary_words),
      make("copy", 2, spirv::copy, spirv::copy_words),
      make("gather", 4, spirv::gather, spirv::gather_words),
      make("pad", 2, spirv::pad, spirv::pad_words),
      make("resize", 3, spirv::resize, spirv::resize_words),
      make("pool", 2, spirv::pool, spirv::pool_words),
      make("reduce", 2, spirv::reduce, spirv::reduce_words),
      make("softmax", 2, spirv::softmax, spirv::softmax_words),
      make("layernorm", 6, spirv::layernorm, spirv::layernorm_words),
      make("batchnorm", 6, spirv::batchnorm, spirv::batchnorm_words),
      make("attention", 5, spirv::attention, spirv::attention_words),
      make("cast", 2, spirv::cast, spirv::cast_words),
      make("gemm_lanes", 4, spirv::gemm_lanes, spirv::gemm_lanes_words),
      make("conv_lanes", 4, spirv::conv_lanes, spirv::conv_lanes_words),
      make("gemm_f16", 4, spirv::gemm_f16, spirv::gemm_f16_words),
      make("gemm_small_f16", 4, spirv::gemm_small_f16, spirv::gemm_small_f16_words),
      make("conv_f16", 4, spirv::conv_f16, spirv::conv_f16_words),
      make("conv_depthwise_f16", 4, spirv::conv_depthwise_f16, spirv::conv_depthwise_f16_words),
      make("binary_f16", 3, spirv::binary_f16, spirv::binary_f16_words),
      make("unary_f16", 2, spirv::unary_f16, spirv::unary_f16_words),
      make("copy_f16", 2, spirv::copy_f16, spirv::copy_f16_words),
      make("gather_f16", 4, spirv::gather_f16, spirv::gather_f16_words),
      make("pad_f16", 2, spirv::pad_f16, spirv::pad_f16_words),
      make("resize_f16", 3, spirv::resize_f16, spirv::resize_f16_words),
      make("pool_f16", 2, spirv::pool_f16, spirv::pool_f16_words),
      make("gemm_lanes_f16", 4, spirv::gemm_lanes_f16, spirv::gemm_lanes_f16_words),
      make("conv_lanes_f16", 4, spirv::conv_lanes_f16, spirv::conv_lanes_f16_words),
      make("cast_widen", 2, spirv::cast_widen, spirv::cast_widen_words),
      make("cast_narrow", 2, spirv::cast_narrow, spirv::cast_narrow_words),
  };
  return table[id];
}

namespace {

struct HalfPair {
  ShaderId base, half;
};
constexpr HalfPair kHalfPairs[] = {
    {kShaderGemm, kShaderGemmF16},
    {kShaderGemmSmall, kShaderGemmSmallF16},
    {kShaderConv, kShaderConvF16},
    {kShaderConvDepthwise, kShaderConvDepthwiseF16},
    {kShaderBinary, kShaderBinaryF16},
    {kShaderUnary, kShaderUnaryF16},
    {kShaderCopy, kShaderCopyF16},
    {kShaderGather, kShaderGatherF16},
    {kShaderPad, kShaderPadF16},
    {kShaderResize, kShaderResizeF16},
    {kShaderPool, kShaderPoolF16},
    {kShaderGemmLanes, kShaderGemmLanesF16},
    {kShaderConvLanes, kShaderConvLanesF16},
};

}  // namespace

ShaderId half_variant(ShaderId id) {
  for (const HalfPair& p : kHalfPairs) {
    if (p.base == id || p.half == id) return p.half;
  }
  return kShaderCount;
}

bool reads_halves(ShaderId id) {
  return id >= kShaderGemmF16 && id < kShaderCount;
}

}  // namespace kite::vk
