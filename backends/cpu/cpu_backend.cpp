// The CPU backend behind the C ABI of kite/backend.h (version 2: a host
// backend; its kernels read the v1 view of each node, whose data pointers
// are host addresses). Nothing thrown inside may cross that boundary: every
// entry point catches and reports a status.
#include "cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "half_bridge.h"
#include "kernel.h"
#include "kernels/fused_kernels.h"
#include "kernels/sgemm.h"
#include "kernels/weight_pack.h"
#include "kite/abi/node.h"
#include "kite/abi/plugin.h"
#include "kite/ops/op_node.h"
#include "run_mode.h"
#include "thread_pool.h"

namespace kite::cpu {
namespace {

// More worker threads than this is a mistake, not a machine.
constexpr int kMaxThreads = 1024;

struct Options {
  int threads = 0;       // 0: one per core
  bool fused = true;     // fused=0: decline fused nodes (their bodies run instead)
  bool profile = false;  // time every kernel (kernel_time)
  // winograd=0: every convolution through im2col + GEMM, so that a 3x3
  // convolution's rounding does not depend on its image size (a banded
  // convolution under a memory budget then equals the whole one bit for bit).
  bool winograd = true;
  // adaptive=1 (kAdaptive): small models' runs are timed spread over the
  // threads and on the caller alone, and go the faster (run_mode.h);
  // adaptive=0 (kSpread): every run spreads its kernels over the threads;
  // adaptive=inline (kInline): every run on the caller alone, its kernels
  // cut for the session's threads (the other way adaptive runs compare;
  // for measurements and for tests of its bits).
  enum class RunWay { kAdaptive, kSpread, kInline };
  RunWay run_way = RunWay::kAdaptive;
};

struct Backend {
  explicit Backend(const Options& o) : options(o), workspace(/*external=*/true), pool(o.threads) {}
  Options options;
  Workspace workspace;  // scratch shared by this instance's kernels (the host allocates it)
  ThreadPool pool;
  RunModeChooser run_mode;
  bool timing_run = false;  // begin_run chose a mode and started the clock
  std::chrono::steady_clock::time_point run_start;
};

using kite::abi::fail;
using kite::abi::write_message;

std::string node_label(const kite_backend_node* node) {
  const char* op = node && node->op ? node->op : "?";
  const char* name = node && node->name ? node->name : "";
  return kite::ops::node_label(op, name);
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

// The file's packed weight forms (kite_backend_tensor2::packed, format 1.1)
// of a node's tensors, reached through the node's v1 view, which the
// kernels read (a fused kernel's sub-node shares the view's tensors).
class ViewPackedForms : public PackedForms {
 public:
  explicit ViewPackedForms(const kite::abi::V1Node& view) : view_(view) {}
  const void* find(const kite_backend_tensor* t, const std::string& key, uint64_t* bytes) const override {
    return find_form(view_.source_of(t), key, bytes);
  }
  static const void* find_form(const kite_backend_tensor2* src, const std::string& key, uint64_t* bytes) {
    if (src == nullptr || src->struct_size < offsetof(kite_backend_tensor2, packed) + sizeof(src->packed) ||
        src->num_packed <= 0 || src->packed == nullptr) {
      return nullptr;
    }
    for (int32_t i = 0; i < src->num_packed; ++i) {
      const kite_backend_packed_form& f = src->packed[i];
      if (f.key != nullptr && f.data != nullptr && key == f.key) {
        if (bytes) *bytes = f.byte_size;
        return f.data;
      }
    }
    return nullptr;
  }

 private:
  const kite::abi::V1Node& view_;
};

// For the placement: which of the node's weights the kernel will pack at
// load because the file carries no form for this ISA level ("" when none).
std::string packed_at_load_note(const kite_backend_node2& node, const kite::ops::OpNode& op,
                                bool winograd) {
  std::string missing;
  for (const weight_pack::Layout& l : weight_pack::layouts(op, winograd)) {
    const kite_backend_tensor2* t = l.input < node.num_inputs ? node.inputs[l.input] : nullptr;
    const std::string key = weight_pack::key(weight_pack::host_isa(), l.name);
    if (t == nullptr || ViewPackedForms::find_form(t, key, nullptr) != nullptr) continue;
    missing += (missing.empty() ? "" : ", ") + key;
  }
  return missing.empty() ? "" : "weights packed at load (the file has no " + missing + ")";
}

// ---- devices ------------------------------------------------------------------

std::string cpu_model_name() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  std::string name;
  if (f != nullptr) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "model name", 10) == 0) {
        const char* colon = std::strchr(line, ':');
        if (colon != nullptr) {
          name = colon + 1;
          while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.erase(name.begin());
          while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
        }
        break;
      }
    }
    std::fclose(f);
  }
  return name.empty() ? "host CPU" : name;
}

