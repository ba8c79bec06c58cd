#include "schedule.h"

#include <algorithm>
#include <map>
#include <set>

namespace kite::rt {
namespace {

std::string node_label(const NodeRec& n) { return kite::ops::node_label(n.op, n.name); }

bool is_if(const NodeRec& n) { return n.op == "If" && n.domain.empty(); }

const kite::ops::Attr* find_attr(const NodeRec& n, const char* name) {
  for (const auto& a : n.attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// Every tensor a graph's nodes read (recursively through nested branches).
void collect_reads(const Model& m, int graph, std::set<int>* out) {
  for (const NodeRec& n : m.graphs[static_cast<size_t>(graph)].nodes) {
    for (int t : n.inputs) {
      if (t >= 0) out->insert(t);
    }
    for (const NodeRec& b : n.body) {
      for (int t : b.inputs) {
        if (t >= 0) out->insert(t);
      }
    }
    for (const auto& a : n.attrs) {
      if (a.type == KITE_ATTR_GRAPH) collect_reads(m, static_cast<int>(a.i), out);
    }
  }
  for (int t : m.graphs[static_cast<size_t>(graph)].outputs) out->insert(t);
}

// Copies to move a value between two places (0: host; a device's arena).
int copy_cost(int from, int to) {
  if (from == to) return 0;
  return (from == 0 || to == 0) ? 1 : 2;
}

}  // namespace

bool is_cheap_op(const NodeRec& node) {
  if (!node.domain.empty() || !node.body.empty()) return false;
  static const std::set<std::string> kCheap = {
      // elementwise
      "Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Equal", "Greater", "Less", "And", "Or", "Xor",
      "GreaterOrEqual", "LessOrEqual", "Where", "Max", "Min", "Sum", "Mean", "Relu", "Sigmoid",
      "Clip", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg", "Erf", "Tanh", "LeakyRelu", "Elu",
      "HardSigmoid", "HardSwish", "Gelu", "Not", "Sign", "Ceil", "Floor", "Round", "Sin", "Cos",
      "Softplus", "Mish", "Cast",
      // data movement
      "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
      "Slice", "Gather", "Expand", "Tile", "Pad", "Shape", "Size", "ConstantOfShape", "Range"};
  return kCheap.count(node.op) != 0;
}

int ScheduleBuilder::space_of(int backend) const {
  const BackendTraits& t = backends_[static_cast<size_t>(backend)];
  return t.device && !t.shares_host ? 1 + backend : 0;
}

Status ScheduleBuilder::place(Schedule* out) {
  out->kernels.clear();
  out->placements.clear();
  out->fallbacks.clear();
  out->notes.clear();
  items_.assign(model_.graphs.size(), {});
  for (size_t g = 0; g < model_.graphs.size(); ++g) {
    const GraphRec& graph = model_.graphs[g];
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const NodeRec& node = graph.nodes[i];
      if (is_if(node)) {
        // Control flow runs in the session (its branches were checked at load).
        items_[g].push_back(-1 - static_cast<int>(i));
        if (g == 0) {
          PlacementRec rec;
          rec.node_name = node.name;
          rec.op = node.op;
          rec.backend = "session";
          rec.reason = "control flow";
          out->placements.push_back(rec);
        }
        continue;
      }
      Status st = place_node(node, static_cast<int>(g), g == 0, -1, out);
      if (!st.is_ok()) return st;
    }
  }
  build_segments(out);
  return Status::ok();
}

Status ScheduleBuilder::place_node(const NodeRec& node, int graph, bool record,
                                   int parent_placement, Schedule* out) {
  PlacementRec rec;
  rec.node_name = node.name;
  rec.op = node.op;
  rec.fused = !node.fused_pattern.empty();

  // A backend that lacks the fused kernel but runs every node of the body
  // takes the node decomposed, so a fused node leaves its preferred backend
  // only for ops that backend lacks.
  std::string declined;
  for (const std::string& u : unavailable_) declined += (declined.empty() ? "" : "; ") + u;
  int chosen = -1;
  bool decompose = false;
  std::string note;  // the chosen backend's note on how it runs the node
  for (size_t b = 0; b < backends_.size(); ++b) {
    std::string reason;
    if (oracle_->supports(node, static_cast<int>(b), &reason)) {
      chosen = static_cast<int>(b);
      if (!reason.empty()) note = backends_[b].name + ": " + reason;
      break;
    }
    declined += std::string(declined.empty() ? "" : "; ") + backends_[b].name + ": " +
                (reason.empty() ? "not supported" : reason);
    if (node.body.empty()) continue;
    bool body_ok = true;
    for (const NodeRec& body_node : node.body) {
      std::string ignored;
      body_ok = body_ok && oracle_->supports(body_node, static_cast<int>(b), &ignored);
    }
    if (body_ok) {
      chosen = static_cast<int>(b);
      decompose = true;
      break;
    }
  }
  const int placement = record ? static_cast<int>(out->placements.size()) : parent_placement;
  auto add_kernel = [&](const NodeRec& n, int backend) {
    KernelRec k;
    k.node = &n;
    k.backend = backend;
    k.graph = graph;
    k.placement = placement;
    items_[static_cast<size_t>(graph)].push_back(static_cast<int>(out->kernels.size()));
    out->kernels.push_back(k);
  };

  if (chosen >= 0 && !decompose) {
    rec.backend = backends_[static_cast<size_t>(chosen)].name;
    rec.reason = declined;
    if (!note.empty()) rec.reason += (rec.reason.empty() ? "" : "; ") + note;
    add_kernel(node, chosen);
    if (chosen > 0 || !unavailable_.empty()) {
      out->fallbacks.push_back(node_label(node) + " -> " + rec.backend + " (" + declined + ")");
    }
    if (record) out->placements.push_back(rec);
    return Status::ok();
  }
  if (node.body.empty()) {
    return Status(KITE_ERROR_UNSUPPORTED,
                  node_label(node) + " is not supported by any backend (" + declined + ")");
  }
  // The body: on the chosen backend, or (none runs it all) each body node
  // placed on its own.
  out->fallbacks.push_back(node_label(node) + " decomposed into " + std::to_string(node.body.size()) +
                           " nodes (" + declined + ")");
  if (record) out->placements.push_back(rec);  // filled in below
  std::string body_backend;
  for (const NodeRec& b : node.body) {
    if (decompose) {
      add_kernel(b, chosen);
    } else {
      Status st = place_node(b, graph, false, placement, out);
      if (!st.is_ok()) return st;
    }
    const std::string& used = backends_[static_cast<size_t>(out->kernels.back().backend)].name;
    if (body_backend.empty()) {
      body_backend = used;
    } else if (body_backend != used) {
      body_backend = "mixed";
    }
  }
  if (record) {
    PlacementRec& r = out->placements[static_cast<size_t>(placement)];
    r.backend = body_backend;
    r.decomposed = true;
    r.reason = declined;
  }
  return Status::ok();
}

void ScheduleBuilder::build_segments(Schedule* out) const {
  out->segments.clear();
  for (size_t g = 0; g < items_.size(); ++g) {
    SegmentRec* open = nullptr;
    for (int item : items_[g]) {
      if (item < 0) {
        open = nullptr;
        continue;
      }
      const KernelRec& k = out->kernels[static_cast<size_t>(item)];
      if (open != nullptr && open->backend == k.backend && open->first + open->count == item) {
        ++open->count;
        continue;
      }
      SegmentRec s;
      s.backend = k.backend;
      s.graph = static_cast<int>(g);
      s.first = item;
      s.count = 1;
      out->segments.push_back(s);
      open = &out->segments.back();
    }
  }
}

void ScheduleBuilder::avoid_ping_pong(Schedule* out) {
  for (size_t g = 0; g < items_.size(); ++g) {
    const GraphRec& graph = model_.graphs[g];
    const std::vector<int>& items = items_[g];
    auto kernel_at = [&](size_t pos) -> KernelRec* {
      return items[pos] < 0 ? nullptr : &out->kernels[static_cast<size_t>(items[pos])];
    };
    // Where the value of `tensor` is when item `before` starts: the space of
    // its last producer before it (an If's outputs and anything from outside
    // the graph are on the host).
    auto producer_space = [&](int tensor, size_t before) {
      int space = 0;
      for (size_t pos = 0; pos < before; ++pos) {
        const KernelRec* k = kernel_at(pos);
        const NodeRec& n = k ? *k->node : graph.nodes[static_cast<size_t>(-1 - items[pos])];
        for (int t : n.outputs) {
          if (t == tensor) space = k ? space_of(k->backend) : 0;
        }
      }
      return space;
    };
    // The places that read `tensor` from item `from` on.
    auto reader_spaces = [&](int tensor, size_t from) {
      std::set<int> readers;
      for (size_t pos = from; pos < items.size(); ++pos) {
        const KernelRec* k = kernel_at(pos);
        if (k != nullptr) {
          for (int in : k->node->inputs) {
            if (in == tensor) readers.insert(space_of(k->backend));
          }
          continue;
        }
        std::set<int> reads;
        const NodeRec& n = graph.nodes[static_cast<size_t>(-1 - items[pos])];
        reads.insert(n.inputs.empty() ? -1 : n.inputs[0]);
        for (const auto& a : n.attrs) {
          if (a.type == KITE_ATTR_GRAPH) collect_reads(model_, static_cast<int>(a.i), &reads);
        }
        if (reads.count(tensor)) readers.insert(0);
      }
      for (int o : graph.outputs) {
        if (o == tensor) readers.insert(0);
      }
      return readers;
    };
    // Copies per run if the island [begin, end) of items ran in `space`.
    auto island_copies = [&](size_t begin, size_t end, int space) {
      std::set<int> inside;
      std::set<int> counted;
      int copies = 0;
      for (size_t pos = begin; pos < end; ++pos) {
        const NodeRec& n = *kernel_at(pos)->node;
        for (int t : n.inputs) {
          if (t < 0 || model_.tensors[static_cast<size_t>(t)].is_constant() || inside.count(t) ||
              !counted.insert(t).second) {
            continue;
          }
          copies += copy_cost(producer_space(t, begin), space);
        }
        for (int t : n.outputs) inside.insert(t);
      }
      for (int t : inside) {
        for (int r : reader_spaces(t, end)) copies += copy_cost(space, r);
      }
      return copies;
    };
    size_t i = 0;
    while (i < items.size()) {
      if (kernel_at(i) == nullptr) {
        ++i;
        continue;
      }
      const int backend = kernel_at(i)->backend;
      size_t j = i;
      bool cheap = true;
      while (j < items.size() && kernel_at(j) != nullptr && kernel_at(j)->backend == backend) {
        cheap = cheap && is_cheap_op(*kernel_at(j)->node);
        ++j;
      }
      // An island [i, j) on `backend` between kernels of one other backend.
      const KernelRec* prev = i > 0 ? kernel_at(i - 1) : nullptr;
      const KernelRec* next = j < items.size() ? kernel_at(j) : nullptr;
      if (prev == nullptr || next == nullptr || prev->backend != next->backend || !cheap) {
        i = j;
        continue;
      }
      const int neighbour = prev->backend;
      const int here = island_copies(i, j, space_of(backend));
      const int there = island_copies(i, j, space_of(neighbour));
      bool runs_there = true;
      std::string why_not;
      for (size_t k = i; k < j && runs_there; ++k) {
        runs_there = oracle_->supports(*kernel_at(k)->node, neighbour, &why_not);
      }
      if (runs_there && here > there) {
        for (size_t k = i; k < j; ++k) {
          KernelRec& kr = *kernel_at(k);
          kr.backend = neighbour;
          if (kr.placement < 0) continue;
          PlacementRec& p = out->placements[static_cast<size_t>(kr.placement)];
          if (!p.decomposed) p.backend = backends_[static_cast<size_t>(neighbour)].name;
          p.reason += std::string(p.reason.empty() ? "" : "; ") + "kept with its neighbours on " +
                      backends_[static_cast<size_t>(neighbour)].name + " (on " +
                      backends_[static_cast<size_t>(backend)].name + " it would cost " +
                      std::to_string(here) + " copies per run, there " + std::to_string(there) + ")";
        }
        i = j;
        continue;
      }
      if (!runs_there && neighbour < backend && backends_[static_cast<size_t>(neighbour)].device) {
        std::string names;
        for (size_t k = i; k < j; ++k) {
          names += (names.empty() ? "" : ", ") + node_label(*kernel_at(k)->node);
        }
        out->notes.push_back(names + ", declined by " + backends_[static_cast<size_t>(neighbour)].name +
                             " (" + why_not + "), splits its work into two segments: " +
                             std::to_string(here) + " copies per run");
      }
      i = j;
    }
  }
  // A decomposed node whose body now runs on one backend says so.
  std::map<int, std::set<int>> body_backends;
  for (const KernelRec& k : out->kernels) {
    if (k.placement >= 0 && out->placements[static_cast<size_t>(k.placement)].decomposed) {
      body_backends[k.placement].insert(k.backend);
    }
  }
  for (const auto& kv : body_backends) {
    out->placements[static_cast<size_t>(kv.first)].backend =
        kv.second.size() == 1 ? backends_[static_cast<size_t>(*kv.second.begin())].name : "mixed";
  }
  build_segments(out);
}

Status ScheduleBuilder::plan_steps(const Boundary& boundary, Schedule* out) const {
  out->steps.assign(model_.graphs.size(), {});
  out->main_transfers = 0;
  for (size_t g = 0; g < model_.graphs.size(); ++g) {
    int transfers = 0;
    Status st = plan_graph(static_cast<int>(g), g == 0 ? &boundary : nullptr, out,
                           &out->steps[g], &transfers);
    if (!st.is_ok()) return st;
    if (g == 0) out->main_transfers = transfers;
  }
  return Status::ok();
}

Status ScheduleBuilder::plan_graph(int graph_index, const Boundary* boundary, Schedule* out,
                                   std::vector<Step>* steps, int* transfers) const {
  const GraphRec& graph = model_.graphs[static_cast<size_t>(graph_index)];
  const size_t nb = backends_.size();
  if (nb > 62) return Status(KITE_ERROR_BACKEND, "too many backends in one session (at most 62)");
  std::vector<uint64_t> where(model_.tensors.size(), 1u);  // bit 0: host; bit s: space s
  std::vector<bool> pending(nb, false);   // queued work that touches host memory
  std::vector<bool> enqueued(nb, false);  // any queued work
  auto is_device = [&](int b) { return backends_[static_cast<size_t>(b)].device; };

  auto emit = [&](StepKind kind, int backend, int tensor) {
    Step s;
    s.kind = kind;
    s.backend = backend;
    s.tensor = tensor;
    steps->push_back(s);
  };
  // Rule 5: before `agent` (a backend, or -1 the host) touches host memory.
  auto host_access = [&](int agent) {
    for (size_t d = 0; d < nb; ++d) {
      if (static_cast<int>(d) == agent || !pending[d]) continue;
      emit(StepKind::Sync, static_cast<int>(d), -1);
      pending[d] = false;
      enqueued[d] = false;
    }
  };
  auto needs_copy = [&](int t) {
    return t >= 0 && !model_.tensors[static_cast<size_t>(t)].is_constant();
  };
  auto ensure_host = [&](int t) {
    if (!needs_copy(t) || (where[static_cast<size_t>(t)] & 1u)) return;
    for (size_t b = 0; b < nb; ++b) {
      const int space = space_of(static_cast<int>(b));
      if (space == 0 || !(where[static_cast<size_t>(t)] & (1ull << space))) continue;
      host_access(static_cast<int>(b));
      emit(StepKind::Download, static_cast<int>(b), t);
      ++*transfers;
      pending[b] = false;  // a download waits for everything queued before it
      enqueued[b] = false;
      where[static_cast<size_t>(t)] |= 1u;
      return;
    }
  };
  auto ensure_in = [&](int t, int b) {
    if (!needs_copy(t)) return;
    const int space = space_of(b);
    if (where[static_cast<size_t>(t)] & (1ull << space)) return;
    ensure_host(t);
    if (space == 0) return;
    host_access(b);
    emit(StepKind::Upload, b, t);
    ++*transfers;
    pending[static_cast<size_t>(b)] = true;  // reads host memory until done
    enqueued[static_cast<size_t>(b)] = true;
    where[static_cast<size_t>(t)] |= 1ull << space;
  };

  // Application buffers bound to main-graph inputs are copied into the
  // device's arena first.
  if (boundary != nullptr) {
    for (size_t i = 0; i < graph.inputs.size() && i < boundary->inputs.size(); ++i) {
      const int b = boundary->inputs[i];
      if (b < 0) continue;
      const int t = graph.inputs[i];
      if (space_of(b) == 0) host_access(b);
      emit(StepKind::BufferIn, b, t);
      enqueued[static_cast<size_t>(b)] = true;
      if (space_of(b) == 0) pending[static_cast<size_t>(b)] = true;
      where[static_cast<size_t>(t)] = 1ull << space_of(b);
    }
  }

  size_t next_segment = 0;
  while (next_segment < out->segments.size() && out->segments[next_segment].graph != graph_index) ++next_segment;
  for (int item : items_[static_cast<size_t>(graph_index)]) {
    if (item < 0) {
      const NodeRec& node = graph.nodes[static_cast<size_t>(-1 - item)];
      const kite::ops::Attr* then_attr = find_attr(node, "then_branch");
      const kite::ops::Attr* else_attr = find_attr(node, "else_branch");
      if (then_attr == nullptr || else_attr == nullptr || node.inputs.empty()) {
        return Status(KITE_ERROR_INVALID_MODEL, node_label(node) + " lacks its condition or branches");
      }
      std::set<int> reads = {node.inputs[0]};
      collect_reads(model_, static_cast<int>(then_attr->i), &reads);
      collect_reads(model_, static_cast<int>(else_attr->i), &reads);
      for (int t : reads) ensure_host(t);
      host_access(-1);
      Step s;
      s.kind = StepKind::If;
      s.if_node = &node;
      s.then_graph = static_cast<int>(then_attr->i);
      s.else_graph = static_cast<int>(else_attr->i);
      if (graph_index == 0) {
        // Its placement: count the main-graph nodes before it.
        int index = 0;
        for (const NodeRec& n : graph.nodes) {
          if (&n == &node) break;
          ++index;
        }
        s.placement = index;
      }
      steps->push_back(s);
      for (int t : node.outputs) where[static_cast<size_t>(t)] = 1u;
      continue;
    }
    // The segment that starts at this kernel (segments are in kernel order).
    if (next_segment >= out->segments.size() || out->segments[next_segment].first != item) continue;
    const SegmentRec& seg = out->segments[next_segment];
    const int segment_index = static_cast<int>(next_segment);
    ++next_segment;
    while (next_segment < out->segments.size() && out->segments[next_segment].graph != graph_index) ++next_segment;
    const int b = seg.backend;
    // Rule 4: every value the segment reads from elsewhere, before it starts.
    std::set<int> produced;
    for (int k = seg.first; k < seg.first + seg.count; ++k) {
      const NodeRec& n = *out->kernels[static_cast<size_t>(k)].node;
      for (int t : n.inputs) {
        if (t >= 0 && !produced.count(t)) ensure_in(t, b);
      }
      for (int t : n.outputs) produced.insert(t);
    }
    const bool touches_host = !is_device(b) || space_of(b) == 0;
    if (touches_host) host_access(is_device(b) ? b : -1);
    Step s;
    s.kind = StepKind::Segment;
    s.segment = segment_index;
    s.backend = b;
    steps->push_back(s);
    if (is_device(b)) {
      enqueued[static_cast<size_t>(b)] = true;
      if (space_of(b) == 0) pending[static_cast<size_t>(b)] = true;
    }
    for (int t : produced) where[static_cast<size_t>(t)] = 1ull << space_of(b);
  }

  // Results: the main graph's outputs on the host or in their bound
  // buffers; a branch's outputs on the host (the If step copies them).
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    const int t = graph.outputs[k];
    const int b = boundary != nullptr && k < boundary->outputs.size() ? boundary->outputs[k] : -1;
    if (b < 0) {
      ensure_host(t);
      continue;
    }
    ensure_in(t, b);
    if (space_of(b) == 0) host_access(b);
    emit(StepKind::BufferOut, b, t);
    enqueued[static_cast<size_t>(b)] = true;
    if (space_of(b) == 0) pending[static_cast<size_t>(b)] = true;
  }
  if (boundary == nullptr) {
    host_access(-1);
  } else {
    for (size_t d = 0; d < nb; ++d) {
      if (!pending[d] && !enqueued[d]) continue;
      emit(StepKind::Sync, static_cast<int>(d), -1);
      steps->back().final_sync = true;
    }
  }
  return Status::ok();
}

void ScheduleBuilder::apply_test_mutation(const std::string& mutation, Schedule* out) {
  if (mutation == "skip_transfer") {
    for (StepKind kind : {StepKind::Upload, StepKind::Download}) {
      for (auto it = out->steps[0].begin(); it != out->steps[0].end(); ++it) {
        if (it->kind == kind) {
          out->steps[0].erase(it);
          return;
        }
      }
    }
  } else if (mutation == "skip_sync") {
    for (std::vector<Step>& steps : out->steps) {
      steps.erase(std::remove_if(steps.begin(), steps.end(),
                                 [](const Step& s) { return s.kind == StepKind::Sync; }),
                  steps.end());
    }
  }
}

}  // namespace kite::rt
