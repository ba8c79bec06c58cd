// Every kernel of the fatbin: X(name, parameter struct, uses block
// synchronisation). A kernel with an _f16 twin is a template on its storage
// type: the twin reads and writes float16 (fp16 storage, fp32 arithmetic).
// One list serves the plugin (kernel ids, names looked up
// with cuModuleGetFunction), the device code (each .cuh defines the kernels
// it lists here) and the host emulator (which runs kernels that synchronise
// as one fiber per thread). Adding a kernel: one line here, its body in a
// .cuh, its planner on the host side.
#pragma once

#define KITE_CUDA_KERNELS(X)                              \
  X(kite_unary, UnaryParams, 0)                           \
  X(kite_unary_f16, UnaryParams, 0)                       \
  X(kite_binary, BinaryParams, 0)                         \
  X(kite_binary_f16, BinaryParams, 0)                     \
  X(kite_bias_act, BiasActParams, 0)                      \
  X(kite_copy, CopyParams, 0)                             \
  X(kite_pad, PadParams, 0)                               \
  X(kite_pad_f16, PadParams, 0)                           \
  X(kite_gather, GatherParams, 0)                         \
  X(kite_cast, CastParams, 0)                             \
  X(kite_conv_direct, ConvParams, 0)                      \
  X(kite_conv_direct_f16, ConvParams, 0)                  \
  X(kite_conv_igemm, ConvParams, 1)                       \
  X(kite_conv_igemm_f16, ConvParams, 1)                   \
  X(kite_gemm_tiled, GemmParams, 1)                       \
  X(kite_gemm_tiled_f16, GemmParams, 1)                   \
  X(kite_gemm_simple, GemmParams, 0)                      \
  X(kite_gemm_simple_f16, GemmParams, 0)                  \
  X(kite_pool2d, PoolParams, 0)                           \
  X(kite_pool2d_f16, PoolParams, 0)                       \
  X(kite_reduce_rows, ReduceParams, 1)                    \
  X(kite_reduce_cols, ReduceParams, 0)                    \
  X(kite_softmax_rows, SoftmaxParams, 1)                  \
  X(kite_softmax_strided, SoftmaxParams, 0)               \
  X(kite_layernorm, NormParams, 1)                        \
  X(kite_channel_affine, ChannelAffineParams, 0)          \
  X(kite_resize, ResizeParams, 0)                         \
  X(kite_resize_f16, ResizeParams, 0)                     \
  X(kite_attention, AttentionParams, 1)
