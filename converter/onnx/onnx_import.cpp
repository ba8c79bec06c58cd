#include "onnx/onnx_import.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include "kite/ops/op_node.h"
#include "onnx/onnx_tensor.h"

namespace kite::converter {

namespace {

using onnx_detail::dtype_from_onnx;
using onnx_detail::onnx_dtype_name;
using onnx_detail::tensor_from_onnx;

bool is_default_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

std::string normalized_domain(const std::string& domain) {
  return is_default_domain(domain) ? std::string() : domain;
}

std::string node_label(const onnx::NodeProto& node) {
  return node.op_type() + " '" + node.name() + "'";
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// The names a graph defines, chained to the enclosing graph's scope so a
// subgraph can use outer values. Lookups that resolve outside the graph are
// recorded: the node owning the subgraph depends on them (topological order).
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_map<std::string, int> names;  // ONNX name -> tensor index
  std::unordered_set<int> own;                 // tensor indices defined here
  mutable std::set<int> outer_refs;

  int find(const std::string& name) const {
    auto it = names.find(name);
    if (it != names.end()) return it->second;
    for (const Scope* s = parent; s; s = s->parent) {
      auto pit = s->names.find(name);
      if (pit != s->names.end()) {
        outer_refs.insert(pit->second);
        return pit->second;
      }
    }
    return -1;
  }
};

// "batchx3x224x224" from a declared ONNX shape ('?' for an unnamed unknown dim).
std::string declared_shape_text(const onnx::TensorShapeProto& shape) {
  if (shape.dim_size() == 0) return "scalar";
  std::string out;
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (i) out += "x";
    const auto& d = shape.dim(i);
    if (d.has_dim_value() && d.dim_value() >= 0) {
      out += std::to_string(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      out += d.dim_param();
    } else {
      out += "?";
    }
  }
  return out;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += "x";
    out += dims[i] < 0 ? "?" : std::to_string(dims[i]);
  }
  return out.empty() ? "scalar" : out;
}

// Declared dims, -1 where unknown.
std::vector<int64_t> declared_dims(const onnx::TensorShapeProto& shape) {
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) {
    dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
  }
  return dims;
}

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

class Importer {
 public:
  Importer(const ImportOptions& options, std::string model_dir, ir::Model* model)
      : options_(options), model_dir_(std::move(model_dir)), model_(model) {}

  bool run(onnx::ModelProto* proto);
  const std::string& error() const { return err_; }

 private:
  bool fail(const std::string& message) {
    err_ = message;
    return false;
  }

  bool read_opsets(const onnx::ModelProto& proto);
  void name_nodes(onnx::GraphProto* graph);
  bool check_supported_ops(const onnx::GraphProto& graph);
  void collect_unsupported(const onnx::GraphProto& graph, std::vector<std::string>* lines);

  bool import_graph(const onnx::GraphProto& proto, const Scope* parent, bool is_main,
                    const std::string& fallback_name, int* out_index,
                    std::set<int>* out_outer_refs);
  int define_tensor(Scope* scope, const std::string& onnx_name, const std::string& graph_name,
                    ir::Tensor tensor);
  bool import_main_input(const onnx::ValueInfoProto& input, ir::Tensor* tensor);
  bool check_input_shape_options();
  void apply_declared_type(const onnx::TypeProto& type, ir::Tensor* tensor);
  bool constant_from_node(const onnx::NodeProto& node, ir::Tensor* tensor);
  bool convert_attrs(const onnx::NodeProto& node, const Scope& scope, ir::Node* out,
                     std::set<int>* sub_outer_refs);
  bool sort_nodes(const Scope& scope, const std::vector<std::set<int>>& deps, ir::Graph* graph);

  const ImportOptions& options_;
  std::string model_dir_;
  ir::Model* model_;
  std::string err_;
  std::map<std::string, int64_t> opsets_;  // normalized domain -> version
  std::unordered_set<std::string> tensor_names_;
  std::unordered_set<std::string> graph_names_;
  std::set<std::string> main_input_names_;  // non-constant inputs of the main graph
};