// The GEMM's ISA level and, on AArch64, the Armv8.2 extensions found at run
// time: "x86-avx512", "arm64-neon; fp16 arithmetic, dot product detected".
std::string isa_summary() {
  std::string s = weight_pack::host_isa();
  if (sgemm::detail::cpu_has_neon()) {
    const sgemm::detail::ArmFeatures f = sgemm::detail::arm_features();
    std::string found;
    if (f.fp16_arithmetic) found += "fp16 arithmetic";
    if (f.dot_product) found += std::string(found.empty() ? "" : ", ") + "dot product";
    s += "; " + (found.empty() ? std::string("no Armv8.2 fp16/dot product") : found + " detected");
  }
  return s;
}

kite_status cpu_device_count(int32_t* out_count, char* err, size_t err_size) {
  if (!out_count) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_count is NULL");
  *out_count = 1;
  return KITE_OK;
}

kite_status cpu_device_info(int32_t index, kite_backend_device_info* out, char* err,
                            size_t err_size) {
  if (!out || out->struct_size < offsetof(kite_backend_device_info, flags) + sizeof(out->flags)) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "device info struct too small");
  }
  if (index != 0) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                "device " + std::to_string(index) + " does not exist (the CPU backend has 1)");
  }
  const uint32_t size = out->struct_size;
  kite_backend_device_info info{};
  info.struct_size = size;
  std::snprintf(info.name, sizeof info.name, "%s (%s)", cpu_model_name().c_str(), isa_summary().c_str());
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  info.memory_bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  info.flags = KITE_DEVICE_TIMESTAMPS;
  info.min_offset_alignment = 64;
  info.max_buffer_size = UINT64_MAX;
  std::memcpy(out, &info, std::min<size_t>(size, sizeof info));
  return KITE_OK;
}

// ---- instances ----------------------------------------------------------------

kite_status cpu_create2(void* /*device*/, const kite_backend_create_info* info, void** out_backend,
                        char* err, size_t err_size) {
  if (!out_backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_backend is NULL");
  try {
    const std::string table_error = validate_kernel_table();
    if (!table_error.empty()) return fail(err, err_size, KITE_ERROR_INTERNAL, table_error);
    Options options;
    if (info) {
      if (info->struct_size < offsetof(kite_backend_create_info, profile) + sizeof(info->profile)) {
        return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "create info struct too small");
      }
      options.threads = info->threads;
      options.profile = info->profile != 0;
      for (int32_t i = 0; i < info->num_options; ++i) {
        const std::string key = info->option_keys[i] ? info->option_keys[i] : "";
        const std::string value = info->option_values[i] ? info->option_values[i] : "";
        if (key == "threads") {
          char* end = nullptr;
          const long v = std::strtol(value.c_str(), &end, 10);
          if (value.empty() || *end != '\0' || v < 0 || v > kMaxThreads) {
            return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                        "option threads=" + value + ": expected 0 (one per core) to " +
                            std::to_string(kMaxThreads));
          }
          options.threads = static_cast<int>(v);
        } else if (key == "winograd") {
          if (value != "0" && value != "1") {
            return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                        "option winograd=" + value + ": expected 0 or 1");
          }
          options.winograd = value == "1";
        } else if (key == "adaptive") {
          if (value != "0" && value != "1" && value != "inline") {
            return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                        "option adaptive=" + value + ": expected 0, 1 or inline");
          }
          options.run_way = value == "1"   ? Options::RunWay::kAdaptive
                            : value == "0" ? Options::RunWay::kSpread
                                           : Options::RunWay::kInline;
        } else if (key == "fused") {
          if (value != "0" && value != "1") {
            return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "option fused=" + value + ": expected 0 or 1");
          }
          options.fused = value == "1";
        } else {
          return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                      "unknown option '" + key + "' (the CPU backend knows threads=N, fused=0|1, winograd=0|1, adaptive=0|1|inline)");
        }
      }
    }
    if (options.threads < 0 || options.threads > kMaxThreads) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                  "threads is " + std::to_string(options.threads) + ", expected 0 (one per core) to " +
                      std::to_string(kMaxThreads));
    }
    *out_backend = new Backend(options);
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

