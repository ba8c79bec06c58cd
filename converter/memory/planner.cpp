#include "memory/planner.h"

#include <algorithm>
#include <limits>

namespace kite::memory {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool overlaps_in_time(const Buffer& a, const Buffer& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

int ArenaPlanner::add_buffer(uint64_t size, int first, int last) {
  buffers_.push_back(Buffer{size, first, std::max(first, last)});
  return static_cast<int>(buffers_.size()) - 1;
}

Placement ArenaPlanner::naive() const {
  Placement p;
  p.strategy = "naive";
  p.offsets.resize(buffers_.size());
  uint64_t end = 0;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    p.offsets[i] = end;
    end = align_up(end + buffers_[i].size, alignment_);
  }
  p.arena_size = end;
  return p;
}

Placement ArenaPlanner::greedy(const std::vector<int>& order, const char* name) const {
  Placement p;
  p.strategy = name;
  p.offsets.assign(buffers_.size(), 0);
  std::vector<int> placed;
  placed.reserve(buffers_.size());
  for (int i : order) {
    const Buffer& b = buffers_[static_cast<size_t>(i)];
    // Ranges of already placed buffers that are live at the same time.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (int j : placed) {
      const Buffer& o = buffers_[static_cast<size_t>(j)];
      if (overlaps_in_time(b, o) && o.size > 0) {
        busy.emplace_back(p.offsets[static_cast<size_t>(j)], p.offsets[static_cast<size_t>(j)] + o.size);
      }
    }
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds the buffer; else after the last.
    uint64_t best_offset = 0;
    uint64_t best_gap = std::numeric_limits<uint64_t>::max();
    uint64_t cursor = 0;
    bool found = false;
    for (const auto& r : busy) {
      if (r.first > cursor && r.first - cursor >= b.size) {
        const uint64_t gap = r.first - cursor;
        if (gap < best_gap) {
          best_gap = gap;
          best_offset = cursor;
          found = true;
        }
      }
      cursor = std::max(cursor, align_up(r.second, alignment_));
    }
    p.offsets[static_cast<size_t>(i)] = found ? best_offset : cursor;
    placed.push_back(i);
  }
  uint64_t end = 0;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    end = std::max(end, align_up(p.offsets[i] + buffers_[i].size, alignment_));
  }
  p.arena_size = end;
  return p;
}

namespace {

// Indices 0..n-1 in the order `before` sorts them (stable: ties keep
// index order).
template <typename Before>
std::vector<int> sorted_indices(size_t n, Before before) {
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), before);
  return order;
}

}  // namespace

Placement ArenaPlanner::greedy_by_size() const {
  const std::vector<int> order = sorted_indices(buffers_.size(), [&](int a, int b) {
    return buffers_[static_cast<size_t>(a)].size > buffers_[static_cast<size_t>(b)].size;
  });
  return greedy(order, "greedy_by_size");
}

Placement ArenaPlanner::greedy_by_lifetime() const {
  const std::vector<int> order = sorted_indices(buffers_.size(), [&](int a, int b) {
    const Buffer& x = buffers_[static_cast<size_t>(a)];
    const Buffer& y = buffers_[static_cast<size_t>(b)];
    const int lx = x.last - x.first, ly = y.last - y.first;
    if (lx != ly) return lx > ly;
    return x.size > y.size;
  });
  return greedy(order, "greedy_by_lifetime");
}

Placement ArenaPlanner::greedy_by_breadth() const {
  int steps = 0;
  for (const Buffer& b : buffers_) steps = std::max(steps, b.last + 1);
  std::vector<uint64_t> breadth(static_cast<size_t>(steps), 0);
  std::vector<std::vector<int>> live_at(static_cast<size_t>(steps));
  for (size_t i = 0; i < buffers_.size(); ++i) {
    for (int s = buffers_[i].first; s <= buffers_[i].last; ++s) {
      breadth[static_cast<size_t>(s)] += buffers_[i].size;
      live_at[static_cast<size_t>(s)].push_back(static_cast<int>(i));
    }
  }
  const std::vector<int> step_order = sorted_indices(static_cast<size_t>(steps), [&](int a, int b) {
    return breadth[static_cast<size_t>(a)] > breadth[static_cast<size_t>(b)];
  });
  std::vector<int> order;
  std::vector<bool> queued(buffers_.size(), false);
  for (int s : step_order) {
    std::vector<int> here = live_at[static_cast<size_t>(s)];
    std::stable_sort(here.begin(), here.end(), [&](int a, int b) {
      return buffers_[static_cast<size_t>(a)].size > buffers_[static_cast<size_t>(b)].size;
    });
    for (int i : here) {
      if (!queued[static_cast<size_t>(i)]) {
        queued[static_cast<size_t>(i)] = true;
        order.push_back(i);
      }
    }
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!queued[i]) order.push_back(static_cast<int>(i));
  }
  return greedy(order, "greedy_by_breadth");
}

