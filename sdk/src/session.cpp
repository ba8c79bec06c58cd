#include "session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>

namespace kite::rt {
namespace {

std::string node_label(const NodeRec& n) { return n.op + " '" + n.name + "'"; }

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

}  // namespace

Session::~Session() {
  for (PreparedNode& p : prepared_) {
    if (p.kernel != nullptr) {
      BackendSlot& b = backends_[static_cast<size_t>(p.backend)];
      b.api->release(b.instance, p.kernel);
    }
  }
  for (BackendSlot& b : backends_) {
    if (b.instance == nullptr) continue;
    for (void* c : b.device_constants) {
      if (c != nullptr) b.api->free(b.instance, c);
    }
    if (b.device_arena != nullptr) b.api->free(b.instance, b.device_arena);
    b.api->destroy(b.instance);
  }
  std::free(arena_);
}

uint32_t Session::space_bit(int backend) const {
  return backends_[static_cast<size_t>(backend)].device ? (2u << backend) : 1u;
}

Status Session::create(std::shared_ptr<const Model> model, const SessionConfig& config,
                       std::unique_ptr<Session>* out) {
  std::unique_ptr<Session> s(new (std::nothrow) Session());
  if (!s) return Status(KITE_ERROR_OUT_OF_MEMORY, "cannot allocate a session");
  s->model_ = std::move(model);
  const Model& m = *s->model_;

  // The host arena: allocated once, here, of the plan's size.
  const uint64_t alignment = m.plan.alignment < 64 ? 64 : m.plan.alignment;
  const uint64_t arena_bytes = (m.plan.arena_size + alignment - 1) / alignment * alignment;
  if (m.plan.arena_size > arena_bytes || arena_bytes > SIZE_MAX / 2) {
    return Status(KITE_ERROR_OUT_OF_MEMORY, "arena of " + std::to_string(m.plan.arena_size) +
                                                " bytes cannot be allocated");
  }
  if (config.memory_limit != 0 && arena_bytes > config.memory_limit) {
    return Status(KITE_ERROR_OUT_OF_MEMORY,
                  "memory limit: the session needs " + std::to_string(arena_bytes) +
                      " bytes for its arena, the limit allows " +
                      std::to_string(config.memory_limit) + " bytes");
  }
  // An arena larger than the machine's RAM is refused up front: with memory
  // overcommit the allocation could succeed and touching it get the process
  // killed.
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 &&
      arena_bytes / static_cast<uint64_t>(page_size) > static_cast<uint64_t>(pages)) {
    return Status(KITE_ERROR_OUT_OF_MEMORY,
                  "arena of " + std::to_string(arena_bytes) +
                      " bytes is larger than this machine's physical memory (" +
                      std::to_string(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)) +
                      " bytes)");
  }
  const size_t alloc_bytes = static_cast<size_t>(arena_bytes == 0 ? alignment : arena_bytes);
  s->arena_ = static_cast<uint8_t*>(std::aligned_alloc(static_cast<size_t>(alignment), alloc_bytes));
  if (s->arena_ == nullptr) {
    return Status(KITE_ERROR_OUT_OF_MEMORY,
                  "cannot allocate the arena of " + std::to_string(m.plan.arena_size) + " bytes");
  }
  std::memset(s->arena_, 0, alloc_bytes);
  s->host_tensors_.resize(m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorRec& t = m.tensors[i];
    kite_backend_tensor& bt = s->host_tensors_[i];
    bt.name = t.name.c_str();
    bt.dtype = t.dtype;
    bt.rank = static_cast<int32_t>(t.shape.size());
    bt.shape = t.shape.data();
    bt.byte_size = t.byte_size;
    bt.is_constant = t.is_constant() ? 1 : 0;
    bt.data = t.is_constant() ? const_cast<uint8_t*>(t.const_data) : s->arena_ + t.arena_offset;
  }

  Resolution resolution;
  Status st = resolve_backends(config.backends, config.plugin_path, config.strict, &resolution);
  if (!st.is_ok()) return st;
  s->unavailable_ = resolution.unavailable;
  st = s->start_backends(resolution, config);
  if (!st.is_ok()) return st;

  s->steps_.resize(m.graphs.size());
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    // Every graph starts with all values on the host: the main graph because
    // the application writes inputs there, branches because the If step
    // brings what they read to the host first.
    Residency where(m.tensors.size(), 1u);
    st = s->schedule_graph(static_cast<int>(g), g == 0, &where);
    if (!st.is_ok()) return st;
  }
  if (config.poison || std::getenv("KITE_POISON_ARENA") != nullptr) {
    // Everything but the bytes of the main graph's inputs (set by the
    // application before the run).
    std::vector<std::pair<uint64_t, uint64_t>> keep;
    for (int t : m.main_graph().inputs) {
      const TensorRec& in = m.tensors[static_cast<size_t>(t)];
      keep.emplace_back(in.arena_offset, in.arena_offset + in.byte_size);
    }
    std::sort(keep.begin(), keep.end());
    uint64_t cursor = 0;
    for (const auto& k : keep) {
      if (k.first > cursor) s->poison_ranges_.emplace_back(cursor, k.first);
      cursor = std::max(cursor, k.second);
    }
    if (cursor < m.plan.arena_size) s->poison_ranges_.emplace_back(cursor, m.plan.arena_size);
  }
  if (config.strict && !s->fallbacks_.empty()) {
    std::string list;
    for (const std::string& f : s->fallbacks_) list += "\n  " + f;
    return Status(KITE_ERROR_UNSUPPORTED, "strict mode: " + std::to_string(s->fallbacks_.size()) +
                                              " node(s) would not run as placed first:" + list);
  }
  *out = std::move(s);
  return Status::ok();
}

