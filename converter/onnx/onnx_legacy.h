// Older-opset ONNX semantics -> the semantics Kite's op rules and kernels
// implement. The IR carries no per-node opset, so where an op's meaning
// changed without a visible change in its inputs or attributes, the node must
// be rewritten before anything interprets it. (Changes that show in the node,
// such as Squeeze's axes moving from an attribute to an input, are handled
// by the op rules themselves.)
//
//  - Softmax, LogSoftmax, Hardmax before opset 13 coerce the input to 2-D at
//    `axis` (default 1). With axis = rank-1 that is the opset-13 meaning;
//    otherwise the node becomes Flatten(axis) -> op(axis=1) -> Reshape(back).
//    The default axis is made explicit either way.
//  - Resize at opset 10 takes (X, scales) and works like Upsample: it becomes
//    (X, <no roi>, scales) with coordinate_transformation_mode "asymmetric"
//    and, for mode "nearest", nearest_mode "floor" (as ONNX's own version
//    converter does).
#pragma once

#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

// Rewrites node for model->source_opset. Needs the shapes of the node's
// inputs (infer_shapes calls it just before inferring the node). Leaves
// replacement empty when the node stays as it is; else fills it with the
// nodes to run instead, in order, adding any new tensors to the model.
bool legalize_legacy_node(ir::Model* model, const ir::Node& node,
                          std::vector<ir::Node>* replacement, std::string* err);

}  // namespace kite::converter
