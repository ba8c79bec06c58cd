#include "kite/converter/ir.h"

#include <unordered_set>
#include <utility>

namespace kite::ir {

uint64_t Tensor::byte_size() const {
  uint64_t bytes = 0;
  // An invalid shape (negative or overflowing dims) has no size; callers
  // validate shapes where they are created, so 0 is only a safe fallback.
  if (!kite::ops::checked_byte_size(dtype, shape, &bytes)) return 0;
  return bytes;
}

const Attr* Node::find_attr(const std::string& attr_name) const {
  return kite::ops::find_attr(attrs, attr_name);
}

bool Node::has_subgraph() const {
  for (const Attr& a : attrs) {
    if (a.type == KITE_ATTR_GRAPH) return true;
  }
  return false;
}

int64_t Node::attr_int(const std::string& attr_name, int64_t fallback) const {
  return kite::ops::attr_int(attrs, attr_name, fallback);
}

float Node::attr_float(const std::string& attr_name, float fallback) const {
  return kite::ops::attr_float(attrs, attr_name, fallback);
}

std::string Node::attr_string(const std::string& attr_name, const std::string& fallback) const {
  return kite::ops::attr_string(attrs, attr_name, fallback);
}

std::vector<int64_t> Node::attr_ints(const std::string& attr_name,
                                     const std::vector<int64_t>& fallback) const {
  return kite::ops::attr_ints(attrs, attr_name, fallback);
}

int Model::add_tensor(Tensor t) {
  tensors.push_back(std::move(t));
  return static_cast<int>(tensors.size()) - 1;
}

int Model::find_tensor(const std::string& name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Model::unused_tensor_name(const std::string& base) const {
  std::unordered_set<std::string> names;
  names.reserve(tensors.size());
  for (const Tensor& t : tensors) names.insert(t.name);
  if (!names.count(base)) return base;
  for (int k = 1;; ++k) {
    const std::string candidate = base + "_" + std::to_string(k);
    if (!names.count(candidate)) return candidate;
  }
}

std::string declared_shape_string(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += "x";
    out += dims[i] < 0 ? "?" : std::to_string(dims[i]);
  }
  return out;
}

kite::ops::OpNode to_op_node(const Model& model, const Node& node) {
  return kite::ops::make_op_node(node, [&model](int index, kite::ops::TensorType* type) {
    if (static_cast<size_t>(index) >= model.tensors.size()) return false;
    const Tensor& t = model.tensors[static_cast<size_t>(index)];
    type->name = t.name;
    type->dtype = t.dtype;
    type->shape = t.shape;
    if (t.is_constant()) type->data = kite::ops::constant_value(t.data.empty() ? nullptr : t.data.data());
    return true;
  });
}

}  // namespace kite::ir
