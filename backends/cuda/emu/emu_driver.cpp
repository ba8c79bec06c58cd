// A host emulator of the CUDA driver API subset the plugin uses, for the
// test build libkite_backend_cudaemu.so: the same backend code as the real
// plugin, with this table instead of libcuda. It behaves like a GPU that a
// host cannot out-smart:
//  - device memory is host memory poisoned with 0xFF bytes (NaN in float)
//    when allocated, so a value never written shows as a wrong output;
//  - all work on a stream (kernels, async copies, memsets, event records)
//    is queued and runs only at cuStreamSynchronize, so a missing
//    synchronize shows, and an async copy reads its source only then;
//  - stream capture records the queued work into a graph instead (a
//    synchronising call during capture fails, as on a GPU);
//  - kernels run as host code (emu_exec.cpp), fibers where they
//    synchronise.
// Environment (read on every call, so one test process can vary them):
//  KITE_CUDAEMU_INTEGRATED=1  report an integrated GPU (the Jetson path)
//  KITE_CUDAEMU_NO_DEVICE=1   cuInit reports CUDA_ERROR_NO_DEVICE
//  KITE_CUDAEMU_FAIL=SYMBOL[:sticky]  that call fails (out of memory for
//      allocations, out of resources for launches, else an invalid value);
//      :sticky makes it an illegal address that every later call returns too
//  KITE_CUDAEMU_FAIL_AFTER=N  the failing call succeeds N times first
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../src/driver.h"
#include "emu_exec.h"

