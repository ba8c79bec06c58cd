// The CPU backend behind the C ABI of kite/backend.h. Nothing thrown inside
// may cross that boundary: every entry point catches and reports a status.
#include "cpu_backend.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernel.h"
#include "kernels/fused_kernels.h"
#include "kite/ops/op_node.h"
#include "thread_pool.h"

namespace kite::cpu {
namespace {

// More worker threads than this is a mistake, not a machine.
constexpr int kMaxThreads = 1024;

struct Backend {
  Workspace workspace;  // scratch shared by this instance's kernels
  explicit Backend(int threads) : pool(threads) {}
  ThreadPool pool;
};

// Copies a message into a caller's buffer, truncated and NUL-terminated.
void write_message(char* buffer, size_t size, const std::string& message) {
  if (!buffer || size == 0) return;
  std::snprintf(buffer, size, "%s", message.c_str());
}

kite_status fail(char* err, size_t err_size, kite_status status, const std::string& message) {
  write_message(err, err_size, message);
  return status;
}

std::string node_label(const kite_backend_node* node) {
  const char* op = node && node->op ? node->op : "?";
  const char* name = node && node->name ? node->name : "";
  return std::string(op) + " '" + name + "'";
}

// The domain of the optimizer's fused ops.
constexpr const char* kFusedDomain = "kite";

// What supports() and prepare() learn about a node they can take.
struct Accepted {
  kite::ops::OpNode op;
  const KernelEntry* primitive = nullptr;     // domain "", no fused_pattern
  const FusedKernelEntry* fused = nullptr;    // domain "kite", a fused_pattern
};

// Why the backend cannot take the node, or "" (no tensor data read).
std::string unsupported_reason(const kite_backend_node& node, Accepted* out) {
  if (!node.op) return "node has no op type";
  const std::string op = node.op;
  const std::string domain = node.domain ? node.domain : "";
  const std::string pattern = node.fused_pattern ? node.fused_pattern : "";
  if (!pattern.empty()) {
    const FusedKernelEntry* entry = domain == kFusedDomain ? find_fused_kernel(op) : nullptr;
    if (!entry) return "no fused kernel for pattern " + pattern;
    kite::ops::OpNode parsed;
    std::string err;
    if (!kite::ops::from_backend_node(node, &parsed, &err, true)) return err;
    const std::string why = entry->check(parsed, pattern, kite::ops::outputs_from_backend_node(node));
    if (!why.empty()) return why;
    out->op = std::move(parsed);
    out->fused = entry;
    return "";
  }
  if (!domain.empty()) return "domain '" + domain + "' is not supported (only ai.onnx)";
  const KernelEntry* entry = find_kernel(op);
  if (!entry) return "no CPU kernel for op " + op;
  if (!kite::ops::is_known_op(op)) return "op " + op + " has no shape rules";
  kite::ops::OpNode parsed;
  std::string err;
  if (!kite::ops::from_backend_node(node, &parsed, &err, true)) return err;
  const std::string why = entry->check(parsed);
  if (!why.empty()) return why;
  out->op = std::move(parsed);
  out->primitive = entry;
  return "";
}

// Present tensors must have data for their bytes; the kernels rely on it.
std::string check_tensor_memory(const kite_backend_tensor* t, const char* kind) {
  if (!t) return "";
  const std::string name = t->name ? t->name : "";
  if (t->rank < 0 || t->rank > KITE_MAX_RANK || (t->rank > 0 && !t->shape)) {
    return std::string(kind) + " '" + name + "' has an invalid rank or no shape";
  }
  std::vector<int64_t> shape(t->shape, t->shape + t->rank);
  uint64_t bytes = 0;
  if (!kite::ops::checked_byte_size(t->dtype, shape, &bytes)) {
    return std::string(kind) + " '" + name + "' has an invalid dtype or shape";
  }
  if (t->byte_size < bytes) {
    return std::string(kind) + " '" + name + "' has " + std::to_string(t->byte_size) +
           " bytes, expected " + std::to_string(bytes);
  }
  if (bytes > 0 && !t->data) return std::string(kind) + " '" + name + "' has no data";
  return "";
}

kite_status cpu_create(const kite_backend_options* options, void** out_backend, char* err,
                       size_t err_size) {
  if (!out_backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_backend is NULL");
  try {
    const std::string table_error = validate_kernel_table();
    if (!table_error.empty()) return fail(err, err_size, KITE_ERROR_INTERNAL, table_error);
    const int threads = options ? options->threads : 0;
    if (threads < 0 || threads > kMaxThreads) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                  "threads is " + std::to_string(threads) + ", expected 0 (one per core) to " +
                      std::to_string(kMaxThreads));
    }
    *out_backend = new Backend(threads);
    return KITE_OK;
  } catch (const std::bad_alloc&) {
    return fail(err, err_size, KITE_ERROR_OUT_OF_MEMORY, "out of memory creating the CPU backend");
  } catch (const std::exception& e) {
    return fail(err, err_size, KITE_ERROR_INTERNAL,
                std::string("cannot create the CPU backend: ") + e.what());
  } catch (...) {
    return fail(err, err_size, KITE_ERROR_INTERNAL, "cannot create the CPU backend");
  }
}

void cpu_destroy(void* backend) { delete static_cast<Backend*>(backend); }

int cpu_supports(void* /*backend*/, const kite_backend_node* node, char* reason,
                 size_t reason_size) {
  if (!node) {
    write_message(reason, reason_size, "node is NULL");
    return 0;
  }
  try {
    Accepted accepted;
    const std::string why = unsupported_reason(*node, &accepted);
    if (why.empty()) return 1;
    write_message(reason, reason_size, why);
  } catch (const std::bad_alloc&) {
    write_message(reason, reason_size, "out of memory");
  } catch (...) {
    write_message(reason, reason_size, "internal error");
  }
  return 0;
}

kite_status cpu_prepare(void* backend, const kite_backend_node* node, void** out_kernel,
                        char* err, size_t err_size) {
  if (!backend || !node || !out_kernel) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, node or out_kernel is NULL");
  }
  try {
    Accepted accepted;
    std::string why = unsupported_reason(*node, &accepted);
    if (!why.empty()) {
      return fail(err, err_size, KITE_ERROR_UNSUPPORTED, node_label(node) + ": " + why);
    }
    const kite::ops::OpNode& op = accepted.op;
    if (accepted.primitive) {
      // Declared outputs against the kite::ops rules (a fused op's check did
      // this through the rules of the primitive op it extends).
      const std::vector<kite::ops::TensorType> declared =
          kite::ops::outputs_from_backend_node(*node);
      std::string check_err;
      if (!kite::ops::check_declared_outputs(op, declared, &check_err)) {
        return fail(err, err_size, KITE_ERROR_INVALID_MODEL, check_err);
      }
    }
    for (int32_t i = 0; i < node->num_inputs; ++i) {
      why = check_tensor_memory(node->inputs[i], "input");
      if (!why.empty()) return fail(err, err_size, KITE_ERROR_INVALID_MODEL, op.label() + ": " + why);
    }
    for (int32_t i = 0; i < node->num_outputs; ++i) {
      why = check_tensor_memory(node->outputs[i], "output");
      if (!why.empty()) return fail(err, err_size, KITE_ERROR_INVALID_MODEL, op.label() + ": " + why);
    }
    Backend* b = static_cast<Backend*>(backend);
    KernelArgs args{node, &op, b->pool.size()};
    args.workspace = &b->workspace;
    std::string prepare_err;
    const PrepareFn prepare = accepted.fused ? accepted.fused->prepare : accepted.primitive->prepare;
    std::unique_ptr<Kernel> kernel = prepare(args, &prepare_err);
    if (!kernel) {
      if (prepare_err.empty()) prepare_err = op.label() + ": the CPU kernel cannot run it";
      return fail(err, err_size, KITE_ERROR_UNSUPPORTED, prepare_err);
    }
    *out_kernel = kernel.release();
    return KITE_OK;
  } catch (const std::bad_alloc&) {
    return fail(err, err_size, KITE_ERROR_OUT_OF_MEMORY,
                node_label(node) + ": out of memory preparing the CPU kernel");
  } catch (const std::exception& e) {
    return fail(err, err_size, KITE_ERROR_INTERNAL, node_label(node) + ": " + e.what());
  } catch (...) {
    return fail(err, err_size, KITE_ERROR_INTERNAL, node_label(node) + ": internal error");
  }
}

