// ONNX -> Kite IR import.
//
// What the importer produces (ir::Model):
//  - graphs[0] is the main graph; the then_branch / else_branch of an If (and
//    any other GRAPH attribute) become further graphs, referenced by an
//    attribute of type KITE_ATTR_GRAPH whose `i` is the index in
//    Model::graphs. A subgraph may use outer-scope tensors by index, like any
//    other tensor: Model::tensors is shared by all graphs.
//  - Initializers, Constant nodes and graph inputs that are also
//    initializers become Constant tensors with their bytes (little-endian;
//    bool one byte per element). Constant nodes do not appear in the graph.
//  - Main-graph inputs become Input tensors with a fully known shape
//    (symbolic dims come from ImportOptions::input_shapes); main-graph
//    outputs become Output tensors. Subgraph inputs/outputs stay Activation.
//  - Node outputs are Activation tensors with dtype/shape not yet known
//    (shape_known = false); run infer_shapes() next. When the ONNX model
//    declares a type for such a tensor (value_info or graph output), the
//    declaration is kept in Tensor::dtype / Tensor::shape with
//    shape_known = false and -1 for unknown dims, and infer_shapes() checks
//    it against what it infers (an empty declared shape is not checked).
//  - Nodes are topologically sorted (stable: file order is kept where the
//    dependencies allow); nodes without a name get a unique "<op>_<index>".
//  - Node::domain is "" for ai.onnx (either spelling in the file).
//  - Attributes keep their ONNX meaning and values (e.g. Cast's `to` is an
//    ONNX TensorProto data type). TENSOR attributes are accepted only for
//    Constant (folded into a constant tensor) and ConstantOfShape, whose
//    `value` becomes two attributes, always present after import:
//      value        FLOATS (float32/float16) or INTS (integer/bool), 1 element
//      value_dtype  INT, a kite_dtype (default: FLOAT32 0.0, as in ONNX)
//
// Every failure returns false with a message naming the tensor or node. All
// ops Kite does not know are reported together, one line per node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

struct ImportOptions {
  // Graph input name -> full shape, replacing the shape the model declares
  // (its known dims must agree). Needed for symbolic/unknown dims.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Directory that external-data locations are relative to. Empty:
  // import_onnx_file uses the model file's directory; import_onnx_bytes
  // then refuses models with external data.
  std::string model_dir;
};

bool import_onnx_file(const std::string& path, const ImportOptions& options, ir::Model* out,
                      std::string* err);
bool import_onnx_bytes(const void* data, size_t size, const ImportOptions& options,
                       ir::Model* out, std::string* err);

}  // namespace kite::converter