bool Importer::run(onnx::ModelProto* proto) {
  if (!proto->has_graph()) return fail("the ONNX model has no graph");
  if (!read_opsets(*proto)) return false;
  model_->producer = proto->producer_name();
  if (!proto->producer_version().empty()) {
    model_->producer += (model_->producer.empty() ? "" : " ") + proto->producer_version();
  }
  name_nodes(proto->mutable_graph());
  if (!check_supported_ops(proto->graph())) return false;
  int main_index = -1;
  std::set<int> outer;
  if (!import_graph(proto->graph(), nullptr, true, "main", &main_index, &outer)) return false;
  if (main_index != 0) return fail("internal error: main graph is not graph 0");
  // The runtime hands names, ops and attribute strings to applications and
  // backends as C strings and refuses files where they hold a NUL byte
  // (sdk/src/verify.cpp): refuse such a model here, with its name.
  auto nul = [](const std::string& text) { return text.find('\0') != std::string::npos; };
  for (const ir::Tensor& t : model_->tensors) {
    if (nul(t.name)) return fail("a tensor name contains a NUL byte");
  }
  std::function<bool(const ir::Node&)> node_ok = [&](const ir::Node& n) {
    if (nul(n.name) || nul(n.op) || nul(n.domain) || nul(n.fused_pattern)) return false;
    for (const ir::Attr& a : n.attrs) {
      if (nul(a.name) || nul(a.s)) return false;
      for (const std::string& str : a.strings) {
        if (nul(str)) return false;
      }
    }
    for (const ir::Node& b : n.body) {
      if (!node_ok(b)) return false;
    }
    return true;
  };
  for (const ir::Graph& g : model_->graphs) {
    for (const ir::Node& n : g.nodes) {
      if (!node_ok(n)) {
        return fail("node '" + std::string(n.name.c_str()) + "' (" + std::string(n.op.c_str()) +
                    ") has a name, op, domain or attribute string with a NUL byte");
      }
    }
  }
  return true;
}

bool Importer::read_opsets(const onnx::ModelProto& proto) {
  for (const auto& opset : proto.opset_import()) {
    opsets_[normalized_domain(opset.domain())] = opset.version();
  }
  auto it = opsets_.find("");
  model_->source_opset = it == opsets_.end() ? 0 : it->second;
  if (model_->source_opset > 0) return true;
  std::function<bool(const onnx::GraphProto&)> uses_default = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      if (is_default_domain(node.domain())) return true;
      for (const auto& a : node.attribute()) {
        if (a.has_g() && uses_default(a.g())) return true;
      }
    }
    return false;
  };
  if (uses_default(proto.graph())) {
    return fail("the ONNX model declares no ai.onnx opset (opset_import), so its operators "
                "cannot be interpreted");
  }
  return true;
}

// Gives every node a unique, non-empty name, before anything reports nodes by
// name: explicit names are kept unless repeated; the rest get "<op>_<index>".
void Importer::name_nodes(onnx::GraphProto* main_graph) {
  std::unordered_set<std::string> explicit_names;
  std::function<void(const onnx::GraphProto&)> collect = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      if (!node.name().empty()) explicit_names.insert(node.name());
      for (const auto& a : node.attribute()) {
        if (a.has_g()) collect(a.g());
      }
    }
  };
  collect(*main_graph);

  std::unordered_set<std::string> taken;
  std::function<void(onnx::GraphProto*)> assign = [&](onnx::GraphProto* g) {
    for (int i = 0; i < g->node_size(); ++i) {
      onnx::NodeProto* node = g->mutable_node(i);
      const bool named = !node->name().empty();
      if (!named || taken.count(node->name())) {
        // A generated name must not take an explicit name a later node uses.
        auto free_name = [&](const std::string& c) {
          return !taken.count(c) && !explicit_names.count(c);
        };
        const std::string base = named ? node->name() : node->op_type() + "_" + std::to_string(i);
        std::string candidate = base;
        if (named || !free_name(candidate)) {
          for (int k = 1;; ++k) {
            candidate = base + "_" + std::to_string(k);
            if (free_name(candidate)) break;
          }
        }
        node->set_name(candidate);
      }
      taken.insert(node->name());
      for (int a = 0; a < node->attribute_size(); ++a) {
        if (node->attribute(a).has_g()) assign(node->mutable_attribute(a)->mutable_g());
      }
    }
  };
  assign(main_graph);
}