kite_status cpu_execute(void* backend, void* kernel, char* err, size_t err_size) {
  if (!backend || !kernel) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or kernel is NULL");
  }
  try {
    Kernel* k = static_cast<Kernel*>(kernel);
    k->run(static_cast<Backend*>(backend)->pool);
    if (const char* message = k->run_error()) {
      if (err && err_size > 0) std::snprintf(err, err_size, "%s", message);
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    return KITE_OK;
  } catch (const std::bad_alloc&) {
    return fail(err, err_size, KITE_ERROR_OUT_OF_MEMORY, "out of memory in a CPU kernel");
  } catch (...) {
    return fail(err, err_size, KITE_ERROR_INTERNAL, "a CPU kernel failed");
  }
}

void cpu_release(void* /*backend*/, void* kernel) { delete static_cast<Kernel*>(kernel); }

const kite_backend_api kCpuApi = {
    KITE_BACKEND_ABI_VERSION,
    sizeof(kite_backend_api),
    "cpu",
    KITE_BACKEND_MEMORY_HOST,
    cpu_create,
    cpu_destroy,
    cpu_supports,
    cpu_prepare,
    cpu_execute,
    cpu_release,
    nullptr,  // alloc
    nullptr,  // free
    nullptr,  // copy_to_device
    nullptr,  // copy_to_host
    nullptr,  // synchronize
};

}  // namespace
}  // namespace kite::cpu

extern "C" const kite_backend_api* kite_cpu_backend_api(void) { return &kite::cpu::kCpuApi; }
