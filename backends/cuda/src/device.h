// One CUDA device as the process shares it (the ABI's device_open ..
// device_close): the primary context, the module loaded from the embedded
// fatbin with its kernels, the device's properties, and the cuDNN and
// cuBLASLt handles, created when the first session that wants them asks.
// Sessions on the device (instances) each have their own stream.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "driver.h"
#include "kernel_ids.h"
#include "kite/backend.h"
#include "libs.h"

namespace kite::cuda {

struct DeviceProps {
  std::string name;
  int ordinal = 0;
  uint64_t total_memory = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  bool integrated = false;          // Jetson: CPU and GPU share DRAM
  bool can_map_host = false;        // mapped pinned memory
  bool host_register = false;       // cuMemHostRegister works
  bool read_only_register = false;  // ... on read-only pages (the mapped file)
  int max_threads_per_block = 1024;
  int max_shared_per_block = 48 * 1024;
  int max_grid_y = 65535, max_grid_z = 65535;
};

// Device memory this process's Kite device holds outside the sessions'
// buffers, measured with cuMemGetInfo around each step (0: not measured).
struct DeviceMemory {
  uint64_t in_use_at_context = 0;   // total - free right after the context (all processes)
  uint64_t module = 0;              // the fatbin's kernels
  uint64_t cudnn_handle = 0;
  uint64_t cublaslt_handle = 0;
};

class Device {
 public:
  // Opens device `index` (primary context, module, functions).
  static Device* open(const kite_backend_device_options& options, std::string* err);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Driver& drv() const { return *drv_; }
  CUcontext context() const { return ctx_; }
  const DeviceProps& props() const { return props_; }
  CUfunction function(KernelId id) const { return functions_[static_cast<int>(id)]; }
  DeviceMemory memory() const;

  // The shared library handles, created on first use (null with why).
  // cuDNN handles are not thread-safe: calls on it hold cudnn_mutex().
  cudnnHandle_t cudnn(const Cudnn** lib, std::string* why);
  cublasLtHandle_t cublaslt(const CublasLt** lib, std::string* why);
  std::mutex& cudnn_mutex() { return cudnn_mutex_; }

  bool lost() const { return lost_.load(); }
  void mark_lost() { lost_.store(true); }
  void log(int level, const std::string& message) const;

 private:
  Device() = default;
  uint64_t free_bytes() const;

  const Driver* drv_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction functions_[kKernelCount] = {};
  DeviceProps props_;
  DeviceMemory memory_;
  kite_log_fn log_ = nullptr;
  void* log_user_ = nullptr;
  std::atomic<bool> lost_{false};

  // A library handle made on the first call: the library, its handle
  // (null with error when either failed), tried once.
  template <typename Lib, typename Handle>
  struct LazyHandle {
    Handle handle = nullptr;
    const Lib* lib = nullptr;
    std::string error;
    bool tried = false;
  };
  // The handle of h: the first call loads the library with load(),
  // creates its handle with lib->Create (`create` names that call in the
  // error, `name` the library in the log line and the emulator's refusal)
  // and records the device memory that took in *bytes. Null with why when
  // there is none.
  template <typename Lib, typename Handle, typename Status>
  Handle lazy_handle(LazyHandle<Lib, Handle>* h, const Lib* (*load)(std::string*), Status success,
                     const char* create, const char* name, uint64_t* bytes, const Lib** lib, std::string* why);

  mutable std::mutex handles_mutex_;
  std::mutex cudnn_mutex_;
  LazyHandle<Cudnn, cudnnHandle_t> cudnn_;
  LazyHandle<CublasLt, cublasLtHandle_t> lt_;
};

// Makes the device's context current on this thread for a scope and
// restores the caller's afterwards (the application may use its own).
class ContextScope {
 public:
  explicit ContextScope(const Device& d) : drv_(d.drv()) { ok_ = drv_.CtxPushCurrent(d.context()) == CUDA_SUCCESS; }
  ~ContextScope() {
    if (ok_) {
      CUcontext ignored;
      drv_.CtxPopCurrent(&ignored);
    }
  }
  bool ok() const { return ok_; }

 private:
  const Driver& drv_;
  bool ok_ = false;
};

// Properties of device `index` without opening a context (device_info).
bool query_props(const Driver& drv, int index, DeviceProps* out, std::string* err);

// The embedded fatbin (src/fatbin.S) and the architectures it was built for.
extern "C" const unsigned char kite_cuda_fatbin[];
extern "C" const unsigned char kite_cuda_fatbin_end[];
const char* built_architectures();

}  // namespace kite::cuda
