// Changes to a model the passes share: new constants and tensors, rewiring
// readers, removing nodes, restoring topological order.
#include "passes/graph_rewrite.h"

#include <cstring>

#include "passes/graph_query.h"
#include "src/topo_sort.h"

namespace kite::passes {

namespace {

void replace_in_node(ir::Node* n, int from, int to) {
  for (int& t : n->inputs) {
    if (t == from) t = to;
  }
  for (ir::Node& b : n->body) replace_in_node(&b, from, to);
}

ir::Tensor new_tensor(const ir::Model& model, const std::string& base, kite_dtype dtype,
                      const std::vector<int64_t>& shape, ir::TensorKind kind) {
  ir::Tensor t;
  t.name = model.unused_tensor_name(base);
  t.dtype = dtype;
  t.shape = shape;
  t.shape_known = true;
  t.kind = kind;
  return t;
}

int add_constant(ir::Model* model, const std::string& base, kite_dtype dtype,
                 const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  ir::Tensor t = new_tensor(*model, base, dtype, shape, ir::TensorKind::Constant);
  t.data.resize(bytes);
  if (bytes) std::memcpy(t.data.data(), data, bytes);
  return model->add_tensor(std::move(t));
}

}  // namespace

int add_float_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<float>& values) {
  return add_constant(model, base, KITE_DTYPE_FLOAT32, shape, values.data(),
                      values.size() * sizeof(float));
}

int add_int64_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& values) {
  return add_constant(model, base, KITE_DTYPE_INT64, shape, values.data(),
                      values.size() * sizeof(int64_t));
}

int add_activation(ir::Model* model, const std::string& base, kite_dtype dtype,
                   const std::vector<int64_t>& shape) {
  return model->add_tensor(new_tensor(*model, base, dtype, shape, ir::TensorKind::Activation));
}

int add_activation_like(ir::Model* model, const std::string& base, int like) {
  const ir::Tensor& l = tensor_at(*model, like);
  return add_activation(model, base, l.dtype, l.shape);
}

void replace_reads(ir::Model* model, int from, int to) {
  for (ir::Graph& g : model->graphs) {
    for (ir::Node& n : g.nodes) replace_in_node(&n, from, to);
  }
}

void erase_nodes(ir::Model* model, const std::vector<bool>& dead) {
  std::vector<ir::Node>& nodes = model->main().nodes;
  std::vector<ir::Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i >= dead.size() || !dead[i]) kept.push_back(std::move(nodes[i]));
  }
  nodes = std::move(kept);
}

bool stable_topo_sort(ir::Model* model, std::string* err) {
  ir::Graph& main = model->main();
  std::vector<std::vector<int>> reads(main.nodes.size());
  for (size_t i = 0; i < main.nodes.size(); ++i) collect_node_reads(*model, main.nodes[i], &reads[i]);
  return converter::stable_topo_sort(&main, reads, err);
}

bool rewrite_until_stable(PassContext& ctx, PassResult* result, const LocalRewrite& rewrite) {
  ir::Model& m = *ctx.model;
  bool again = true;
  while (again) {
    again = false;
    const UseMap uses(m);
    for (size_t i = 0; i < m.main().nodes.size() && !again; ++i) {
      const bool changed = rewrite(i, uses);
      if (!ctx.error.empty()) return false;
      if (changed) {
        result->changed = true;
        again = true;
      }
    }
  }
  return true;
}

}  // namespace kite::passes
