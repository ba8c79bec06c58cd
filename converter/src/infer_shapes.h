// Shape and dtype inference over an imported model, with constant folding of
// what can be computed at convert time.
#pragma once

#include <string>

#include "kite/converter/ir.h"

namespace kite::converter {

// Runs kite::ops::infer_types over graph 0 in node order, and over the
// subgraphs of each If when that node is reached; fills every node output's
// dtype and shape (shape_known = true). Graph nodes must be topologically
// sorted (the importer does that). Before each node is inferred, nodes whose
// meaning depends on an older source_opset are rewritten into the form the
// op rules and kernels implement (onnx/onnx_legacy.h), so after this the
// graph means the same under the latest opset.
//
// Folding: a node the folding policy lets fold (src/fold_policy.h, the same
// policy the fold_constants pass follows) is computed with the CPU kernels
// (const_eval) and replaced by constant outputs; Shape and Size of a tensor
// whose shape is known become constants even when the tensor's value is
// not. So chains such as Shape -> Gather -> Concat -> Reshape resolve. A
// node whose results would bloat the file is left to fold_constants, which
// sees whether its readers fold too.
//
// A shape or dtype the model declares (value_info, graph outputs; see
// onnx_import.h) that disagrees with the inferred one is an error naming the
// tensor and both shapes. An If whose branches give different shapes must
// have a constant condition.
bool infer_shapes(ir::Model* model, std::string* err);

}  // namespace kite::converter