Status Session::start_backends(const Resolution& resolution, const SessionConfig& config) {
  const Model& m = *model_;
  for (const ResolvedBackend& rb : resolution.backends) {
    backends_.emplace_back();
    BackendSlot& slot = backends_.back();
    slot.api = rb.api;
    slot.plugin = rb.plugin;
    slot.device = rb.api->memory == KITE_BACKEND_MEMORY_DEVICE;
    if (slot.device && backends_.size() > 30) {
      return Status(KITE_ERROR_BACKEND, "too many device backends");
    }
    kite_backend_options options{};
    options.threads = config.threads;
    error_[0] = '\0';
    const kite_status cs = rb.api->create(&options, &slot.instance, error_, sizeof(error_));
    if (cs != KITE_OK) {
      slot.instance = nullptr;
      return Status(cs, std::string("backend '") + rb.api->name + "' failed to start: " + error_);
    }
    if (!slot.device) {
      slot.tensors = host_tensors_;
      continue;
    }
    // Device backends mirror the host arena (same offsets) and get their own
    // copy of every constant, uploaded once here.
    const uint64_t alignment = m.plan.alignment < 64 ? 64 : m.plan.alignment;
    if (config.memory_limit != 0) {
      // The limit counts the host arena and, per device backend, its arena
      // and constants; checked before this backend allocates anything.
      uint64_t device_bytes = m.plan.arena_size == 0 ? alignment : m.plan.arena_size;
      for (const TensorRec& t : m.tensors) {
        if (t.is_constant()) device_bytes += t.byte_size == 0 ? 1 : t.byte_size;
      }
      const uint64_t host_bytes = (m.plan.arena_size + alignment - 1) / alignment * alignment;
      const uint64_t needed = host_bytes + device_bytes * static_cast<uint64_t>(
                                               std::count_if(backends_.begin(), backends_.end(),
                                                             [](const BackendSlot& b) { return b.device; }));
      if (needed > config.memory_limit) {
        return Status(KITE_ERROR_OUT_OF_MEMORY,
                      "memory limit: the session needs " + std::to_string(needed) +
                          " bytes (host arena, and arena plus weights on backend '" +
                          rb.api->name + "'), the limit allows " +
                          std::to_string(config.memory_limit) + " bytes");
      }
    }
    kite_status as = rb.api->alloc(slot.instance, m.plan.arena_size == 0 ? alignment : m.plan.arena_size,
                                   alignment, &slot.device_arena);
    if (as != KITE_OK || slot.device_arena == nullptr) {
      slot.device_arena = nullptr;
      return Status(KITE_ERROR_OUT_OF_MEMORY, std::string("backend '") + rb.api->name +
                                                  "' cannot allocate its arena of " +
                                                  std::to_string(m.plan.arena_size) + " bytes");
    }
    slot.tensors = host_tensors_;
    slot.device_constants.assign(m.tensors.size(), nullptr);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const TensorRec& t = m.tensors[i];
      if (!t.is_constant()) {
        slot.tensors[i].data = static_cast<uint8_t*>(slot.device_arena) + t.arena_offset;
        continue;
      }
      void* dev = nullptr;
      as = rb.api->alloc(slot.instance, t.byte_size == 0 ? 1 : t.byte_size, 64, &dev);
      if (as != KITE_OK || dev == nullptr) {
        return Status(KITE_ERROR_OUT_OF_MEMORY, std::string("backend '") + rb.api->name +
                                                    "' cannot allocate constant '" + t.name + "'");
      }
      slot.device_constants[i] = dev;
      if (t.byte_size > 0) {
        as = rb.api->copy_to_device(slot.instance, dev, t.const_data, t.byte_size);
        if (as != KITE_OK) {
          return Status(KITE_ERROR_BACKEND, std::string("backend '") + rb.api->name +
                                                "' cannot upload constant '" + t.name + "'");
        }
      }
      slot.tensors[i].data = dev;
    }
  }
  return Status::ok();
}

