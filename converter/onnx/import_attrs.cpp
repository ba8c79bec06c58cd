// Node attributes and Constant nodes: ONNX AttributeProto -> ir::Attr, the
// value of ConstantOfShape, subgraphs (GRAPH attributes), and the constant
// tensor a Constant node holds.
#include <cstring>
#include <utility>

#include "kite/ops/half.h"
#include "kite/ops/op_node.h"
#include "onnx/onnx_importer.h"
#include "onnx/onnx_tensor.h"

namespace kite::converter::onnx_detail {

namespace {

onnx::AttributeProto_AttributeType attr_type(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto_AttributeType_UNDEFINED) return a.type();
  // Old models may omit the type; infer it from the field that is set.
  if (a.ints_size()) return onnx::AttributeProto_AttributeType_INTS;
  if (a.floats_size()) return onnx::AttributeProto_AttributeType_FLOATS;
  if (a.strings_size()) return onnx::AttributeProto_AttributeType_STRINGS;
  if (a.has_i()) return onnx::AttributeProto_AttributeType_INT;
  if (a.has_f()) return onnx::AttributeProto_AttributeType_FLOAT;
  if (a.has_s()) return onnx::AttributeProto_AttributeType_STRING;
  if (a.has_t()) return onnx::AttributeProto_AttributeType_TENSOR;
  if (a.has_g()) return onnx::AttributeProto_AttributeType_GRAPH;
  return onnx::AttributeProto_AttributeType_UNDEFINED;
}

// An attribute of a plain value type (INT, FLOAT, STRING and their lists);
// false for TENSOR, GRAPH and types Kite does not take.
bool convert_value_attr(const onnx::AttributeProto& a, ir::Attr* attr) {
  attr->name = a.name();
  switch (attr_type(a)) {
    case onnx::AttributeProto_AttributeType_INT:
      attr->type = KITE_ATTR_INT;
      attr->i = a.i();
      return true;
    case onnx::AttributeProto_AttributeType_FLOAT:
      attr->type = KITE_ATTR_FLOAT;
      attr->f = a.f();
      return true;
    case onnx::AttributeProto_AttributeType_STRING:
      attr->type = KITE_ATTR_STRING;
      attr->s = a.s();
      return true;
    case onnx::AttributeProto_AttributeType_INTS:
      attr->type = KITE_ATTR_INTS;
      attr->ints.assign(a.ints().begin(), a.ints().end());
      return true;
    case onnx::AttributeProto_AttributeType_FLOATS:
      attr->type = KITE_ATTR_FLOATS;
      attr->floats.assign(a.floats().begin(), a.floats().end());
      return true;
    case onnx::AttributeProto_AttributeType_STRINGS:
      attr->type = KITE_ATTR_STRINGS;
      attr->strings.assign(a.strings().begin(), a.strings().end());
      return true;
    default:
      return false;
  }
}

// The one element of a ConstantOfShape value as the attribute `value`:
// FLOATS for float dtypes, INTS for integers and bool. False for a dtype
// without such a form.
bool scalar_value_attr(const ir::Tensor& value, ir::Attr* attr) {
  const uint8_t* p = value.data.data();
  attr->name = "value";
  switch (value.dtype) {
    case KITE_DTYPE_FLOAT32: {
      float v;
      std::memcpy(&v, p, sizeof v);
      attr->type = KITE_ATTR_FLOATS;
      attr->floats = {v};
      return true;
    }
    case KITE_DTYPE_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      attr->type = KITE_ATTR_FLOATS;
      attr->floats = {kite::half_to_float(h)};
      return true;
    }
    case KITE_DTYPE_INT64: {
      int64_t v;
      std::memcpy(&v, p, sizeof v);
      attr->type = KITE_ATTR_INTS;
      attr->ints = {v};
      return true;
    }
    case KITE_DTYPE_INT32: {
      int32_t v;
      std::memcpy(&v, p, sizeof v);
      attr->type = KITE_ATTR_INTS;
      attr->ints = {v};
      return true;
    }
    case KITE_DTYPE_INT8:
      attr->type = KITE_ATTR_INTS;
      attr->ints = {static_cast<int8_t>(p[0])};
      return true;
    case KITE_DTYPE_UINT8:
    case KITE_DTYPE_BOOL:
      attr->type = KITE_ATTR_INTS;
      attr->ints = {p[0]};
      return true;
    default:
      return false;
  }
}

// A Constant's value_float(s) / value_int(s): a scalar, or a 1-D list.
template <typename T>
void constant_from_list(kite_dtype dtype, const std::vector<T>& values, bool list,
                        ir::Tensor* tensor) {
  tensor->dtype = dtype;
  if (list) tensor->shape = {static_cast<int64_t>(values.size())};
  tensor->data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(tensor->data.data(), values.data(), tensor->data.size());
  tensor->shape_known = true;
}

}  // namespace

