// The one topological sort of the converter: the importer orders each graph
// it reads with it, and the passes re-sort the main graph after a rewrite.
#pragma once

#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

// Reorders graph->nodes so that every node comes after the nodes writing
// the tensors it reads, keeping the current order wherever the
// dependencies allow (Kahn's algorithm, earliest position first).
// reads[i] lists the tensors node i depends on: its inputs and whatever its
// subgraphs read from outside (tensors no node of the graph writes are
// ignored). On a cycle (a node reading its own output is one) the graph is
// left as it was and false comes back with *err naming the graph and the
// nodes of one cycle in data-flow order.
bool stable_topo_sort(ir::Graph* graph, const std::vector<std::vector<int>>& reads,
                      std::string* err);

}  // namespace kite::converter
