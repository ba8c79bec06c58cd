// devsim: a simulated GPU behind ABI v2, for tests. It behaves like a device
// that a runtime cannot out-smart:
//  - buffer handles are not addresses (dereferencing one faults), and every
//    tensor is reached through (buffer, offset), bounds-checked;
//  - memory is poisoned (0xFF bytes, NaN in float32) when allocated, so a
//    value the runtime forgot to upload shows up as a wrong output;
//  - all work (kernels, uploads, device copies) is deferred until
//    synchronize or a download, so a missing synchronize shows up too, and an
//    upload reads its source only then (the runtime must keep it unchanged);
//  - it counts its own calls (allocations, uploads, downloads, device copies,
//    segments prepared and executed, synchronizes), per phase (setup, runs),
//    and writes them as JSON on destroy (option stats=FILE).
// It computes with the CPU backend's kernels on its private memory, so its
// outputs are bit-identical to the CPU's.
//
// Options (kite_session_options_set_backend_option / --backend-option):
//   unified=0|1        1: the arena is host-visible (buffer_map) and host
//                      memory can be imported (the mapped weights); default 0
//   decline_ops=Op,Op  decline these op types
//   decline_fused=1    decline every fused node (their bodies run instead)
//   segments=0|1       0: decline prepare_segment (per-kernel execution)
//   fail=CALL          make one call fail: create, alloc, map, import, upload,
//                      prepare, workspace, bind, segment, begin_run, execute,
//                      end_run, download, copy, synchronize; or fail=lost:
//                      the device is lost at a wait (synchronize, download)
//   fail_after=N       the failing call succeeds N times first (default 0)
//   stats=FILE         write the counters as JSON when the instance ends
//   gate=PATH          each run stops in begin_run until the file PATH exists
//                      (it creates PATH.waiting first, so a test knows the run
//                      is inside the backend); fails after 60 s. Lets a test
//                      prove that a caller is not blocked while a run computes
//                      (the Python binding releases the GIL).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cpu_backend.h"
#include "kite/abi/node.h"
#include "kite/abi/plugin.h"
#include "kite/backend.h"

namespace {

constexpr int32_t kDeviceCount = 2;
constexpr uint64_t kDeviceMemory = 4ull << 30;
constexpr uint64_t kMaxBuffer = 1ull << 30;
constexpr uint64_t kOffsetAlignment = 64;  // the .kite blob alignment
// Handles live in the non-canonical address range: using one as a pointer
// faults on x86-64 and on aarch64.
constexpr uintptr_t kHandleTag = 0xDEAD000000000000ull;

const kite_backend_api* cpu() { return kite_cpu_backend_api(); }

using kite::abi::write_message;

struct Device {
  int32_t index = 0;
  std::atomic<int> instances{0};
};

// Process-wide: how often each device was opened (tests check that
// sessions on one device share it).
std::atomic<int> g_device_opens[kDeviceCount];

struct Buffer {
  uint64_t size = 0;
  kite_buffer_usage usage = KITE_BUFFER_ARENA;
  uint8_t* memory = nullptr;  // the simulated device memory (private)
  bool owned = true;          // false: imported host or application memory
  bool read_only = false;
};

struct Counters {
  uint64_t allocs = 0, alloc_bytes = 0, frees = 0, maps = 0, imports = 0, external_imports = 0;
  uint64_t uploads = 0, upload_bytes = 0, downloads = 0, download_bytes = 0, buffer_copies = 0;
  uint64_t kernels_prepared = 0, segments_prepared = 0, execute_calls = 0;
  uint64_t segments_executed = 0, kernels_executed = 0, syncs = 0;
};

struct Options {
  bool unified = false;
  bool decline_fused = false;
  bool segments = true;
  std::set<std::string> decline_ops;
  std::string fail;
  int fail_after = 0;
  std::string stats;
  std::string gate;
};

struct Instance;

// A kernel: the node re-described with the simulated memory's addresses,
// prepared on the inner CPU backend.
struct Kernel {
  kite::abi::TensorTable tensors;
  kite::abi::Node node;
  std::string name;
  void* cpu_kernel = nullptr;
  uint64_t last_ns = 0;
  bool timed = false;
};

struct Segment {
  std::vector<Kernel*> kernels;
};

// Deferred work.
struct Op {
  enum Kind { Run, Copy } kind = Run;
  Kernel* kernel = nullptr;
  const uint8_t* src = nullptr;  // Copy: read when the queue is flushed
  uint8_t* dst = nullptr;
  uint64_t size = 0;
};

struct Instance {
  Device* device = nullptr;
  Options options;
  void* cpu_instance = nullptr;
  bool profile = false;
  bool lost = false;
  bool running = false;  // past the first begin_run
  int calls_to_fail = 0;
  std::map<uintptr_t, std::unique_ptr<Buffer>> buffers;
  uintptr_t next_id = 1;
  std::vector<Op> queue;
  Counters setup, run;
  uint64_t runs = 0;
  uint64_t arena_bytes = 0, weights_bytes = 0, workspace_bytes = 0;

