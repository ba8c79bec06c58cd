// The C API: argument checks, status codes and the per-thread last error.
// No exception leaves this file.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <utility>

#include "kite/abi/status_guard.h"
#include "kite/backend.h"
#include "kite/kite.h"
#include "kite/ops/op_node.h"
#include "model.h"
#include "session.h"

struct kite_model {
  std::shared_ptr<kite::rt::Model> model;
};

struct kite_session_options {
  kite::rt::SessionConfig config;
};

struct kite_session {
  std::unique_ptr<kite::rt::Session> session;
  std::vector<int> inputs;   // tensor indices of the main graph's inputs
  std::vector<int> outputs;
  std::vector<kite::rt::BackendUsage> backends;  // fixed at creation
  // Set while a call that touches the arena (set_input, get_output, run) is
  // in progress: such a call overlapping another one on this session (two
  // threads, which kite.h forbids) fails instead of racing.
  mutable std::atomic<bool> busy{false};
};

namespace {

using kite::rt::Status;

kite_status report(const Status& s) {
  if (s.is_ok()) {
    kite::rt::clear_last_error();
  } else {
    kite::rt::set_last_error(s.message());
  }
  return s.code();
}

kite_status fail(kite_status code, const std::string& message) {
  return report(Status(code, message));
}

// Holds a session's busy flag for one call, if it was free.
class SessionUse {
 public:
  explicit SessionUse(const kite_session* s)
      : s_(s), ok_(!s->busy.exchange(true, std::memory_order_acquire)) {}
  ~SessionUse() {
    if (ok_) s_->busy.store(false, std::memory_order_release);
  }
  SessionUse(const SessionUse&) = delete;
  SessionUse& operator=(const SessionUse&) = delete;
  bool ok() const { return ok_; }

 private:
  const kite_session* s_;
  bool ok_;
};

kite_status busy(const char* fn) {
  return fail(KITE_ERROR_INVALID_ARGUMENT,
              std::string(fn) + ": the session is in use by another call (on another thread); "
                                "calls on one session must not overlap, use one session per thread");
}

// body(), an exception turned into a status and this thread's last error.
template <typename F>
kite_status guarded(const char* fn, F&& body) {
  return kite::abi::guard_exceptions(fn, std::forward<F>(body), fail);
}

// "<what> index <index> out of range (<count> <what>s)", or "" when in range:
// every index a caller passes is checked with this one message.
std::string range_error(const char* what, int64_t index, size_t count) {
  if (index >= 0 && static_cast<uint64_t>(index) < count) return std::string();
  return std::string(what) + " index " + std::to_string(index) + " out of range (" + std::to_string(count) + " " +
         what + "s)";
}

kite_status check_index(const char* fn, size_t count, int64_t index, const char* what) {
  const std::string e = range_error(what, index, count);
  if (!e.empty()) return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + e);
  return KITE_OK;
}

kite_status check_index(const char* fn, const std::vector<int>& list, int32_t index, const char* what) {
  return check_index(fn, list.size(), index, what);
}

void fill_info(const kite::rt::Model& m, int tensor, kite_tensor_info* out) {
  const kite::rt::TensorRec& t = m.tensors[static_cast<size_t>(tensor)];
  out->name = t.name.c_str();
  out->dtype = t.dtype;
  out->rank = static_cast<int32_t>(t.shape.size());
  out->shape = t.shape.data();
  out->byte_size = t.byte_size;
}

kite_status find_named(const char* fn, const kite_session* session, const std::vector<int>& list,
                       const char* name, const char* what, int32_t* out_index) {
  if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": session is NULL");
  if (name == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": name is NULL");
  const kite::rt::Model& m = session->session->model();
  std::string names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string& n = m.tensors[static_cast<size_t>(list[i])].name;
    if (n == name) {
      if (out_index) *out_index = static_cast<int32_t>(i);
      kite::rt::clear_last_error();
      return KITE_OK;
    }
    names += (names.empty() ? "'" : ", '") + n + "'";
  }
  return fail(KITE_ERROR_NOT_FOUND, std::string(fn) + ": the model has no " + what + " '" + name +
                                        "' (its " + what + "s: " + names + ")");
}

}  // namespace

