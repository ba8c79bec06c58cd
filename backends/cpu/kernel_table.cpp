// The explicit tables of CPU kernels: primitive ops (domain "") and fused
// ops (domain "kite"). Adding an op: write its check and prepare in
// kernels/<family>.cpp and add one line here. No self-registration.
#include <string>

#include "kernel.h"
#include "kernels/fused_kernels.h"
#include "kernels/kernels.h"
#include "kite/abi/kernel_table.h"

namespace kite::cpu {

const std::vector<KernelEntry>& kernel_table() {
  static const std::vector<KernelEntry> table = {
      // Convolution and matrix products.
      {"Conv", check_conv, prepare_conv},
      {"ConvTranspose", check_conv_transpose, prepare_conv_transpose},
      {"Gemm", check_gemm, prepare_gemm},
      {"MatMul", check_matmul, prepare_matmul},
      // Elementwise, two or three inputs with numpy broadcasting.
      {"Add", check_binary, prepare_binary},
      {"Sub", check_binary, prepare_binary},
      {"Mul", check_binary, prepare_binary},
      {"Div", check_binary, prepare_binary},
      {"Pow", check_binary, prepare_binary},
      {"PRelu", check_binary, prepare_binary},
      {"Equal", check_binary, prepare_binary},
      {"Greater", check_binary, prepare_binary},
      {"Less", check_binary, prepare_binary},
      {"And", check_binary, prepare_binary},
      {"Or", check_binary, prepare_binary},
      {"Xor", check_binary, prepare_binary},
      {"GreaterOrEqual", check_binary, prepare_binary},
      {"LessOrEqual", check_binary, prepare_binary},
      {"Where", check_where, prepare_where},
      // Elementwise, any number of inputs with numpy broadcasting.
      {"Max", check_variadic, prepare_variadic},
      {"Min", check_variadic, prepare_variadic},
      {"Sum", check_variadic, prepare_variadic},
      {"Mean", check_variadic, prepare_variadic},
      // Elementwise, one input.
      {"Relu", check_unary, prepare_unary},
      {"Sigmoid", check_unary, prepare_unary},
      {"Clip", check_unary, prepare_unary},
      {"Sqrt", check_unary, prepare_unary},
      {"Reciprocal", check_unary, prepare_unary},
      {"Exp", check_unary, prepare_unary},
      {"Log", check_unary, prepare_unary},
      {"Abs", check_unary, prepare_unary},
      {"Neg", check_unary, prepare_unary},
      {"Erf", check_unary, prepare_unary},
      {"Tanh", check_unary, prepare_unary},
      {"LeakyRelu", check_unary, prepare_unary},
      {"Elu", check_unary, prepare_unary},
      {"HardSigmoid", check_unary, prepare_unary},
      {"HardSwish", check_unary, prepare_unary},
      {"Gelu", check_unary, prepare_unary},
      {"Not", check_unary, prepare_unary},
      {"Sign", check_unary, prepare_unary},
      {"Ceil", check_unary, prepare_unary},
      {"Floor", check_unary, prepare_unary},
      {"Round", check_unary, prepare_unary},
      {"Sin", check_unary, prepare_unary},
      {"Cos", check_unary, prepare_unary},
      {"Softplus", check_unary, prepare_unary},
      {"Mish", check_unary, prepare_unary},
      // Pooling and normalisation.
      {"MaxPool", check_pool, prepare_pool},
      {"AveragePool", check_pool, prepare_pool},
      {"GlobalAveragePool", check_global_pool, prepare_global_pool},
      {"GlobalMaxPool", check_global_pool, prepare_global_pool},
      {"BatchNormalization", check_batch_norm, prepare_batch_norm},
      {"InstanceNormalization", check_instance_norm, prepare_instance_norm},
      {"LayerNormalization", check_layer_norm, prepare_layer_norm},
      {"Softmax", check_softmax, prepare_softmax},
      {"LogSoftmax", check_softmax, prepare_softmax},
      {"Hardmax", check_softmax, prepare_softmax},
      // Data movement.
      {"Identity", check_copy, prepare_copy},
      {"Reshape", check_copy, prepare_copy},
      {"Flatten", check_copy, prepare_copy},
      {"Squeeze", check_copy, prepare_copy},
      {"Unsqueeze", check_copy, prepare_copy},
      {"Dropout", check_copy, prepare_copy},
      {"Concat", check_concat, prepare_concat},
      {"Transpose", check_transpose, prepare_transpose},
      {"Split", check_split, prepare_split},
      {"Shape", check_shape, prepare_shape},
      {"Size", check_shape, prepare_shape},
      {"Slice", check_slice, prepare_slice},
      {"Gather", check_gather, prepare_gather},
      {"Expand", check_expand, prepare_expand},
      {"Tile", check_tile, prepare_tile},
      {"Pad", check_pad, prepare_pad},
      {"ConstantOfShape", check_constant_of_shape, prepare_constant_of_shape},
      {"Range", check_range, prepare_range},
      {"Cast", check_cast, prepare_cast},
      {"Resize", check_resize, prepare_resize},
      // Reductions.
      {"ReduceMean", check_reduce, prepare_reduce},
      {"ReduceSum", check_reduce, prepare_reduce},
      {"ReduceMax", check_reduce, prepare_reduce},
      {"ReduceMin", check_reduce, prepare_reduce},
      {"ReduceProd", check_reduce, prepare_reduce},
      {"ReduceL1", check_reduce, prepare_reduce},
      {"ReduceL2", check_reduce, prepare_reduce},
      {"ReduceSumSquare", check_reduce, prepare_reduce},
      {"ReduceLogSumExp", check_reduce, prepare_reduce},
      {"ArgMax", check_arg_reduce, prepare_arg_reduce},
      {"ArgMin", check_arg_reduce, prepare_arg_reduce},
      // Exporters' mask, index and rearrangement ops (kernels/indexing.cpp).
      {"IsNaN", check_indexing, prepare_indexing},
      {"IsInf", check_indexing, prepare_indexing},
      {"Mod", check_indexing, prepare_indexing},
      {"Trilu", check_indexing, prepare_indexing},
      {"CumSum", check_indexing, prepare_indexing},
      {"GatherElements", check_indexing, prepare_indexing},
      {"ScatterElements", check_indexing, prepare_indexing},
      {"GatherND", check_indexing, prepare_indexing},
      {"ScatterND", check_indexing, prepare_indexing},
      {"DepthToSpace", check_indexing, prepare_indexing},
      {"SpaceToDepth", check_indexing, prepare_indexing},
      {"TopK", check_indexing, prepare_indexing},
      {"OneHot", check_indexing, prepare_indexing},
      {"Einsum", check_indexing, prepare_indexing},
      {"LSTM", check_recurrent, prepare_recurrent},
      {"GRU", check_recurrent, prepare_recurrent},
      {"RNN", check_recurrent, prepare_recurrent},
      {"GridSample", check_grid_sample, prepare_grid_sample},
  };
  return table;
}

// Fused ops of the graph optimizer (docs/FUSIONS.md), domain "kite".
const std::vector<FusedKernelEntry>& fused_kernel_table() {
  static const std::vector<FusedKernelEntry> table = {
      {"FusedConv", check_fused_conv, prepare_fused_conv},
      {"FusedGemm", check_fused_gemm, prepare_fused_gemm},
      {"FusedMatMul", check_fused_matmul, prepare_fused_matmul},
      {"Gelu", check_fused_gelu, prepare_fused_gelu},
      {"LayerNormalization", check_fused_layer_norm, prepare_fused_layer_norm},
      {"SkipLayerNormalization", check_fused_skip_layer_norm, prepare_fused_skip_layer_norm},
      {"Attention", check_fused_attention, prepare_fused_attention},
      {"ChannelShuffle", check_fused_channel_shuffle, prepare_fused_channel_shuffle},
  };
  return table;
}

std::string validate_kernel_table() {
  std::string why = abi::check_entries(kernel_table(), "CPU kernel table",
                                       [](const KernelEntry& e) { return e.check && e.prepare; });
  if (why.empty()) {
    why = abi::check_entries(fused_kernel_table(), "CPU fused kernel table",
                             [](const FusedKernelEntry& e) { return e.check && e.prepare; });
  }
  return why;
}

const FusedKernelEntry* find_fused_kernel(const std::string& op) { return abi::find_entry(fused_kernel_table(), op); }

const KernelEntry* find_kernel(const std::string& op) { return abi::find_entry(kernel_table(), op); }

}  // namespace kite::cpu
