// Folding a per-channel affine map into the weights of the node before it,
// shared by fold_batch_norm and fold_scale_into_weights.
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"

namespace kite::passes {

// Scales the output channels of main-graph node node_index (Conv,
// ConvTranspose or Gemm with float32 constant weights and bias) by `scale`,
// then adds `shift` (per channel; empty: 1 and 0), through new weight and
// bias constants; a Gemm's beta becomes 1. False (graph untouched, *why set)
// when the node does not fit.
bool rescale_output_channels(PassContext& ctx, int node_index, const std::vector<double>& scale,
                             const std::vector<double>& shift, std::string* why);

}  // namespace kite::passes