void Importer::collect_unsupported(const onnx::GraphProto& graph,
                                   std::vector<std::string>* lines) {
  for (const auto& node : graph.node()) {
    const std::string domain = normalized_domain(node.domain());
    // Constant is folded here and If is control flow the converter and the
    // runtime handle themselves; everything else needs the op rules.
    const bool known = domain.empty() &&
                       (node.op_type() == "Constant" || node.op_type() == "If" ||
                        kite::ops::is_known_op(node.op_type()));
    if (!known) {
      auto it = opsets_.find(domain);
      const int64_t opset = it == opsets_.end() ? 0 : it->second;
      lines->push_back("node '" + node.name() + "': op '" + node.op_type() + "' (domain '" +
                       (domain.empty() ? "ai.onnx" : domain) + "', opset " +
                       std::to_string(opset) + ") is not supported");
    }
    for (const auto& a : node.attribute()) {
      if (a.has_g()) collect_unsupported(a.g(), lines);
    }
  }
}

bool Importer::check_supported_ops(const onnx::GraphProto& graph) {
  std::vector<std::string> lines;
  collect_unsupported(graph, &lines);
  if (lines.empty()) return true;
  return fail(std::to_string(lines.size()) + " node(s) use operators Kite does not support:\n" +
              join(lines, "\n"));
}

int Importer::define_tensor(Scope* scope, const std::string& onnx_name,
                            const std::string& graph_name, ir::Tensor tensor) {
  // Model::tensors is shared by all graphs, so a subgraph name that repeats
  // a name used elsewhere is made unique; references go through the scope.
  std::string name = onnx_name;
  if (tensor_names_.count(name)) {
    const std::string base = onnx_name + "@" + graph_name;
    name = base;
    for (int k = 1; tensor_names_.count(name); ++k) name = base + "_" + std::to_string(k);
  }
  tensor.name = name;
  tensor_names_.insert(name);
  const int index = model_->add_tensor(std::move(tensor));
  scope->names[onnx_name] = index;
  scope->own.insert(index);
  return index;
}

void Importer::apply_declared_type(const onnx::TypeProto& type, ir::Tensor* tensor) {
  if (!type.has_tensor_type()) return;
  const auto& tt = type.tensor_type();
  const kite_dtype dtype = dtype_from_onnx(tt.elem_type());
  if (dtype != KITE_DTYPE_UNDEFINED) tensor->dtype = dtype;
  if (tt.has_shape()) tensor->shape = declared_dims(tt.shape());
}