  Counters& now() { return running ? run : setup; }
};

// ---- helpers -------------------------------------------------------------------

bool parse_options(const kite_backend_create_info* info, Options* out, std::string* err) {
  std::vector<kite::abi::BackendOption> options;
  *err = kite::abi::backend_options(info, &options);
  if (!err->empty()) return false;
  for (const kite::abi::BackendOption& option : options) {
    const std::string& key = option.key;
    const std::string& value = option.value;
    auto flag = [&](bool* target) {
      *err = kite::abi::parse_flag_option("devsim", key, value, target);
      return err->empty();
    };
    if (key == "unified") {
      if (!flag(&out->unified)) return false;
    } else if (key == "decline_fused") {
      if (!flag(&out->decline_fused)) return false;
    } else if (key == "segments") {
      if (!flag(&out->segments)) return false;
    } else if (key == "decline_ops") {
      size_t start = 0;
      while (start <= value.size()) {
        size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        if (comma > start) out->decline_ops.insert(value.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (key == "fail") {
      static const std::set<std::string> kCalls = {
          "create",  "alloc", "map",       "import",  "upload",   "prepare",
          "workspace", "bind", "segment",  "begin_run", "execute", "end_run",
          "download", "copy", "synchronize", "lost"};
      if (!kCalls.count(value)) {
        *err = "option fail=" + value + ": not a call devsim can fail";
        return false;
      }
      out->fail = value;
    } else if (key == "fail_after") {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 0 || n > 1000000) {
        *err = "option fail_after=" + value + ": expected a count >= 0";
        return false;
      }
      out->fail_after = static_cast<int>(n);
    } else if (key == "stats") {
      out->stats = value;
    } else if (key == "gate") {
      if (value.empty()) {
        *err = "option gate=: expected a file path";
        return false;
      }
      out->gate = value;
    } else {
      *err = "unknown option '" + key +
             "' (devsim knows unified, decline_ops, decline_fused, segments, fail, fail_after, "
             "stats, gate)";
      return false;
    }
  }
  return true;
}

// KITE_OK, or the simulated failure of `call` (once fail_after is used up).
kite_status injected(Instance* in, const char* call, char* err, size_t err_size) {
  if (in->lost) {
    write_message(err, err_size, std::string("device lost (simulated) before ") + call);
    return KITE_ERROR_DEVICE_LOST;
  }
  if (in->options.fail != call) return KITE_OK;
  if (in->calls_to_fail > 0) {
    --in->calls_to_fail;
    return KITE_OK;
  }
  write_message(err, err_size, std::string("simulated failure of ") + call + " (option fail=" + call + ")");
  return KITE_ERROR_BACKEND;
}

kite_backend_buffer handle_of(uintptr_t id) {
  return reinterpret_cast<kite_backend_buffer>(kHandleTag | (id << 4));
}

Buffer* find_buffer(Instance* in, kite_backend_buffer handle) {
  const uintptr_t raw = reinterpret_cast<uintptr_t>(handle);
  if ((raw & kHandleTag) != kHandleTag) return nullptr;
  auto it = in->buffers.find((raw & ~kHandleTag) >> 4);
  return it == in->buffers.end() ? nullptr : it->second.get();
}

// The simulated memory of (buffer, offset, size), or null with a message.
uint8_t* resolve(Instance* in, kite_backend_buffer handle, uint64_t offset, uint64_t size,
                 const std::string& what, std::string* err) {
  Buffer* b = find_buffer(in, handle);
  if (b == nullptr) {
    *err = what + ": buffer handle " + std::to_string(reinterpret_cast<uintptr_t>(handle)) +
           " is not a devsim buffer of this instance";
    return nullptr;
  }
  if (!kite::abi::range_fits(offset, size, b->size)) {
    *err = kite::abi::range_outside(what, offset, size, b->size);
    return nullptr;
  }
  if (offset % kOffsetAlignment != 0) {
    *err = what + ": offset " + std::to_string(offset) + " is not a multiple of " +
           std::to_string(kOffsetAlignment);
    return nullptr;
  }
  return b->memory + offset;
}

void flush(Instance* in) {
  for (Op& op : in->queue) {
    if (op.kind == Op::Copy) {
      if (op.size > 0) std::memmove(op.dst, op.src, static_cast<size_t>(op.size));
      continue;
    }
    char message[512] = {0};
    std::chrono::steady_clock::time_point start;
    if (in->profile) start = std::chrono::steady_clock::now();
    // The CPU kernels' failures (a bad index value) surface at synchronize.
    const kite_status s = cpu()->execute(in->cpu_instance, op.kernel->cpu_kernel, message, sizeof message);
    if (in->profile) {
      op.kernel->last_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                     std::chrono::steady_clock::now() - start)
                                                     .count());
      op.kernel->timed = true;
    }
    if (s != KITE_OK && std::getenv("KITE_DEVSIM_DEBUG")) std::fprintf(stderr, "devsim: %s: %s\n", op.kernel->name.c_str(), message);
    ++in->now().kernels_executed;
  }
  in->queue.clear();
}

// ---- devices --------------------------------------------------------------------

kite_status ds_device_count(int32_t* out_count, char* err, size_t err_size) {
  if (out_count == nullptr) {
    write_message(err, err_size, "out_count is NULL");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  *out_count = kDeviceCount;
  return KITE_OK;
}

kite_status ds_device_info(int32_t index, kite_backend_device_info* out, char* err, size_t err_size) {
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    write_message(err, err_size, "device info is NULL or too small");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  if (index < 0 || index >= kDeviceCount) {
    write_message(err, err_size, "devsim has " + std::to_string(kDeviceCount) + " devices, no device " + std::to_string(index));
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  kite_backend_device_info info{};
  info.struct_size = out->struct_size;
  std::snprintf(info.name, sizeof info.name, "devsim %d (simulated GPU)", index);
  info.memory_bytes = kDeviceMemory;
  info.flags = KITE_DEVICE_UNIFIED | KITE_DEVICE_HOST_IMPORT | KITE_DEVICE_TIMESTAMPS |
               KITE_DEVICE_EXTERNAL_BUFFERS;
  info.min_offset_alignment = kOffsetAlignment;
  info.max_buffer_size = kMaxBuffer;
  std::memcpy(out, &info, std::min<size_t>(out->struct_size, sizeof info));
  return KITE_OK;
}

kite_status ds_device_open(const kite_backend_device_options* options, void** out_device,
                           char* err, size_t err_size) {
  if (options == nullptr || out_device == nullptr) {
    write_message(err, err_size, "options or out_device is NULL");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  if (options->device_index < 0 || options->device_index >= kDeviceCount) {
    write_message(err, err_size, "no devsim device " + std::to_string(options->device_index));
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  auto* d = new (std::nothrow) Device();
  if (d == nullptr) return KITE_ERROR_OUT_OF_MEMORY;
  d->index = options->device_index;
  g_device_opens[d->index].fetch_add(1);
  *out_device = d;
  return KITE_OK;
}

void ds_device_close(void* device) { delete static_cast<Device*>(device); }

// ---- instances ----------------------------------------------------------------

void write_counters(std::FILE* f, const char* name, const Counters& c, bool last) {
  std::fprintf(f,
               "  \"%s\": {\"allocs\": %llu, \"alloc_bytes\": %llu, \"frees\": %llu, \"maps\": %llu, "
               "\"imports\": %llu, \"external_imports\": %llu, \"uploads\": %llu, \"upload_bytes\": %llu, "
               "\"downloads\": %llu, \"download_bytes\": %llu, \"buffer_copies\": %llu, "
               "\"kernels_prepared\": %llu, \"segments_prepared\": %llu, \"execute_calls\": %llu, "
               "\"segments_executed\": %llu, \"kernels_executed\": %llu, \"syncs\": %llu}%s\n",
               name, (unsigned long long)c.allocs, (unsigned long long)c.alloc_bytes,
               (unsigned long long)c.frees, (unsigned long long)c.maps, (unsigned long long)c.imports,
               (unsigned long long)c.external_imports, (unsigned long long)c.uploads,
               (unsigned long long)c.upload_bytes, (unsigned long long)c.downloads,
               (unsigned long long)c.download_bytes, (unsigned long long)c.buffer_copies,
               (unsigned long long)c.kernels_prepared, (unsigned long long)c.segments_prepared,
               (unsigned long long)c.execute_calls, (unsigned long long)c.segments_executed,
               (unsigned long long)c.kernels_executed, (unsigned long long)c.syncs, last ? "" : ",");
}

void write_stats(const Instance& in) {
  std::FILE* f = std::fopen(in.options.stats.c_str(), "w");
  if (f == nullptr) return;
  std::fprintf(f, "{\n  \"device\": %d,\n  \"unified\": %d,\n  \"runs\": %llu,\n", in.device ? in.device->index : -1,
               in.options.unified ? 1 : 0, (unsigned long long)in.runs);
  std::fprintf(f, "  \"arena_bytes\": %llu,\n  \"weights_bytes\": %llu,\n  \"workspace_bytes\": %llu,\n",
               (unsigned long long)in.arena_bytes, (unsigned long long)in.weights_bytes,
               (unsigned long long)in.workspace_bytes);
  write_counters(f, "setup", in.setup, false);
  write_counters(f, "run", in.run, true);
  std::fprintf(f, "}\n");
  std::fclose(f);
}

kite_status ds_create2(void* device, const kite_backend_create_info* info, void** out_backend,
                       char* err, size_t err_size) {
  if (out_backend == nullptr) {
    write_message(err, err_size, "out_backend is NULL");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  if (device == nullptr) {
    write_message(err, err_size, "devsim needs an open device");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  auto in = std::make_unique<Instance>();
  in->device = static_cast<Device*>(device);
  std::string why;
  if (!parse_options(info, &in->options, &why)) {
    write_message(err, err_size, why);
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  in->calls_to_fail = in->options.fail_after;
  kite_status s = injected(in.get(), "create", err, err_size);
  if (s != KITE_OK) return s;
  in->profile = info != nullptr && info->profile != 0;
  kite_backend_create_info cpu_info{};
  cpu_info.struct_size = sizeof cpu_info;
  cpu_info.threads = info ? info->threads : 0;
  cpu_info.profile = 0;  // devsim times the kernels itself
  s = cpu()->create2(nullptr, &cpu_info, &in->cpu_instance, err, err_size);
  if (s != KITE_OK) return s;
  in->device->instances.fetch_add(1);
  if (info != nullptr && info->log != nullptr) {
    char message[128];
    std::snprintf(message, sizeof message, "instance on device %d (unified=%d)", in->device->index,
                  in->options.unified ? 1 : 0);
    info->log(info->log_user, KITE_LOG_INFO, "devsim", message);
  }
  *out_backend = in.release();
  return KITE_OK;
}

void ds_destroy(void* backend) {
  auto* in = static_cast<Instance*>(backend);
  if (in == nullptr) return;
  if (!in->options.stats.empty()) write_stats(*in);
  in->queue.clear();
  for (auto& kv : in->buffers) {
    if (kv.second->owned) std::free(kv.second->memory);
  }
  if (in->cpu_instance != nullptr) cpu()->destroy(in->cpu_instance);
  in->device->instances.fetch_sub(1);
  delete in;
}

// The node as the inner CPU backend sees it: every tensor at its simulated
// address (data), or, before buffers exist, constants at their host bytes.
bool describe(Instance* in, const kite_backend_node2& node, bool resolve_buffers, Kernel* k,
              std::string* err) {
  kite::abi::Node::Spec spec;
  spec.name = node.name;
  spec.op = node.op;
  spec.domain = node.domain;
  spec.fused_pattern = node.fused_pattern;
  spec.index = node.index;
  spec.num_raw_attrs = node.num_attrs;
  spec.raw_attrs = node.attrs;
  const std::string label = std::string(node.op ? node.op : "?") + " '" + (node.name ? node.name : "") + "'";
  auto add = [&](const kite_backend_tensor2* t, std::vector<int>* list) {
    if (t == nullptr) {
      list->push_back(-1);
      return true;
    }
    kite::abi::TensorDesc d;
    d.name = t->name;
    d.dtype = t->dtype;
    d.rank = t->rank;
    d.shape = t->shape;
    d.byte_size = t->byte_size;
    d.is_constant = t->is_constant != 0;
    d.host_data = t->host_data;
    const int index = k->tensors.add(d);
    kite_backend_tensor2& mine = k->tensors.at(index);
    mine.data = nullptr;
    if (resolve_buffers) {
      mine.data = resolve(in, t->buffer, t->offset, t->byte_size,
                          label + " tensor '" + (t->name ? t->name : "") + "'", err);
      if (mine.data == nullptr) return false;
    } else if (t->is_constant) {
      mine.data = const_cast<void*>(t->host_data);
    }
    list->push_back(index);
    return true;
  };
  for (int32_t i = 0; i < node.num_inputs; ++i) {
    if (!add(node.inputs[i], &spec.inputs)) return false;
  }
  for (int32_t i = 0; i < node.num_outputs; ++i) {
    if (!add(node.outputs[i], &spec.outputs)) return false;
  }
  k->node.build(spec, &k->tensors);
  k->name = label;
  return true;
}

int ds_supports2(void* backend, const kite_backend_node2* node, char* reason, size_t reason_size) {
  auto* in = static_cast<Instance*>(backend);
  if (in == nullptr || node == nullptr) return 0;
  if (in->options.decline_fused && node->fused_pattern && node->fused_pattern[0] != '\0') {
    write_message(reason, reason_size, "configured to decline fused nodes (decline_fused=1)");
    return 0;
  }
  if (node->op && in->options.decline_ops.count(node->op)) {
    write_message(reason, reason_size, std::string("configured to decline ") + node->op + " (decline_ops)");
    return 0;
  }
  try {
    Kernel probe;
    std::string err;
    if (!describe(in, *node, false, &probe, &err)) {
      write_message(reason, reason_size, err);
      return 0;
    }
    return cpu()->supports2(in->cpu_instance, probe.node.v2(), reason, reason_size);
  } catch (...) {
    write_message(reason, reason_size, "out of memory");
    return 0;
  }
}

kite_status ds_prepare2(void* backend, const kite_backend_node2* node, void** out_kernel,
                        char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  if (in == nullptr || node == nullptr || out_kernel == nullptr) {
    write_message(err, err_size, "backend, node or out_kernel is NULL");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  kite_status s = injected(in, "prepare", err, err_size);
  if (s != KITE_OK) return s;
  try {
    auto k = std::make_unique<Kernel>();
    std::string why;
    if (!describe(in, *node, true, k.get(), &why)) {
      write_message(err, err_size, why);
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    // The CPU kernels pack weights at prepare, reading the simulated memory:
    // like device-side packing queued behind the uploads, it comes after them.
    flush(in);
    s = cpu()->prepare2(in->cpu_instance, k->node.v2(), &k->cpu_kernel, err, err_size);
    if (s != KITE_OK) return s;
    ++in->now().kernels_prepared;
    *out_kernel = k.release();
    return KITE_OK;
  } catch (const std::bad_alloc&) {
    write_message(err, err_size, "out of memory");
    return KITE_ERROR_OUT_OF_MEMORY;
  }
}

void ds_release(void* backend, void* kernel) {
  auto* in = static_cast<Instance*>(backend);
  auto* k = static_cast<Kernel*>(kernel);
  if (k == nullptr) return;
  if (in != nullptr && k->cpu_kernel != nullptr) cpu()->release(in->cpu_instance, k->cpu_kernel);
  delete k;
}

kite_status ds_workspace_size(void* backend, uint64_t* out_bytes, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "workspace", err, err_size);
  if (s != KITE_OK) return s;
  return cpu()->workspace_size(in->cpu_instance, out_bytes, err, err_size);
}

kite_status ds_bind(void* backend, const kite_backend_bindings* b, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "bind", err, err_size);
  if (s != KITE_OK) return s;
  kite_backend_bindings cpu_bindings{};
  cpu_bindings.struct_size = sizeof cpu_bindings;
  if (b->workspace != nullptr) {
    std::string why;
    uint8_t* memory = resolve(in, b->workspace, 0, b->workspace_size, "workspace", &why);
    if (memory == nullptr) {
      write_message(err, err_size, why);
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    cpu_bindings.workspace_host = memory;
    cpu_bindings.workspace_size = b->workspace_size;
  }
  return cpu()->bind(in->cpu_instance, &cpu_bindings, err, err_size);
}

kite_status ds_execute(void* backend, void* kernel, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "execute", err, err_size);
  if (s != KITE_OK) return s;
  ++in->now().execute_calls;
  Op op;
  op.kind = Op::Run;
  op.kernel = static_cast<Kernel*>(kernel);
  in->queue.push_back(op);  // capacity grows during the first run only
  return KITE_OK;
}

// fail=lost: the device goes away at a wait (synchronize or a download),
// after fail_after waits.
bool loses_device_now(Instance* in, char* err, size_t err_size) {
  if (in->options.fail != "lost" || in->lost) return false;
  if (in->calls_to_fail > 0) {
    --in->calls_to_fail;
    return false;
  }
  in->lost = true;
  in->queue.clear();
  write_message(err, err_size, "device lost (simulated, option fail=lost)");
  return true;
}

kite_status ds_synchronize2(void* backend, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  if (loses_device_now(in, err, err_size)) return KITE_ERROR_DEVICE_LOST;
  kite_status s = injected(in, "synchronize", err, err_size);
  if (s != KITE_OK) return s;
  ++in->now().syncs;
  flush(in);
  return KITE_OK;
}

kite_status ds_buffer_alloc(void* backend, uint64_t size, kite_buffer_usage usage,
                            kite_backend_buffer* out, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "alloc", err, err_size);
  if (s != KITE_OK) return s;
  if (size == 0 || size > kMaxBuffer) {
    write_message(err, err_size, "buffer of " + std::to_string(size) + " bytes (devsim allocates 1 to " +
                           std::to_string(kMaxBuffer) + ")");
    return size == 0 ? KITE_ERROR_INVALID_ARGUMENT : KITE_ERROR_OUT_OF_MEMORY;
  }
  const uint64_t rounded = (size + 4095) / 4096 * 4096;
  auto b = std::make_unique<Buffer>();
  b->memory = static_cast<uint8_t*>(std::aligned_alloc(4096, static_cast<size_t>(rounded)));
  if (b->memory == nullptr) {
    write_message(err, err_size, "out of simulated device memory");
    return KITE_ERROR_OUT_OF_MEMORY;
  }
  std::memset(b->memory, 0xFF, static_cast<size_t>(rounded));  // poison
  b->size = size;
  b->usage = usage;
  const uintptr_t id = in->next_id++;
  in->buffers[id] = std::move(b);
  ++in->now().allocs;
  in->now().alloc_bytes += size;
  if (usage == KITE_BUFFER_ARENA) in->arena_bytes += size;
  if (usage == KITE_BUFFER_WEIGHTS) in->weights_bytes += size;
  if (usage == KITE_BUFFER_WORKSPACE) in->workspace_bytes += size;
  *out = handle_of(id);
  return KITE_OK;
}

void ds_buffer_free(void* backend, kite_backend_buffer handle) {
  auto* in = static_cast<Instance*>(backend);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(handle);
  auto it = in->buffers.find((raw & ~kHandleTag) >> 4);
  if (it == in->buffers.end()) return;
  if (it->second->owned) std::free(it->second->memory);
  in->buffers.erase(it);
  ++in->now().frees;
}

kite_status ds_buffer_map(void* backend, kite_backend_buffer handle, void** out_host, char* err,
                          size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  if (!in->options.unified) {
    write_message(err, err_size, "devsim is not host-visible (option unified=0)");
    return KITE_ERROR_UNSUPPORTED;
  }
  kite_status s = injected(in, "map", err, err_size);
  if (s != KITE_OK) return s;
  Buffer* b = find_buffer(in, handle);
  if (b == nullptr) {
    write_message(err, err_size, "buffer_map: not a devsim buffer");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ++in->now().maps;
  *out_host = b->memory;
  return KITE_OK;
}

kite_status wrap(Instance* in, const void* memory, uint64_t size, bool read_only,
                 kite_backend_buffer* out) {
  auto b = std::make_unique<Buffer>();
  b->memory = static_cast<uint8_t*>(const_cast<void*>(memory));
  b->size = size;
  b->owned = false;
  b->read_only = read_only;
  b->usage = read_only ? KITE_BUFFER_WEIGHTS : KITE_BUFFER_ARENA;
  const uintptr_t id = in->next_id++;
  in->buffers[id] = std::move(b);
  *out = handle_of(id);
  return KITE_OK;
}

kite_status ds_import_host(void* backend, const void* host, uint64_t size, kite_backend_buffer* out,
                           char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  if (!in->options.unified) {
    write_message(err, err_size, "devsim cannot import host memory (option unified=0)");
    return KITE_ERROR_UNSUPPORTED;
  }
  kite_status s = injected(in, "import", err, err_size);
  if (s != KITE_OK) return s;
  if (host == nullptr || reinterpret_cast<uintptr_t>(host) % 4096 != 0) {
    write_message(err, err_size, "import_host: address is not page-aligned");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ++in->now().imports;
  return wrap(in, host, size, true, out);
}

// The application's "device memory" in the simulation is host memory; its
// native handle is its address.
kite_status ds_import_external(void* backend, uint64_t native_handle, uint64_t size,
                               kite_backend_buffer* out, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "import", err, err_size);
  if (s != KITE_OK) return s;
  if (native_handle == 0) {
    write_message(err, err_size, "import_external: native handle is 0");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ++in->now().external_imports;
  return wrap(in, reinterpret_cast<const void*>(static_cast<uintptr_t>(native_handle)), size, false, out);
}

kite_status ds_upload(void* backend, const kite_backend_tensor2* dst, const void* src, char* err,
                      size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "upload", err, err_size);
  if (s != KITE_OK) return s;
  std::string why;
  uint8_t* to = resolve(in, dst->buffer, dst->offset, dst->byte_size,
                        std::string("upload of '") + (dst->name ? dst->name : "") + "'", &why);
  if (to == nullptr) {
    write_message(err, err_size, why);
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  Op op;
  op.kind = Op::Copy;
  op.src = static_cast<const uint8_t*>(src);
  op.dst = to;
  op.size = dst->byte_size;
  in->queue.push_back(op);
  ++in->now().uploads;
  in->now().upload_bytes += dst->byte_size;
  return KITE_OK;
}

kite_status ds_download(void* backend, void* dst, const kite_backend_tensor2* src, char* err,
                        size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  if (loses_device_now(in, err, err_size)) return KITE_ERROR_DEVICE_LOST;
  kite_status s = injected(in, "download", err, err_size);
  if (s != KITE_OK) return s;
  std::string why;
  const uint8_t* from = resolve(in, src->buffer, src->offset, src->byte_size,
                                std::string("download of '") + (src->name ? src->name : "") + "'", &why);
  if (from == nullptr) {
    write_message(err, err_size, why);
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  flush(in);  // returns after all work queued before it
  if (src->byte_size > 0) std::memcpy(dst, from, static_cast<size_t>(src->byte_size));
  ++in->now().downloads;
  in->now().download_bytes += src->byte_size;
  return KITE_OK;
}

kite_status ds_copy_buffer(void* backend, kite_backend_buffer src, uint64_t src_offset,
                           kite_backend_buffer dst, uint64_t dst_offset, uint64_t size, char* err,
                           size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "copy", err, err_size);
  if (s != KITE_OK) return s;
  std::string why;
  Buffer* sb = find_buffer(in, src);
  Buffer* db = find_buffer(in, dst);
  if (sb == nullptr || db == nullptr) {
    write_message(err, err_size, "copy_buffer: a buffer is not a devsim buffer of this instance");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  why = kite::abi::check_copy_ranges(src_offset, sb->size, dst_offset, db->size, size);
  if (why.empty() && db->read_only) why = "copy_buffer: the target is read-only";
  if (!why.empty()) {
    write_message(err, err_size, why);
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  Op op;
  op.kind = Op::Copy;
  op.src = sb->memory + src_offset;
  op.dst = db->memory + dst_offset;
  op.size = size;
  in->queue.push_back(op);
  ++in->now().buffer_copies;
  return KITE_OK;
}

kite_status ds_prepare_segment(void* backend, const kite_backend_segment* segment, void** out,
                               char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  if (!in->options.segments) {
    write_message(err, err_size, "segments are off (option segments=0)");
    return KITE_ERROR_UNSUPPORTED;
  }
  kite_status s = injected(in, "segment", err, err_size);
  if (s != KITE_OK) return s;
  auto seg = std::make_unique<Segment>();
  for (int32_t i = 0; i < segment->num_kernels; ++i) {
    seg->kernels.push_back(static_cast<Kernel*>(segment->kernels[i]));
  }
  ++in->now().segments_prepared;
  *out = seg.release();
  return KITE_OK;
}

kite_status ds_execute_segment(void* backend, void* segment, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "execute", err, err_size);
  if (s != KITE_OK) return s;
  for (Kernel* k : static_cast<Segment*>(segment)->kernels) {
    Op op;
    op.kind = Op::Run;
    op.kernel = k;
    in->queue.push_back(op);
  }
  ++in->now().segments_executed;
  return KITE_OK;
}

void ds_release_segment(void*, void* segment) { delete static_cast<Segment*>(segment); }

bool file_exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

// gate=PATH: announce the wait (PATH.waiting), then wait for PATH.
kite_status wait_at_gate(const std::string& gate, char* err, size_t err_size) {
  const std::string waiting = gate + ".waiting";
  std::FILE* f = std::fopen(waiting.c_str(), "wb");
  if (f == nullptr) {
    write_message(err, err_size, "gate: cannot create " + waiting);
    return KITE_ERROR_BACKEND;
  }
  std::fclose(f);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!file_exists(gate)) {
    if (std::chrono::steady_clock::now() > deadline) {
      write_message(err, err_size, "gate: " + gate + " was not created within 60 s (option gate)");
      return KITE_ERROR_BACKEND;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return KITE_OK;
}

kite_status ds_begin_run(void* backend, char* err, size_t err_size) {
  auto* in = static_cast<Instance*>(backend);
  kite_status s = injected(in, "begin_run", err, err_size);
  if (s != KITE_OK) return s;
  if (!in->options.gate.empty()) {
    s = wait_at_gate(in->options.gate, err, err_size);
    if (s != KITE_OK) return s;
  }
  in->running = true;
  ++in->runs;
  return KITE_OK;
}

kite_status ds_end_run(void* backend, char* err, size_t err_size) {
  return injected(static_cast<Instance*>(backend), "end_run", err, err_size);
}

kite_status ds_kernel_time(void* backend, void* kernel, uint64_t* out_ns) {
  auto* in = static_cast<Instance*>(backend);
  const Kernel* k = static_cast<const Kernel*>(kernel);
  if (!in->profile || k == nullptr || !k->timed) return KITE_ERROR_UNSUPPORTED;
  *out_ns = k->last_ns;
  return KITE_OK;
}

kite_backend_api make_api() {
  kite_backend_api api = kite::abi::backend_api("devsim", KITE_BACKEND_MEMORY_DEVICE);
  api.destroy = ds_destroy;
  api.execute = ds_execute;
  api.release = ds_release;
  api.device_count = ds_device_count;
  api.device_info = ds_device_info;
  api.device_open = ds_device_open;
  api.device_close = ds_device_close;
  api.create2 = ds_create2;
  api.supports2 = ds_supports2;
  api.prepare2 = ds_prepare2;
  api.workspace_size = ds_workspace_size;
  api.bind = ds_bind;
  api.buffer_alloc = ds_buffer_alloc;
  api.buffer_free = ds_buffer_free;
  api.buffer_map = ds_buffer_map;
  api.import_host = ds_import_host;
  api.import_external = ds_import_external;
  api.upload = ds_upload;
  api.download = ds_download;
  api.copy_buffer = ds_copy_buffer;
  api.synchronize2 = ds_synchronize2;
  api.prepare_segment = ds_prepare_segment;
  api.execute_segment = ds_execute_segment;
  api.release_segment = ds_release_segment;
  api.begin_run = ds_begin_run;
  api.end_run = ds_end_run;
  api.kernel_time = ds_kernel_time;
  return api;
}

}  // namespace

extern "C" const kite_backend_api* kite_backend_entry_devsim(void) {
  static const kite_backend_api api = make_api();
  return &api;
}

// How often device `index` was opened in this process (tests: sessions on
// one device share one device context).
extern "C" __attribute__((visibility("default"))) int kite_devsim_device_opens(int index) {
  return index >= 0 && index < kDeviceCount ? g_device_opens[index].load() : -1;
}

#ifdef KITE_BACKEND_PLUGIN
extern "C" __attribute__((visibility("default"))) const kite_backend_api* kite_backend_entry(void) {
  return kite_backend_entry_devsim();
}
#endif
