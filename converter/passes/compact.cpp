// Drops what no graph references any more (tensors of removed nodes, folded
// constants' old inputs, the untaken branch of an inlined If) and renumbers
// the rest, keeping their order.
#include <functional>

#include "passes/pass.h"

namespace kite::passes {

void compact_model(ir::Model* model) {
  if (model->graphs.empty()) return;
  // Graphs reachable from the main graph through subgraph attributes.
  std::vector<bool> graph_used(model->graphs.size(), false);
  std::function<void(int)> mark_graph = [&](int g) {
    if (g < 0 || static_cast<size_t>(g) >= model->graphs.size() || graph_used[static_cast<size_t>(g)]) return;
    graph_used[static_cast<size_t>(g)] = true;
    for (const ir::Node& n : model->graphs[static_cast<size_t>(g)].nodes) {
      for (const ir::Attr& a : n.attrs) {
        if (a.type == KITE_ATTR_GRAPH) mark_graph(static_cast<int>(a.i));
      }
    }
  };
  mark_graph(0);
  std::vector<int> graph_index(model->graphs.size(), -1);
  std::vector<ir::Graph> graphs;
  for (size_t g = 0; g < model->graphs.size(); ++g) {
    if (!graph_used[g]) continue;
    graph_index[g] = static_cast<int>(graphs.size());
    graphs.push_back(std::move(model->graphs[g]));
  }
  model->graphs = std::move(graphs);

  std::vector<bool> used(model->tensors.size(), false);
  auto mark = [&](int t) {
    if (t >= 0 && static_cast<size_t>(t) < used.size()) used[static_cast<size_t>(t)] = true;
  };
  std::function<void(const ir::Node&)> mark_node = [&](const ir::Node& n) {
    for (int t : n.inputs) mark(t);
    for (int t : n.outputs) mark(t);
    for (const ir::Node& b : n.body) mark_node(b);
  };
  for (const ir::Graph& g : model->graphs) {
    for (int t : g.inputs) mark(t);
    for (int t : g.outputs) mark(t);
    for (const ir::Node& n : g.nodes) mark_node(n);
  }
  std::vector<int> new_index(model->tensors.size(), -1);
  std::vector<ir::Tensor> tensors;
  for (size_t t = 0; t < model->tensors.size(); ++t) {
    if (!used[t]) continue;
    new_index[t] = static_cast<int>(tensors.size());
    tensors.push_back(std::move(model->tensors[t]));
  }
  const bool had_plan = model->plan.offsets.size() == model->tensors.size();
  if (had_plan) {
    std::vector<uint64_t> offsets;
    for (size_t t = 0; t < used.size(); ++t) {
      if (used[t]) offsets.push_back(model->plan.offsets[t]);
    }
    model->plan.offsets = std::move(offsets);
  }
  model->tensors = std::move(tensors);
  auto remap = [&](int& t) {
    if (t >= 0 && static_cast<size_t>(t) < new_index.size()) t = new_index[static_cast<size_t>(t)];
  };
  std::function<void(ir::Node&)> remap_node = [&](ir::Node& n) {
    for (int& t : n.inputs) remap(t);
    for (int& t : n.outputs) remap(t);
    for (ir::Node& b : n.body) remap_node(b);
    for (ir::Attr& a : n.attrs) {
      if (a.type == KITE_ATTR_GRAPH && a.i >= 0 && static_cast<size_t>(a.i) < graph_index.size()) {
        a.i = graph_index[static_cast<size_t>(a.i)];
      }
    }
  };
  for (ir::Graph& g : model->graphs) {
    for (int& t : g.inputs) remap(t);
    for (int& t : g.outputs) remap(t);
    for (ir::Node& n : g.nodes) remap_node(n);
  }
}

}  // namespace kite::passes