extern "C" {

int kite_version_number(void) { return KITE_VERSION_NUMBER; }
const char* kite_version_string(void) { return KITE_VERSION_STRING; }

const char* kite_status_string(kite_status status) {
  switch (status) {
    case KITE_OK: return "ok";
    case KITE_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case KITE_ERROR_IO: return "I/O error";
    case KITE_ERROR_INVALID_MODEL: return "invalid model";
    case KITE_ERROR_UNSUPPORTED_VERSION: return "unsupported format version";
    case KITE_ERROR_UNSUPPORTED: return "unsupported";
    case KITE_ERROR_OUT_OF_MEMORY: return "out of memory";
    case KITE_ERROR_BACKEND: return "backend error";
    case KITE_ERROR_SIZE_MISMATCH: return "size mismatch";
    case KITE_ERROR_NOT_FOUND: return "not found";
    case KITE_ERROR_INTERNAL: return "internal error";
    case KITE_ERROR_DEVICE_LOST: return "device lost";
  }
  return "unknown status";
}

const char* kite_last_error(void) { return kite::rt::last_error(); }

void kite_format_version_supported(int32_t* out_major, int32_t* out_minor) {
  if (out_major) *out_major = KITE_FORMAT_MAJOR;
  if (out_minor) *out_minor = KITE_FORMAT_MINOR;
}

int32_t kite_backend_abi_version(void) { return KITE_BACKEND_ABI_VERSION; }
const char* kite_dtype_name(kite_dtype dtype) { return kite::ops::dtype_name(dtype); }
size_t kite_dtype_size(kite_dtype dtype) { return kite::ops::dtype_size(dtype); }

kite_status kite_model_load_file(const char* path, kite_model** out_model) {
  return guarded("kite_model_load_file", [&]() {
    if (path == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_load_file: path is NULL");
    if (out_model == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_load_file: out_model is NULL");
    std::shared_ptr<kite::rt::Model> m;
    Status s = kite::rt::Model::load_file(path, &m);
    if (!s.is_ok()) return report(s);
    *out_model = new kite_model{std::move(m)};
    return report(s);
  });
}

kite_status kite_model_load_memory(const void* data, size_t size, kite_model** out_model) {
  return guarded("kite_model_load_memory", [&]() {
    if (out_model == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_load_memory: out_model is NULL");
    std::shared_ptr<kite::rt::Model> m;
    Status s = kite::rt::Model::load_memory(data, size, &m);
    if (!s.is_ok()) return report(s);
    *out_model = new kite_model{std::move(m)};
    return report(s);
  });
}

void kite_model_destroy(kite_model* model) { delete model; }

kite_status kite_model_get_format_version(const kite_model* model, int32_t* out_major,
                                          int32_t* out_minor) {
  if (model == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_format_version: model is NULL");
  if (out_major) *out_major = model->model->format_major;
  if (out_minor) *out_minor = model->model->format_minor;
  return report(Status::ok());
}

const char* kite_model_get_producer(const kite_model* model) {
  return model == nullptr ? "" : model->model->producer.c_str();
}

namespace {

const kite::rt::NodeRec* find_node(const char* fn, const kite_model* model, int32_t graph,
                                   int32_t node, int32_t body, kite_status* status) {
  auto bad = [&](const std::string& what) {
    *status = fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + what);
    return nullptr;
  };
  if (model == nullptr) return bad("model is NULL");
  const kite::rt::Model& m = *model->model;
  if (std::string e = range_error("graph", graph, m.graphs.size()); !e.empty()) return bad(e);
  const auto& nodes = m.graphs[static_cast<size_t>(graph)].nodes;
  if (std::string e = range_error("node", node, nodes.size()); !e.empty()) return bad(e);
  const kite::rt::NodeRec* n = &nodes[static_cast<size_t>(node)];
  if (body >= 0) {
    if (std::string e = range_error("body node", body, n->body.size()); !e.empty()) return bad(e);
    n = &n->body[static_cast<size_t>(body)];
  }
  *status = KITE_OK;
  return n;
}

}  // namespace

kite_status kite_model_get_source_opset(const kite_model* model, int64_t* out_opset) {
  if (model == nullptr || out_opset == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_source_opset: model or out_opset is NULL");
  }
  *out_opset = model->model->source_opset;
  return report(Status::ok());
}

kite_status kite_model_get_plan(const kite_model* model, kite_model_plan* out_plan) {
  if (model == nullptr || out_plan == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_plan: model or out_plan is NULL");
  }
  const kite::rt::PlanRec& p = model->model->plan;
  out_plan->arena_size = p.arena_size;
  out_plan->alignment = p.alignment;
  out_plan->lower_bound = p.lower_bound;
  out_plan->naive_size = p.naive_size;
  out_plan->strategy = p.strategy.c_str();
  uint64_t weights = 0;
  for (const kite::rt::TensorRec& t : model->model->tensors) {
    if (t.is_constant()) weights += t.byte_size;
  }
  out_plan->weights_bytes = weights;
  return report(Status::ok());
}

kite_status kite_model_get_tensor_count(const kite_model* model, int32_t* out_count) {
  if (model == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_tensor_count: model or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(model->model->tensors.size());
  return report(Status::ok());
}

kite_status kite_model_get_tensor(const kite_model* model, int32_t index, kite_model_tensor* out) {
  if (model == nullptr || out == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_tensor: model or out_tensor is NULL");
  }
  const auto& tensors = model->model->tensors;
  if (kite_status st = check_index("kite_model_get_tensor", tensors.size(), index, "tensor")) return st;
  const kite::rt::TensorRec& t = tensors[static_cast<size_t>(index)];
  out->name = t.name.c_str();
  out->dtype = t.dtype;
  out->rank = static_cast<int32_t>(t.shape.size());
  out->shape = t.shape.data();
  out->byte_size = t.byte_size;
  out->kind = static_cast<kite_tensor_kind>(static_cast<int>(t.kind));
  out->arena_offset = t.is_constant() ? 0 : t.arena_offset;
  return report(Status::ok());
}

kite_status kite_model_get_graph_count(const kite_model* model, int32_t* out_count) {
  if (model == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_graph_count: model or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(model->model->graphs.size());
  return report(Status::ok());
}

kite_status kite_model_get_graph(const kite_model* model, int32_t graph, kite_model_graph* out) {
  if (model == nullptr || out == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_graph: model or out_graph is NULL");
  }
  const auto& graphs = model->model->graphs;
  if (kite_status st = check_index("kite_model_get_graph", graphs.size(), graph, "graph")) return st;
  const kite::rt::GraphRec& g = graphs[static_cast<size_t>(graph)];
  out->name = g.name.c_str();
  out->num_nodes = static_cast<int32_t>(g.nodes.size());
  out->num_inputs = static_cast<int32_t>(g.inputs.size());
  out->inputs = g.inputs.data();
  out->num_outputs = static_cast<int32_t>(g.outputs.size());
  out->outputs = g.outputs.data();
  return report(Status::ok());
}

kite_status kite_model_get_node(const kite_model* model, int32_t graph, int32_t node, int32_t body,
                                kite_model_node* out) {
  kite_status st = KITE_OK;
  const kite::rt::NodeRec* n = find_node("kite_model_get_node", model, graph, node, body, &st);
  if (n == nullptr) return st;
  if (out == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_node: out_node is NULL");
  out->name = n->name.c_str();
  out->op = n->op.c_str();
  out->domain = n->domain.c_str();
  out->fused_pattern = n->fused_pattern.c_str();
  out->num_inputs = static_cast<int32_t>(n->inputs.size());
  out->inputs = n->inputs.data();
  out->num_outputs = static_cast<int32_t>(n->outputs.size());
  out->outputs = n->outputs.data();
  out->num_attrs = static_cast<int32_t>(n->attrs.size());
  out->num_body_nodes = static_cast<int32_t>(n->body.size());
  return report(Status::ok());
}

kite_status kite_model_get_node_attr(const kite_model* model, int32_t graph, int32_t node, int32_t body,
                                     int32_t attr, kite_model_attr* out) {
  kite_status st = KITE_OK;
  const kite::rt::NodeRec* n = find_node("kite_model_get_node_attr", model, graph, node, body, &st);
  if (n == nullptr) return st;
  if (out == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_node_attr: out_attr is NULL");
  if (kite_status st = check_index("kite_model_get_node_attr", static_cast<size_t>(n->abi_attrs.count()),
                                   attr, "attribute")) {
    return st;
  }
  const kite_backend_attr& a = n->abi_attrs[static_cast<size_t>(attr)];
  out->name = a.name;
  out->type = static_cast<int32_t>(a.type);
  out->i = a.i;
  out->f = a.f;
  out->s = a.s;
  out->count = a.count;
  out->ints = a.ints;
  out->floats = a.floats;
  out->strings = a.strings;
  return report(Status::ok());
}

kite_status kite_model_get_input_count(const kite_model* model, int32_t* out_count) {
  if (model == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_input_count: model or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(model->model->main_graph().inputs.size());
  return report(Status::ok());
}

kite_status kite_model_get_output_count(const kite_model* model, int32_t* out_count) {
  if (model == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_output_count: model or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(model->model->main_graph().outputs.size());
  return report(Status::ok());
}

kite_status kite_model_get_input_info(const kite_model* model, int32_t index,
                                      kite_tensor_info* out_info) {
  if (model == nullptr || out_info == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_input_info: model or out_info is NULL");
  }
  const std::vector<int>& list = model->model->main_graph().inputs;
  kite_status st = check_index("kite_model_get_input_info", list, index, "input");
  if (st != KITE_OK) return st;
  fill_info(*model->model, list[static_cast<size_t>(index)], out_info);
  return report(Status::ok());
}

kite_status kite_model_get_output_info(const kite_model* model, int32_t index,
                                       kite_tensor_info* out_info) {
  if (model == nullptr || out_info == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_model_get_output_info: model or out_info is NULL");
  }
  const std::vector<int>& list = model->model->main_graph().outputs;
  kite_status st = check_index("kite_model_get_output_info", list, index, "output");
  if (st != KITE_OK) return st;
  fill_info(*model->model, list[static_cast<size_t>(index)], out_info);
  return report(Status::ok());
}

kite_status kite_session_options_create(kite_session_options** out_options) {
  return guarded("kite_session_options_create", [&]() {
    if (out_options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_create: out_options is NULL");
    *out_options = new kite_session_options();
    return report(Status::ok());
  });
}

void kite_session_options_destroy(kite_session_options* options) { delete options; }

kite_status kite_session_options_set_backends(kite_session_options* options, const char* backends) {
  return guarded("kite_session_options_set_backends", [&]() {
    if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_backends: options is NULL");
    if (backends == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_backends: backends is NULL");
    options->config.backends = backends;
    return report(Status::ok());
  });
}

kite_status kite_session_options_set_threads(kite_session_options* options, int32_t threads) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_threads: options is NULL");
  if (threads < 0) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_threads: threads is " +
                                                 std::to_string(threads) + ", must be >= 0");
  }
  options->config.threads = threads;
  return report(Status::ok());
}

kite_status kite_session_options_set_backend_path(kite_session_options* options, const char* paths) {
  return guarded("kite_session_options_set_backend_path", [&]() {
    if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_backend_path: options is NULL");
    options->config.plugin_path = paths == nullptr ? "" : paths;
    return report(Status::ok());
  });
}

kite_status kite_session_options_set_strict(kite_session_options* options, int32_t strict) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_strict: options is NULL");
  options->config.strict = strict != 0;
  return report(Status::ok());
}

kite_status kite_session_options_set_memory_limit(kite_session_options* options, uint64_t bytes) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_memory_limit: options is NULL");
  options->config.memory_limit = bytes;
  return report(Status::ok());
}

kite_status kite_session_options_set_poison(kite_session_options* options, int32_t poison) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_poison: options is NULL");
  options->config.poison = poison != 0;
  return report(Status::ok());
}

kite_status kite_session_options_set_backend_option(kite_session_options* options, const char* backend,
                                                    const char* key, const char* value) {
  return guarded("kite_session_options_set_backend_option", [&]() {
    if (options == nullptr || backend == nullptr || key == nullptr || value == nullptr) {
      return fail(KITE_ERROR_INVALID_ARGUMENT,
                  "kite_session_options_set_backend_option: options, backend, key or value is NULL");
    }
    if (*backend == '\0' || *key == '\0') {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_backend_option: empty backend or key");
    }
    auto& list = options->config.backend_options[backend];
    for (auto& kv : list) {
      if (kv.first == key) {
        kv.second = value;
        return report(Status::ok());
      }
    }
    list.emplace_back(key, value);
    return report(Status::ok());
  });
}

kite_status kite_session_options_set_device_index(kite_session_options* options, const char* backend,
                                                  int32_t index) {
  return guarded("kite_session_options_set_device_index", [&]() {
    if (options == nullptr || backend == nullptr || *backend == '\0') {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_device_index: options or backend is NULL");
    }
    if (index < 0) {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_device_index: index is " +
                                                   std::to_string(index) + ", must be >= 0");
    }
    options->config.device_index[backend] = index;
    return report(Status::ok());
  });
}

kite_status kite_session_options_set_external_queue(kite_session_options* options, const char* backend,
                                                   void* queue) {
  return guarded("kite_session_options_set_external_queue", [&]() {
    if (options == nullptr || backend == nullptr || *backend == '\0') {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_external_queue: options or backend is NULL");
    }
    if (queue == nullptr) {
      options->config.external_queue.erase(backend);
    } else {
      options->config.external_queue[backend] = queue;
    }
    return report(Status::ok());
  });
}

kite_status kite_session_options_set_precision(kite_session_options* options, uint32_t flags) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_precision: options is NULL");
  const uint32_t known = KITE_PRECISION_FP16_STORAGE | KITE_PRECISION_FP16_COMPUTE | KITE_PRECISION_TF32;
  if ((flags & ~known) != 0) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_precision: unknown flags " +
                                                 std::to_string(flags & ~known));
  }
  options->config.precision = flags;
  return report(Status::ok());
}

kite_status kite_session_options_set_cache_dir(kite_session_options* options, const char* dir) {
  return guarded("kite_session_options_set_cache_dir", [&]() {
    if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_cache_dir: options is NULL");
    options->config.cache_dir = dir == nullptr ? "" : dir;
    return report(Status::ok());
  });
}

kite_status kite_session_options_set_log_callback(kite_session_options* options, kite_log_callback callback,
                                                  void* user) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_log_callback: options is NULL");
  options->config.log = callback;
  options->config.log_user = user;
  return report(Status::ok());
}

kite_status kite_session_options_set_profiling(kite_session_options* options, int32_t profile) {
  if (options == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_options_set_profiling: options is NULL");
  options->config.profile = profile != 0;
  return report(Status::ok());
}

kite_status kite_session_create(kite_model* model, const kite_session_options* options,
                                kite_session** out_session) {
  return guarded("kite_session_create", [&]() {
    if (model == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_create: model is NULL");
    if (out_session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_create: out_session is NULL");
    kite::rt::SessionConfig config;
    if (options != nullptr) config = options->config;
    std::unique_ptr<kite::rt::Session> session;
    Status s = kite::rt::Session::create(model->model, config, &session);
    if (!s.is_ok()) return report(s);
    auto* handle = new kite_session();
    handle->inputs = model->model->main_graph().inputs;
    handle->outputs = model->model->main_graph().outputs;
    handle->backends = session->backend_usage();
    handle->session = std::move(session);
    *out_session = handle;
    return report(s);
  });
}

void kite_session_destroy(kite_session* session) { delete session; }  // waits for a run in flight

namespace {

kite_status in_flight(const char* fn) {
  return fail(KITE_ERROR_INVALID_ARGUMENT,
              std::string(fn) + ": a run is in flight (kite_session_run_async); call kite_session_wait first");
}

}  // namespace

kite_status kite_session_get_input_count(const kite_session* session, int32_t* out_count) {
  if (session == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_input_count: session or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(session->inputs.size());
  return report(Status::ok());
}

kite_status kite_session_get_output_count(const kite_session* session, int32_t* out_count) {
  if (session == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_output_count: session or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(session->outputs.size());
  return report(Status::ok());
}

kite_status kite_session_get_input_info(const kite_session* session, int32_t index,
                                        kite_tensor_info* out_info) {
  if (session == nullptr || out_info == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_input_info: session or out_info is NULL");
  }
  kite_status st = check_index("kite_session_get_input_info", session->inputs, index, "input");
  if (st != KITE_OK) return st;
  fill_info(session->session->model(), session->inputs[static_cast<size_t>(index)], out_info);
  return report(Status::ok());
}

kite_status kite_session_get_output_info(const kite_session* session, int32_t index,
                                         kite_tensor_info* out_info) {
  if (session == nullptr || out_info == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_output_info: session or out_info is NULL");
  }
  kite_status st = check_index("kite_session_get_output_info", session->outputs, index, "output");
  if (st != KITE_OK) return st;
  fill_info(session->session->model(), session->outputs[static_cast<size_t>(index)], out_info);
  return report(Status::ok());
}

kite_status kite_session_find_input(const kite_session* session, const char* name,
                                    int32_t* out_index) {
  return guarded("kite_session_find_input", [&]() {
    return find_named("kite_session_find_input", session,
                      session ? session->inputs : std::vector<int>(), name, "input", out_index);
  });
}

kite_status kite_session_find_output(const kite_session* session, const char* name,
                                     int32_t* out_index) {
  return guarded("kite_session_find_output", [&]() {
    return find_named("kite_session_find_output", session,
                      session ? session->outputs : std::vector<int>(), name, "output", out_index);
  });
}

kite_status kite_session_set_input(kite_session* session, int32_t index, const void* data,
                                   size_t size) {
  return guarded("kite_session_set_input", [&]() {
    if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_set_input: session is NULL");
    SessionUse use(session);
    if (!use.ok()) return busy("kite_session_set_input");
    if (session->session->in_flight()) return in_flight("kite_session_set_input");
    kite_status st = check_index("kite_session_set_input", session->inputs, index, "input");
    if (st != KITE_OK) return st;
    const int t = session->inputs[static_cast<size_t>(index)];
    const kite::rt::TensorRec& rec = session->session->model().tensors[static_cast<size_t>(t)];
    if (data == nullptr && rec.byte_size != 0) {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_set_input: data for input '" + rec.name + "' is NULL");
    }
    if (size != rec.byte_size) {
      return fail(KITE_ERROR_SIZE_MISMATCH,
                  "kite_session_set_input: input '" + rec.name + "' (" +
                      kite::ops::shape_string(rec.shape) + " " + kite::ops::dtype_name(rec.dtype) +
                      ") takes " + std::to_string(rec.byte_size) + " bytes, got " +
                      std::to_string(size));
    }
    if (size > 0) std::memcpy(session->session->tensor_data(t), data, size);
    return report(Status::ok());
  });
}

kite_status kite_session_set_input_by_name(kite_session* session, const char* name,
                                           const void* data, size_t size) {
  int32_t index = -1;
  kite_status st = kite_session_find_input(session, name, &index);
  if (st != KITE_OK) return st;
  return kite_session_set_input(session, index, data, size);
}

kite_status kite_session_get_output(const kite_session* session, int32_t index, void* data,
                                    size_t size) {
  return guarded("kite_session_get_output", [&]() {
    if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_output: session is NULL");
    SessionUse use(session);
    if (!use.ok()) return busy("kite_session_get_output");
    if (session->session->in_flight()) return in_flight("kite_session_get_output");
    kite_status st = check_index("kite_session_get_output", session->outputs, index, "output");
    if (st != KITE_OK) return st;
    const int t = session->outputs[static_cast<size_t>(index)];
    const kite::rt::TensorRec& rec = session->session->model().tensors[static_cast<size_t>(t)];
    if (session->session->output_bound(index)) {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_output: output '" + rec.name +
                                                   "' is bound to an application buffer; read it there");
    }
    if (data == nullptr && rec.byte_size != 0) {
      return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_output: buffer for output '" + rec.name + "' is NULL");
    }
    if (size != rec.byte_size) {
      return fail(KITE_ERROR_SIZE_MISMATCH,
                  "kite_session_get_output: output '" + rec.name + "' (" +
                      kite::ops::shape_string(rec.shape) + " " + kite::ops::dtype_name(rec.dtype) +
                      ") holds " + std::to_string(rec.byte_size) + " bytes, buffer has " +
                      std::to_string(size));
    }
    if (size > 0) std::memcpy(data, session->session->tensor_data(t), size);
    return report(Status::ok());
  });
}

kite_status kite_session_get_output_by_name(const kite_session* session, const char* name,
                                            void* data, size_t size) {
  int32_t index = -1;
  kite_status st = kite_session_find_output(session, name, &index);
  if (st != KITE_OK) return st;
  return kite_session_get_output(session, index, data, size);
}

kite_status kite_session_get_input_pointer(kite_session* session, int32_t index, void** out_data) {
  if (session == nullptr || out_data == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_input_pointer: session or out_data is NULL");
  }
  kite_status st = check_index("kite_session_get_input_pointer", session->inputs, index, "input");
  if (st != KITE_OK) return st;
  *out_data = session->session->tensor_data(session->inputs[static_cast<size_t>(index)]);
  return report(Status::ok());
}

kite_status kite_session_get_output_pointer(const kite_session* session, int32_t index,
                                            const void** out_data) {
  if (session == nullptr || out_data == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_output_pointer: session or out_data is NULL");
  }
  kite_status st = check_index("kite_session_get_output_pointer", session->outputs, index, "output");
  if (st != KITE_OK) return st;
  *out_data = session->session->tensor_data(session->outputs[static_cast<size_t>(index)]);
  return report(Status::ok());
}

kite_status kite_session_run(kite_session* session) {
  return guarded("kite_session_run", [&]() {
    if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_run: session is NULL");
    SessionUse use(session);
    if (!use.ok()) return busy("kite_session_run");
    if (session->session->in_flight()) return in_flight("kite_session_run");
    return report(session->session->run());
  });
}

kite_status kite_session_run_async(kite_session* session) {
  return guarded("kite_session_run_async", [&]() {
    if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_run_async: session is NULL");
    SessionUse use(session);
    if (!use.ok()) return busy("kite_session_run_async");
    if (session->session->in_flight()) return in_flight("kite_session_run_async");
    return report(session->session->run_async());
  });
}

kite_status kite_session_wait(kite_session* session) {
  return guarded("kite_session_wait", [&]() {
    if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_wait: session is NULL");
    SessionUse use(session);
    if (!use.ok()) return busy("kite_session_wait");
    return report(session->session->wait());
  });
}

namespace {

kite_status bind_buffer(const char* fn, kite_session* session, bool input, int32_t index, const char* backend,
                        uint64_t handle, uint64_t offset) {
  return guarded(fn, [&]() {
    if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": session is NULL");
    SessionUse use(session);
    if (!use.ok()) return busy(fn);
    kite_status st = check_index(fn, input ? session->inputs : session->outputs, index, input ? "input" : "output");
    if (st != KITE_OK) return st;
    Status s = session->session->bind_buffer(input, index, backend ? backend : "", handle, offset);
    if (!s.is_ok()) return fail(s.code(), std::string(fn) + ": " + s.message());
    return report(s);
  });
}

}  // namespace

kite_status kite_session_bind_input_buffer(kite_session* session, int32_t index, const char* backend,
                                           uint64_t native_handle, uint64_t offset) {
  return bind_buffer("kite_session_bind_input_buffer", session, true, index, backend, native_handle, offset);
}

kite_status kite_session_bind_output_buffer(kite_session* session, int32_t index, const char* backend,
                                            uint64_t native_handle, uint64_t offset) {
  return bind_buffer("kite_session_bind_output_buffer", session, false, index, backend, native_handle, offset);
}

kite_status kite_session_get_node_count(const kite_session* session, int32_t* out_count) {
  if (session == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_node_count: session or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(session->session->placements().size());
  return report(Status::ok());
}

kite_status kite_session_get_node_placement(const kite_session* session, int32_t index,
                                            kite_node_placement* out_placement) {
  if (session == nullptr || out_placement == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_node_placement: session or out_placement is NULL");
  }
  const auto& all = session->session->placements();
  if (kite_status st = check_index("kite_session_get_node_placement", all.size(), index, "node")) return st;
  const kite::rt::PlacementRec& p = all[static_cast<size_t>(index)];
  out_placement->node_name = p.node_name.c_str();
  out_placement->op = p.op.c_str();
  out_placement->backend = p.backend.c_str();
  out_placement->fused = p.fused ? 1 : 0;
  out_placement->decomposed = p.decomposed ? 1 : 0;
  out_placement->reason = p.reason.c_str();
  return report(Status::ok());
}

kite_status kite_session_get_transfer_count(const kite_session* session, int32_t* out_count) {
  if (session == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_transfer_count: session or out_count is NULL");
  }
  *out_count = session->session->transfer_count();
  return report(Status::ok());
}

kite_status kite_session_get_note_count(const kite_session* session, int32_t* out_count) {
  if (session == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_note_count: session or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(session->session->notes().size());
  return report(Status::ok());
}

const char* kite_session_get_note(const kite_session* session, int32_t index) {
  if (session == nullptr || index < 0 || static_cast<size_t>(index) >= session->session->notes().size()) return "";
  return session->session->notes()[static_cast<size_t>(index)].c_str();
}

kite_status kite_session_get_run_stats(const kite_session* session, kite_run_stats* out) {
  if (session == nullptr || out == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_run_stats: session or out_stats is NULL");
  }
  if (out->struct_size < sizeof(uint32_t)) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_run_stats: set out_stats->struct_size");
  }
  const kite::rt::RunStats& r = session->session->run_stats();
  kite_run_stats full{};
  full.struct_size = out->struct_size;
  full.segments = r.segments;
  full.transfers = r.uploads + r.downloads;
  full.uploads = r.uploads;
  full.downloads = r.downloads;
  full.buffer_copies = r.buffer_copies;
  full.syncs = r.syncs;
  std::memcpy(out, &full, std::min<size_t>(out->struct_size, sizeof full));
  return report(Status::ok());
}

kite_status kite_session_get_backend_count(const kite_session* session, int32_t* out_count) {
  if (session == nullptr || out_count == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_backend_count: session or out_count is NULL");
  }
  *out_count = static_cast<int32_t>(session->backends.size());
  return report(Status::ok());
}

kite_status kite_session_get_backend(const kite_session* session, int32_t index, kite_session_backend* out) {
  if (session == nullptr || out == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_backend: session or out_backend is NULL");
  }
  if (out->struct_size < sizeof(uint32_t)) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_backend: set out_backend->struct_size");
  }
  if (kite_status st = check_index("kite_session_get_backend", session->backends.size(), index, "backend")) {
    return st;
  }
  const kite::rt::BackendUsage& u = session->backends[static_cast<size_t>(index)];
  kite_session_backend full{};
  full.struct_size = out->struct_size;
  full.name = u.name.c_str();
  full.available = u.available ? 1 : 0;
  full.reason = u.reason.c_str();
  full.device_name = u.device_name.c_str();
  full.device_index = u.device_index;
  full.abi_version = u.abi_version;
  full.device_memory = u.device_memory ? 1 : 0;
  full.unified = u.unified ? 1 : 0;
  full.weights_imported = u.weights_imported ? 1 : 0;
  full.kernels = u.kernels;
  full.segments = u.segments;
  full.weight_uploads = u.weight_uploads;
  full.arena_bytes = u.arena_bytes;
  full.weights_bytes = u.weights_bytes;
  full.workspace_bytes = u.workspace_bytes;
  std::memcpy(out, &full, std::min<size_t>(out->struct_size, sizeof full));
  return report(Status::ok());
}

kite_status kite_session_get_node_profile(const kite_session* session, int32_t index, kite_node_profile* out) {
  if (session == nullptr || out == nullptr) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_node_profile: session or out_profile is NULL");
  }
  const auto& all = session->session->profile();
  if (kite_status st = check_index("kite_session_get_node_profile", all.size(), index, "node")) return st;
  const kite::rt::NodeProfile& p = all[static_cast<size_t>(index)];
  out->runs = p.runs;
  out->total_ns = p.total_ns;
  out->mean_ns = p.runs ? p.total_ns / p.runs : 0;
  out->measured = p.measured ? 1 : 0;
  return report(Status::ok());
}

kite_status kite_session_reset_profile(kite_session* session) {
  if (session == nullptr) return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_reset_profile: session is NULL");
  SessionUse use(session);
  if (!use.ok()) return busy("kite_session_reset_profile");
  session->session->reset_profile();
  return report(Status::ok());
}

}  // extern "C"