Placement ArenaPlanner::greedy_by_first_use() const {
  const std::vector<int> order = sorted_indices(buffers_.size(), [&](int a, int b) {
    const Buffer& x = buffers_[static_cast<size_t>(a)];
    const Buffer& y = buffers_[static_cast<size_t>(b)];
    if (x.first != y.first) return x.first < y.first;
    return x.size > y.size;
  });
  return greedy(order, "greedy_by_first_use");
}

Placement ArenaPlanner::greedy_by_size_perturbed(uint32_t seed) const {
  // Size order with multiplicative noise: a cheap way out of the plateaus
  // where one unlucky tie-break fragments the arena. Deterministic per seed.
  std::vector<double> key(buffers_.size());
  uint64_t state = 0x9E3779B97F4A7C15ull ^ seed;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double noise = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
    key[i] = static_cast<double>(buffers_[i].size) * (1.0 + 0.5 * noise);
  }
  const std::vector<int> order = sorted_indices(buffers_.size(), [&](int a, int b) {
    return key[static_cast<size_t>(a)] > key[static_cast<size_t>(b)];
  });
  return greedy(order, "greedy_by_size_perturbed");
}

Placement ArenaPlanner::best() const {
  std::vector<Placement> candidates = {greedy_by_size(), greedy_by_breadth(), greedy_by_lifetime(),
                                       greedy_by_first_use(), naive()};
  const uint64_t bound = lower_bound();
  auto smallest = [&]() {
    size_t best = 0;
    for (size_t i = 1; i < candidates.size(); ++i) {
      if (candidates[i].arena_size < candidates[best].arena_size) best = i;
    }
    return best;
  };
  // Stop searching once within 1% of the lower bound (aligned sizes make the
  // bound itself unreachable by a few hundred bytes per buffer).
  for (uint32_t seed = 1; seed <= 48; ++seed) {
    if (candidates[smallest()].arena_size <= bound + bound / 100) break;
    candidates.push_back(greedy_by_size_perturbed(seed));
  }
  return candidates[smallest()];
}

uint64_t ArenaPlanner::lower_bound() const {
  int steps = 0;
  for (const Buffer& b : buffers_) steps = std::max(steps, b.last + 1);
  std::vector<uint64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (const Buffer& b : buffers_) {
    for (int s = b.first; s <= b.last; ++s) live[static_cast<size_t>(s)] += b.size;
  }
  uint64_t peak = 0;
  for (uint64_t v : live) peak = std::max(peak, v);
  return peak;
}

uint64_t ArenaPlanner::naive_size() const {
  uint64_t sum = 0;
  for (const Buffer& b : buffers_) sum += b.size;
  return sum;
}

std::string ArenaPlanner::check(const Placement& p) const {
  if (p.offsets.size() != buffers_.size()) return "plan has the wrong number of offsets";
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (p.offsets[i] % alignment_ != 0) {
      return "buffer " + std::to_string(i) + " offset " + std::to_string(p.offsets[i]) +
             " is not aligned to " + std::to_string(alignment_);
    }
    if (p.offsets[i] + buffers_[i].size > p.arena_size) {
      return "buffer " + std::to_string(i) + " leaves the arena";
    }
    for (size_t j = i + 1; j < buffers_.size(); ++j) {
      const Buffer& a = buffers_[i];
      const Buffer& b = buffers_[j];
      if (a.size == 0 || b.size == 0 || !overlaps_in_time(a, b)) continue;
      if (p.offsets[i] < p.offsets[j] + b.size && p.offsets[j] < p.offsets[i] + a.size) {
        return "buffers " + std::to_string(i) + " and " + std::to_string(j) +
               " are live at the same time and share bytes";
      }
    }
  }
  return "";
}

