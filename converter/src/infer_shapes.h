// Shape and dtype inference over an imported model, with constant folding of
// what can be computed at convert time.
#pragma once

#include <string>

#include "kite/converter/ir.h"

namespace kite::converter {

// Largest output (all outputs of a node together) that is folded into a
// constant just because all inputs are constants.
constexpr uint64_t kMaxFoldedBytes = 64 * 1024;

// Runs kite::ops::infer_types over graph 0 in node order, and over the
// subgraphs of each If when that node is reached; fills every node output's
// dtype and shape (shape_known = true). Graph nodes must be topologically
// sorted (the importer does that). Before each node is inferred, nodes whose
// meaning depends on an older source_opset are rewritten into the form the
// op rules and kernels implement (onnx/onnx_legacy.h), so after this the
// graph means the same under the latest opset.
//
// Folding: a node whose present inputs are all constants and whose outputs
// total at most kMaxFoldedBytes is computed with the CPU kernels (const_eval)
// and replaced by constant outputs; Shape and Size of a tensor whose shape is
// known become constants even when the tensor's value is not. So chains such
// as Shape -> Gather -> Concat -> Reshape resolve. Not folded: nodes with no
// inputs or random results, nodes with subgraphs (If), nodes producing a
// graph output (except Shape and Size producing a main-graph output), and
// nodes the CPU backend does not run.
//
// A shape or dtype the model declares (value_info, graph outputs; see
// onnx_import.h) that disagrees with the inferred one is an error naming the
// tensor and both shapes. An If whose branches give different shapes must
// have a constant condition.
bool infer_shapes(ir::Model* model, std::string* err);

}  // namespace kite::converter
