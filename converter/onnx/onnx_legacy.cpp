#include "onnx/onnx_legacy.h"

#include <cstring>
#include <utility>

#include "kite/ops/attr.h"
#include "kite/ops/op_node.h"

namespace kite::converter {

namespace {

using kite::ops::int_attr;
using kite::ops::set_attr;
using kite::ops::string_attr;

// Rewrites add tensors; their names must not clash with any other.
int add_activation(ir::Model* model, const std::string& base) {
  ir::Tensor t;
  t.name = model->unused_tensor_name(base);
  return model->add_tensor(std::move(t));
}

bool legalize_softmax(ir::Model* model, const ir::Node& node, std::vector<ir::Node>* replacement) {
  if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.size() != 1 ||
      node.outputs[0] < 0) {
    return true;  // malformed: the op rules report it
  }
  const ir::Attr* axis_attr = node.find_attr("axis");
  if (axis_attr && axis_attr->type != KITE_ATTR_INT) return true;
  // Copied: adding tensors below may move the model's tensors.
  const ir::Tensor& x = model->tensors.at(static_cast<size_t>(node.inputs[0]));
  const std::vector<int64_t> x_shape = x.shape;
  const std::string x_name = x.name;
  const int64_t rank = static_cast<int64_t>(x_shape.size());
  const int64_t axis = axis_attr ? axis_attr->i : 1;  // the default before opset 13
  const int64_t normalized = axis < 0 ? axis + rank : axis;

  ir::Node same = node;
  set_attr(&same.attrs, int_attr("axis", axis));
  if (!x.shape_known || normalized < 0 || normalized >= rank || normalized == rank - 1) {
    // Same meaning in both opsets (or invalid, which the op rules report).
    replacement->push_back(std::move(same));
    return true;
  }

  const int flat = add_activation(model, x_name + "/kite_2d");
  const int flat_out = add_activation(model, node.name + "/kite_2d_out");
  ir::Tensor shape;
  shape.name = model->unused_tensor_name(node.name + "/kite_shape");
  shape.dtype = KITE_DTYPE_INT64;
  shape.shape = {rank};
  shape.shape_known = true;
  shape.kind = ir::TensorKind::Constant;
  shape.data.resize(x_shape.size() * sizeof(int64_t));
  if (!x_shape.empty()) std::memcpy(shape.data.data(), x_shape.data(), shape.data.size());
  const int shape_index = model->add_tensor(std::move(shape));

  ir::Node flatten;
  flatten.name = node.name + "/kite_flatten";
  flatten.op = "Flatten";
  flatten.inputs = {node.inputs[0]};
  flatten.outputs = {flat};
  flatten.attrs = {int_attr("axis", normalized)};

  ir::Node op = node;
  op.inputs = {flat};
  op.outputs = {flat_out};
  set_attr(&op.attrs, int_attr("axis", 1));

  ir::Node reshape;
  reshape.name = node.name + "/kite_reshape";
  reshape.op = "Reshape";
  reshape.inputs = {flat_out, shape_index};
  reshape.outputs = node.outputs;
  reshape.attrs = {int_attr("allowzero", 1)};  // a 0 in the shape is a real 0

  replacement->push_back(std::move(flatten));
  replacement->push_back(std::move(op));
  replacement->push_back(std::move(reshape));
  return true;
}

bool legalize_resize10(const ir::Node& node, std::vector<ir::Node>* replacement) {
  if (node.inputs.size() != 2) return true;  // the op rules report it
  ir::Node r = node;
  r.inputs = {node.inputs[0], -1, node.inputs[1]};  // X, no roi, scales
  if (!r.find_attr("coordinate_transformation_mode")) {
    r.attrs.push_back(string_attr("coordinate_transformation_mode", "asymmetric"));
  }
  const ir::Attr* mode = r.find_attr("mode");
  const bool nearest = !mode || (mode->type == KITE_ATTR_STRING && mode->s == "nearest");
  if (nearest && !r.find_attr("nearest_mode")) {
    r.attrs.push_back(string_attr("nearest_mode", "floor"));
  }
  replacement->push_back(std::move(r));
  return true;
}

}  // namespace

bool legalize_legacy_node(ir::Model* model, const ir::Node& node,
                          std::vector<ir::Node>* replacement, std::string* err) {
  replacement->clear();
  if (!node.domain.empty() || model->source_opset <= 0) return true;
  if (model->source_opset < 13 &&
      (node.op == "Softmax" || node.op == "LogSoftmax" || node.op == "Hardmax")) {
    return legalize_softmax(model, node, replacement);
  }
  if (model->source_opset == 10 && node.op == "Resize") {
    return legalize_resize10(node, replacement);
  }
  (void)err;
  return true;
}

}  // namespace kite::converter