int cpu_supports2(void* backend, const kite_backend_node2* node, char* reason, size_t reason_size) {
  if (!node) {
    write_message(reason, reason_size, "node is NULL");
    return 0;
  }
  bool bridged = false;
  std::string pack_note;
  const int ok = kite::abi::supported(reason, reason_size, [&]() -> std::string {
    const Backend* b = static_cast<const Backend*>(backend);
    if (b && !b->options.fused && node->fused_pattern && node->fused_pattern[0] != '\0') {
      return "fused kernels are off (option fused=0)";
    }
    kite::abi::V1Node view;
    std::string why;
    if (!view.build(*node, nullptr, &why)) return why;
    Accepted accepted;
    why = unsupported_reason(*view.get(), &accepted);
    // A float16 node whose kernel takes float32 runs on a float32 view.
    if (!why.empty() && HalfBridge::needed(*view.get()) &&
        unsupported_reason(HalfBridge(*view.get(), false).node(), &accepted).empty()) {
      bridged = true;
      return std::string();
    }
    if (why.empty()) pack_note = packed_at_load_note(*node, accepted.op, !b || b->options.winograd);
    return why;
  });
  // Taken: say how, for the node's placement (kite/backend.h, supports2).
  if (ok && bridged) write_message(reason, reason_size, "fp16 storage, fp32 arithmetic");
  if (ok && !pack_note.empty()) write_message(reason, reason_size, pack_note.c_str());
  return ok;
}

// A prepared kernel with the v1 view of its node, which the kernel reads
// (data pointers) until release, and its last measured time.
struct PreparedKernel {
  kite::abi::V1Node view;
  std::unique_ptr<Kernel> kernel;
  uint64_t last_ns = 0;
  bool timed = false;
};

kite_status cpu_prepare2(void* backend, const kite_backend_node2* node2, void** out_kernel,
                         char* err, size_t err_size) {
  if (!backend || !node2 || !out_kernel) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, node or out_kernel is NULL");
  }
  const std::string label = std::string(node2->op ? node2->op : "?") + " '" +
                            (node2->name ? node2->name : "") + "'";
  try {
    auto prepared = std::make_unique<PreparedKernel>();
    std::string why;
    if (!prepared->view.build(*node2, nullptr, &why)) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, why);
    }
    const kite_backend_node* node = prepared->view.get();
    Backend* b = static_cast<Backend*>(backend);
    if (!b->options.fused && node->fused_pattern[0] != '\0') {
      return fail(err, err_size, KITE_ERROR_UNSUPPORTED, label + ": fused kernels are off (option fused=0)");
    }
    Accepted accepted;
    why = unsupported_reason(*node, &accepted);
    // fp16 storage, fp32 arithmetic (half_bridge.h): a float16 node whose
    // kernel takes only float32 runs on a float32 view of itself.
    bool bridged = false;
    if (!why.empty() && HalfBridge::needed(*node) &&
        unsupported_reason(HalfBridge(*node, false).node(), &accepted).empty()) {
      bridged = true;
      why.clear();
    }
    if (!why.empty()) {
      return fail(err, err_size, KITE_ERROR_UNSUPPORTED, node_label(node) + ": " + why);
    }
    const kite::ops::OpNode& op = accepted.op;
    if (accepted.primitive) {
      // Declared outputs against the kite::ops rules (a fused op's check did
      // this through the rules of the primitive op it extends).
      const std::vector<kite::ops::TensorType> declared = kite::ops::outputs_from_backend_node(
          bridged ? HalfBridge(*node, false).node() : *node);
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
    // With the tensors' memory checked, the bridge may read the constants.
    std::unique_ptr<HalfBridge> bridge;
    if (bridged) {
      bridge = std::make_unique<HalfBridge>(*node, true);
      node = &bridge->node();
      why = unsupported_reason(*node, &accepted);  // the op again, now over the converted values
      if (!why.empty()) return fail(err, err_size, KITE_ERROR_UNSUPPORTED, node_label(node) + ": " + why);
    }
    KernelArgs args{node, &op, b->pool.size()};
    args.winograd = b->options.winograd;
    args.workspace = &b->workspace;
    const ViewPackedForms forms(prepared->view);
    args.packed = &forms;
    PackStats pack_stats;
    args.pack_stats = &pack_stats;
    std::string prepare_err;
    const PrepareFn prepare = accepted.fused ? accepted.fused->prepare : accepted.primitive->prepare;
    prepared->kernel = prepare(args, &prepare_err);
    if (!prepared->kernel) {
      if (prepare_err.empty()) prepare_err = op.label() + ": the CPU kernel cannot run it";
      return fail(err, err_size, pack_stats.malformed ? KITE_ERROR_INVALID_MODEL : KITE_ERROR_UNSUPPORTED,
                  prepare_err);
    }
    if (bridge) prepared->kernel = bridge_kernel(std::move(bridge), std::move(prepared->kernel));
    *out_kernel = prepared.release();
    return KITE_OK;
  } catch (const std::bad_alloc&) {
    return fail(err, err_size, KITE_ERROR_OUT_OF_MEMORY, label + ": out of memory preparing the CPU kernel");
  } catch (const std::exception& e) {
    return fail(err, err_size, KITE_ERROR_INTERNAL, label + ": " + e.what());
  } catch (...) {
    return fail(err, err_size, KITE_ERROR_INTERNAL, label + ": internal error");
  }
}

