// An If whose condition is a constant is replaced by the nodes of the branch
// it takes; the other branch is dropped (compact_model removes its graph).
// An If whose condition is known only at run time is kept with both
// branches: the runtime executes the one the condition picks.
#include "passes/graph_query.h"
#include "passes/pass.h"

namespace kite::passes {

bool inline_constant_if(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  size_t i = 0;
  for (; i < m.main().nodes.size(); ++i) {
    const ir::Node& node = m.main().nodes[i];
    if (!is_op(node, "If") || node.inputs.size() != 1 || !is_constant(m, node.inputs[0])) continue;
    const ir::Tensor& cond = tensor_at(m, node.inputs[0]);
    if (cond.dtype != KITE_DTYPE_BOOL || cond.data.size() != 1) continue;
    const ir::Attr* branch_attr = node.find_attr(cond.data[0] ? "then_branch" : "else_branch");
    if (!branch_attr || branch_attr->type != KITE_ATTR_GRAPH || branch_attr->i <= 0 ||
        static_cast<size_t>(branch_attr->i) >= m.graphs.size()) {
      continue;
    }
    ir::Graph& branch = m.graphs[static_cast<size_t>(branch_attr->i)];
    if (branch.outputs.size() != node.outputs.size()) continue;
    const ir::Node if_node = node;  // the branch's nodes replace it below

    // The branch's nodes take the If's place; each branch output becomes the
    // matching If output: its producer in the branch writes it directly, and
    // anything else (a constant, an outer tensor, an output listed twice)
    // is copied by an Identity, which eliminate_identity may drop later.
    std::vector<ir::Node> inlined = std::move(branch.nodes);
    branch.nodes.clear();
    std::vector<ir::Node> copies;
    std::vector<bool> renamed(m.tensors.size(), false);
    for (size_t k = 0; k < if_node.outputs.size(); ++k) {
      const int from = branch.outputs[k];
      const int to = if_node.outputs[k];
      if (to < 0) continue;
      ir::Node* producer = nullptr;
      size_t slot = 0;
      for (ir::Node& n : inlined) {
        for (size_t s = 0; s < n.outputs.size(); ++s) {
          if (n.outputs[s] == from) {
            producer = &n;
            slot = s;
          }
        }
      }
      if (producer && !renamed[static_cast<size_t>(from)]) {
        producer->outputs[slot] = to;
        for (ir::Node& n : inlined) {
          for (int& t : n.inputs) {
            if (t == from) t = to;
          }
          for (ir::Node& b : n.body) {
            for (int& t : b.inputs) {
              if (t == from) t = to;
            }
          }
        }
        renamed[static_cast<size_t>(from)] = true;
        // A later duplicate of `from` must copy the renamed tensor.
        for (size_t j = k + 1; j < if_node.outputs.size(); ++j) {
          if (branch.outputs[j] == from) branch.outputs[j] = to;
        }
      } else {
        ir::Node copy;
        copy.name = if_node.name + "/output_" + std::to_string(k);
        copy.op = "Identity";
        copy.inputs = {from};
        copy.outputs = {to};
        copies.push_back(std::move(copy));
      }
    }
    // Nested graphs keep their indices; only the If's own graphs go unused.
    std::vector<ir::Node>& nodes = m.main().nodes;
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
    inlined.insert(inlined.end(), copies.begin(), copies.end());
    const size_t count = inlined.size();
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(i),
                 std::make_move_iterator(inlined.begin()), std::make_move_iterator(inlined.end()));
    result->count("inlined");
    result->count("branch_nodes", static_cast<int64_t>(count));
    result->changed = true;
    // Continue after the inlined nodes (a nested constant If among them is
    // taken in the group's next round).
    i += count;
    if (i == 0) continue;
    --i;
  }
  if (result->changed) compact_model(&m);
  return true;
}

}  // namespace kite::passes
