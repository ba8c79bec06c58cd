// Drops what no graph references any more (tensors of removed nodes, folded
// constants' old inputs, the untaken branch of an inlined If) and renumbers
// the rest, keeping their order.
#include <functional>
#include <vector>

#include "passes/pass.h"

namespace kite::passes {

namespace {

// Keeps the items marked used, in their order, and returns each old index's
// new one (-1 for a dropped item).
template <typename T>
std::vector<int> keep_used(std::vector<T>* items, const std::vector<bool>& used) {
  std::vector<int> new_index(items->size(), -1);
  std::vector<T> kept;
  for (size_t k = 0; k < items->size(); ++k) {
    if (!used[k]) continue;
    new_index[k] = static_cast<int>(kept.size());
    kept.push_back(std::move((*items)[k]));
  }
  *items = std::move(kept);
  return new_index;
}

}  // namespace

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
  const std::vector<int> graph_index = keep_used(&model->graphs, graph_used);

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
  if (model->plan.offsets.size() == model->tensors.size()) keep_used(&model->plan.offsets, used);
  const std::vector<int> new_index = keep_used(&model->tensors, used);
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