kite_status cpu_workspace_size(void* backend, uint64_t* out_bytes, char* err, size_t err_size) {
  if (!backend || !out_bytes) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or out_bytes is NULL");
  *out_bytes = static_cast<uint64_t>(static_cast<Backend*>(backend)->workspace.need()) * sizeof(float);
  return KITE_OK;
}

kite_status cpu_bind(void* backend, const kite_backend_bindings* bindings, char* err,
                     size_t err_size) {
  if (!backend || !bindings) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or bindings is NULL");
  Backend* b = static_cast<Backend*>(backend);
  const size_t floats = static_cast<size_t>(bindings->workspace_size / sizeof(float));
  if (floats < b->workspace.need() || (floats > 0 && bindings->workspace_host == nullptr)) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                "workspace of " + std::to_string(bindings->workspace_size) + " bytes at " +
                    (bindings->workspace_host ? "an address" : "NULL") + ", the kernels need " +
                    std::to_string(b->workspace.need() * sizeof(float)) + " bytes");
  }
  b->workspace.bind(static_cast<float*>(bindings->workspace_host), floats);
  return KITE_OK;
}

kite_status cpu_execute(void* backend, void* kernel, char* err, size_t err_size) {
  if (!backend || !kernel) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or kernel is NULL");
  }
  try {
    Backend* b = static_cast<Backend*>(backend);
    if (!b->workspace.ready()) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT,
                  "the kernels need a workspace of " + std::to_string(b->workspace.need() * sizeof(float)) +
                      " bytes and none was bound (call workspace_size, then bind)");
    }
    PreparedKernel* p = static_cast<PreparedKernel*>(kernel);
    std::chrono::steady_clock::time_point start;
    if (b->options.profile) start = std::chrono::steady_clock::now();
    p->kernel->run(b->pool);
    if (b->options.profile) {
      p->last_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - start)
                                             .count());
      p->timed = true;
    }
    if (const char* message = p->kernel->run_error()) {
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

// Around every run: whether its kernels spread over the threads or stay on
// the caller (run_mode.h), and its time: with adaptive=1 only, and not with
// one thread nor while profiling (each kernel's time then is its spread one).
kite_status cpu_begin_run(void* backend, char* err, size_t err_size) {
  if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
  Backend* b = static_cast<Backend*>(backend);
  b->timing_run = b->pool.size() > 1 && b->options.run_way == Options::RunWay::kAdaptive &&
                  !b->options.profile && !b->run_mode.settled_spread();
  if (!b->timing_run) {
    b->pool.set_inline(b->options.run_way == Options::RunWay::kInline);
    return KITE_OK;
  }
  b->pool.set_inline(b->run_mode.next_inline());
  b->run_start = std::chrono::steady_clock::now();
  return KITE_OK;
}

kite_status cpu_end_run(void* backend, char* err, size_t err_size) {
  if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
  Backend* b = static_cast<Backend*>(backend);
  if (b->timing_run) {
    b->run_mode.record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - b->run_start)
                           .count());
    b->timing_run = false;
  }
  return KITE_OK;
}

void cpu_release(void* /*backend*/, void* kernel) { delete static_cast<PreparedKernel*>(kernel); }

kite_status cpu_kernel_time(void* backend, void* kernel, uint64_t* out_ns) {
  if (!backend || !kernel || !out_ns) return KITE_ERROR_INVALID_ARGUMENT;
  const PreparedKernel* p = static_cast<const PreparedKernel*>(kernel);
  if (!static_cast<Backend*>(backend)->options.profile || !p->timed) return KITE_ERROR_UNSUPPORTED;
  *out_ns = p->last_ns;
  return KITE_OK;
}

kite_backend_api make_api() {
  kite_backend_api api = kite::abi::backend_api("cpu", KITE_BACKEND_MEMORY_HOST);
  api.destroy = cpu_destroy;
  api.execute = cpu_execute;
  api.release = cpu_release;
  api.device_count = cpu_device_count;
  api.device_info = cpu_device_info;
  api.create2 = cpu_create2;
  api.supports2 = cpu_supports2;
  api.prepare2 = cpu_prepare2;
  api.workspace_size = cpu_workspace_size;
  api.bind = cpu_bind;
  api.kernel_time = cpu_kernel_time;
  api.begin_run = cpu_begin_run;
  api.end_run = cpu_end_run;
  return api;
}

const kite_backend_api kCpuApi = make_api();

}  // namespace
}  // namespace kite::cpu

extern "C" const kite_backend_api* kite_cpu_backend_api(void) { return &kite::cpu::kCpuApi; }
extern "C" const kite_backend_api* kite_backend_entry_cpu(void) { return &kite::cpu::kCpuApi; }