bool Importer::import_main_input(const onnx::ValueInfoProto& input, ir::Tensor* tensor) {
  const std::string& name = input.name();
  const std::string label = "graph input '" + name + "'";
  if (!input.type().has_tensor_type()) {
    return fail(label + " is not a tensor (sequence, map or optional inputs are not supported)");
  }
  const auto& tt = input.type().tensor_type();
  tensor->dtype = dtype_from_onnx(tt.elem_type());
  if (tensor->dtype == KITE_DTYPE_UNDEFINED) {
    return fail(label + " has data type " + onnx_dtype_name(tt.elem_type()) +
                ", which Kite does not support (supported: " +
                onnx_detail::supported_dtypes_text() + ")");
  }
  const bool declared = tt.has_shape();
  std::vector<int64_t> dims = declared ? declared_dims(tt.shape()) : std::vector<int64_t>{};
  const std::string declared_text = declared ? declared_shape_text(tt.shape()) : "";

  auto opt = options_.input_shapes.find(name);
  if (opt != options_.input_shapes.end()) {
    const std::vector<int64_t>& given = opt->second;
    for (int64_t d : given) {
      if (d < 0) {
        return fail("--input-shape " + name + "=" + dims_text(given) +
                    ": dims must be non-negative");
      }
    }
    if (declared && given.size() != dims.size()) {
      return fail("--input-shape " + name + "=" + dims_text(given) + " has " +
                  std::to_string(given.size()) + " dims, but the model declares " + label +
                  " with " + std::to_string(dims.size()) + " (" + declared_text + ")");
    }
    if (declared) {
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] >= 0 && dims[i] != given[i]) {
          return fail("--input-shape " + name + "=" + dims_text(given) + " disagrees with " +
                      label + " (" + declared_text + ") at dim " + std::to_string(i));
        }
      }
    }
    dims = given;
  } else if (!declared) {
    return fail(label + " has no shape in the model; pass --input-shape " + name +
                "=AxBxC with its full shape");
  } else {
    bool unknown = false;
    std::vector<int64_t> example = dims;
    for (int64_t& d : example) {
      if (d < 0) {
        unknown = true;
        d = 1;
      }
    }
    if (unknown) {
      return fail(label + " has unknown dims (" + declared_text + "); Kite needs static " +
                  "shapes: pass --input-shape " + name + "=AxBxC with every dim, e.g. " +
                  "--input-shape " + name + "=" + dims_text(example));
    }
  }
  if (dims.size() > KITE_MAX_RANK) {
    return fail(label + " has " + std::to_string(dims.size()) + " dims; Kite supports at most " +
                std::to_string(KITE_MAX_RANK));
  }
  uint64_t bytes = 0;
  if (!kite::ops::checked_byte_size(tensor->dtype, dims, &bytes)) {
    return fail(label + " is too large (" + dims_text(dims) + ")");
  }
  tensor->shape = std::move(dims);
  tensor->shape_known = true;
  tensor->kind = ir::TensorKind::Input;
  return true;
}

bool Importer::check_input_shape_options() {
  for (const auto& entry : options_.input_shapes) {
    if (!main_input_names_.count(entry.first)) {
      std::vector<std::string> names(main_input_names_.begin(), main_input_names_.end());
      return fail("--input-shape names '" + entry.first +
                  "', which is not an input of the model (inputs: " +
                  (names.empty() ? std::string("none") : join(names, ", ")) + ")");
    }
  }
  return true;
}

