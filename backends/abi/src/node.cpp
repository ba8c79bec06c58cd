#include "kite/abi/node.h"

namespace kite::abi {

namespace {

kite_backend_tensor2 make_tensor(const TensorDesc& d) {
  kite_backend_tensor2 t{};
  t.struct_size = sizeof(kite_backend_tensor2);
  t.name = d.name ? d.name : "";
  t.dtype = d.dtype;
  t.rank = d.rank;
  t.shape = d.shape;
  t.byte_size = d.byte_size;
  t.is_constant = d.is_constant ? 1 : 0;
  t.host_data = d.is_constant ? d.host_data : nullptr;
  t.data = d.is_constant ? const_cast<void*>(d.host_data) : nullptr;
  t.num_packed = d.is_constant ? d.num_packed : 0;
  t.packed = d.is_constant && d.num_packed > 0 ? d.packed : nullptr;
  return t;
}

void* own_data(const kite_backend_tensor2& t) { return t.data; }

}  // namespace

void TensorTable::assign(const std::vector<TensorDesc>& tensors) {
  v2_.clear();
  for (const TensorDesc& d : tensors) v2_.push_back(make_tensor(d));
}

int TensorTable::add(const TensorDesc& tensor) {
  v2_.push_back(make_tensor(tensor));
  return static_cast<int>(v2_.size() - 1);
}

void AttrTable::assign(const std::vector<kite::ops::Attr>& attrs) {
  attrs_.clear();
  strings_.clear();
  strings_.resize(attrs.size());
  attrs_.reserve(attrs.size());
  for (size_t k = 0; k < attrs.size(); ++k) {
    const kite::ops::Attr& a = attrs[k];
    kite_backend_attr c{};
    c.name = a.name.c_str();
    c.type = a.type;
    c.i = a.i;
    c.f = a.f;
    c.s = a.s.c_str();
    if (a.type == KITE_ATTR_INTS) {
      c.count = static_cast<int32_t>(a.ints.size());
      c.ints = a.ints.data();
    } else if (a.type == KITE_ATTR_FLOATS) {
      c.count = static_cast<int32_t>(a.floats.size());
      c.floats = a.floats.data();
    } else if (a.type == KITE_ATTR_STRINGS) {
      for (const std::string& s : a.strings) strings_[k].push_back(s.c_str());
      c.count = static_cast<int32_t>(a.strings.size());
      c.strings = strings_[k].data();
    }
    attrs_.push_back(c);
  }
}

bool V1Node::build(const kite_backend_node2& node, DataFn data_of, std::string* err) {
  const std::string label = std::string(node.op ? node.op : "?") + " '" + (node.name ? node.name : "") + "'";
  if (node.num_inputs < 0 || node.num_outputs < 0 || node.num_attrs < 0 ||
      (node.num_inputs > 0 && node.inputs == nullptr) ||
      (node.num_outputs > 0 && node.outputs == nullptr) ||
      (node.num_attrs > 0 && node.attrs == nullptr)) {
    if (err) *err = label + ": malformed node (negative count or NULL array)";
    return false;
  }
  source_ = &node;
  data_of_ = data_of ? data_of : own_data;
  const size_t n = static_cast<size_t>(node.num_inputs) + static_cast<size_t>(node.num_outputs);
  tensors_.assign(n, kite_backend_tensor{});
  inputs_.assign(static_cast<size_t>(node.num_inputs), nullptr);
  outputs_.assign(static_cast<size_t>(node.num_outputs), nullptr);
  for (int32_t i = 0; i < node.num_inputs; ++i) {
    if (node.inputs[i] != nullptr) inputs_[static_cast<size_t>(i)] = &tensors_[static_cast<size_t>(i)];
  }
  for (int32_t i = 0; i < node.num_outputs; ++i) {
    if (node.outputs[i] != nullptr) {
      outputs_[static_cast<size_t>(i)] = &tensors_[static_cast<size_t>(node.num_inputs + i)];
    }
  }
  refresh();
  node_ = kite_backend_node{};
  node_.name = node.name ? node.name : "";
  node_.op = node.op ? node.op : "";
  node_.domain = node.domain ? node.domain : "";
  node_.fused_pattern = node.fused_pattern ? node.fused_pattern : "";
  node_.num_inputs = node.num_inputs;
  node_.inputs = inputs_.data();
  node_.num_outputs = node.num_outputs;
  node_.outputs = outputs_.data();
  node_.num_attrs = node.num_attrs;
  node_.attrs = node.attrs;
  return true;
}

const kite_backend_tensor2* V1Node::source_of(const kite_backend_tensor* t) const {
  if (source_ == nullptr || t == nullptr || tensors_.empty()) return nullptr;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (&tensors_[i] != t) continue;
    const size_t inputs = static_cast<size_t>(source_->num_inputs);
    return i < inputs ? source_->inputs[i] : source_->outputs[i - inputs];
  }
  return nullptr;
}

void V1Node::refresh() {
  if (source_ == nullptr) return;
  auto fill = [this](const kite_backend_tensor2* src, kite_backend_tensor* dst) {
    if (src == nullptr) return;
    dst->name = src->name;
    dst->dtype = src->dtype;
    dst->rank = src->rank;
    dst->shape = src->shape;
    dst->byte_size = src->byte_size;
    dst->is_constant = src->is_constant;
    dst->data = data_of_(*src);
  };
  for (int32_t i = 0; i < source_->num_inputs; ++i) {
    fill(source_->inputs[i], &tensors_[static_cast<size_t>(i)]);
  }
  for (int32_t i = 0; i < source_->num_outputs; ++i) {
    fill(source_->outputs[i], &tensors_[static_cast<size_t>(source_->num_inputs + i)]);
  }
}

void Node::build(const Spec& spec, TensorTable* table) {
  inputs_.clear();
  outputs_.clear();
  for (int t : spec.inputs) inputs_.push_back(t < 0 ? nullptr : &table->at(t));
  for (int t : spec.outputs) outputs_.push_back(t < 0 ? nullptr : &table->at(t));
  node_ = kite_backend_node2{};
  node_.struct_size = sizeof(kite_backend_node2);
  node_.index = spec.index;
  node_.name = spec.name ? spec.name : "";
  node_.op = spec.op ? spec.op : "";
  node_.domain = spec.domain ? spec.domain : "";
  node_.fused_pattern = spec.fused_pattern ? spec.fused_pattern : "";
  node_.num_inputs = static_cast<int32_t>(inputs_.size());
  node_.inputs = inputs_.data();
  node_.num_outputs = static_cast<int32_t>(outputs_.size());
  node_.outputs = outputs_.data();
  node_.num_attrs = spec.attrs ? spec.attrs->count() : spec.num_raw_attrs;
  node_.attrs = spec.attrs ? spec.attrs->data() : spec.raw_attrs;
  v1_built_ = false;
}

const kite_backend_node* Node::v1(V1Node::DataFn data_of) {
  if (!v1_built_) {
    v1_.build(node_, data_of, nullptr);
    v1_built_ = true;
  } else {
    v1_.refresh();
  }
  return v1_.get();
}

}  // namespace kite::abi
