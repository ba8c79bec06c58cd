#include "device.h"

#include <cstdio>
#include <memory>

namespace kite::cuda {

#ifndef KITE_CUDA_ARCH_LIST
#define KITE_CUDA_ARCH_LIST "emulated"
#endif
const char* built_architectures() { return KITE_CUDA_ARCH_LIST; }

bool query_props(const Driver& drv, int index, DeviceProps* out, std::string* err) {
  int count = 0;
  CUresult r = drv.DeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    *err = drv.describe(r, "cuDeviceGetCount");
    return false;
  }
  if (index < 0 || index >= count) {
    *err = "CUDA device " + std::to_string(index) + " does not exist (" + std::to_string(count) + " devices)";
    return false;
  }
  CUdevice dev = 0;
  r = drv.DeviceGet(&dev, index);
  if (r != CUDA_SUCCESS) {
    *err = drv.describe(r, "cuDeviceGet");
    return false;
  }
  DeviceProps p;
  p.ordinal = index;
  char name[256] = {0};
  if (drv.DeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS) p.name = name;
  size_t total = 0;
  if (drv.DeviceTotalMem(&total, dev) == CUDA_SUCCESS) p.total_memory = total;
  auto attr = [&](CUdevice_attribute a, int fallback) {
    int v = 0;
    return drv.DeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : fallback;
  };
  p.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
  p.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
  p.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1);
  p.integrated = attr(CU_DEVICE_ATTRIBUTE_INTEGRATED, 0) != 0;
  p.can_map_host = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0) != 0;
  p.host_register = attr(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 0) != 0;
  p.read_only_register = attr(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 0) != 0;
  p.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
  p.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024);
  p.max_grid_y = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535);
  p.max_grid_z = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535);
  *out = p;
  return true;
}

Device* Device::open(const kite_backend_device_options& options, std::string* err) {
  const Driver* drv = driver(err);
  if (!drv) return nullptr;
  std::unique_ptr<Device> d(new Device());
  d->drv_ = drv;
  d->log_ = options.log;
  d->log_user_ = options.log_user;
  if (!query_props(*drv, options.device_index, &d->props_, err)) return nullptr;
  CUresult r = drv->DeviceGet(&d->dev_, options.device_index);
  if (r == CUDA_SUCCESS) r = drv->DevicePrimaryCtxRetain(&d->ctx_, d->dev_);
  if (r != CUDA_SUCCESS) {
    d->ctx_ = nullptr;
    *err = drv->describe(r, "cuDevicePrimaryCtxRetain") + " on device " + std::to_string(options.device_index);
    return nullptr;
  }
  ContextScope scope(*d);
  if (!scope.ok()) {
    *err = "cuCtxPushCurrent_v2 failed for device " + std::to_string(options.device_index);
    return nullptr;
  }
  const uint64_t free_before = d->free_bytes();
  if (free_before > 0 && d->props_.total_memory >= free_before) {
    d->memory_.in_use_at_context = d->props_.total_memory - free_before;
  }
  r = drv->ModuleLoadData(&d->module_, kite_cuda_fatbin);
  if (r != CUDA_SUCCESS) {
    d->module_ = nullptr;
    *err = drv->describe(r, "cuModuleLoadData") + ": the plugin's kernels are built for " + built_architectures() +
           " and device '" + d->props_.name + "' is sm_" + std::to_string(d->props_.cc_major) +
           std::to_string(d->props_.cc_minor) +
           " (rebuild with -DKITE_CUDA_ARCHITECTURES=" + std::to_string(d->props_.cc_major) +
           std::to_string(d->props_.cc_minor) + ")";
    return nullptr;
  }
  const uint64_t free_after = d->free_bytes();
  if (free_before > free_after) d->memory_.module = free_before - free_after;
  for (int i = 0; i < kKernelCount; ++i) {
    const char* name = kernel_name(static_cast<KernelId>(i));
    r = drv->ModuleGetFunction(&d->functions_[i], d->module_, name);
    if (r != CUDA_SUCCESS) {
      *err = drv->describe(r, std::string("cuModuleGetFunction(") + name + ")");
      return nullptr;
    }
  }
  char line[512];
  std::snprintf(line, sizeof line, "device %d: %s, sm_%d%d, %d SMs, %llu MiB%s; driver %d; kernels for %s",
                options.device_index, d->props_.name.c_str(), d->props_.cc_major, d->props_.cc_minor,
                d->props_.sm_count, static_cast<unsigned long long>(d->props_.total_memory >> 20),
                d->props_.integrated ? ", integrated (shares DRAM with the CPU)" : "", drv->version,
                built_architectures());
  d->log(KITE_LOG_INFO, line);
  return d.release();
}

Device::~Device() {
  if (!drv_) return;
  {
    ContextScope scope(*this);
    if (cudnn_.handle && cudnn_.lib) cudnn_.lib->Destroy(cudnn_.handle);
    if (lt_.handle && lt_.lib) lt_.lib->Destroy(lt_.handle);
    if (module_) drv_->ModuleUnload(module_);
  }
  if (ctx_) drv_->DevicePrimaryCtxRelease(dev_);
}

uint64_t Device::free_bytes() const {
  size_t free = 0, total = 0;
  return drv_->MemGetInfo(&free, &total) == CUDA_SUCCESS ? free : 0;
}

DeviceMemory Device::memory() const {
  std::lock_guard<std::mutex> lock(handles_mutex_);
  return memory_;
}

void Device::log(int level, const std::string& message) const {
  if (log_) log_(log_user_, level, KITE_CUDA_BACKEND_NAME, message.c_str());
}

template <typename Lib, typename Handle, typename Status>
Handle Device::lazy_handle(LazyHandle<Lib, Handle>* h, const Lib* (*load)(std::string*), Status success,
                           const char* create, const char* name, uint64_t* bytes, const Lib** lib,
                           std::string* why) {
#ifdef KITE_CUDA_EMULATOR
  if (why) *why = std::string("the CUDA emulator has no ") + name;
  if (lib) *lib = nullptr;
  return nullptr;
#endif
  std::lock_guard<std::mutex> lock(handles_mutex_);
  if (!h->tried) {
    h->tried = true;
    const Lib* l = load(&h->error);
    if (l) {
      ContextScope scope(*this);
      const uint64_t before = free_bytes();
      const Status s = l->Create(&h->handle);
      if (s != success) {
        h->handle = nullptr;
        h->error = l->describe(s, create);
      } else {
        h->lib = l;
        const uint64_t after = free_bytes();
        if (before > after) *bytes = before - after;
        log(KITE_LOG_INFO, std::string(name) + " " + std::to_string(l->version) + " from " + l->library);
      }
    }
  }
  if (!h->handle && why) *why = h->error;
  if (lib) *lib = h->lib;
  return h->handle;
}

cudnnHandle_t Device::cudnn(const Cudnn** lib, std::string* why) {
  return lazy_handle(&cudnn_, cudnn_library, CUDNN_STATUS_SUCCESS, "cudnnCreate", "cuDNN", &memory_.cudnn_handle,
                     lib, why);
}

cublasLtHandle_t Device::cublaslt(const CublasLt** lib, std::string* why) {
  return lazy_handle(&lt_, cublaslt_library, CUBLAS_STATUS_SUCCESS, "cublasLtCreate", "cuBLASLt",
                     &memory_.cublaslt_handle, lib, why);
}

}  // namespace kite::cuda