Status Session::schedule_graph(int graph_index, bool record_placement, Residency* where) {
  const GraphRec& g = model_->graphs[static_cast<size_t>(graph_index)];
  std::vector<Step>& steps = steps_[static_cast<size_t>(graph_index)];
  for (const NodeRec& node : g.nodes) {
    Status st = place_node(node, graph_index, record_placement, where, &steps);
    if (!st.is_ok()) return st;
  }
  // Results leave every graph on the host: the application reads the main
  // graph's outputs there, and If copies branch outputs there.
  for (int t : g.outputs) make_host_resident(t, where, &steps);
  return Status::ok();
}

Session::PreparedNode& Session::describe(const NodeRec& node, int backend) {
  BackendSlot& slot = backends_[static_cast<size_t>(backend)];
  prepared_.emplace_back();
  PreparedNode& p = prepared_.back();
  p.node = &node;
  p.backend = backend;
  for (int t : node.inputs) p.inputs.push_back(t < 0 ? nullptr : &slot.tensors[static_cast<size_t>(t)]);
  for (int t : node.outputs) p.outputs.push_back(&slot.tensors[static_cast<size_t>(t)]);
  p.abi.name = node.name.c_str();
  p.abi.op = node.op.c_str();
  p.abi.domain = node.domain.c_str();
  p.abi.fused_pattern = node.fused_pattern.c_str();
  p.abi.num_inputs = static_cast<int32_t>(p.inputs.size());
  p.abi.inputs = p.inputs.data();
  p.abi.num_outputs = static_cast<int32_t>(p.outputs.size());
  p.abi.outputs = p.outputs.data();
  p.abi.num_attrs = static_cast<int32_t>(node.abi_attrs.size());
  p.abi.attrs = node.abi_attrs.data();
  return p;
}

void Session::make_host_resident(int tensor, Residency* where, std::vector<Step>* steps) {
  if (tensor < 0 || model_->tensors[static_cast<size_t>(tensor)].is_constant()) return;
  uint32_t& w = (*where)[static_cast<size_t>(tensor)];
  if (w & 1u) return;
  for (size_t b = 0; b < backends_.size(); ++b) {
    if (backends_[b].device && (w & space_bit(static_cast<int>(b)))) {
      Step step;
      step.kind = StepKind::ToHost;
      step.tensor = tensor;
      step.backend = static_cast<int>(b);
      steps->push_back(step);
      ++transfer_count_;
      w |= 1u;
      return;
    }
  }
}

void Session::make_resident(int tensor, int backend, Residency* where, std::vector<Step>* steps) {
  if (tensor < 0 || model_->tensors[static_cast<size_t>(tensor)].is_constant()) return;
  const uint32_t bit = space_bit(backend);
  if ((*where)[static_cast<size_t>(tensor)] & bit) return;
  make_host_resident(tensor, where, steps);
  if (bit == 1u) return;
  Step step;
  step.kind = StepKind::ToDevice;
  step.tensor = tensor;
  step.backend = backend;
  steps->push_back(step);
  ++transfer_count_;
  (*where)[static_cast<size_t>(tensor)] |= bit;
}

Status Session::prepare_on(const NodeRec& node, int backend, Residency* where,
                           std::vector<Step>* steps) {
  for (int t : node.inputs) make_resident(t, backend, where, steps);
  PreparedNode& p = describe(node, backend);
  BackendSlot& b = backends_[static_cast<size_t>(backend)];
  error_[0] = '\0';
  const kite_status cs = b.api->prepare(b.instance, &p.abi, &p.kernel, error_, sizeof(error_));
  if (cs != KITE_OK) {
    p.kernel = nullptr;
    return Status(cs, std::string(b.api->name) + " backend cannot prepare " + node_label(node) +
                          ": " + error_);
  }
  Step step;
  step.kind = StepKind::Kernel;
  step.kernel = &p;
  steps->push_back(step);
  for (int t : node.outputs) (*where)[static_cast<size_t>(t)] = space_bit(backend);
  return Status::ok();
}

