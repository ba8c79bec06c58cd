// OpNode accessors and conversion from the backend ABI's node.
#include <cstring>
#include <type_traits>

#include "kite/ops/op_node.h"

namespace kite::ops {

int64_t TensorType::numel() const {
  int64_t n = 0;
  return checked_numel(shape, &n) ? n : -1;
}

const Attr* OpNode::find_attr(const std::string& attr_name) const {
  return ops::find_attr(attrs, attr_name);
}

int64_t OpNode::attr_int(const std::string& attr_name, int64_t fallback) const {
  return ops::attr_int(attrs, attr_name, fallback);
}

float OpNode::attr_float(const std::string& attr_name, float fallback) const {
  return ops::attr_float(attrs, attr_name, fallback);
}

std::string OpNode::attr_string(const std::string& attr_name,
                                const std::string& fallback) const {
  return ops::attr_string(attrs, attr_name, fallback);
}

std::vector<int64_t> OpNode::attr_ints(const std::string& attr_name,
                                       const std::vector<int64_t>& fallback) const {
  return ops::attr_ints(attrs, attr_name, fallback);
}

std::string node_label(const std::string& op, const std::string& name) {
  return op + " '" + name + "'";
}

bool is_nondeterministic_op(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Multinomial" || op == "Bernoulli";
}

namespace {

const char* or_empty(const char* s) { return s ? s : ""; }

// Reads a C enum field without loading an out-of-range value as the C++ enum
// type (undefined behaviour); a hostile file can put any integer there.
template <typename Enum>
int64_t raw_enum(const Enum* field) {
  std::underlying_type_t<Enum> raw;
  std::memcpy(&raw, field, sizeof raw);
  return static_cast<int64_t>(raw);
}

bool known_dtype(int64_t raw) { return raw >= KITE_DTYPE_FLOAT32 && raw <= KITE_DTYPE_UINT8; }
bool known_attr_type(int64_t raw) { return raw >= KITE_ATTR_INT && raw <= KITE_ATTR_GRAPH; }

// Converts one ABI tensor. Returns "" or what is wrong with it.
std::string convert_tensor(const kite_backend_tensor& t, bool keep_data, TensorType* out) {
  out->present = true;
  out->name = or_empty(t.name);
  out->data = nullptr;
  const int64_t raw_dtype = raw_enum(&t.dtype);
  out->dtype = known_dtype(raw_dtype) ? static_cast<kite_dtype>(raw_dtype) : KITE_DTYPE_UNDEFINED;
  if (out->dtype == KITE_DTYPE_UNDEFINED) {
    out->shape.clear();
    return "has invalid dtype " + std::to_string(raw_dtype);
  }
  if (t.rank < 0 || t.rank > KITE_MAX_RANK) {
    out->shape = {-1};
    return "has rank " + std::to_string(t.rank) + ", expected 0.." +
           std::to_string(KITE_MAX_RANK);
  }
  if (t.rank > 0 && !t.shape) {
    out->shape = {-1};
    return "has rank " + std::to_string(t.rank) + " but no shape array";
  }
  out->shape.assign(t.shape, t.shape + t.rank);
  if (keep_data && t.is_constant && t.data) {
    uint64_t bytes = 0;
    if (!checked_byte_size(out->dtype, out->shape, &bytes) || bytes != t.byte_size) {
      // A value whose size disagrees with its shape cannot be read safely.
      std::string why = "is a constant of " + std::to_string(t.byte_size) +
                        " bytes, which disagrees with dtype " + dtype_name(out->dtype) +
                        " and shape " + shape_string(out->shape);
      out->shape = {-1};
      return why;
    }
    out->data = t.data;
  }
  return "";
}

std::string convert_attr(const kite_backend_attr& a, Attr* out) {
  out->name = or_empty(a.name);
  const int64_t raw_type = raw_enum(&a.type);
  if (!known_attr_type(raw_type)) {
    out->type = KITE_ATTR_UNDEFINED;
    return "has invalid type " + std::to_string(raw_type);
  }
  out->type = a.type;
  out->i = a.i;
  out->f = a.f;
  switch (a.type) {
    case KITE_ATTR_STRING:
      out->s = or_empty(a.s);
      break;
    case KITE_ATTR_INTS:
    case KITE_ATTR_FLOATS:
    case KITE_ATTR_STRINGS: {
      const void* array = a.type == KITE_ATTR_INTS     ? static_cast<const void*>(a.ints)
                          : a.type == KITE_ATTR_FLOATS ? static_cast<const void*>(a.floats)
                                                       : static_cast<const void*>(a.strings);
      if (a.count < 0 || (a.count > 0 && !array)) {
        out->type = KITE_ATTR_UNDEFINED;
        return "has count " + std::to_string(a.count) + " with " +
               (array ? "an array" : "no array");
      }
      if (a.type == KITE_ATTR_INTS) out->ints.assign(a.ints, a.ints + a.count);
      if (a.type == KITE_ATTR_FLOATS) out->floats.assign(a.floats, a.floats + a.count);
      if (a.type == KITE_ATTR_STRINGS) {
        for (int32_t k = 0; k < a.count; ++k) out->strings.emplace_back(or_empty(a.strings[k]));
      }
      break;
    }
    default:
      break;
  }
  return "";
}

}  // namespace

bool from_backend_node(const kite_backend_node& node, OpNode* out, std::string* err,
                       bool keep_constant_data) {
  OpNode n;
  n.name = or_empty(node.name);
  n.op = or_empty(node.op);
  n.domain = or_empty(node.domain);
  std::string first_error;
  auto note = [&](const std::string& what) {
    if (first_error.empty() && !what.empty()) first_error = n.label() + ": " + what;
  };
  // A negative count, or a positive one with no array, is malformed.
  auto bad_array = [&](int32_t count, const void* array, const char* noun) {
    if (count >= 0 && (count == 0 || array)) return false;
    note("has " + std::to_string(count) + " " + noun + "s and " + (array ? "an" : "no") + " " + noun +
         " array");
    return true;
  };

  if (!bad_array(node.num_inputs, node.inputs, "input")) {
    n.inputs.resize(static_cast<size_t>(node.num_inputs));
    for (int32_t k = 0; k < node.num_inputs; ++k) {
      const kite_backend_tensor* t = node.inputs[k];
      if (!t) {
        n.inputs[k].present = false;
        continue;
      }
      std::string why = convert_tensor(*t, keep_constant_data, &n.inputs[k]);
      if (!why.empty()) note("input '" + n.inputs[k].name + "' " + why);
    }
  }

  n.num_outputs = node.num_outputs;
  if (bad_array(node.num_outputs, node.outputs, "output")) {
    n.num_outputs = 0;
  } else {
    for (int32_t k = 0; k < node.num_outputs; ++k) n.outputs_used.push_back(node.outputs[k] != nullptr);
  }

  if (!bad_array(node.num_attrs, node.attrs, "attribute")) {
    n.attrs.resize(static_cast<size_t>(node.num_attrs));
    for (int32_t k = 0; k < node.num_attrs; ++k) {
      std::string why = convert_attr(node.attrs[k], &n.attrs[k]);
      if (!why.empty()) note("attribute '" + n.attrs[k].name + "' " + why);
    }
  }

  *out = std::move(n);
  if (!first_error.empty()) {
    if (err) *err = first_error;
    return false;
  }
  return true;
}

OpNode from_backend_node(const kite_backend_node& node) {
  OpNode n;
  std::string ignored;
  from_backend_node(node, &n, &ignored, true);
  return n;
}

std::vector<TensorType> outputs_from_backend_node(const kite_backend_node& node) {
  std::vector<TensorType> outs;
  if (node.num_outputs <= 0 || !node.outputs) return outs;
  outs.resize(static_cast<size_t>(node.num_outputs));
  for (int32_t k = 0; k < node.num_outputs; ++k) {
    const kite_backend_tensor* t = node.outputs[k];
    if (!t) {
      outs[k].present = false;
      continue;
    }
    convert_tensor(*t, false, &outs[k]);
  }
  return outs;
}

}  // namespace kite::ops
