#include "session.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "backend_registry.h"

namespace kite::rt {
namespace {

std::string node_label(const NodeRec& n) { return n.op + " '" + n.name + "'"; }

const kite::ops::Attr* find_attr(const NodeRec& n, const char* name) {
  for (const auto& a : n.attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace

Session::~Session() {
  for (PreparedNode& p : prepared_) {
    if (p.kernel != nullptr) backends_[p.backend].api->release(backends_[p.backend].instance, p.kernel);
  }
  for (BackendSlot& b : backends_) {
    if (b.instance != nullptr) b.api->destroy(b.instance);
  }
  std::free(arena_);
}

Status Session::create(std::shared_ptr<const Model> model, const SessionConfig& config,
                       std::unique_ptr<Session>* out) {
  std::unique_ptr<Session> s(new (std::nothrow) Session());
  if (!s) return Status(KITE_ERROR_OUT_OF_MEMORY, "cannot allocate a session");
  s->model_ = std::move(model);
  const Model& m = *s->model_;

  std::vector<const kite_backend_api*> apis;
  Status st = resolve_backends(config.backends, &apis);
  if (!st.is_ok()) return st;
  for (const kite_backend_api* api : apis) {
    if (api->memory != KITE_BACKEND_MEMORY_HOST) {
      return Status(KITE_ERROR_BACKEND, std::string("backend '") + api->name +
                                            "' uses device memory, which this runtime does not "
                                            "schedule yet");
    }
    BackendSlot slot;
    slot.api = api;
    kite_backend_options options{};
    options.threads = config.threads;
    s->error_[0] = '\0';
    const kite_status cs = api->create(&options, &slot.instance, s->error_, sizeof(s->error_));
    if (cs != KITE_OK) {
      return Status(cs, std::string("backend '") + api->name + "' failed to start: " + s->error_);
    }
    s->backends_.push_back(slot);
  }

  // The arena: allocated once, here, of the plan's size.
  const uint64_t alignment = m.plan.alignment < 64 ? 64 : m.plan.alignment;
  const uint64_t arena_bytes = (m.plan.arena_size + alignment - 1) / alignment * alignment;
  if (m.plan.arena_size > arena_bytes || arena_bytes > SIZE_MAX) {
    return Status(KITE_ERROR_OUT_OF_MEMORY, "arena of " + std::to_string(m.plan.arena_size) +
                                                " bytes cannot be allocated");
  }
  s->arena_ = static_cast<uint8_t*>(
      std::aligned_alloc(static_cast<size_t>(alignment),
                         static_cast<size_t>(arena_bytes == 0 ? alignment : arena_bytes)));
  if (s->arena_ == nullptr) {
    return Status(KITE_ERROR_OUT_OF_MEMORY,
                  "cannot allocate the arena of " + std::to_string(m.plan.arena_size) + " bytes");
  }
  std::memset(s->arena_, 0, static_cast<size_t>(arena_bytes == 0 ? alignment : arena_bytes));

  s->tensors_.resize(m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorRec& t = m.tensors[i];
    kite_backend_tensor& bt = s->tensors_[i];
    bt.name = t.name.c_str();
    bt.dtype = t.dtype;
    bt.rank = static_cast<int32_t>(t.shape.size());
    bt.shape = t.shape.data();
    bt.byte_size = t.byte_size;
    bt.is_constant = t.is_constant() ? 1 : 0;
    bt.data = t.is_constant() ? const_cast<uint8_t*>(t.const_data) : s->arena_ + t.arena_offset;
  }

  s->steps_.resize(m.graphs.size());
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    st = s->schedule_graph(static_cast<int>(g), g == 0);
    if (!st.is_ok()) return st;
  }
  *out = std::move(s);
  return Status::ok();
}

Status Session::schedule_graph(int graph_index, bool record_placement) {
  const GraphRec& g = model_->graphs[static_cast<size_t>(graph_index)];
  std::vector<Step>& steps = steps_[static_cast<size_t>(graph_index)];
  for (const NodeRec& node : g.nodes) {
    Status st = place_node(node, graph_index, &steps, record_placement);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

Status Session::prepare_on(const NodeRec& node, int backend, std::vector<Step>* steps) {
  prepared_.emplace_back();
  PreparedNode& p = prepared_.back();
  p.node = &node;
  p.backend = backend;
  for (int t : node.inputs) p.inputs.push_back(t < 0 ? nullptr : &tensors_[static_cast<size_t>(t)]);
  for (int t : node.outputs) p.outputs.push_back(&tensors_[static_cast<size_t>(t)]);
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
  if (steps == nullptr) return Status::ok();  // probe only
  BackendSlot& b = backends_[static_cast<size_t>(backend)];
  error_[0] = '\0';
  const kite_status cs = b.api->prepare(b.instance, &p.abi, &p.kernel, error_, sizeof(error_));
  if (cs != KITE_OK) {
    p.kernel = nullptr;
    return Status(cs, std::string(b.api->name) + " backend cannot prepare " + node_label(node) +
                          ": " + error_);
  }
  Step step;
  step.kernel = &p;
  steps->push_back(step);
  return Status::ok();
}

Status Session::place_node(const NodeRec& node, int graph_index, std::vector<Step>* steps,
                           bool record_placement) {
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
    }
    Step step;
    step.if_node = &node;
    step.then_graph = static_cast<int>(then_attr->i);
    step.else_graph = static_cast<int>(else_attr->i);
    steps->push_back(step);
    rec.backend = "session";
    rec.reason = "control flow";
    if (record_placement) placements_.push_back(rec);
    (void)graph_index;
    return Status::ok();
  }

  // Probe the backends in preference order.
  prepare_on(node, 0, nullptr);
  PreparedNode& probe = prepared_.back();
  std::string declined;
  int chosen = -1;
  for (size_t b = 0; b < backends_.size(); ++b) {
    char reason[256] = {0};
    if (backends_[b].api->supports(backends_[b].instance, &probe.abi, reason, sizeof(reason))) {
      chosen = static_cast<int>(b);
      break;
    }
    declined += std::string(declined.empty() ? "" : "; ") + backends_[b].api->name + ": " +
                (reason[0] ? reason : "not supported");
  }
  prepared_.pop_back();

  if (chosen >= 0) {
    rec.backend = backends_[static_cast<size_t>(chosen)].api->name;
    rec.reason = declined;
    Status st = prepare_on(node, chosen, steps);
    if (!st.is_ok()) return st;
    if (record_placement) placements_.push_back(rec);
    return Status::ok();
  }
  if (!node.body.empty()) {
    // No backend runs the fused kernel: run its body, each node placed alike.
    std::string body_backend;
    for (const NodeRec& b : node.body) {
      size_t before = placements_.size();
      Status st = place_node(b, graph_index, steps, /*record_placement=*/true);
      if (!st.is_ok()) return st;
      const std::string used = placements_[before].backend;
      placements_.resize(before);
      if (body_backend.empty()) body_backend = used;
      else if (body_backend != used) body_backend = "mixed";
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
    if (step.kernel != nullptr) {
      PreparedNode& p = *step.kernel;
      BackendSlot& b = backends_[static_cast<size_t>(p.backend)];
      const kite_status cs = b.api->execute(b.instance, p.kernel, error_, sizeof(error_));
      if (cs != KITE_OK) {
        return Status(cs, std::string(b.api->name) + " backend failed on " + node_label(*p.node) +
                              ": " + error_);
      }
      continue;
    }
    const NodeRec& node = *step.if_node;
    const uint8_t cond = *static_cast<const uint8_t*>(tensors_[static_cast<size_t>(node.inputs[0])].data);
    const int branch = cond != 0 ? step.then_graph : step.else_graph;
    Status st = run_graph(branch);
    if (!st.is_ok()) return st;
    const GraphRec& bg = model_->graphs[static_cast<size_t>(branch)];
    for (size_t k = 0; k < bg.outputs.size(); ++k) {
      const kite_backend_tensor& src = tensors_[static_cast<size_t>(bg.outputs[k])];
      const kite_backend_tensor& dst = tensors_[static_cast<size_t>(node.outputs[k])];
      if (src.data != dst.data) std::memmove(dst.data, src.data, static_cast<size_t>(dst.byte_size));
    }
  }
  return Status::ok();
}

Status Session::run() { return run_graph(0); }

}  // namespace kite::rt
