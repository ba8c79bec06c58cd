// A configurable backend for scheduler tests, built as the plugin
// libkite_backend_test.so (and as a static library for embedded builds).
// It runs nodes with the CPU backend's kernels, but its supported set and its
// memory are configurable through KITE_TEST_BACKEND, a comma-separated list:
//   decline-fused     decline every fused node (forces decomposition)
//   decline=OP        decline nodes of op type OP (forces CPU fallback)
//   device            pretend to own device memory: tensors live in buffers
//                     of its own and the runtime must copy across
// An empty or unset variable accepts everything the CPU kernels accept.
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <string>

#include "cpu_backend.h"
#include "kite/backend.h"

namespace {

struct Config {
  bool decline_fused = false;
  bool device = false;
  std::set<std::string> declined_ops;
};

struct Instance {
  Config config;
  void* cpu = nullptr;  // the CPU backend instance doing the arithmetic
};

const kite_backend_api* cpu() { return kite_cpu_backend_api(); }

Config read_config() {
  Config c;
  const char* env = std::getenv("KITE_TEST_BACKEND");
  std::string s = env ? env : "";
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(start, comma - start);
    start = comma + 1;
    if (item == "decline-fused") c.decline_fused = true;
    else if (item == "device") c.device = true;
    else if (item.rfind("decline=", 0) == 0) c.declined_ops.insert(item.substr(8));
  }
  return c;
}

void put(char* buf, size_t size, const std::string& text) {
  if (buf == nullptr || size == 0) return;
  std::strncpy(buf, text.c_str(), size - 1);
  buf[size - 1] = '\0';
}

kite_status tb_create(const kite_backend_options* options, void** out, char* err, size_t err_size) {
  auto* inst = new (std::nothrow) Instance();
  if (inst == nullptr) return KITE_ERROR_OUT_OF_MEMORY;
  inst->config = read_config();
  const kite_status s = cpu()->create(options, &inst->cpu, err, err_size);
  if (s != KITE_OK) {
    delete inst;
    return s;
  }
  *out = inst;
  return KITE_OK;
}

void tb_destroy(void* backend) {
  auto* inst = static_cast<Instance*>(backend);
  if (inst == nullptr) return;
  cpu()->destroy(inst->cpu);
  delete inst;
}

int tb_supports(void* backend, const kite_backend_node* node, char* reason, size_t reason_size) {
  auto* inst = static_cast<Instance*>(backend);
  if (inst->config.decline_fused && node->fused_pattern[0] != '\0') {
    put(reason, reason_size, "configured to decline fused nodes");
    return 0;
  }
  if (inst->config.declined_ops.count(node->op)) {
    put(reason, reason_size, std::string("configured to decline ") + node->op);
    return 0;
  }
  return cpu()->supports(inst->cpu, node, reason, reason_size);
}

kite_status tb_prepare(void* backend, const kite_backend_node* node, void** out_kernel, char* err,
                       size_t err_size) {
  return cpu()->prepare(static_cast<Instance*>(backend)->cpu, node, out_kernel, err, err_size);
}

kite_status tb_execute(void* backend, void* kernel, char* err, size_t err_size) {
  return cpu()->execute(static_cast<Instance*>(backend)->cpu, kernel, err, err_size);
}

void tb_release(void* backend, void* kernel) {
  cpu()->release(static_cast<Instance*>(backend)->cpu, kernel);
}

// "Device" memory: ordinary heap blocks the runtime may only reach through
// the copy functions.
kite_status tb_alloc(void*, uint64_t size, uint64_t alignment, void** out_ptr) {
  if (alignment < 64) alignment = 64;
  const uint64_t rounded = (size + alignment - 1) / alignment * alignment;
  *out_ptr = std::aligned_alloc(static_cast<size_t>(alignment), static_cast<size_t>(rounded));
  if (*out_ptr == nullptr) return KITE_ERROR_OUT_OF_MEMORY;
  // Garbage, so a missing upload shows up as wrong results.
  std::memset(*out_ptr, 0xA5, static_cast<size_t>(rounded));
  return KITE_OK;
}
void tb_free(void*, void* ptr) { std::free(ptr); }
kite_status tb_copy(void*, void* dst, const void* src, uint64_t size) {
  if (size > 0) std::memcpy(dst, src, static_cast<size_t>(size));
  return KITE_OK;
}
kite_status tb_sync(void*) { return KITE_OK; }

kite_backend_api make_api(bool device) {
  kite_backend_api api{};
  api.abi_version = KITE_BACKEND_ABI_VERSION;
  api.struct_size = sizeof(kite_backend_api);
  api.name = "test";
  api.memory = device ? KITE_BACKEND_MEMORY_DEVICE : KITE_BACKEND_MEMORY_HOST;
  api.create = tb_create;
  api.destroy = tb_destroy;
  api.supports = tb_supports;
  api.prepare = tb_prepare;
  api.execute = tb_execute;
  api.release = tb_release;
  if (device) {
    api.alloc = tb_alloc;
    api.free = tb_free;
    api.copy_to_device = tb_copy;
    api.copy_to_host = tb_copy;
    api.synchronize = tb_sync;
  }
  return api;
}

}  // namespace

extern "C" const kite_backend_api* kite_backend_entry_test(void) {
  // The memory kind is part of the table, so it is read once per process.
  static const kite_backend_api api = make_api(read_config().device);
  return &api;
}

#ifdef KITE_BACKEND_PLUGIN
extern "C" __attribute__((visibility("default"))) const kite_backend_api* kite_backend_entry(void) {
  return kite_backend_entry_test();
}
#endif