Status Session::place_node(const NodeRec& node, int graph_index, bool record_placement,
                           Residency* where, std::vector<Step>* steps) {
  PlacementRec rec;
  rec.node_name = node.name;
  rec.op = node.op;
  rec.fused = !node.fused_pattern.empty();

  if (node.op == "If" && node.domain.empty()) {
    // Control flow runs in the session: read the condition, run one branch.
    const kite::ops::Attr* then_attr = find_attr(node, "then_branch");
    const kite::ops::Attr* else_attr = find_attr(node, "else_branch");
    if (then_attr == nullptr || else_attr == nullptr || then_attr->type != KITE_ATTR_GRAPH ||
        else_attr->type != KITE_ATTR_GRAPH) {
      return Status(KITE_ERROR_INVALID_MODEL, node_label(node) + " lacks then/else branch graphs");
    }
    if (node.inputs.size() != 1 || node.inputs[0] < 0) {
      return Status(KITE_ERROR_INVALID_MODEL, node_label(node) + " needs exactly one condition");
    }
    const TensorRec& cond = model_->tensors[static_cast<size_t>(node.inputs[0])];
    if (cond.dtype != KITE_DTYPE_BOOL || cond.byte_size != 1) {
      return Status(KITE_ERROR_INVALID_MODEL, node_label(node) + ": condition '" + cond.name +
                                                  "' must hold one bool");
    }
    std::set<int> reads = {node.inputs[0]};
    for (const kite::ops::Attr* branch : {then_attr, else_attr}) {
      const GraphRec& bg = model_->graphs[static_cast<size_t>(branch->i)];
      if (bg.outputs.size() != node.outputs.size()) {
        return Status(KITE_ERROR_INVALID_MODEL,
                      node_label(node) + ": branch graph " + std::to_string(branch->i) + " has " +
                          std::to_string(bg.outputs.size()) + " outputs, the node has " +
                          std::to_string(node.outputs.size()));
      }
      for (size_t k = 0; k < bg.outputs.size(); ++k) {
        const TensorRec& src = model_->tensors[static_cast<size_t>(bg.outputs[k])];
        const TensorRec& dst = model_->tensors[static_cast<size_t>(node.outputs[k])];
        if (src.dtype != dst.dtype || src.shape != dst.shape) {
          return Status(KITE_ERROR_INVALID_MODEL,
                        node_label(node) + ": branch output '" + src.name + "' (" +
                            kite::ops::shape_string(src.shape) + ") does not match output '" +
                            dst.name + "' (" + kite::ops::shape_string(dst.shape) + ")");
        }
      }
      collect_reads(*model_, static_cast<int>(branch->i), &reads);
    }
    for (int t : reads) make_host_resident(t, where, steps);
    Step step;
    step.kind = StepKind::If;
    step.if_node = &node;
    step.then_graph = static_cast<int>(then_attr->i);
    step.else_graph = static_cast<int>(else_attr->i);
    steps->push_back(step);
    for (int t : node.outputs) (*where)[static_cast<size_t>(t)] = 1u;
    rec.backend = "session";
    rec.reason = "control flow";
    if (record_placement) placements_.push_back(rec);
    return Status::ok();
  }

  // Probe the backends in preference order. A backend that lacks the fused
  // kernel but runs every node of the body takes the node decomposed, so a
  // fused node leaves its preferred backend only for ops that backend lacks.
  std::string declined;
  for (const std::string& u : unavailable_) declined += (declined.empty() ? "" : "; ") + u;
  auto supports = [&](const NodeRec& n, size_t b, std::string* reason) {
    PreparedNode& probe = describe(n, static_cast<int>(b));
    char text[256] = {0};
    const int ok = backends_[b].api->supports(backends_[b].instance, &probe.abi, text, sizeof(text));
    prepared_.pop_back();
    if (!ok && reason) *reason = text[0] ? text : "not supported";
    return ok != 0;
  };
  int chosen = -1;
  bool decompose_on_chosen = false;
  for (size_t b = 0; b < backends_.size() && chosen < 0; ++b) {
    std::string reason;
    if (supports(node, b, &reason)) {
      chosen = static_cast<int>(b);
      break;
    }
    declined += std::string(declined.empty() ? "" : "; ") + backends_[b].api->name + ": " + reason;
    if (node.body.empty()) continue;
    bool body_ok = true;
    for (const NodeRec& body_node : node.body) body_ok = body_ok && supports(body_node, b, nullptr);
    if (body_ok) {
      chosen = static_cast<int>(b);
      decompose_on_chosen = true;
    }
  }

  if (chosen >= 0 && !decompose_on_chosen) {
    rec.backend = backends_[static_cast<size_t>(chosen)].api->name;
    rec.reason = declined;
    Status st = prepare_on(node, chosen, where, steps);
    if (!st.is_ok()) return st;
    if (chosen > 0 || !unavailable_.empty()) {
      fallbacks_.push_back(node_label(node) + " -> " + rec.backend + " (" + declined + ")");
    }
    if (record_placement) placements_.push_back(rec);
    return Status::ok();
  }
  if (!node.body.empty()) {
    // Run the body: on the chosen backend, or (none runs it all) each body
    // node placed on its own.
    fallbacks_.push_back(node_label(node) + " decomposed into " + std::to_string(node.body.size()) +
                         " nodes (" + declined + ")");
    std::string body_backend;
    for (const NodeRec& b : node.body) {
      std::string used;
      if (decompose_on_chosen) {
        Status st = prepare_on(b, chosen, where, steps);
        if (!st.is_ok()) return st;
        used = backends_[static_cast<size_t>(chosen)].api->name;
      } else {
        const size_t before = placements_.size();
        Status st = place_node(b, graph_index, /*record_placement=*/true, where, steps);
        if (!st.is_ok()) return st;
        used = placements_[before].backend;
        placements_.resize(before);
      }
      if (body_backend.empty()) {
        body_backend = used;
      } else if (body_backend != used) {
        body_backend = "mixed";
      }
    }
    rec.backend = body_backend;
    rec.decomposed = true;
    rec.reason = declined;
    if (record_placement) placements_.push_back(rec);
    return Status::ok();
  }
  return Status(KITE_ERROR_UNSUPPORTED,
                node_label(node) + " is not supported by any backend (" + declined + ")");
}

