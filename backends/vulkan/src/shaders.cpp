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
  };
  return table[id];
}

}  // namespace kite::vk
