#include "const_eval.h"

#include <cstddef>
#include <set>

#include "cpu_backend.h"
#include "kite/ops/op_node.h"

namespace kite::converter {

namespace {

// Zero-byte tensors still need a non-null address.
uint8_t g_empty_buffer[16];

// The backend's messages usually name the node already.
std::string with_label(const std::string& label, const char* message) {
  const std::string text = message;
  return text.compare(0, label.size(), label) == 0 ? text : label + ": " + text;
}

// An ABI view of one ir::Node. Everything the kite_backend_node points to is
// owned here (or by the model/node, which outlive it).
class AbiNode {
 public:
  // outputs: buffers for the outputs (sized here), or null when only asking
  // supports(). require_constant_inputs: fail on a non-constant input.
  bool build(const ir::Model& model, const ir::Node& node,
             std::vector<std::vector<uint8_t>>* outputs, bool require_constant_inputs,
             std::string* err) {
    const std::string label = node.op + " '" + node.name + "'";
    tensors_.reserve(node.inputs.size() + node.outputs.size());
    shapes_.reserve(node.inputs.size() + node.outputs.size());

    for (int index : node.inputs) {
      if (index < 0) {
        inputs_.push_back(nullptr);
        continue;
      }
      if (static_cast<size_t>(index) >= model.tensors.size()) {
        return fail(err, label + ": input tensor index " + std::to_string(index) + " is invalid");
      }
      const ir::Tensor& t = model.tensors[static_cast<size_t>(index)];
      if (!t.shape_known) {
        return fail(err, label + ": input '" + t.name + "' has no known shape");
      }
      if (require_constant_inputs && !t.is_constant()) {
        return fail(err, label + ": input '" + t.name + "' is not a constant");
      }
      void* data = nullptr;
      if (t.is_constant()) {
        if (t.data.size() != t.byte_size()) {
          return fail(err, label + ": constant '" + t.name + "' holds " +
                               std::to_string(t.data.size()) + " bytes, expected " +
                               std::to_string(t.byte_size()));
        }
        // The backend only reads constants (is_constant = 1).
        data = t.data.empty() ? g_empty_buffer : const_cast<uint8_t*>(t.data.data());
      }
      inputs_.push_back(add_tensor(t, data, t.is_constant()));
    }

    if (outputs) outputs->assign(node.outputs.size(), {});
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int index = node.outputs[k];
      if (index < 0) {
        // An unused optional output is a NULL entry, as the runtime passes
        // it. The evaluator needs every output, though.
        if (!outputs) {
          outputs_.push_back(nullptr);
          continue;
        }
        return fail(err, label + ": output " + std::to_string(k) +
                             " is unused; the CPU evaluator needs every output");
      }
      if (static_cast<size_t>(index) >= model.tensors.size()) {
        return fail(err, label + ": output tensor index " + std::to_string(index) + " is invalid");
      }
      const ir::Tensor& t = model.tensors[static_cast<size_t>(index)];
      if (!t.shape_known || t.dtype == KITE_DTYPE_UNDEFINED) {
        return fail(err, label + ": output '" + t.name + "' has no inferred dtype and shape");
      }
      void* data = nullptr;
      if (outputs) {
        uint64_t bytes = 0;
        if (!kite::ops::checked_byte_size(t.dtype, t.shape, &bytes) ||
            bytes > (*outputs)[k].max_size()) {
          return fail(err, label + ": output '" + t.name + "' is too large");
        }
        (*outputs)[k].resize(static_cast<size_t>(bytes));
        data = bytes == 0 ? g_empty_buffer : (*outputs)[k].data();
      }
      outputs_.push_back(add_tensor(t, data, false));
    }