bool is_view_op(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Identity";
}

bool is_inplace_op(const std::string& op, int input_index) {
  static const char* const kUnary[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Abs", "Neg",
                                       "Sqrt", "Reciprocal", "Erf", "LeakyRelu", "Elu",
                                       "HardSigmoid", "HardSwish", "Clip", "Gelu"};
  static const char* const kBinary[] = {"Add", "Sub", "Mul", "Div"};
  if (input_index == 0) {
    for (const char* u : kUnary) {
      if (op == u) return true;
    }
  }
  if (input_index == 0 || input_index == 1) {
    for (const char* b : kBinary) {
      if (op == b) return true;
    }
  }
  return false;
}

namespace {

// Steps count executed primitive nodes: a fused node spans one step per body
// node, so its scratch tensors live only between their body producer and
// consumer, and its own inputs and outputs span the whole node. A fused kernel
// thus never needs the scratch, and the body path fits the same plan.
struct LifetimeBuilder {
  const ir::Model* model;
  std::vector<int> first, last;
  std::vector<int> node_step;  // main-graph node index -> its first step

  void touch(int t, int step) {
    if (t < 0 || model->tensors[static_cast<size_t>(t)].is_constant()) return;
    if (first[static_cast<size_t>(t)] < 0 || step < first[static_cast<size_t>(t)]) first[static_cast<size_t>(t)] = step;
    last[static_cast<size_t>(t)] = std::max(last[static_cast<size_t>(t)], step);
  }
  // Touches everything at one step (If branches, nested bodies).
  void node_at(const ir::Node& n, int step) {
    for (int t : n.inputs) touch(t, step);
    for (int t : n.outputs) touch(t, step);
    for (const ir::Node& b : n.body) node_at(b, step);
    for (const ir::Attr& a : n.attrs) {
      if (a.type == KITE_ATTR_GRAPH) graph_at(static_cast<int>(a.i), step);
    }
  }
  void graph_at(int g, int step) {
    const ir::Graph& graph = model->graphs[static_cast<size_t>(g)];
    for (int t : graph.inputs) touch(t, step);
    for (int t : graph.outputs) touch(t, step);
    for (const ir::Node& n : graph.nodes) node_at(n, step);
  }
  // Returns the number of steps the node takes.
  int node(const ir::Node& n, int step) {
    if (n.body.empty()) {
      node_at(n, step);
      return 1;
    }
    const int span = static_cast<int>(n.body.size());
    for (int k = 0; k < span; ++k) {
      for (int t : n.inputs) touch(t, step + k);
      for (int t : n.outputs) touch(t, step + k);
      node_at(n.body[static_cast<size_t>(k)], step + k);
    }
    return span;
  }
};

void build_lifetimes(const ir::Model& model, std::vector<int>* first, std::vector<int>* last,
                     std::vector<int>* node_step = nullptr) {
  const size_t n = model.tensors.size();
  LifetimeBuilder lb{&model, std::vector<int>(n, -1), std::vector<int>(n, -1), {}};
  const ir::Graph& main = model.main();
  for (int t : main.inputs) lb.touch(t, 0);
  int step = 1;
  for (const ir::Node& node : main.nodes) {
    lb.node_step.push_back(step);
    step += lb.node(node, step);
  }
  for (int t : main.outputs) lb.touch(t, step);
  // Inputs stay intact for the whole run: an application may run again on
  // the same inputs without setting them again.
  for (int t : main.inputs) lb.touch(t, step);
  *first = std::move(lb.first);
  *last = std::move(lb.last);
  if (node_step) *node_step = std::move(lb.node_step);
}

// Alias groups: a view's output, or an in-place op's output, joins the group
// of the input whose bytes it takes. Groups holding a main-graph input are
// never written in place (the application's inputs must survive a run).
struct Aliases {
  std::vector<int> parent;
  std::vector<int> first, last;  // per representative
  std::vector<bool> has_input;
  int inplace = 0, views = 0, concat_parts = 0;
  // Concat views: a group whose bytes are a slice of another group's buffer
  // (an input of a Concat written straight into the output). Per
  // representative: the parent representative (-1 if none) and the byte
  // offset inside it.
  std::vector<int> slice_parent;
  std::vector<uint64_t> slice_offset;

