// Identity and inference-mode Dropout copy their input: readers of the copy
// read the original instead. When the copy is a graph output, the node that
// produced the original writes the output directly. A copy of a graph input
// or a constant into a graph output stays (an output must be written by a
// node).
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

// True if node is a pure copy of input 0 into output 0.
bool is_copy(const ir::Model& m, const ir::Node& node) {
  if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.empty() || node.outputs[0] < 0) {
    return false;
  }
  if (is_op(node, "Identity")) return node.outputs.size() == 1;
  if (!is_op(node, "Dropout")) return false;
  // Inference mode: training_mode absent or a constant false. The mask
  // output, if any, must be unused.
  if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
    const int t = node.inputs[2];
    if (!is_constant(m, t)) return false;
    const ir::Tensor& mode = tensor_at(m, t);
    if (mode.data.size() != 1 || mode.data[0] != 0) return false;
  }
  return node.outputs.size() == 1 || node.outputs[1] < 0;
}

}  // namespace

bool eliminate_identity(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  std::vector<bool> graph_output(m.tensors.size(), false);
  std::vector<bool> graph_input(m.tensors.size(), false);
  for (const ir::Graph& g : m.graphs) {
    for (int t : g.outputs) graph_output[static_cast<size_t>(t)] = true;
    for (int t : g.inputs) graph_input[static_cast<size_t>(t)] = true;
  }
  std::vector<bool> dead(m.main().nodes.size(), false);
  int64_t removed = 0;
  for (size_t i = 0; i < m.main().nodes.size(); ++i) {
    const ir::Node& node = m.main().nodes[i];
    if (!is_copy(m, node)) continue;
    const int src = node.inputs[0];
    const int dst = node.outputs[0];
    const std::string op = node.op;
    if (!graph_output[static_cast<size_t>(dst)]) {
      replace_reads(&m, dst, src);
    } else {
      // dst must keep its name and kind: move the write of src onto dst.
      if (graph_output[static_cast<size_t>(src)] || graph_input[static_cast<size_t>(src)] ||
          is_constant(m, src)) {
        continue;
      }
      ir::Node* producer = nullptr;
      for (ir::Node& n : m.main().nodes) {
        for (int& t : n.outputs) {
          if (t == src) producer = &n;
        }
      }
      if (!producer) continue;  // written inside a branch: leave it
      for (int& t : producer->outputs) {
        if (t == src) t = dst;
      }
      replace_reads(&m, src, dst);
      // The copy itself now reads dst; it is dropped below.
    }
    dead[i] = true;
    ++removed;
    result->count(op == "Identity" ? "identity" : "dropout");
  }
  if (removed == 0) return true;
  erase_nodes(&m, dead);
  result->changed = true;
  return true;
}

}  // namespace kite::passes
