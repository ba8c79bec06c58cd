#include "src/topo_sort.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>

namespace kite::converter {

namespace {

// The nodes of one cycle among the nodes Kahn's algorithm could not order:
// walking producers from an unordered node must repeat a node, and that
// node lies on a cycle (the first unordered node may only sit downstream of
// one). Data-flow order.
std::vector<size_t> find_cycle(const std::vector<std::vector<size_t>>& preds,
                               const std::vector<bool>& ordered) {
  size_t current = 0;
  while (ordered[current]) ++current;
  std::vector<size_t> path;
  std::vector<int> seen_at(preds.size(), -1);
  while (seen_at[current] < 0) {
    seen_at[current] = static_cast<int>(path.size());
    path.push_back(current);
    for (size_t p : preds[current]) {
      if (!ordered[p]) {
        current = p;
        break;
      }
    }
  }
  std::vector<size_t> cycle(path.begin() + seen_at[current], path.end());
  std::reverse(cycle.begin(), cycle.end());
  return cycle;
}

}  // namespace

bool stable_topo_sort(ir::Graph* graph, const std::vector<std::vector<int>>& reads,
                      std::string* err) {
  const size_t n = graph->nodes.size();
  std::unordered_map<int, size_t> producer;
  for (size_t i = 0; i < n; ++i) {
    for (int t : graph->nodes[i].outputs) {
      if (t >= 0) producer[t] = i;
    }
  }
  std::vector<std::vector<size_t>> preds(n);
  std::vector<std::vector<size_t>> succs(n);
  for (size_t i = 0; i < n && i < reads.size(); ++i) {
    std::set<size_t> unique;
    for (int t : reads[i]) {
      auto it = producer.find(t);
      if (it != producer.end()) unique.insert(it->second);
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
    std::vector<bool> ordered(n, false);
    for (size_t i : order) ordered[i] = true;
    const std::vector<size_t> cycle = find_cycle(preds, ordered);
    if (err) {
      std::string path;
      for (size_t i : cycle) path += "'" + graph->nodes[i].name + "' -> ";
      path += "'" + graph->nodes[cycle.front()].name + "'";
      const ir::Node& first = graph->nodes[cycle.front()];
      *err = "graph '" + graph->name + "' contains a cycle through node '" + first.name + "' (" +
             first.op + "): " + path;
    }
    return false;
  }
  std::vector<ir::Node> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move(graph->nodes[i]));
  graph->nodes = std::move(sorted);
  return true;
}

}  // namespace kite::converter
