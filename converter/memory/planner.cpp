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

Placement ArenaPlanner::greedy_by_size() const {
  std::vector<int> order(buffers_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return buffers_[static_cast<size_t>(a)].size > buffers_[static_cast<size_t>(b)].size;
  });
  return greedy(order, "greedy_by_size");
}

Placement ArenaPlanner::greedy_by_lifetime() const {
  std::vector<int> order(buffers_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Buffer& x = buffers_[static_cast<size_t>(a)];
    const Buffer& y = buffers_[static_cast<size_t>(b)];
    const int lx = x.last - x.first, ly = y.last - y.first;
    if (lx != ly) return lx > ly;
    return x.size > y.size;
  });
  return greedy(order, "greedy_by_lifetime");
}

Placement ArenaPlanner::best() const {
  Placement candidates[] = {greedy_by_size(), greedy_by_lifetime(), naive()};
  size_t best = 0;
  for (size_t i = 1; i < 3; ++i) {
    if (candidates[i].arena_size < candidates[best].arena_size) best = i;
  }
  return candidates[best];
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

namespace {

struct LifetimeBuilder {
  ir::Model* model;
  std::vector<int> first, last;

  void touch(int t, int step) {
    if (t < 0 || model->tensors[static_cast<size_t>(t)].is_constant()) return;
    if (first[static_cast<size_t>(t)] < 0 || step < first[static_cast<size_t>(t)]) first[static_cast<size_t>(t)] = step;
    last[static_cast<size_t>(t)] = std::max(last[static_cast<size_t>(t)], step);
  }
  // Everything a node touches, including its body and subgraphs, is live at
  // the node's step.
  void node(const ir::Node& n, int step) {
    for (int t : n.inputs) touch(t, step);
    for (int t : n.outputs) touch(t, step);
    for (const ir::Node& b : n.body) node(b, step);
    for (const ir::Attr& a : n.attrs) {
      if (a.type == KITE_ATTR_GRAPH) graph(static_cast<int>(a.i), step);
    }
  }
  void graph(int g, int step) {
    const ir::Graph& graph = model->graphs[static_cast<size_t>(g)];
    for (int t : graph.inputs) touch(t, step);
    for (int t : graph.outputs) touch(t, step);
    for (const ir::Node& n : graph.nodes) node(n, step);
  }
};

}  // namespace

bool plan_memory(ir::Model* model, uint64_t alignment, std::string* err) {
  const size_t n = model->tensors.size();
  LifetimeBuilder lb{model, std::vector<int>(n, -1), std::vector<int>(n, -1)};
  const ir::Graph& main = model->main();
  const int end = static_cast<int>(main.nodes.size()) + 1;
  for (int t : main.inputs) lb.touch(t, 0);
  for (size_t i = 0; i < main.nodes.size(); ++i) lb.node(main.nodes[i], static_cast<int>(i) + 1);
  for (int t : main.outputs) lb.touch(t, end);

  ArenaPlanner planner(alignment);
  std::vector<int> buffer_of(n, -1);
  for (size_t t = 0; t < n; ++t) {
    if (model->tensors[t].is_constant()) continue;
    if (lb.first[t] < 0) continue;  // never used: planned at offset 0 with size checks below
    buffer_of[t] = planner.add_buffer(model->tensors[t].byte_size(), lb.first[t], lb.last[t]);
  }
  const Placement p = planner.best();
  const std::string problem = planner.check(p);
  if (!problem.empty()) {
    *err = "memory plan check failed: " + problem;
    return false;
  }
  ir::MemoryPlan& plan = model->plan;
  plan.alignment = alignment;
  plan.arena_size = p.arena_size;
  plan.lower_bound = planner.lower_bound();
  plan.naive_size = planner.naive_size();
  plan.strategy = p.strategy;
  plan.offsets.assign(n, 0);
  for (size_t t = 0; t < n; ++t) {
    if (buffer_of[t] >= 0) plan.offsets[t] = p.offsets[static_cast<size_t>(buffer_of[t])];
  }
  // A tensor no node touches still needs room if it has bytes (e.g. an unused
  // graph input); give it its own range at the end.
  for (size_t t = 0; t < n; ++t) {
    if (model->tensors[t].is_constant() || buffer_of[t] >= 0) continue;
    plan.offsets[t] = plan.arena_size;
    plan.arena_size = align_up(plan.arena_size + model->tensors[t].byte_size(), alignment);
  }
  return true;
}

}  // namespace kite::memory