bool Importer::constant_from_node(const onnx::NodeProto& node, ir::Tensor* tensor) {
  const std::string label = node_label(node);
  if (node.output_size() != 1 || node.output(0).empty()) {
    return fail(label + ": a Constant node must have exactly one output");
  }
  if (node.attribute_size() != 1) {
    return fail(label + ": a Constant node must have exactly one value attribute, it has " +
                std::to_string(node.attribute_size()));
  }
  const onnx::AttributeProto& a = node.attribute(0);
  const std::string& out_name = node.output(0);
  if (a.name() == "value") {
    if (!a.has_t()) return fail(label + ": attribute 'value' holds no tensor");
    return tensor_from_onnx(a.t(), out_name, model_dir_, tensor, &err_);
  }
  if (a.name() == "value_float" || a.name() == "value_floats") {
    std::vector<float> values;
    if (a.name() == "value_float") {
      values.push_back(a.f());
    } else {
      values.assign(a.floats().begin(), a.floats().end());
      tensor->shape = {static_cast<int64_t>(values.size())};
    }
    tensor->dtype = KITE_DTYPE_FLOAT32;
    tensor->data.resize(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(tensor->data.data(), values.data(), tensor->data.size());
    tensor->shape_known = true;
    return true;
  }
  if (a.name() == "value_int" || a.name() == "value_ints") {
    std::vector<int64_t> values;
    if (a.name() == "value_int") {
      values.push_back(a.i());
    } else {
      values.assign(a.ints().begin(), a.ints().end());
      tensor->shape = {static_cast<int64_t>(values.size())};
    }
    tensor->dtype = KITE_DTYPE_INT64;
    tensor->data.resize(values.size() * sizeof(int64_t));
    if (!values.empty()) std::memcpy(tensor->data.data(), values.data(), tensor->data.size());
    tensor->shape_known = true;
    return true;
  }
  return fail(label + ": Constant attribute '" + a.name() +
              "' is not supported (supported: value, value_float, value_floats, value_int, "
              "value_ints)");
}

bool Importer::convert_attrs(const onnx::NodeProto& node, const Scope& scope, ir::Node* out,
                             std::set<int>* sub_outer_refs) {
  const std::string label = node_label(node);
  const bool constant_of_shape =
      node.op_type() == "ConstantOfShape" && is_default_domain(node.domain());
  bool has_value = false;
  for (const auto& a : node.attribute()) {
    ir::Attr attr;
    attr.name = a.name();
    switch (attr_type(a)) {
      case onnx::AttributeProto_AttributeType_INT:
        attr.type = KITE_ATTR_INT;
        attr.i = a.i();
        break;
      case onnx::AttributeProto_AttributeType_FLOAT:
        attr.type = KITE_ATTR_FLOAT;
        attr.f = a.f();
        break;
      case onnx::AttributeProto_AttributeType_STRING:
        attr.type = KITE_ATTR_STRING;
        attr.s = a.s();
        break;
      case onnx::AttributeProto_AttributeType_INTS:
        attr.type = KITE_ATTR_INTS;
        attr.ints.assign(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto_AttributeType_FLOATS:
        attr.type = KITE_ATTR_FLOATS;
        attr.floats.assign(a.floats().begin(), a.floats().end());
        break;
      case onnx::AttributeProto_AttributeType_STRINGS:
        attr.type = KITE_ATTR_STRINGS;
        attr.strings.assign(a.strings().begin(), a.strings().end());
        break;
      case onnx::AttributeProto_AttributeType_TENSOR: {
        if (!constant_of_shape || a.name() != "value") {
          return fail(label + ": attribute '" + a.name() +
                      "' is a tensor, which Kite supports only for Constant and "
                      "ConstantOfShape 'value'");
        }
        ir::Tensor value;
        if (!tensor_from_onnx(a.t(), node.name() + ".value", model_dir_, &value, &err_)) {
          return false;
        }
        if (value.byte_size() != kite::ops::dtype_size(value.dtype) || value.data.empty()) {
          return fail(label + ": attribute 'value' must hold exactly one element, it has shape " +
                      kite::ops::shape_string(value.shape));
        }
        ir::Attr dtype_attr;
        dtype_attr.name = "value_dtype";
        dtype_attr.type = KITE_ATTR_INT;
        dtype_attr.i = value.dtype;
        const uint8_t* p = value.data.data();
        switch (value.dtype) {
          case KITE_DTYPE_FLOAT32: {
            float v;
            std::memcpy(&v, p, sizeof v);
            attr.type = KITE_ATTR_FLOATS;
            attr.floats = {v};
            break;
          }
          case KITE_DTYPE_FLOAT16: {
            uint16_t h;
            std::memcpy(&h, p, sizeof h);
            // IEEE half -> float, exactly.
            const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
            uint32_t exp = (h >> 10) & 0x1fu;
            uint32_t mant = h & 0x3ffu;
            uint32_t bits;
            if (exp == 0x1f) {
              bits = sign | 0x7f800000u | (mant << 13);
            } else if (exp != 0) {
              bits = sign | ((exp + 112u) << 23) | (mant << 13);
            } else if (mant == 0) {
              bits = sign;
            } else {
              exp = 113;
              while (!(mant & 0x400u)) {
                mant <<= 1;
                --exp;
              }
              bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
            }
            float v;
            std::memcpy(&v, &bits, sizeof v);
            attr.type = KITE_ATTR_FLOATS;
            attr.floats = {v};
            break;
          }
          case KITE_DTYPE_INT64: {
            int64_t v;
            std::memcpy(&v, p, sizeof v);
            attr.type = KITE_ATTR_INTS;
            attr.ints = {v};
            break;
          }
          case KITE_DTYPE_INT32: {
            int32_t v;
            std::memcpy(&v, p, sizeof v);
            attr.type = KITE_ATTR_INTS;
            attr.ints = {v};
            break;
          }
          case KITE_DTYPE_INT8:
            attr.type = KITE_ATTR_INTS;
            attr.ints = {static_cast<int8_t>(p[0])};
            break;
          case KITE_DTYPE_UINT8:
          case KITE_DTYPE_BOOL:
            attr.type = KITE_ATTR_INTS;
            attr.ints = {p[0]};
            break;
          default:
            return fail(label + ": attribute 'value' has an unsupported dtype");
        }
        has_value = true;
        out->attrs.push_back(std::move(attr));
        out->attrs.push_back(std::move(dtype_attr));
        continue;
      }
      case onnx::AttributeProto_AttributeType_GRAPH: {
        int index = -1;
        std::set<int> refs;
        if (!import_graph(a.g(), &scope, false, node.name() + "/" + a.name(), &index, &refs)) {
          return false;
        }
        sub_outer_refs->insert(refs.begin(), refs.end());
        attr.type = KITE_ATTR_GRAPH;
        attr.i = index;
        break;
      }
      default:
        return fail(label + ": attribute '" + a.name() + "' has type " +
                    onnx::AttributeProto_AttributeType_Name(attr_type(a)) +
                    ", which Kite does not support");
    }
    out->attrs.push_back(std::move(attr));
  }
  if (constant_of_shape && !has_value) {
    // ONNX default: a float32 zero.
    ir::Attr value;
    value.name = "value";
    value.type = KITE_ATTR_FLOATS;
    value.floats = {0.0f};
    ir::Attr dtype_attr;
    dtype_attr.name = "value_dtype";
    dtype_attr.type = KITE_ATTR_INT;
    dtype_attr.i = KITE_DTYPE_FLOAT32;
    out->attrs.push_back(std::move(value));
    out->attrs.push_back(std::move(dtype_attr));
  }
  return true;
}

bool Importer::import_graph(const onnx::GraphProto& proto, const Scope* parent, bool is_main,
                            const std::string& fallback_name, int* out_index,
                            std::set<int>* out_outer_refs) {
  Scope scope;
  scope.parent = parent;
  ir::Graph graph;
  graph.name = proto.name();
  if (graph.name.empty() || graph_names_.count(graph.name)) {
    graph.name = fallback_name;
    for (int k = 1; graph_names_.count(graph.name); ++k) {
      graph.name = fallback_name + "_" + std::to_string(k);
    }
  }
  graph_names_.insert(graph.name);
  // Reserve the slot now so the main graph is graphs[0] and subgraphs
  // follow in the order they are met.
  const int graph_index = static_cast<int>(model_->graphs.size());
  model_->graphs.emplace_back();
  const std::string in_graph = is_main ? std::string() : " in graph '" + graph.name + "'";

  auto define_once = [&](const std::string& name, const std::string& what,
                         ir::Tensor tensor) -> int {
    if (scope.names.count(name)) {
      fail("tensor '" + name + "'" + in_graph + " is defined twice (again as " + what + ")");
      return -1;
    }
    return define_tensor(&scope, name, graph.name, std::move(tensor));
  };

  // Initializers (Constant nodes follow with the other node outputs).
  if (proto.sparse_initializer_size() > 0) {
    return fail("sparse initializer '" + proto.sparse_initializer(0).values().name() + "'" +
                in_graph + " is not supported");
  }
  for (const auto& init : proto.initializer()) {
    if (init.name().empty()) return fail("an initializer" + in_graph + " has no name");
    ir::Tensor t;
    if (!tensor_from_onnx(init, init.name(), model_dir_, &t, &err_)) return false;
    t.kind = ir::TensorKind::Constant;
    if (define_once(init.name(), "an initializer", std::move(t)) < 0) return false;
  }

  // Inputs; an input that is also an initializer is a constant.
  for (const auto& input : proto.input()) {
    if (input.name().empty()) return fail("a graph input" + in_graph + " has no name");
    auto it = scope.names.find(input.name());
    if (it != scope.names.end() && model_->tensors[static_cast<size_t>(it->second)].is_constant()) {
      continue;
    }
    ir::Tensor t;
    if (is_main) {
      if (!import_main_input(input, &t)) return false;
      main_input_names_.insert(input.name());
    } else {
      // Loop/Scan body inputs: the declaration is all there is.
      apply_declared_type(input.type(), &t);
      t.shape_known = t.dtype != KITE_DTYPE_UNDEFINED && input.type().tensor_type().has_shape() &&
                      std::none_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; });
    }
    const int index = define_once(input.name(), "a graph input", std::move(t));
    if (index < 0) return false;
    graph.inputs.push_back(index);
  }
  if (is_main && !check_input_shape_options()) return false;

  for (const auto& node : proto.node()) {
    if (node.op_type() == "Constant" && is_default_domain(node.domain())) {
      ir::Tensor t;
      if (!constant_from_node(node, &t)) return false;
      t.kind = ir::TensorKind::Constant;
      if (define_once(node.output(0), "the output of node '" + node.name() + "'", std::move(t)) <
          0) {
        return false;
      }
      continue;
    }
    for (const auto& output : node.output()) {
      if (output.empty()) continue;
      if (define_once(output, "the output of node '" + node.name() + "'", ir::Tensor()) < 0) {
        return false;
      }
    }
  }

  for (const auto& info : proto.value_info()) {
    auto it = scope.names.find(info.name());
    if (it == scope.names.end()) continue;  // describes nothing this graph computes
    ir::Tensor& t = model_->tensors[static_cast<size_t>(it->second)];
    if (t.kind == ir::TensorKind::Activation) apply_declared_type(info.type(), &t);
  }

  for (const auto& output : proto.output()) {
    const int index = scope.find(output.name());
    if (index < 0) {
      return fail("graph output '" + output.name() + "'" + in_graph +
                  " is not produced by any node and is not a graph input or initializer");
    }
    ir::Tensor& t = model_->tensors[static_cast<size_t>(index)];
    if (t.kind == ir::TensorKind::Activation && scope.own.count(index)) {
      if (is_main) t.kind = ir::TensorKind::Output;
      apply_declared_type(output.type(), &t);
    }
    graph.outputs.push_back(index);
  }

  // Nodes, with the tensors each depends on (inputs and the outer values
  // its subgraphs use).
  std::vector<std::set<int>> deps;
  for (const auto& node : proto.node()) {
    if (node.op_type() == "Constant" && is_default_domain(node.domain())) continue;
    ir::Node n;
    n.name = node.name();
    n.op = node.op_type();
    n.domain = normalized_domain(node.domain());
    std::set<int> node_deps;
    for (const auto& input : node.input()) {
      if (input.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      const int index = scope.find(input);
      if (index < 0) {
        return fail("node '" + node.name() + "' (" + node.op_type() + ")" + in_graph +
                    ": input '" + input +
                    "' is not produced by any node and is not a graph input or initializer");
      }
      n.inputs.push_back(index);
      node_deps.insert(index);
    }
    for (const auto& output : node.output()) {
      n.outputs.push_back(output.empty() ? -1 : scope.names.at(output));
    }
    std::set<int> sub_refs;
    if (!convert_attrs(node, scope, &n, &sub_refs)) return false;
    for (int ref : sub_refs) {
      if (scope.own.count(ref)) {
        node_deps.insert(ref);
      } else {
        scope.outer_refs.insert(ref);  // defined further out
      }
    }
    graph.nodes.push_back(std::move(n));
    deps.push_back(std::move(node_deps));
  }

  if (!sort_nodes(scope, deps, &graph)) return false;
  *out_index = graph_index;
  *out_outer_refs = scope.outer_refs;
  model_->graphs[static_cast<size_t>(graph_index)] = std::move(graph);
  return true;
}

// Stable topological sort (Kahn's algorithm, smallest file position first).
bool Importer::sort_nodes(const Scope& scope, const std::vector<std::set<int>>& deps,
                          ir::Graph* graph) {
  const size_t n = graph->nodes.size();
  std::unordered_map<int, size_t> producer;
  for (size_t i = 0; i < n; ++i) {
    for (int out : graph->nodes[i].outputs) {
      if (out >= 0) producer[out] = i;
    }
  }
  std::vector<std::vector<size_t>> preds(n);
  std::vector<std::vector<size_t>> succs(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> unique;
    for (int t : deps[i]) {
      auto it = producer.find(t);
      if (it != producer.end() && scope.own.count(t)) unique.insert(it->second);
    }
    preds[i].assign(unique.begin(), unique.end());
    for (size_t p : preds[i]) succs[p].push_back(i);
  }
  std::vector<size_t> pending(n);
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i) {
    pending[i] = preds[i].size();
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t s : succs[i]) {
      if (--pending[s] == 0) ready.push(s);
    }
  }
  if (order.size() != n) {
    // Walk producers among the unsorted nodes until one repeats: that node
    // lies on a cycle (the first unsorted node may only sit downstream of one).
    std::vector<bool> done(n, false);
    for (size_t i : order) done[i] = true;
    size_t current = 0;
    while (done[current]) ++current;
    std::vector<size_t> path;
    std::vector<int> seen_at(n, -1);
    while (seen_at[current] < 0) {
      seen_at[current] = static_cast<int>(path.size());
      path.push_back(current);
      for (size_t p : preds[current]) {
        if (!done[p]) {
          current = p;
          break;
        }
      }
    }
    std::vector<size_t> cycle(path.begin() + seen_at[current], path.end());
    std::reverse(cycle.begin(), cycle.end());  // data-flow order
    std::vector<std::string> names;
    for (size_t i : cycle) names.push_back("'" + graph->nodes[i].name + "'");
    names.push_back(names.front());
    const ir::Node& first = graph->nodes[cycle.front()];
    return fail("graph '" + graph->name + "' contains a cycle through node '" + first.name +
                "' (" + first.op + "): " + join(names, " -> "));
  }
  std::vector<ir::Node> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move(graph->nodes[i]));
  graph->nodes = std::move(sorted);
  return true;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool import_parsed(onnx::ModelProto* proto, const ImportOptions& options,
                   const std::string& model_dir, ir::Model* out, std::string* err) {
  ir::Model model;
  Importer importer(options, model_dir, &model);
  if (!importer.run(proto)) {
    if (err) *err = importer.error();
    return false;
  }
  *out = std::move(model);
  return true;
}

}  // namespace