  // The representative owning the buffer, and the offset of rep's slice in it.
  int root(int rep, uint64_t* offset) const {
    uint64_t off = 0;
    while (slice_parent[static_cast<size_t>(rep)] >= 0) {
      off += slice_offset[static_cast<size_t>(rep)];
      rep = slice_parent[static_cast<size_t>(rep)];
    }
    if (offset) *offset = off;
    return rep;
  }

  int find(int t) {
    while (parent[static_cast<size_t>(t)] != t) {
      parent[static_cast<size_t>(t)] = parent[static_cast<size_t>(parent[static_cast<size_t>(t)])];
      t = parent[static_cast<size_t>(t)];
    }
    return t;
  }
  void join(int out, int in) {
    const int r = find(in);
    const int o = find(out);
    parent[static_cast<size_t>(o)] = r;
    first[static_cast<size_t>(r)] = std::min(first[static_cast<size_t>(r)], first[static_cast<size_t>(o)]);
    last[static_cast<size_t>(r)] = std::max(last[static_cast<size_t>(r)], last[static_cast<size_t>(o)]);
    has_input[static_cast<size_t>(r)] = has_input[static_cast<size_t>(r)] || has_input[static_cast<size_t>(o)];
  }
};

// offsets == nullptr: join every legal alias (planning). Otherwise join only
// legal aliases the plan put at the same offset (checking).
Aliases find_aliases(const ir::Model& model, const std::vector<int>& first,
                     const std::vector<int>& last, bool allow,
                     const std::vector<uint64_t>* offsets, uint64_t alignment,
                     bool concat_views) {
  const size_t n = model.tensors.size();
  Aliases a;
  a.slice_parent.assign(n, -1);
  a.slice_offset.assign(n, 0);
  a.parent.resize(n);
  a.first = first;
  a.last = last;
  a.has_input.assign(n, false);
  for (size_t t = 0; t < n; ++t) a.parent[t] = static_cast<int>(t);
  for (int t : model.main().inputs) a.has_input[static_cast<size_t>(t)] = true;
  if (!allow) return a;
  const auto& nodes = model.main().nodes;
  std::vector<int> f, l, node_step;
  build_lifetimes(model, &f, &l, &node_step);
  // One node at one step; inside a fused body only Scratch inputs may be
  // taken over, so a fused kernel's output never aliases its inputs.
  auto visit = [&](const ir::Node& node, int step, bool in_body) {
    if (!node.body.empty() || node.outputs.size() != 1 || !node.domain.empty()) return;
    const int out = node.outputs[0];
    const ir::Tensor& to = model.tensors[static_cast<size_t>(out)];
    if (to.is_constant() || a.find(out) != out || a.has_input[static_cast<size_t>(out)]) return;
    auto compatible = [&](int in) {
      if (in < 0) return false;
      const ir::Tensor& ti = model.tensors[static_cast<size_t>(in)];
      if (ti.is_constant() || ti.byte_size() != to.byte_size() || first[static_cast<size_t>(in)] < 0) return false;
      if (in_body && ti.kind != ir::TensorKind::Scratch) return false;
      if (offsets != nullptr && (*offsets)[static_cast<size_t>(in)] != (*offsets)[static_cast<size_t>(out)]) return false;
      return true;
    };
    if (is_view_op(node.op) && !node.inputs.empty() && compatible(node.inputs[0]) &&
        (!in_body || a.last[static_cast<size_t>(a.find(node.inputs[0]))] == step)) {
      a.join(out, node.inputs[0]);
      ++a.views;
      return;
    }
    for (int k = 0; k < static_cast<int>(node.inputs.size()) && k < 2; ++k) {
      const int in = node.inputs[static_cast<size_t>(k)];
      if (!is_inplace_op(node.op, k) || !compatible(in)) continue;
      const ir::Tensor& ti = model.tensors[static_cast<size_t>(in)];
      if (ti.dtype != to.dtype || ti.shape != to.shape) continue;
      const int r = a.find(in);
      if (a.has_input[static_cast<size_t>(r)] || a.last[static_cast<size_t>(r)] != step) continue;
      a.join(out, in);
      ++a.inplace;
      return;
    }
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& node = nodes[i];
    if (node.body.empty()) {
      visit(node, node_step[i], false);
    } else {
      for (size_t k = 0; k < node.body.size(); ++k) {
        visit(node.body[k], node_step[i] + static_cast<int>(k), true);
      }
    }
  }
  // Concat views, after every in-place and view decision: when everything
  // before the axis has size 1, each input is one contiguous slice of the
  // output, so its producer can write straight there and the Concat copies
  // nothing. Each input's group must die at the Concat (nothing may write
  // the output's bytes while an input is still read elsewhere).
  for (size_t i = 0; i < nodes.size() && concat_views; ++i) {
    const ir::Node& node = nodes[i];
    if (node.op != "Concat" || !node.domain.empty() || !node.body.empty() ||
        node.outputs.size() != 1) {
      continue;
    }
    const int step = node_step[i];
    const int y = node.outputs[0];
    const ir::Tensor& ty = model.tensors[static_cast<size_t>(y)];
    const ir::Attr* axis_attr = node.find_attr("axis");
    int64_t axis = axis_attr ? axis_attr->i : 0;
    const int64_t rank = static_cast<int64_t>(ty.shape.size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || ty.is_constant()) continue;
    bool outer_one = true;
    for (int64_t d = 0; d < axis; ++d) outer_one = outer_one && ty.shape[static_cast<size_t>(d)] == 1;
    const int ry = a.find(y);
    if (!outer_one || a.slice_parent[static_cast<size_t>(ry)] >= 0) continue;
    std::vector<int> reps;
    std::vector<uint64_t> rel;
    uint64_t cursor = 0;
    bool ok = true;
    for (int in : node.inputs) {
      if (in < 0) {
        ok = false;
        break;
      }
      const ir::Tensor& ti = model.tensors[static_cast<size_t>(in)];
      const int r = a.find(in);
      const bool fresh = std::find(reps.begin(), reps.end(), r) == reps.end();
      if (ti.is_constant() || first[static_cast<size_t>(in)] < 0 || ti.dtype != ty.dtype || !fresh ||
          r == ry || a.has_input[static_cast<size_t>(r)] || a.slice_parent[static_cast<size_t>(r)] >= 0 ||
          a.last[static_cast<size_t>(r)] != step ||
          (offsets != nullptr && (*offsets)[static_cast<size_t>(in)] != (*offsets)[static_cast<size_t>(y)] + cursor)) {
        ok = false;
        break;
      }
      if (cursor % alignment != 0) {  // every tensor keeps the plan's alignment
        ok = false;
        break;
      }
      reps.push_back(r);
      rel.push_back(cursor);
      cursor += ti.byte_size();
    }
    if (!ok || cursor != ty.byte_size()) continue;
    for (size_t k = 0; k < reps.size(); ++k) {
      a.slice_parent[static_cast<size_t>(reps[k])] = ry;
      a.slice_offset[static_cast<size_t>(reps[k])] = rel[k];
    }
    ++a.concat_parts;
  }
  return a;
}

struct PlanResult {
  Placement placement;
  std::vector<uint64_t> offsets;  // per tensor
  uint64_t lower_bound = 0;
  uint64_t naive = 0;
  int inplace = 0, views = 0, concat_parts = 0;
};

PlanResult plan_once(const ir::Model& model, uint64_t alignment, bool allow_aliasing,
                     bool concat_views, std::string* problem) {
  const size_t n = model.tensors.size();
  std::vector<int> first, last;
  build_lifetimes(model, &first, &last);
  Aliases aliases = find_aliases(model, first, last, allow_aliasing, nullptr, alignment,
                                 allow_aliasing && concat_views);
  ArenaPlanner planner(alignment);
  std::vector<int> buffer_of_rep(n, -1);
  PlanResult r;
  r.inplace = aliases.inplace;
  r.views = aliases.views;
  // One buffer per root group; a Concat's input groups live inside it, so
  // the root's lifetime covers theirs.
  std::vector<int> root_first(n, -1), root_last(n, -1);
  std::vector<uint64_t> root_size(n, 0);
  for (size_t t = 0; t < n; ++t) {
    const ir::Tensor& tensor = model.tensors[t];
    if (tensor.is_constant() || first[t] < 0) continue;
    r.naive += tensor.byte_size();
    uint64_t off = 0;
    const int root = aliases.root(aliases.find(static_cast<int>(t)), &off);
    const size_t ri = static_cast<size_t>(root);
    root_first[ri] = root_first[ri] < 0 ? first[t] : std::min(root_first[ri], first[t]);
    root_last[ri] = std::max(root_last[ri], last[t]);
    root_size[ri] = std::max(root_size[ri], off + tensor.byte_size());
  }
  for (size_t t = 0; t < n; ++t) {
    if (root_first[t] >= 0) {
      buffer_of_rep[t] = planner.add_buffer(root_size[t], root_first[t], root_last[t]);
    }
  }
  r.concat_parts = aliases.concat_parts;
  r.placement = planner.best();
  *problem = planner.check(r.placement);
  r.lower_bound = planner.lower_bound();
  r.offsets.assign(n, 0);
  for (size_t t = 0; t < n; ++t) {
    if (model.tensors[t].is_constant() || first[t] < 0) continue;
    uint64_t off = 0;
    const int root = aliases.root(aliases.find(static_cast<int>(t)), &off);
    r.offsets[t] = r.placement.offsets[static_cast<size_t>(buffer_of_rep[static_cast<size_t>(root)])] + off;
  }
  // A tensor no node touches still needs room if it has bytes (e.g. an unused
  // graph input); give it its own range at the end.
  for (size_t t = 0; t < n; ++t) {
    if (model.tensors[t].is_constant() || first[t] >= 0) continue;
    r.offsets[t] = r.placement.arena_size;
    r.placement.arena_size = align_up(r.placement.arena_size + model.tensors[t].byte_size(), alignment);
  }
  return r;
}

}  // namespace