    attrs_.reserve(node.attrs.size());
    attr_strings_.reserve(node.attrs.size());
    for (const ir::Attr& a : node.attrs) {
      if (a.type == KITE_ATTR_GRAPH) {
        return fail(err, label + ": attribute '" + a.name +
                             "' is a subgraph; the CPU evaluator runs single nodes only");
      }
      kite_backend_attr out = {};
      out.name = a.name.c_str();
      out.type = a.type;
      out.i = a.i;
      out.f = a.f;
      out.s = a.s.c_str();
      attr_strings_.emplace_back();
      switch (a.type) {
        case KITE_ATTR_INTS:
          out.count = static_cast<int32_t>(a.ints.size());
          out.ints = a.ints.data();
          break;
        case KITE_ATTR_FLOATS:
          out.count = static_cast<int32_t>(a.floats.size());
          out.floats = a.floats.data();
          break;
        case KITE_ATTR_STRINGS:
          for (const std::string& s : a.strings) attr_strings_.back().push_back(s.c_str());
          out.count = static_cast<int32_t>(a.strings.size());
          out.strings = attr_strings_.back().data();
          break;
        default:
          break;
      }
      attrs_.push_back(out);
    }

    node_ = {};
    node_.name = node.name.c_str();
    node_.op = node.op.c_str();
    node_.domain = node.domain.c_str();
    node_.fused_pattern = node.fused_pattern.c_str();
    node_.num_inputs = static_cast<int32_t>(inputs_.size());
    node_.inputs = inputs_.data();
    node_.num_outputs = static_cast<int32_t>(outputs_.size());
    node_.outputs = outputs_.data();
    node_.num_attrs = static_cast<int32_t>(attrs_.size());
    node_.attrs = attrs_.data();
    return true;
  }

  const kite_backend_node* node() const { return &node_; }

 private:
  static bool fail(std::string* err, const std::string& message) {
    if (err) *err = message;
    return false;
  }

  const kite_backend_tensor* add_tensor(const ir::Tensor& t, void* data, bool is_constant) {
    shapes_.push_back(t.shape);
    kite_backend_tensor bt = {};
    bt.name = t.name.c_str();
    bt.dtype = t.dtype;
    bt.rank = static_cast<int32_t>(t.shape.size());
    bt.shape = shapes_.back().data();
    bt.byte_size = t.byte_size();
    bt.data = data;
    bt.is_constant = is_constant ? 1 : 0;
    tensors_.push_back(bt);  // capacity reserved: pointers stay valid
    return &tensors_.back();
  }

  std::vector<std::vector<int64_t>> shapes_;
  std::vector<kite_backend_tensor> tensors_;
  std::vector<const kite_backend_tensor*> inputs_;
  std::vector<const kite_backend_tensor*> outputs_;
  std::vector<kite_backend_attr> attrs_;
  std::vector<std::vector<const char*>> attr_strings_;
  kite_backend_node node_ = {};
};

}  // namespace

CpuEvaluator::~CpuEvaluator() {
  if (backend_ && api_ && api_->destroy) api_->destroy(backend_);
}

bool CpuEvaluator::ensure_backend(std::string* err) {
  if (backend_) return true;
  const kite_backend_api* api = kite_cpu_backend_api();
  if (!api || api->abi_version != KITE_BACKEND_ABI_VERSION ||
      api->struct_size < offsetof(kite_backend_api, release) + sizeof(api->release) ||
      !api->create || !api->destroy || !api->supports || !api->prepare || !api->execute ||
      !api->release) {
    if (err) *err = "the CPU backend's ABI table is missing or of another version";
    return false;
  }
  kite_backend_options options = {};
  options.threads = 1;  // constant subexpressions are small
  char message[512] = {};
  void* backend = nullptr;
  if (api->create(&options, &backend, message, sizeof message) != KITE_OK || !backend) {
    if (err) *err = std::string("cannot create the CPU backend: ") + message;
    return false;
  }
  api_ = api;
  backend_ = backend;
  return true;
}

bool CpuEvaluator::supports(const ir::Model& model, const ir::Node& node, std::string* reason) {
  if (!ensure_backend(reason)) return false;
  AbiNode abi;
  if (!abi.build(model, node, nullptr, false, reason)) return false;
  char message[512] = {};
  if (api_->supports(backend_, abi.node(), message, sizeof message)) return true;
  if (reason) *reason = message;
  return false;
}