bool Importer::constant_from_node(const onnx::NodeProto& node, ir::Tensor* tensor) {
  const std::string label = kite::ops::node_label(node.op_type(), node.name());
  if (node.output_size() != 1 || node.output(0).empty()) {
    return fail(label + ": a Constant node must have exactly one output");
  }
  if (node.attribute_size() != 1) {
    return fail(label + ": a Constant node must have exactly one value attribute, it has " +
                std::to_string(node.attribute_size()));
  }
  const onnx::AttributeProto& a = node.attribute(0);
  if (a.name() == "value") {
    if (!a.has_t()) return fail(label + ": attribute 'value' holds no tensor");
    return tensor_from_onnx(a.t(), node.output(0), model_dir_, tensor, &err_);
  }
  if (a.name() == "value_float") {
    constant_from_list(KITE_DTYPE_FLOAT32, std::vector<float>{a.f()}, false, tensor);
    return true;
  }
  if (a.name() == "value_floats") {
    constant_from_list(KITE_DTYPE_FLOAT32, std::vector<float>(a.floats().begin(), a.floats().end()),
                       true, tensor);
    return true;
  }
  if (a.name() == "value_int") {
    constant_from_list(KITE_DTYPE_INT64, std::vector<int64_t>{a.i()}, false, tensor);
    return true;
  }
  if (a.name() == "value_ints") {
    constant_from_list(KITE_DTYPE_INT64, std::vector<int64_t>(a.ints().begin(), a.ints().end()),
                       true, tensor);
    return true;
  }
  return fail(label + ": Constant attribute '" + a.name() +
              "' is not supported (supported: value, value_float, value_floats, value_int, "
              "value_ints)");
}

bool Importer::convert_constant_of_shape_value(const onnx::NodeProto& node,
                                               const onnx::AttributeProto& a, ir::Node* out) {
  const std::string label = kite::ops::node_label(node.op_type(), node.name());
  ir::Tensor value;
  if (!tensor_from_onnx(a.t(), node.name() + ".value", model_dir_, &value, &err_)) return false;
  if (value.byte_size() != kite::ops::dtype_size(value.dtype) || value.data.empty()) {
    return fail(label + ": attribute 'value' must hold exactly one element, it has shape " +
                kite::ops::shape_string(value.shape));
  }
  ir::Attr attr;
  if (!scalar_value_attr(value, &attr)) {
    return fail(label + ": attribute 'value' has an unsupported dtype");
  }
  out->attrs.push_back(std::move(attr));
  out->attrs.push_back(kite::ops::int_attr("value_dtype", value.dtype));
  return true;
}

bool Importer::convert_attrs(const onnx::NodeProto& node, const Scope& scope, ir::Node* out,
                             std::set<int>* sub_outer_refs) {
  const std::string label = kite::ops::node_label(node.op_type(), node.name());
  const bool constant_of_shape =
      node.op_type() == "ConstantOfShape" && is_default_domain(node.domain());
  bool has_value = false;
  for (const auto& a : node.attribute()) {
    ir::Attr attr;
    if (convert_value_attr(a, &attr)) {
      out->attrs.push_back(std::move(attr));
      continue;
    }
    switch (attr_type(a)) {
      case onnx::AttributeProto_AttributeType_TENSOR:
        if (!constant_of_shape || a.name() != "value") {
          return fail(label + ": attribute '" + a.name() +
                      "' is a tensor, which Kite supports only for Constant and "
                      "ConstantOfShape 'value'");
        }
        if (!convert_constant_of_shape_value(node, a, out)) return false;
        has_value = true;
        break;
      case onnx::AttributeProto_AttributeType_GRAPH: {
        int index = -1;
        std::set<int> refs;
        if (!import_graph(a.g(), &scope, false, node.name() + "/" + a.name(), &index, &refs)) {
          return false;
        }
        sub_outer_refs->insert(refs.begin(), refs.end());
        attr.type = KITE_ATTR_GRAPH;
        attr.i = index;
        out->attrs.push_back(std::move(attr));
        break;
      }
      default:
        return fail(label + ": attribute '" + a.name() + "' has type " +
                    onnx::AttributeProto_AttributeType_Name(attr_type(a)) +
                    ", which Kite does not support");
    }
  }
  if (constant_of_shape && !has_value) {
    // ONNX default: a float32 zero.
    ir::Attr value;
    value.name = "value";
    value.type = KITE_ATTR_FLOATS;
    value.floats = {0.0f};
    out->attrs.push_back(std::move(value));
    out->attrs.push_back(kite::ops::int_attr("value_dtype", KITE_DTYPE_FLOAT32));
  }
  return true;
}

}  // namespace kite::converter::onnx_detail