std::vector<uint64_t> live_bytes_per_node(const ir::Model& model, bool allow_aliasing) {
  const size_t n = model.tensors.size();
  std::vector<int> first, last, node_step;
  build_lifetimes(model, &first, &last, &node_step);
  Aliases aliases = find_aliases(model, first, last, allow_aliasing, nullptr, 256, false);
  std::vector<int> root_first(n, -1), root_last(n, -1);
  std::vector<uint64_t> root_size(n, 0);
  int steps = 0;
  for (size_t t = 0; t < n; ++t) {
    if (model.tensors[t].is_constant() || first[t] < 0) continue;
    uint64_t off = 0;
    const size_t ri = static_cast<size_t>(aliases.root(aliases.find(static_cast<int>(t)), &off));
    root_first[ri] = root_first[ri] < 0 ? first[t] : std::min(root_first[ri], first[t]);
    root_last[ri] = std::max(root_last[ri], last[t]);
    root_size[ri] = std::max(root_size[ri], off + model.tensors[t].byte_size());
    steps = std::max(steps, last[t] + 1);
  }
  std::vector<uint64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (size_t t = 0; t < n; ++t) {
    if (root_first[t] < 0) continue;
    for (int s = root_first[t]; s <= root_last[t]; ++s) live[static_cast<size_t>(s)] += root_size[t];
  }
  const auto& nodes = model.main().nodes;
  std::vector<uint64_t> per_node(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int end = i + 1 < nodes.size() ? node_step[i + 1] : steps;
    for (int s = node_step[i]; s < end && s < static_cast<int>(live.size()); ++s) {
      per_node[i] = std::max(per_node[i], live[static_cast<size_t>(s)]);
    }
  }
  return per_node;
}

