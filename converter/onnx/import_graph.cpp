// One ONNX graph -> one ir::Graph: its tensors, defined in a scope chained
// to the enclosing graph's (initializers, inputs, node outputs, declared
// types, outputs), then its nodes in topological order.
#include <algorithm>
#include <utility>

#include "onnx/onnx_importer.h"
#include "onnx/onnx_tensor.h"
#include "src/topo_sort.h"

namespace kite::converter::onnx_detail {

bool Importer::import_graph(const onnx::GraphProto& proto, const Scope* parent, bool is_main,
                            const std::string& fallback_name, int* out_index,
                            std::set<int>* out_outer_refs) {
  GraphImport g;
  g.scope.parent = parent;
  g.is_main = is_main;
  g.graph.name = unique_graph_name(proto.name(), fallback_name);
  g.in_graph = is_main ? std::string() : " in graph '" + g.graph.name + "'";
  // Reserve the slot now so the main graph is graphs[0] and subgraphs
  // follow in the order they are met.
  const int graph_index = static_cast<int>(model_->graphs.size());
  model_->graphs.emplace_back();

  // Every name first (Constant nodes with the other node outputs), so nodes
  // may be listed in any order; then the nodes.
  std::vector<std::vector<int>> reads;
  if (!import_initializers(proto, &g) || !import_inputs(proto, &g) ||
      !define_node_outputs(proto, &g)) {
    return false;
  }
  apply_value_info(proto, &g);
  if (!import_outputs(proto, &g) || !import_nodes(proto, &g, &reads)) return false;
  if (!stable_topo_sort(&g.graph, reads, &err_)) return false;
  *out_index = graph_index;
  *out_outer_refs = g.scope.outer_refs;
  model_->graphs[static_cast<size_t>(graph_index)] = std::move(g.graph);
  return true;
}

std::string Importer::unique_graph_name(const std::string& name, const std::string& fallback) {
  std::string unique = name;
  if (unique.empty() || graph_names_.count(unique)) {
    unique = fallback;
    for (int k = 1; graph_names_.count(unique); ++k) unique = fallback + "_" + std::to_string(k);
  }
  graph_names_.insert(unique);
  return unique;
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

int Importer::define_once(GraphImport* g, const std::string& name, const std::string& what,
                          ir::Tensor tensor) {
  if (g->scope.names.count(name)) {
    fail("tensor '" + name + "'" + g->in_graph + " is defined twice (again as " + what + ")");
    return -1;
  }
  return define_tensor(&g->scope, name, g->graph.name, std::move(tensor));
}

bool Importer::import_initializers(const onnx::GraphProto& proto, GraphImport* g) {
  if (proto.sparse_initializer_size() > 0) {
    return fail("sparse initializer '" + proto.sparse_initializer(0).values().name() + "'" +
                g->in_graph + " is not supported");
  }
  for (const auto& init : proto.initializer()) {
    if (init.name().empty()) return fail("an initializer" + g->in_graph + " has no name");
    ir::Tensor t;
    if (!tensor_from_onnx(init, init.name(), model_dir_, &t, &err_)) return false;
    t.kind = ir::TensorKind::Constant;
    if (define_once(g, init.name(), "an initializer", std::move(t)) < 0) return false;
  }
  return true;
}

// Graph inputs; an input that is also an initializer is a constant.
bool Importer::import_inputs(const onnx::GraphProto& proto, GraphImport* g) {
  for (const auto& input : proto.input()) {
    if (input.name().empty()) return fail("a graph input" + g->in_graph + " has no name");
    auto it = g->scope.names.find(input.name());
    if (it != g->scope.names.end() &&
        model_->tensors[static_cast<size_t>(it->second)].is_constant()) {
      continue;
    }
    ir::Tensor t;
    if (g->is_main) {
      if (!import_main_input(input, &t)) return false;
      main_input_names_.insert(input.name());
    } else {
      // Loop/Scan body inputs: the declaration is all there is.
      apply_declared_type(input.type(), &t);
      t.shape_known = t.dtype != KITE_DTYPE_UNDEFINED && input.type().tensor_type().has_shape() &&
                      std::none_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; });
    }
    const int index = define_once(g, input.name(), "a graph input", std::move(t));
    if (index < 0) return false;
    g->graph.inputs.push_back(index);
  }
  return !g->is_main || check_input_shape_options();
}

bool Importer::define_node_outputs(const onnx::GraphProto& proto, GraphImport* g) {
  for (const auto& node : proto.node()) {
    const std::string what = "the output of node '" + node.name() + "'";
    if (is_constant_node(node)) {
      ir::Tensor t;
      if (!constant_from_node(node, &t)) return false;
      t.kind = ir::TensorKind::Constant;
      if (define_once(g, node.output(0), what, std::move(t)) < 0) return false;
      continue;
    }
    for (const auto& output : node.output()) {
      if (output.empty()) continue;
      if (define_once(g, output, what, ir::Tensor()) < 0) return false;
    }
  }
  return true;
}

void Importer::apply_value_info(const onnx::GraphProto& proto, GraphImport* g) {
  for (const auto& info : proto.value_info()) {
    auto it = g->scope.names.find(info.name());
    if (it == g->scope.names.end()) continue;  // describes nothing this graph computes
    ir::Tensor& t = model_->tensors[static_cast<size_t>(it->second)];
    if (t.kind == ir::TensorKind::Activation) apply_declared_type(info.type(), &t);
  }
}

bool Importer::import_outputs(const onnx::GraphProto& proto, GraphImport* g) {
  for (const auto& output : proto.output()) {
    const int index = g->scope.find(output.name());
    if (index < 0) {
      return fail("graph output '" + output.name() + "'" + g->in_graph +
                  " is not produced by any node and is not a graph input or initializer");
    }
    ir::Tensor& t = model_->tensors[static_cast<size_t>(index)];
    if (t.kind == ir::TensorKind::Activation && g->scope.own.count(index)) {
      if (g->is_main) t.kind = ir::TensorKind::Output;
      apply_declared_type(output.type(), &t);
    }
    g->graph.outputs.push_back(index);
  }
  return true;
}

// The nodes, in file order, with the tensors each reads: its inputs and the
// outer values its subgraphs use.
bool Importer::import_nodes(const onnx::GraphProto& proto, GraphImport* g,
                            std::vector<std::vector<int>>* reads) {
  for (const auto& node : proto.node()) {
    if (is_constant_node(node)) continue;
    ir::Node n;
    n.name = node.name();
    n.op = node.op_type();
    n.domain = normalized_domain(node.domain());
    std::vector<int> node_reads;
    for (const auto& input : node.input()) {
      if (input.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      const int index = g->scope.find(input);
      if (index < 0) {
        return fail("node '" + node.name() + "' (" + node.op_type() + ")" + g->in_graph +
                    ": input '" + input +
                    "' is not produced by any node and is not a graph input or initializer");
      }
      n.inputs.push_back(index);
      node_reads.push_back(index);
    }
    for (const auto& output : node.output()) {
      n.outputs.push_back(output.empty() ? -1 : g->scope.names.at(output));
    }
    std::set<int> sub_refs;
    if (!convert_attrs(node, g->scope, &n, &sub_refs)) return false;
    for (int ref : sub_refs) {
      if (g->scope.own.count(ref)) {
        node_reads.push_back(ref);
      } else {
        g->scope.outer_refs.insert(ref);  // defined further out
      }
    }
    g->graph.nodes.push_back(std::move(n));
    reads->push_back(std::move(node_reads));
  }
  return true;
}

}  // namespace kite::converter::onnx_detail