bool CpuEvaluator::evaluate(const ir::Model& model, const ir::Node& node,
                            std::vector<std::vector<uint8_t>>* outputs_data, std::string* err) {
  if (!outputs_data) {
    if (err) *err = "evaluate: outputs_data is null";
    return false;
  }
  if (!ensure_backend(err)) return false;
  std::vector<std::vector<uint8_t>> outputs;
  AbiNode abi;
  if (!abi.build(model, node, &outputs, true, err)) return false;
  const std::string label = node.op + " '" + node.name + "'";
  char message[512] = {};
  if (!api_->supports(backend_, abi.node(), message, sizeof message)) {
    if (err) *err = label + ": the CPU backend does not run it: " + message;
    return false;
  }
  void* kernel = nullptr;
  if (api_->prepare(backend_, abi.node(), &kernel, message, sizeof message) != KITE_OK) {
    if (err) *err = with_label(label, message);
    return false;
  }
  const kite_status status = api_->execute(backend_, kernel, message, sizeof message);
  api_->release(backend_, kernel);
  if (status != KITE_OK) {
    if (err) *err = with_label(label, message);
    return false;
  }
  *outputs_data = std::move(outputs);
  return true;
}

namespace {

// Collects the refusals of the nodes of one graph, recursing into the
// branches of If nodes (only the taken one when the condition is constant).
void collect_refusals(const ir::Model& model, int graph_index, CpuEvaluator* evaluator,
                      std::set<int>* visited, std::vector<std::string>* lines) {
  if (graph_index < 0 || static_cast<size_t>(graph_index) >= model.graphs.size() ||
      !visited->insert(graph_index).second) {
    return;
  }
  const ir::Graph& graph = model.graphs[static_cast<size_t>(graph_index)];
  for (const ir::Node& node : graph.nodes) {
    if (node.op == "If" && node.domain.empty()) {
      // Control flow runs in the session; its branches hold the kernels.
      const ir::Attr* then_attr = node.find_attr("then_branch");
      const ir::Attr* else_attr = node.find_attr("else_branch");
      int taken = -1;
      if (!node.inputs.empty() && node.inputs[0] >= 0) {
        const ir::Tensor& cond = model.tensors[static_cast<size_t>(node.inputs[0])];
        if (cond.is_constant() && cond.data.size() == 1) taken = cond.data[0] != 0 ? 1 : 0;
      }
      if (then_attr && then_attr->type == KITE_ATTR_GRAPH && taken != 0) {
        collect_refusals(model, static_cast<int>(then_attr->i), evaluator, visited, lines);
      }
      if (else_attr && else_attr->type == KITE_ATTR_GRAPH && taken != 1) {
        collect_refusals(model, static_cast<int>(else_attr->i), evaluator, visited, lines);
      }
      continue;
    }
    std::string reason;
    if (!evaluator->supports(model, node, &reason)) {
      const std::string where =
          graph_index == 0 ? std::string() : " in graph '" + graph.name + "'";
      lines->push_back("node '" + node.name + "' (" + node.op + ")" + where + ": " +
                       (reason.empty() ? std::string("not supported") : reason));
    }
  }
}

}  // namespace

bool check_cpu_support(const ir::Model& model, std::string* err) {
  if (model.graphs.empty()) return true;
  CpuEvaluator evaluator;
  std::set<int> visited;
  std::vector<std::string> lines;
  collect_refusals(model, 0, &evaluator, &visited, &lines);
  if (lines.empty()) return true;
  if (err) {
    std::string text = std::to_string(lines.size()) +
                       " node(s) cannot run: the CPU backend (the one every device falls back "
                       "to) refuses them:";
    for (const std::string& line : lines) text += "\n  " + line;
    *err = text;
  }
  return false;
}

bool evaluate_node_on_cpu(const ir::Model& model, const ir::Node& node,
                          std::vector<std::vector<uint8_t>>* outputs_data, std::string* err) {
  CpuEvaluator evaluator;
  return evaluator.evaluate(model, node, outputs_data, err);
}

}  // namespace kite::converter
