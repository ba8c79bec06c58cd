// The importer's private parts, shared by the files that implement it:
//   onnx_import.cpp         entry points (file, bytes) and the model-level run
//   import_model_checks.cpp opsets, node names, supported ops, NUL bytes
//   import_graph.cpp        one graph: tensors by scope, nodes, their order
//   import_inputs.cpp       main-graph inputs and declared types
//   import_attrs.cpp        attributes and Constant nodes
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onnx/onnx_pb.h>

#include "kite/converter/ir.h"
#include "onnx/onnx_import.h"

namespace kite::converter::onnx_detail {

inline bool is_default_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

inline std::string normalized_domain(const std::string& domain) {
  return is_default_domain(domain) ? std::string() : domain;
}

// A Constant node of ai.onnx: folded into a constant tensor, not a node.
inline bool is_constant_node(const onnx::NodeProto& node) {
  return node.op_type() == "Constant" && is_default_domain(node.domain());
}

std::string join(const std::vector<std::string>& items, const char* sep);

// The names a graph defines, chained to the enclosing graph's scope so a
// subgraph can use outer values. Lookups that resolve outside the graph are
// recorded: the node owning the subgraph depends on them (topological order).
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_map<std::string, int> names;  // ONNX name -> tensor index
  std::unordered_set<int> own;                 // tensor indices defined here
  mutable std::set<int> outer_refs;

  int find(const std::string& name) const;
};

class Importer {
 public:
  Importer(const ImportOptions& options, std::string model_dir, ir::Model* model)
      : options_(options), model_dir_(std::move(model_dir)), model_(model) {}

  bool run(onnx::ModelProto* proto);
  const std::string& error() const { return err_; }

 private:
  // One graph being imported (import_graph.cpp).
  struct GraphImport {
    Scope scope;
    ir::Graph graph;
    bool is_main = false;
    std::string in_graph;  // " in graph 'name'" for messages ("" for main)
  };

  bool fail(const std::string& message) {
    err_ = message;
    return false;
  }

  // import_model_checks.cpp
  bool read_opsets(const onnx::ModelProto& proto);
  void name_nodes(onnx::GraphProto* graph);
  bool check_supported_ops(const onnx::GraphProto& graph);
  void collect_unsupported(const onnx::GraphProto& graph, std::vector<std::string>* lines);
  bool check_no_nul_bytes();

  // import_graph.cpp
  bool import_graph(const onnx::GraphProto& proto, const Scope* parent, bool is_main,
                    const std::string& fallback_name, int* out_index,
                    std::set<int>* out_outer_refs);
  std::string unique_graph_name(const std::string& name, const std::string& fallback);
  int define_tensor(Scope* scope, const std::string& onnx_name, const std::string& graph_name,
                    ir::Tensor tensor);
  int define_once(GraphImport* g, const std::string& name, const std::string& what,
                  ir::Tensor tensor);
  bool import_initializers(const onnx::GraphProto& proto, GraphImport* g);
  bool import_inputs(const onnx::GraphProto& proto, GraphImport* g);
  bool define_node_outputs(const onnx::GraphProto& proto, GraphImport* g);
  void apply_value_info(const onnx::GraphProto& proto, GraphImport* g);
  bool import_outputs(const onnx::GraphProto& proto, GraphImport* g);
  bool import_nodes(const onnx::GraphProto& proto, GraphImport* g,
                    std::vector<std::vector<int>>* reads);

  // import_inputs.cpp
  bool import_main_input(const onnx::ValueInfoProto& input, ir::Tensor* tensor);
  bool check_input_shape_options();
  void apply_declared_type(const onnx::TypeProto& type, ir::Tensor* tensor);

  // import_attrs.cpp
  bool constant_from_node(const onnx::NodeProto& node, ir::Tensor* tensor);
  bool convert_attrs(const onnx::NodeProto& node, const Scope& scope, ir::Node* out,
                     std::set<int>* sub_outer_refs);
  bool convert_constant_of_shape_value(const onnx::NodeProto& node,
                                       const onnx::AttributeProto& a, ir::Node* out);

  const ImportOptions& options_;
  std::string model_dir_;
  ir::Model* model_;
  std::string err_;
  std::map<std::string, int64_t> opsets_;  // normalized domain -> version
  std::unordered_set<std::string> tensor_names_;
  std::unordered_set<std::string> graph_names_;
  std::set<std::string> main_input_names_;  // non-constant inputs of the main graph
};

}  // namespace kite::converter::onnx_detail
