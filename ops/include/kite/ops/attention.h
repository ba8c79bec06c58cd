// The shape rule of the graph optimizer's fused Attention (domain "kite",
// pattern "Attention", docs/FUSIONS.md), which every backend applies alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/ops/op_node.h"

namespace kite::ops {

// Inputs q [.., S, D], kt [.., D, T], v [.., T, Dv] and an optional mask,
// one output, attribute scale a finite float, nan_to_zero (when present) 0
// or 1, and the same leading dims on q, kt and v. "" with the scores' shape
// [.., S, T] and the output's [.., S, Dv], or why not, naming the tensors
// and their shapes. Dtypes and the mask's shape are the kernel's to check.
std::string attention_shapes(const OpNode& op, const std::string& pattern, const std::vector<TensorType>& outputs,
                             std::vector<int64_t>* scores, std::vector<int64_t>* out);

}  // namespace kite::ops