bool import_onnx_bytes(const void* data, size_t size, const ImportOptions& options,
                       ir::Model* out, std::string* err) {
  if (!out || (!data && size > 0)) {
    if (err) *err = "import_onnx_bytes: null argument";
    return false;
  }
  if (size > static_cast<size_t>(INT_MAX)) {
    if (err) {
      *err = "the ONNX model is " + std::to_string(size) +
             " bytes; protobuf cannot parse more than 2 GiB: save the weights as external "
             "data (onnx.save_model(..., save_as_external_data=True))";
    }
    return false;
  }
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) {
    if (err) *err = "cannot parse the data as an ONNX model (not a valid ModelProto)";
    return false;
  }
  return import_parsed(&proto, options, options.model_dir, out, err);
}

bool import_onnx_file(const std::string& path, const ImportOptions& options, ir::Model* out,
                      std::string* err) {
  auto set_err = [&](const std::string& message) {
    if (err) *err = message;
    return false;
  };
  if (!out) return set_err("import_onnx_file: null argument");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return set_err("cannot open '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return set_err("'" + path + "' is not a regular file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return set_err("cannot open '" + path + "': " + std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) return set_err("cannot read '" + path + "'");
  if (size > INT_MAX) {
    return set_err("'" + path + "' is " + std::to_string(size) +
                   " bytes; protobuf cannot parse more than 2 GiB: save the weights as external "
                   "data (onnx.save_model(..., save_as_external_data=True))");
  }
  onnx::ModelProto proto;
  {
    // Scoped so the file's bytes are freed before the import copies weights.
    std::string bytes(static_cast<size_t>(size), '\0');
    in.seekg(0);
    if (size > 0 && !in.read(&bytes[0], size)) return set_err("cannot read '" + path + "'");
    if (!proto.ParseFromString(bytes)) {
      return set_err("cannot parse '" + path + "' as an ONNX model (not a valid ModelProto)");
    }
  }
  const std::string model_dir = options.model_dir.empty() ? directory_of(path) : options.model_dir;
  if (!import_parsed(&proto, options, model_dir, out, err)) {
    if (err) *err = "'" + path + "': " + *err;
    return false;
  }
  return true;
}

}  // namespace kite::converter