bool plan_memory(ir::Model* model, const PlanOptions& options, PlanStats* stats, std::string* err) {
  std::string problem;
  const PlanResult plain = plan_once(*model, options.alignment, false, false, &problem);
  if (!problem.empty()) {
    *err = "memory plan check failed: " + problem;
    return false;
  }
  PlanResult chosen = plain;
  if (options.allow_aliasing) {
    chosen = plan_once(*model, options.alignment, true, false, &problem);
    if (!problem.empty()) {
      *err = "memory plan check failed: " + problem;
      return false;
    }
    // Writing Concat inputs into the output reserves the output's bytes from
    // its first input on; keep it where the arena does not grow. On a tie
    // (the peak is elsewhere: squeezenet1_1's is at its stem) it saves the
    // copies: on an AMD EPYC (Zen 3), 1 thread, squeezenet1_1's eight
    // Concats took 0.29 of 10.4 ms (kite-run --profile); the model 10.6-11.9
    // -> 10.2-10.3 ms p50 (three runs each, alternately).
    const PlanResult with_concat = plan_once(*model, options.alignment, true, true, &problem);
    if (!problem.empty()) {
      *err = "memory plan check failed: " + problem;
      return false;
    }
    if (with_concat.concat_parts > 0 &&
        with_concat.placement.arena_size <= chosen.placement.arena_size) {
      chosen = with_concat;
    }
  }
  ir::MemoryPlan& plan = model->plan;
  plan.alignment = options.alignment;
  plan.arena_size = chosen.placement.arena_size;
  plan.lower_bound = chosen.lower_bound;
  plan.naive_size = plain.naive;
  plan.strategy = chosen.placement.strategy;
  plan.offsets = chosen.offsets;
  if (stats != nullptr) {
    stats->inplace_nodes = chosen.inplace;
    stats->view_nodes = chosen.views;
    stats->concat_nodes = chosen.concat_parts;
    stats->arena_without_aliasing = plain.placement.arena_size;
    stats->lower_bound_without_aliasing = plain.lower_bound;
  }
  const std::string proof = check_plan(*model);
  if (!proof.empty()) {
    *err = "memory plan check failed: " + proof;
    return false;
  }
  return true;
}

