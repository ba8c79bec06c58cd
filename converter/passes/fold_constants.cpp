// Constant folding: a node whose inputs are all constants is computed now,
// with Kite's own CPU kernels (const_eval), and replaced by its results.
// Shape and Size need only their input's (static) shape, so the shape
// subgraphs exporters emit (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, ConstantOfShape/Equal/Where) fold away completely.
//
// What folds is the folding policy's decision (src/fold_policy.h: size cap,
// CPU support, dtype rule), the one shape inference follows too. This pass
// adds what only a whole-graph view can decide, the bloat rule: a node whose
// results are much larger than its constant inputs (an Expand or Tile
// broadcast, a big ConstantOfShape) is folded only if every consumer of
// those results folds too, so the large value never reaches the file.
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"
#include "src/fold_policy.h"

namespace kite::passes {

bool fold_constants(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  std::vector<ir::Node>& nodes = m.main().nodes;
  const converter::FoldPolicy policy(m, ctx.evaluator);
  std::vector<size_t> folds;      // nodes folded, in order
  std::vector<size_t> bloating;   // those that fold only with all their readers
  std::vector<bool> folded(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    const converter::FoldDecision decision = policy.decide(m, n);
    if (decision.verdict == converter::FoldVerdict::kNever) continue;
    if (decision.verdict == converter::FoldVerdict::kRefused) {
      result->count(decision.counter);
      continue;
    }
    std::vector<std::vector<uint8_t>> values;
    std::string refusal;
    std::string err;
    if (!policy.compute(m, n, &values, &refusal, &err)) return ctx.fail(err);
    if (!refusal.empty()) {
      result->count("skipped_dtype_rule");
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ir::Tensor& t = m.tensors[static_cast<size_t>(n.outputs[k])];
      t.kind = ir::TensorKind::Constant;
      t.data = std::move(values[k]);
    }
    folded[i] = true;
    folds.push_back(i);
    if (decision.verdict == converter::FoldVerdict::kFoldIfReadersFold) bloating.push_back(i);
  }
  if (folds.empty()) return true;

  // Undo bloating folds whose results a node that stays would still read,
  // last first so that an undone consumer undoes its producer in turn.
  const UseMap uses(m);
  for (auto it = bloating.rbegin(); it != bloating.rend(); ++it) {
    const ir::Node& n = nodes[*it];
    bool read_by_kept_node = false;
    for (int t : n.outputs) {
      if (uses.escapes(t)) read_by_kept_node = true;
      for (int r : uses.readers(t)) {
        if (!folded[static_cast<size_t>(r)]) read_by_kept_node = true;
      }
    }
    if (!read_by_kept_node) continue;
    for (int t : n.outputs) {
      ir::Tensor& tensor = m.tensors[static_cast<size_t>(t)];
      tensor.kind = ir::TensorKind::Activation;
      tensor.data.clear();
      tensor.data.shrink_to_fit();
    }
    folded[*it] = false;
    result->count("skipped_bloat");
  }

  int64_t count = 0;
  for (size_t i : folds) count += folded[i] ? 1 : 0;
  if (count == 0) return true;
  erase_nodes(&m, folded);
  result->count("folded", count);
  result->changed = true;
  return true;
}

}  // namespace kite::passes