namespace kite::cuda {

namespace {

constexpr uint64_t kTotalMemory = uint64_t{4} << 30;

struct EmuGraph {
  std::vector<std::function<void()>> ops;
};

struct EmuStream {
  std::vector<std::function<void()>> queue;
  EmuGraph* capture = nullptr;
  uint64_t enqueued = 0;  // work ever queued (not captured)
};

struct EmuEvent {
  std::chrono::steady_clock::time_point time;
  bool recorded = false;
};

struct State {
  std::recursive_mutex mutex;
  std::map<uintptr_t, uint64_t> device_allocs;   // cuMemAlloc
  std::map<uintptr_t, uint64_t> host_allocs;     // cuMemHostAlloc
  std::map<uintptr_t, uint64_t> registered;      // cuMemHostRegister
  uint64_t allocated = 0;
  CUresult sticky = CUDA_SUCCESS;
  std::map<std::string, int> calls;              // per failing symbol
  int context_tag = 0, module_tag = 0;
};

State& st() {
  static State* s = new State();
  return *s;
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

// The injected result for `symbol`, or CUDA_SUCCESS.
CUresult inject(const char* symbol, CUresult kind = CUDA_ERROR_INVALID_VALUE) {
  State& s = st();
  if (s.sticky != CUDA_SUCCESS) return s.sticky;
  const char* fail = std::getenv("KITE_CUDAEMU_FAIL");
  if (!fail || !fail[0]) return CUDA_SUCCESS;
  std::string spec = fail;
  bool sticky = false;
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    sticky = spec.substr(colon + 1) == "sticky";
    spec = spec.substr(0, colon);
  }
  if (spec != symbol) return CUDA_SUCCESS;
  const char* after = std::getenv("KITE_CUDAEMU_FAIL_AFTER");
  const int allowed = after ? std::atoi(after) : 0;
  if (s.calls[spec]++ < allowed) return CUDA_SUCCESS;
  if (sticky) {
    s.sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return s.sticky;
  }
  return kind;
}

thread_local int t_capturing = 0;  // streams capturing on this thread

#define EMU_GUARD(symbol, kind)                                \
  std::lock_guard<std::recursive_mutex> lock(st().mutex);      \
  {                                                            \
    const CUresult injected = inject(symbol, kind);            \
    if (injected != CUDA_SUCCESS) return injected;             \
  }

// Ops enqueued on a stream go into its capture graph while it captures.
void enqueue(CUstream stream, std::function<void()> op) {
  auto* s = reinterpret_cast<EmuStream*>(stream);
  if (s->capture) {
    s->capture->ops.push_back(std::move(op));
  } else {
    s->queue.push_back(std::move(op));
    ++s->enqueued;
  }
}

void drain(EmuStream* s) {
  // Ops may not enqueue more; run in order.
  std::vector<std::function<void()>> ops;
  ops.swap(s->queue);
  for (auto& op : ops) op();
}

// ---- the table ----------------------------------------------------------------

CUresult emu_Init(unsigned int) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return env_on("KITE_CUDAEMU_NO_DEVICE") ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}
CUresult emu_DriverGetVersion(int* v) {
  *v = 12020;
  return CUDA_SUCCESS;
}
CUresult emu_GetErrorName(CUresult r, const char** out) {
  switch (r) {
    case CUDA_SUCCESS: *out = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *out = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *out = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *out = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_NO_DEVICE: *out = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_VALUE: *out = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_FOUND: *out = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *out = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case CUDA_ERROR_INVALID_HANDLE: *out = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *out = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *out = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    default: *out = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}
CUresult emu_GetErrorString(CUresult r, const char** out) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: *out = "out of memory"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *out = "unspecified launch failure"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *out = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_NO_DEVICE: *out = "no CUDA-capable device is detected"; break;
    default: *out = "emulated error"; break;
  }
  return CUDA_SUCCESS;
}
CUresult emu_DeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult emu_DeviceGet(CUdevice* d, int i) {
  if (i != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult emu_DeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<size_t>(len), "Kite CUDA emulator%s", env_on("KITE_CUDAEMU_INTEGRATED") ? " (integrated)" : "");
  return CUDA_SUCCESS;
}
CUresult emu_DeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = kTotalMemory;
  return CUDA_SUCCESS;
}
CUresult emu_DeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 8; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 7; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = env_on("KITE_CUDAEMU_INTEGRATED") ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult emu_DevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  EMU_GUARD("cuDevicePrimaryCtxRetain", CUDA_ERROR_OUT_OF_MEMORY)
  *c = reinterpret_cast<CUcontext>(&st().context_tag);
  return CUDA_SUCCESS;
}
CUresult emu_DevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult emu_CtxPushCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult emu_CtxPopCurrent(CUcontext* c) {
  if (c) *c = reinterpret_cast<CUcontext>(&st().context_tag);
  return CUDA_SUCCESS;
}
CUresult emu_MemGetInfo(size_t* free_bytes, size_t* total) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  *total = kTotalMemory;
  *free_bytes = kTotalMemory - std::min<uint64_t>(st().allocated, kTotalMemory);
  return CUDA_SUCCESS;
}
CUresult emu_ModuleLoadData(CUmodule* m, const void* image) {
  EMU_GUARD("cuModuleLoadData", CUDA_ERROR_NO_BINARY_FOR_GPU)
  if (!image) return CUDA_ERROR_INVALID_IMAGE;
  *m = reinterpret_cast<CUmodule>(&st().module_tag);
  return CUDA_SUCCESS;
}
CUresult emu_ModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult emu_ModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  const kite_emu::KernelEntry* k = kite_emu::find_kernel(name);
  if (!k) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(const_cast<kite_emu::KernelEntry*>(k));
  return CUDA_SUCCESS;
}
CUresult emu_MemAlloc(CUdeviceptr* p, size_t bytes) {
  EMU_GUARD("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY)
  if (t_capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (st().allocated + bytes > kTotalMemory) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t rounded = (bytes + 255) / 256 * 256;
  void* m = std::aligned_alloc(256, rounded);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0xFF, rounded);  // poison
  st().device_allocs[reinterpret_cast<uintptr_t>(m)] = bytes;
  st().allocated += bytes;
  *p = reinterpret_cast<uintptr_t>(m);
  return CUDA_SUCCESS;
}
CUresult emu_MemFree(CUdeviceptr p) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto it = st().device_allocs.find(static_cast<uintptr_t>(p));
  if (it == st().device_allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  st().allocated -= it->second;
  std::free(reinterpret_cast<void*>(it->first));
  st().device_allocs.erase(it);
  return CUDA_SUCCESS;
}
CUresult emu_MemHostAlloc(void** p, size_t bytes, unsigned int) {
  EMU_GUARD("cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY)
  if (t_capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* m = std::aligned_alloc(4096, rounded);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0xFF, rounded);
  st().host_allocs[reinterpret_cast<uintptr_t>(m)] = bytes;
  *p = m;
  return CUDA_SUCCESS;
}
CUresult emu_MemFreeHost(void* p) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto it = st().host_allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == st().host_allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  st().host_allocs.erase(it);
  return CUDA_SUCCESS;
}
CUresult emu_MemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto inside = [a](const std::map<uintptr_t, uint64_t>& m) {
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a < it->first + it->second;
  };
  if (!inside(st().host_allocs) && !inside(st().registered)) return CUDA_ERROR_INVALID_VALUE;
  *d = a;
  return CUDA_SUCCESS;
}
CUresult emu_MemHostRegister(void* p, size_t bytes, unsigned int) {
  EMU_GUARD("cuMemHostRegister_v2", CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
  st().registered[reinterpret_cast<uintptr_t>(p)] = bytes;
  return CUDA_SUCCESS;
}
CUresult emu_MemHostUnregister(void* p) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return st().registered.erase(reinterpret_cast<uintptr_t>(p)) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}
CUresult emu_MemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  EMU_GUARD("cuMemcpyHtoD_v2", CUDA_ERROR_INVALID_VALUE)
  if (t_capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return CUDA_SUCCESS;
}
CUresult emu_MemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream stream) {
  EMU_GUARD("cuMemcpyHtoDAsync_v2", CUDA_ERROR_INVALID_VALUE)
  enqueue(stream, [d, s, n] { std::memcpy(reinterpret_cast<void*>(d), s, n); });
  return CUDA_SUCCESS;
}
CUresult emu_MemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream stream) {
  EMU_GUARD("cuMemcpyDtoHAsync_v2", CUDA_ERROR_INVALID_VALUE)
  enqueue(stream, [d, s, n] { std::memcpy(d, reinterpret_cast<const void*>(s), n); });
  return CUDA_SUCCESS;
}
CUresult emu_MemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream stream) {
  EMU_GUARD("cuMemcpyDtoDAsync_v2", CUDA_ERROR_INVALID_VALUE)
  enqueue(stream, [d, s, n] { std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n); });
  return CUDA_SUCCESS;
}
CUresult emu_MemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream stream) {
  EMU_GUARD("cuMemsetD8Async", CUDA_ERROR_INVALID_VALUE)
  enqueue(stream, [d, v, n] { std::memset(reinterpret_cast<void*>(d), v, n); });
  return CUDA_SUCCESS;
}
CUresult emu_PointerGetAttribute(void* out, CUpointer_attribute attr, CUdeviceptr p) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto& m = st().device_allocs;
  auto it = m.upper_bound(static_cast<uintptr_t>(p));
  if (it == m.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (p >= it->first + it->second) return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *static_cast<CUdeviceptr*>(out) = it->first;
  else if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE) *static_cast<size_t*>(out) = it->second;
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult emu_StreamCreate(CUstream* s, unsigned int) {
  EMU_GUARD("cuStreamCreate", CUDA_ERROR_OUT_OF_MEMORY)
  *s = reinterpret_cast<CUstream>(new EmuStream());
  return CUDA_SUCCESS;
}
CUresult emu_StreamDestroy(CUstream s) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto* es = reinterpret_cast<EmuStream*>(s);
  if (es->capture) delete es->capture;
  delete es;
  return CUDA_SUCCESS;
}
CUresult emu_StreamSynchronize(CUstream s) {
  EMU_GUARD("cuStreamSynchronize", CUDA_ERROR_INVALID_VALUE)
  auto* es = reinterpret_cast<EmuStream*>(s);
  if (es->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  drain(es);
  // A sticky failure injected into the work shows at the synchronize.
  return st().sticky;
}
CUresult emu_StreamBeginCapture(CUstream s, CUstreamCaptureMode) {
  EMU_GUARD("cuStreamBeginCapture_v2", CUDA_ERROR_INVALID_VALUE)
  auto* es = reinterpret_cast<EmuStream*>(s);
  if (es->capture) return CUDA_ERROR_ILLEGAL_STATE;
  es->capture = new EmuGraph();
  ++t_capturing;
  return CUDA_SUCCESS;
}
CUresult emu_StreamEndCapture(CUstream s, CUgraph* g) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto* es = reinterpret_cast<EmuStream*>(s);
  if (!es->capture) return CUDA_ERROR_ILLEGAL_STATE;
  *g = reinterpret_cast<CUgraph>(es->capture);
  es->capture = nullptr;
  --t_capturing;
  return inject("cuStreamEndCapture", CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}
CUresult emu_GraphInstantiate(CUgraphExec* e, CUgraph g, unsigned long long) {
  EMU_GUARD("cuGraphInstantiateWithFlags", CUDA_ERROR_OUT_OF_MEMORY)
  *e = reinterpret_cast<CUgraphExec>(new EmuGraph(*reinterpret_cast<EmuGraph*>(g)));
  return CUDA_SUCCESS;
}
CUresult emu_GraphLaunch(CUgraphExec e, CUstream s) {
  EMU_GUARD("cuGraphLaunch", CUDA_ERROR_INVALID_VALUE)
  for (const auto& op : reinterpret_cast<EmuGraph*>(e)->ops) enqueue(s, op);
  return CUDA_SUCCESS;
}
CUresult emu_GraphExecDestroy(CUgraphExec e) {
  delete reinterpret_cast<EmuGraph*>(e);
  return CUDA_SUCCESS;
}
CUresult emu_GraphDestroy(CUgraph g) {
  delete reinterpret_cast<EmuGraph*>(g);
  return CUDA_SUCCESS;
}
CUresult emu_LaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                          unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params, void** extra) {
  EMU_GUARD("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
  const auto* k = reinterpret_cast<const kite_emu::KernelEntry*>(f);
  if (!k || !params || extra || shared != 0 || gx == 0 || gy == 0 || gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024 ||
      gy > 65535 || gz > 65535) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The parameters are copied at the launch (a graph keeps its copy).
  auto bytes = std::make_shared<std::vector<unsigned char>>(k->params_size);
  std::memcpy(bytes->data(), params[0], k->params_size);
  const kite_emu::Dim3 grid{gx, gy, gz}, block{bx, by, bz};
  enqueue(s, [k, bytes, grid, block] { kite_emu::launch(*k, grid, block, bytes->data()); });
  return CUDA_SUCCESS;
}
CUresult emu_EventCreate(CUevent* e, unsigned int) {
  EMU_GUARD("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY)
  *e = reinterpret_cast<CUevent>(new EmuEvent());
  return CUDA_SUCCESS;
}
CUresult emu_EventDestroy(CUevent e) {
  delete reinterpret_cast<EmuEvent*>(e);
  return CUDA_SUCCESS;
}
CUresult emu_EventRecord(CUevent e, CUstream s) {
  EMU_GUARD("cuEventRecord", CUDA_ERROR_INVALID_VALUE)
  auto* ev = reinterpret_cast<EmuEvent*>(e);
  enqueue(s, [ev] {
    ev->time = std::chrono::steady_clock::now();
    ev->recorded = true;
  });
  return CUDA_SUCCESS;
}
CUresult emu_EventElapsedTime(float* ms, CUevent a, CUevent b) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto* ea = reinterpret_cast<EmuEvent*>(a);
  auto* eb = reinterpret_cast<EmuEvent*>(b);
  if (!ea->recorded || !eb->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = std::chrono::duration<float, std::milli>(eb->time - ea->time).count();
  return CUDA_SUCCESS;
}

Loaded<Driver> load() {
  Loaded<Driver> out;
  Driver& d = out.table;
  d.library = "the Kite CUDA emulator";
#define KITE_EMU_SET(member, symbol, ret, params) d.member = emu_##member;
  KITE_CUDA_DRIVER_FUNCTIONS(KITE_EMU_SET)
#undef KITE_EMU_SET
  finish_driver_load(&out);
  return out;
}

}  // namespace

const Driver* driver(std::string* why) {
  static const Loaded<Driver> loaded = load();
  return loaded_or(loaded, why);
}

// Test hooks: an application's stream of the emulated device (for
// kite_session_options_set_external_queue), and whether work is queued on it.
extern "C" __attribute__((visibility("default"))) void* kite_cudaemu_stream_create() {
  CUstream s = nullptr;
  return emu_StreamCreate(&s, 0) == CUDA_SUCCESS ? static_cast<void*>(s) : nullptr;
}
extern "C" __attribute__((visibility("default"))) int kite_cudaemu_stream_pending(void* s) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return static_cast<int>(reinterpret_cast<EmuStream*>(s)->queue.size());
}
extern "C" __attribute__((visibility("default"))) long long kite_cudaemu_stream_enqueued(void* s) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return static_cast<long long>(reinterpret_cast<EmuStream*>(s)->enqueued);
}
extern "C" __attribute__((visibility("default"))) void kite_cudaemu_stream_destroy(void* s) {
  emu_StreamDestroy(static_cast<CUstream>(s));
}

// The emulator loads no fatbin; cuModuleLoadData only checks the pointer.
extern "C" const unsigned char kite_cuda_fatbin[] = {0};
extern "C" const unsigned char kite_cuda_fatbin_end[] = {0};

}  // namespace kite::cuda
