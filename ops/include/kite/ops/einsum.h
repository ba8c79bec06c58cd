// Einsum's equation resolved against its input shapes: one place for the op
// rule (the output shape) and the kernels (the index iteration).
//
// Every distinct label gets an id; the dims an ellipsis stands for get ids
// too (one per broadcast ellipsis dim, aligned right as numpy broadcasts).
// A kernel iterates over every label's range: output labels first (in output
// order), then the summed ones; input i's element for an index tuple is at
// sum over labels of index[l] * strides[i][l] (a label repeated in one input
// -- a diagonal -- adds its dims' strides; a dim of size 1 that broadcasts
// has stride 0). Allocates: call it at prepare, not at run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kite::ops {

struct EinsumPlan {
  std::vector<int64_t> label_dims;             // size of each label's range
  std::vector<int> output_labels;              // label ids of the output dims, in order
  std::vector<int> summed_labels;              // label ids summed over
  std::vector<std::vector<int64_t>> strides;   // per input, per label id (element strides)
  std::vector<std::vector<int>> operand_labels;  // per input, the label id of each dim
  std::vector<int64_t> output_shape;
};

// equation: "ij,jk->ik", "bhqd,bhkd->bhqk", "...ij,...jk", "ii->i" ...
// (spaces ignored; without "->" the output is the labels used once, sorted,
// after the ellipsis dims). False with *err (no node label) on a malformed
// equation or shapes that do not fit it.
bool resolve_einsum(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes,
                    EinsumPlan* plan, std::string* err);

}  // namespace kite::ops
