// Fused kernels of the CPU backend: one kernel per fused op of the graph
// optimizer (converter/passes, docs/FUSIONS.md), domain "kite". A fused node
// carries its body too; these kernels never look at it: they compute the
// whole pattern from the fused node's own inputs, outputs and attributes.
//
// A check validates everything prepare relies on without reading tensor
// data: the pattern name, dtypes, every input and declared output shape
// (through kite::ops rules of the primitive ops where there is one), so a
// hostile file gets a message, never an out-of-bounds access.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel.h"

namespace kite::cpu {

// "" when the kernel runs this fused node, else why not. pattern is the
// node's fused_pattern; outputs are its declared outputs.
using FusedCheckFn = std::string (*)(const kite::ops::OpNode& op, const std::string& pattern,
                                     const std::vector<kite::ops::TensorType>& outputs);

struct FusedKernelEntry {
  const char* op;  // in domain "kite"
  FusedCheckFn check;
  PrepareFn prepare;
};

#define KITE_CPU_FUSED(family)                                                              \
  std::string check_##family(const kite::ops::OpNode& op, const std::string& pattern,      \
                             const std::vector<kite::ops::TensorType>& outputs);            \
  std::unique_ptr<Kernel> prepare_##family(const KernelArgs& args, std::string* err);

KITE_CPU_FUSED(fused_conv)        // FusedConv: Conv + activation
KITE_CPU_FUSED(fused_gemm)        // FusedGemm: Gemm + activation
KITE_CPU_FUSED(fused_matmul)      // FusedMatMul: MatMul + bias (+ activation)
KITE_CPU_FUSED(fused_gelu)        // Gelu: the erf or tanh formula
KITE_CPU_FUSED(fused_layer_norm)  // LayerNormalization: from its decomposed form
KITE_CPU_FUSED(fused_skip_layer_norm)  // SkipLayerNormalization: Add + LayerNormalization
KITE_CPU_FUSED(fused_attention)   // Attention: softmax(q kt * scale + mask) v
KITE_CPU_FUSED(fused_channel_shuffle)  // ChannelShuffle: [Concat +] shuffle [+ channel Slices]

#undef KITE_CPU_FUSED

}  // namespace kite::cpu
