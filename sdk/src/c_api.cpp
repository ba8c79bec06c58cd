// The C API: argument checks, status codes and the per-thread last error.
// No exception leaves this file.
#include <atomic>
#include <cstring>
#include <new>

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

template <typename F>
kite_status guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(KITE_ERROR_OUT_OF_MEMORY, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(KITE_ERROR_INTERNAL, std::string(fn) + ": " + e.what());
  } catch (...) {
    return fail(KITE_ERROR_INTERNAL, std::string(fn) + ": unknown error");
  }
}

kite_status check_index(const char* fn, const std::vector<int>& list, int32_t index,
                        const char* what) {
  if (index < 0 || static_cast<size_t>(index) >= list.size()) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " index " +
                                                 std::to_string(index) + " out of range (" +
                                                 std::to_string(list.size()) + " " + what + "s)");
  }
  return KITE_OK;
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
  }
  return "unknown status";
}

const char* kite_last_error(void) { return kite::rt::last_error(); }
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
    handle->session = std::move(session);
    *out_session = handle;
    return report(s);
  });
}

void kite_session_destroy(kite_session* session) { delete session; }

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
    kite_status st = check_index("kite_session_get_output", session->outputs, index, "output");
    if (st != KITE_OK) return st;
    const int t = session->outputs[static_cast<size_t>(index)];
    const kite::rt::TensorRec& rec = session->session->model().tensors[static_cast<size_t>(t)];
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
    return report(session->session->run());
  });
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
  if (index < 0 || static_cast<size_t>(index) >= all.size()) {
    return fail(KITE_ERROR_INVALID_ARGUMENT, "kite_session_get_node_placement: node index " +
                                                 std::to_string(index) + " out of range (" +
                                                 std::to_string(all.size()) + " nodes)");
  }
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

}  // extern "C"
