#include "const_eval.h"

#include <cstddef>
#include <set>

#include "cpu_backend.h"
#include "kite/abi/node.h"
#include "kite/abi/table.h"
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

// The ABI form of one ir::Node (kite/abi/node.h builds it): its tensors in a
// table of their own, constants at their bytes, outputs at `outputs`'
// buffers (or nowhere, when only asking supports2).
class AbiNode {
 public:
  bool build(const ir::Model& model, const ir::Node& node,
             std::vector<std::vector<uint8_t>>* outputs, bool require_constant_inputs,
             std::string* err) {
    const std::string label = node.label();
    kite::abi::Node::Spec spec;
    spec.name = node.name.c_str();
    spec.op = node.op.c_str();
    spec.domain = node.domain.c_str();
    spec.fused_pattern = node.fused_pattern.c_str();
    for (int index : node.inputs) {
      if (index < 0) {
        spec.inputs.push_back(-1);
        continue;
      }
      if (static_cast<size_t>(index) >= model.tensors.size()) {
        return fail(err, label + ": input tensor index " + std::to_string(index) + " is invalid");
      }
      const ir::Tensor& t = model.tensors[static_cast<size_t>(index)];
      if (!t.shape_known) return fail(err, label + ": input '" + t.name + "' has no known shape");
      if (require_constant_inputs && !t.is_constant()) {
        return fail(err, label + ": input '" + t.name + "' is not a constant");
      }
      const void* bytes = nullptr;
      if (t.is_constant()) {
        if (t.data.size() != t.byte_size()) {
          return fail(err, label + ": constant '" + t.name + "' holds " + std::to_string(t.data.size()) +
                               " bytes, expected " + std::to_string(t.byte_size()));
        }
        bytes = t.data.empty() ? g_empty_buffer : t.data.data();
      }
      spec.inputs.push_back(add(t, bytes));
    }
    if (outputs) outputs->assign(node.outputs.size(), {});
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int index = node.outputs[k];
      if (index < 0) {
        // An unused optional output is a NULL entry, as the runtime passes
        // it. The evaluator needs every output, though.
        if (!outputs) {
          spec.outputs.push_back(-1);
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
      const int slot = add(t, nullptr);
      if (outputs) {
        uint64_t bytes = 0;
        if (!kite::ops::checked_byte_size(t.dtype, t.shape, &bytes) || bytes > (*outputs)[k].max_size()) {
          return fail(err, label + ": output '" + t.name + "' is too large");
        }
        (*outputs)[k].resize(static_cast<size_t>(bytes));
        tensors_.at(slot).data = bytes == 0 ? g_empty_buffer : (*outputs)[k].data();
      }
      spec.outputs.push_back(slot);
    }
    for (const ir::Attr& a : node.attrs) {
      if (a.type == KITE_ATTR_GRAPH) {
        return fail(err, label + ": attribute '" + a.name +
                             "' is a subgraph; the CPU evaluator runs single nodes only");
      }
    }
    attrs_.assign(node.attrs);
    spec.attrs = &attrs_;
    node_.build(spec, &tensors_);
    return true;
  }

  const kite_backend_node2* node() const { return node_.v2(); }

 private:
  static bool fail(std::string* err, const std::string& message) {
    if (err) *err = message;
    return false;
  }

  int add(const ir::Tensor& t, const void* constant_bytes) {
    kite::abi::TensorDesc d;
    d.name = t.name.c_str();
    d.dtype = t.dtype;
    d.rank = static_cast<int32_t>(t.shape.size());
    d.shape = t.shape.data();
    d.byte_size = t.byte_size();
    d.is_constant = t.is_constant();
    d.host_data = constant_bytes;  // the backend only reads constants
    return tensors_.add(d);
  }

  kite::abi::TensorTable tensors_;
  kite::abi::AttrTable attrs_;
  kite::abi::Node node_;
};

}  // namespace

CpuEvaluator::~CpuEvaluator() {
  if (backend_ && api_ && api_->destroy) api_->destroy(backend_);
}

bool CpuEvaluator::ensure_backend(std::string* err) {
  if (backend_) return true;
  const kite_backend_api* api = kite_cpu_backend_api();
  const std::string problem = kite::abi::check_table(api);
  if (!problem.empty() || api->abi_version < 2 || !api->workspace_size || !api->bind) {
    if (err) *err = "the CPU backend's ABI table is unusable: " + (problem.empty() ? "not ABI version 2" : problem);
    return false;
  }
  kite_backend_create_info info = {};
  info.struct_size = sizeof info;
  info.threads = 1;  // constant subexpressions are small
  char message[512] = {};
  void* backend = nullptr;
  if (api->create2(nullptr, &info, &backend, message, sizeof message) != KITE_OK || !backend) {
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
  if (api_->supports2(backend_, abi.node(), message, sizeof message)) return true;
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
  const std::string label = node.label();
  char message[512] = {};
  if (!api_->supports2(backend_, abi.node(), message, sizeof message)) {
    if (err) *err = label + ": the CPU backend does not run it: " + message;
    return false;
  }
  void* kernel = nullptr;
  if (api_->prepare2(backend_, abi.node(), &kernel, message, sizeof message) != KITE_OK) {
    if (err) *err = with_label(label, message);
    return false;
  }
  // The scratch its kernels declared, handed over as the runtime does
  // (this evaluator binds again whenever the need grows).
  uint64_t bytes = 0;
  kite_status status = api_->workspace_size(backend_, &bytes, message, sizeof message);
  if (status == KITE_OK && (bytes > workspace_bytes_ || !bound_)) {
    workspace_.assign(static_cast<size_t>((bytes + sizeof(float) - 1) / sizeof(float)), 0.0f);
    workspace_bytes_ = workspace_.size() * sizeof(float);
    kite_backend_bindings bindings = {};
    bindings.struct_size = sizeof bindings;
    bindings.workspace_host = workspace_.empty() ? nullptr : workspace_.data();
    bindings.workspace_size = workspace_bytes_;
    status = api_->bind(backend_, &bindings, message, sizeof message);
    bound_ = status == KITE_OK;
  }
  if (status == KITE_OK) status = api_->execute(backend_, kernel, message, sizeof message);
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
