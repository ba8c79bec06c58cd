#include "memory/budget.h"

#include <algorithm>
#include <functional>
#include <set>

namespace kite::memory {
namespace {

bool is_cheap(const ir::Node& n) {
  if (!n.body.empty() || !n.domain.empty() || n.outputs.size() != 1) return false;
  if (is_view_op(n.op) || is_inplace_op(n.op, 0)) return true;
  static const char* const kMore[] = {"Transpose", "Cast", "Pow", "Expand", "Tile",
                                      "Where", "Equal", "Greater", "Less", "Not"};
  for (const char* op : kMore) {
    if (n.op == op) return true;
  }
  return false;
}

struct Candidate {
  size_t producer = 0;       // main-graph node index
  size_t first_late = 0;     // index of the first consumer after the gap
  uint64_t score = 0;
};

// Main-graph consumers (node indices, ascending) of tensor t, including nodes
// whose fused body or If branches read it.
std::vector<size_t> consumers(const ir::Model& m, int t) {
  std::vector<size_t> out;
  const auto& nodes = m.main().nodes;
  std::function<bool(const ir::Node&)> reads = [&](const ir::Node& n) {
    for (int i : n.inputs) {
      if (i == t) return true;
    }
    for (const ir::Node& b : n.body) {
      if (reads(b)) return true;
    }
    for (const ir::Attr& a : n.attrs) {
      if (a.type != KITE_ATTR_GRAPH) continue;
      for (const ir::Node& g : m.graphs[static_cast<size_t>(a.i)].nodes) {
        if (reads(g)) return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (reads(nodes[i])) out.push_back(i);
  }
  return out;
}

std::vector<Candidate> find_candidates(const ir::Model& m, const std::set<std::pair<size_t, size_t>>& tried) {
  std::vector<Candidate> found;
  const auto& nodes = m.main().nodes;
  std::vector<int> last_use(m.tensors.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].inputs) {
      if (t >= 0) last_use[static_cast<size_t>(t)] = static_cast<int>(i);
    }
  }
  for (int t : m.main().outputs) last_use[static_cast<size_t>(t)] = static_cast<int>(nodes.size());
  for (size_t p = 0; p < nodes.size(); ++p) {
    const ir::Node& node = nodes[p];
    if (!is_cheap(node)) continue;
    const int t = node.outputs[0];
    const ir::Tensor& tensor = m.tensors[static_cast<size_t>(t)];
    if (tensor.kind == ir::TensorKind::Output) continue;
    const std::vector<size_t> uses = consumers(m, t);
    if (uses.empty()) continue;
    // The widest gap between consecutive uses (the production counts as one).
    size_t prev = p, gap_end = 0, widest = 0;
    for (size_t u : uses) {
      if (u - prev > widest) {
        widest = u - prev;
        gap_end = u;
      }
      prev = u;
    }
    if (widest < 3 || gap_end == uses.front()) continue;  // nothing to free
    // The clone reads the producer's inputs at gap_end: they must be
    // constants or already live there, or recomputing only moves the bytes.
    bool inputs_live = true;
    for (int in : node.inputs) {
      if (in < 0 || m.tensors[static_cast<size_t>(in)].is_constant()) continue;
      if (last_use[static_cast<size_t>(in)] < static_cast<int>(gap_end)) inputs_live = false;
    }
    if (!inputs_live || tried.count({p, gap_end})) continue;
    Candidate c;
    c.producer = p;
    c.first_late = gap_end;
    c.score = tensor.byte_size() * widest;
    found.push_back(c);
  }
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  return found;
}

// Clones the producer right before the first late consumer; consumers from
// there on read the clone.
void recompute(ir::Model* m, const Candidate& c, Recomputation* rec) {
  auto& nodes = m->main().nodes;
  const ir::Node producer = nodes[c.producer];
  const int t = producer.outputs[0];
  ir::Tensor copy = m->tensors[static_cast<size_t>(t)];
  copy.name += "/recomputed";
  copy.kind = ir::TensorKind::Activation;
  const int t2 = m->add_tensor(copy);
  ir::Node clone = producer;
  clone.name += "/recompute";
  clone.outputs = {t2};
  int late_uses = 0;
  std::function<void(ir::Node&)> rewire = [&](ir::Node& n) {
    for (int& i : n.inputs) {
      if (i == t) {
        i = t2;
        ++late_uses;
      }
    }
    for (ir::Node& b : n.body) rewire(b);
  };
  for (size_t i = c.first_late; i < nodes.size(); ++i) rewire(nodes[i]);
  nodes.insert(nodes.begin() + static_cast<long>(c.first_late), clone);
  rec->node = producer.name;
  rec->tensor = m->tensors[static_cast<size_t>(t)].name;
  rec->late_uses = late_uses;
  uint64_t numel = 1;
  for (int64_t d : copy.shape) numel *= static_cast<uint64_t>(d);
  rec->elements = numel;
}

}  // namespace

bool apply_memory_budget(ir::Model* model, uint64_t budget, const PlanOptions& options,
                         BudgetReport* report, std::string* err) {
  report->budget = budget;
  if (!plan_memory(model, options, nullptr, err)) return false;
  report->arena_before = model->plan.arena_size;
  std::set<std::pair<size_t, size_t>> tried;
  // Each accepted step shrinks the arena, so the loop ends; the bound keeps
  // conversion time predictable on large graphs.
  for (int round = 0; round < 256 && model->plan.arena_size > budget; ++round) {
    const std::vector<Candidate> candidates = find_candidates(*model, tried);
    bool improved = false;
    int trials = 0;
    for (const Candidate& c : candidates) {
      if (++trials > 16) break;  // each trial replans the model
      tried.insert({c.producer, c.first_late});
      ir::Model trial = *model;
      Recomputation rec;
      recompute(&trial, c, &rec);
      std::string plan_err;
      if (!plan_memory(&trial, options, nullptr, &plan_err)) continue;
      if (trial.plan.arena_size >= model->plan.arena_size) continue;
      rec.arena_before = model->plan.arena_size;
      rec.arena_after = trial.plan.arena_size;
      *model = std::move(trial);
      report->recomputed.push_back(rec);
      tried.clear();  // node indices shifted
      improved = true;
      break;
    }
    if (!improved) break;
  }
  report->arena_after = model->plan.arena_size;
  report->met = model->plan.arena_size <= budget;
  return true;
}

}  // namespace kite::memory
