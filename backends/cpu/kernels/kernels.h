// The CPU kernel families. Each pair (check, prepare) serves the ops that
// kernel_table.cpp maps to it; prepare dispatches on the op type.
#pragma once

#include <memory>
#include <string>

#include "kernel.h"

namespace kite::cpu {

#define KITE_CPU_FAMILY(family)                                      \
  std::string check_##family(const kite::ops::OpNode& op);           \
  std::unique_ptr<Kernel> prepare_##family(const KernelArgs& args, std::string* err);

KITE_CPU_FAMILY(conv)            // Conv
KITE_CPU_FAMILY(conv_transpose)  // ConvTranspose
KITE_CPU_FAMILY(gemm)            // Gemm
KITE_CPU_FAMILY(matmul)          // MatMul
KITE_CPU_FAMILY(binary)          // Add, Sub, Mul, Div, Pow, PRelu, comparisons, And, Or
KITE_CPU_FAMILY(where)           // Where
KITE_CPU_FAMILY(variadic)        // Max, Min, Sum, Mean
KITE_CPU_FAMILY(unary)           // activations and math functions
KITE_CPU_FAMILY(pool)            // MaxPool, AveragePool
KITE_CPU_FAMILY(global_pool)     // GlobalAveragePool, GlobalMaxPool
KITE_CPU_FAMILY(batch_norm)      // BatchNormalization
KITE_CPU_FAMILY(instance_norm)   // InstanceNormalization
KITE_CPU_FAMILY(layer_norm)      // LayerNormalization
KITE_CPU_FAMILY(softmax)         // Softmax, LogSoftmax, Hardmax
KITE_CPU_FAMILY(copy)            // Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout
KITE_CPU_FAMILY(concat)          // Concat
KITE_CPU_FAMILY(transpose)       // Transpose
KITE_CPU_FAMILY(split)           // Split
KITE_CPU_FAMILY(shape)           // Shape, Size
KITE_CPU_FAMILY(slice)           // Slice
KITE_CPU_FAMILY(gather)          // Gather
KITE_CPU_FAMILY(expand)          // Expand
KITE_CPU_FAMILY(tile)            // Tile
KITE_CPU_FAMILY(pad)             // Pad
KITE_CPU_FAMILY(constant_of_shape)  // ConstantOfShape
KITE_CPU_FAMILY(range)           // Range
KITE_CPU_FAMILY(cast)            // Cast
KITE_CPU_FAMILY(reduce)          // ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
                                 // ReduceSumSquare, ReduceLogSumExp
KITE_CPU_FAMILY(arg_reduce)      // ArgMax, ArgMin
KITE_CPU_FAMILY(resize)          // Resize
KITE_CPU_FAMILY(indexing)        // IsNaN, IsInf, Mod, Trilu, CumSum, GatherElements, ScatterElements,
                                 // GatherND, ScatterND, DepthToSpace, SpaceToDepth, TopK, OneHot, Einsum

KITE_CPU_FAMILY(recurrent)       // LSTM, GRU, RNN (one fused kernel per node)
KITE_CPU_FAMILY(grid_sample)     // GridSample

#undef KITE_CPU_FAMILY

}  // namespace kite::cpu