Status Session::run_graph(int graph_index) {
  for (const Step& step : steps_[static_cast<size_t>(graph_index)]) {
    switch (step.kind) {
      case StepKind::Kernel: {
        PreparedNode& p = *step.kernel;
        BackendSlot& b = backends_[static_cast<size_t>(p.backend)];
        const kite_status cs = b.api->execute(b.instance, p.kernel, error_, sizeof(error_));
        if (cs != KITE_OK) {
          return Status(cs, std::string(b.api->name) + " backend failed on " +
                                node_label(*p.node) + ": " + error_);
        }
        break;
      }
      case StepKind::ToHost:
      case StepKind::ToDevice: {
        BackendSlot& b = backends_[static_cast<size_t>(step.backend)];
        const TensorRec& t = model_->tensors[static_cast<size_t>(step.tensor)];
        uint8_t* dev = static_cast<uint8_t*>(b.device_arena) + t.arena_offset;
        uint8_t* host = arena_ + t.arena_offset;
        const kite_status cs = step.kind == StepKind::ToHost
                                   ? b.api->copy_to_host(b.instance, host, dev, t.byte_size)
                                   : b.api->copy_to_device(b.instance, dev, host, t.byte_size);
        if (cs != KITE_OK) {
          return Status(cs, std::string(b.api->name) + " backend failed to copy tensor '" +
                                t.name + "'");
        }
        break;
      }
      case StepKind::If: {
        const NodeRec& node = *step.if_node;
        const uint8_t cond =
            *static_cast<const uint8_t*>(host_tensors_[static_cast<size_t>(node.inputs[0])].data);
        const int branch = cond != 0 ? step.then_graph : step.else_graph;
        Status st = run_graph(branch);
        if (!st.is_ok()) return st;
        const GraphRec& bg = model_->graphs[static_cast<size_t>(branch)];
        for (size_t k = 0; k < bg.outputs.size(); ++k) {
          const kite_backend_tensor& src = host_tensors_[static_cast<size_t>(bg.outputs[k])];
          const kite_backend_tensor& dst = host_tensors_[static_cast<size_t>(node.outputs[k])];
          if (src.data != dst.data && dst.byte_size > 0) {
            std::memmove(dst.data, src.data, static_cast<size_t>(dst.byte_size));
          }
        }
        break;
      }
    }
  }
  return Status::ok();
}

Status Session::run() {
  for (const auto& r : poison_ranges_) {
    std::memset(arena_ + r.first, 0xFF, static_cast<size_t>(r.second - r.first));
  }
  Status st = run_graph(0);
  if (!st.is_ok()) return st;
  for (BackendSlot& b : backends_) {
    if (b.device && b.api->synchronize != nullptr) {
      const kite_status cs = b.api->synchronize(b.instance);
      if (cs != KITE_OK) return Status(cs, std::string(b.api->name) + " backend failed to synchronize");
    }
  }
  return Status::ok();
}

}  // namespace kite::rt