bool plan_memory(ir::Model* model, uint64_t alignment, std::string* err) {
  PlanOptions options;
  options.alignment = alignment;
  return plan_memory(model, options, nullptr, err);
}

std::string check_plan(const ir::Model& model) {
  const ir::MemoryPlan& plan = model.plan;
  const size_t n = model.tensors.size();
  if (plan.offsets.size() != n) return "plan has " + std::to_string(plan.offsets.size()) +
                                       " offsets for " + std::to_string(n) + " tensors";
  if (plan.alignment == 0 || (plan.alignment & (plan.alignment - 1)) != 0) {
    return "alignment " + std::to_string(plan.alignment) + " is not a power of two";
  }
  std::vector<int> first, last;
  build_lifetimes(model, &first, &last);
  Aliases aliases = find_aliases(model, first, last, true, &plan.offsets, plan.alignment, true);
  struct Range { uint64_t begin, end; int first, last, tensor; };
  std::vector<Range> ranges;
  for (size_t t = 0; t < n; ++t) {
    const ir::Tensor& tensor = model.tensors[t];
    if (tensor.is_constant()) continue;
    const uint64_t off = plan.offsets[t];
    const uint64_t size = tensor.byte_size();
    if (off % plan.alignment != 0) {
      return "tensor '" + tensor.name + "' offset " + std::to_string(off) + " is not aligned to " +
             std::to_string(plan.alignment);
    }
    if (off > plan.arena_size || size > plan.arena_size - off) {
      return "tensor '" + tensor.name + "' [" + std::to_string(off) + ", +" + std::to_string(size) +
             ") leaves the arena of " + std::to_string(plan.arena_size) + " bytes";
    }
    if (first[t] < 0 || size == 0) continue;
    ranges.push_back(Range{off, off + size, first[t], last[t], static_cast<int>(t)});
  }
  // Sweep by offset so that only ranges that overlap in bytes are compared.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < ranges.size(); ++i) {
    for (size_t j = i + 1; j < ranges.size() && ranges[j].begin < ranges[i].end; ++j) {
      const Range& a = ranges[i];
      const Range& b = ranges[j];
      if (a.first > b.last || b.first > a.last) continue;
      if (aliases.root(aliases.find(a.tensor), nullptr) == aliases.root(aliases.find(b.tensor), nullptr)) continue;
      return "tensors '" + model.tensors[static_cast<size_t>(a.tensor)].name + "' and '" +
             model.tensors[static_cast<size_t>(b.tensor)].name +
             "' are live at the same time and share bytes";
    }
  }
  return "";
}

}  // namespace kite::memory
