// Dead-code elimination: nodes none of whose outputs reach a graph output
// are removed (an If that is kept keeps everything its branches read), then
// tensors nothing references any more (unused initializers, the old inputs
// of folded constants) and graphs no node references are dropped.
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

bool eliminate_dead_code(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  std::vector<ir::Node>& nodes = m.main().nodes;
  std::vector<bool> needed(m.tensors.size(), false);
  for (int t : m.main().outputs) needed[static_cast<size_t>(t)] = true;
  std::vector<bool> live(nodes.size(), false);
  for (size_t k = nodes.size(); k-- > 0;) {
    const ir::Node& n = nodes[k];
    for (int t : n.outputs) {
      if (t >= 0 && needed[static_cast<size_t>(t)]) live[k] = true;
    }
    if (!live[k]) continue;
    std::vector<int> reads;
    collect_node_reads(m, n, &reads);
    for (int t : reads) needed[static_cast<size_t>(t)] = true;
  }
  std::vector<bool> dead(nodes.size(), false);
  int64_t removed = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!live[k]) {
      dead[k] = true;
      ++removed;
    }
  }
  if (removed > 0) {
    erase_nodes(&m, dead);
    result->count("nodes", removed);
    result->changed = true;
  }
  const size_t tensors = m.tensors.size();
  size_t constants = 0;
  for (const ir::Tensor& t : m.tensors) constants += t.is_constant() ? 1 : 0;
  const size_t graphs = m.graphs.size();
  compact_model(&m);
  size_t constants_after = 0;
  for (const ir::Tensor& t : m.tensors) constants_after += t.is_constant() ? 1 : 0;
  if (m.tensors.size() != tensors) {
    result->count("tensors", static_cast<int64_t>(tensors - m.tensors.size()));
    result->count("constants", static_cast<int64_t>(constants - constants_after));
    // Dropping unreferenced tensors changes no node: it does not make
    // another round necessary.
  }
  if (m.graphs.size() != graphs) result->count("graphs", static_cast<int64_t>(graphs - m.graphs.size()));
  return true;
}

}  // namespace kite::passes
