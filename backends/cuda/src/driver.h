// The CUDA driver API as the plugin uses it: a table of function pointers
// filled by dlopen/dlsym of libcuda.so.1 (src/driver.cpp), so the plugin
// has no link-time dependency on the driver and loads on machines without
// one. The test build fills the same table with a host emulator
// (emu/emu_driver.cpp). Symbols are named with their exact versioned
// exports (cuMemAlloc_v2, ...), all present since CUDA 11.4 at the latest;
// the newest is cuGraphInstantiateWithFlags (11.4). Nothing newer than
// CUDA 12.2 (JetPack 6) is needed.
#pragma once

#include <cuda.h>

#include <string>

namespace kite::cuda {

// X(member, exported symbol, return, (parameters)).
#define KITE_CUDA_DRIVER_FUNCTIONS(X)                                                                 \
  X(Init, "cuInit", CUresult, (unsigned int))                                                          \
  X(DriverGetVersion, "cuDriverGetVersion", CUresult, (int*))                                          \
  X(GetErrorName, "cuGetErrorName", CUresult, (CUresult, const char**))                                \
  X(GetErrorString, "cuGetErrorString", CUresult, (CUresult, const char**))                            \
  X(DeviceGetCount, "cuDeviceGetCount", CUresult, (int*))                                              \
  X(DeviceGet, "cuDeviceGet", CUresult, (CUdevice*, int))                                              \
  X(DeviceGetName, "cuDeviceGetName", CUresult, (char*, int, CUdevice))                                \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t*, CUdevice))                              \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int*, CUdevice_attribute, CUdevice))        \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext*, CUdevice))              \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice))                     \
  X(CtxPushCurrent, "cuCtxPushCurrent_v2", CUresult, (CUcontext))                                      \
  X(CtxPopCurrent, "cuCtxPopCurrent_v2", CUresult, (CUcontext*))                                       \
  X(MemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t*, size_t*))                                       \
  X(ModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule*, const void*))                            \
  X(ModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                                              \
  X(ModuleGetFunction, "cuModuleGetFunction", CUresult, (CUfunction*, CUmodule, const char*))          \
  X(MemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr*, size_t))                                       \
  X(MemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                                  \
  X(MemHostAlloc, "cuMemHostAlloc", CUresult, (void**, size_t, unsigned int))                          \
  X(MemFreeHost, "cuMemFreeHost", CUresult, (void*))                                                   \
  X(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", CUresult, (CUdeviceptr*, void*, unsigned int)) \
  X(MemHostRegister, "cuMemHostRegister_v2", CUresult, (void*, size_t, unsigned int))                  \
  X(MemHostUnregister, "cuMemHostUnregister", CUresult, (void*))                                       \
  X(MemcpyHtoD, "cuMemcpyHtoD_v2", CUresult, (CUdeviceptr, const void*, size_t))                       \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult, (CUdeviceptr, const void*, size_t, CUstream))   \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult, (void*, CUdeviceptr, size_t, CUstream))         \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))   \
  X(MemsetD8Async, "cuMemsetD8Async", CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))        \
  X(PointerGetAttribute, "cuPointerGetAttribute", CUresult, (void*, CUpointer_attribute, CUdeviceptr)) \
  X(StreamCreate, "cuStreamCreate", CUresult, (CUstream*, unsigned int))                               \
  X(StreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))                                         \
  X(StreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))                                    \
  X(StreamBeginCapture, "cuStreamBeginCapture_v2", CUresult, (CUstream, CUstreamCaptureMode))          \
  X(StreamEndCapture, "cuStreamEndCapture", CUresult, (CUstream, CUgraph*))                            \
  X(GraphInstantiate, "cuGraphInstantiateWithFlags", CUresult, (CUgraphExec*, CUgraph, unsigned long long)) \
  X(GraphLaunch, "cuGraphLaunch", CUresult, (CUgraphExec, CUstream))                                   \
  X(GraphExecDestroy, "cuGraphExecDestroy", CUresult, (CUgraphExec))                                   \
  X(GraphDestroy, "cuGraphDestroy", CUresult, (CUgraph))                                               \
  X(LaunchKernel, "cuLaunchKernel", CUresult,                                                          \
    (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,   \
     unsigned int, CUstream, void**, void**))                                                          \
  X(EventCreate, "cuEventCreate", CUresult, (CUevent*, unsigned int))                                  \
  X(EventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                                            \
  X(EventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))                                       \
  X(EventElapsedTime, "cuEventElapsedTime", CUresult, (float*, CUevent, CUevent))

struct Driver {
#define KITE_CUDA_DRIVER_MEMBER(member, symbol, ret, params) ret(CUDAAPI* member) params = nullptr;
  KITE_CUDA_DRIVER_FUNCTIONS(KITE_CUDA_DRIVER_MEMBER)
#undef KITE_CUDA_DRIVER_MEMBER
  int version = 0;          // cuDriverGetVersion, e.g. 12020
  std::string library;      // what was opened ("libcuda.so.1", or "emulator")

  // "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult r, const std::string& call) const;
};

// A library's function table (the driver, real or emulated; cuDNN;
// cuBLASLt), loaded once per process, or why it cannot be used.
template <typename Table>
struct Loaded {
  Table table;
  std::string error;
  bool ok = false;
};

// &loaded.table, or null with *why (when given) set to the reason.
template <typename Table>
const Table* loaded_or(const Loaded<Table>& loaded, std::string* why) {
  if (!loaded.ok) {
    if (why) *why = loaded.error;
    return nullptr;
  }
  return &loaded.table;
}

// The end of loading a driver table whose functions are set, real or
// emulated: cuInit(0) (failure: "cuInit found no CUDA device (...)" for
// CUDA_ERROR_NO_DEVICE, else the call's description) and the version.
void finish_driver_load(Loaded<Driver>* out);

// The process's driver: loaded (and cuInit called) once, on first use.
// Null with the reason (library missing, cuInit failed: no device, driver
// too old) when it cannot be used; the reason is the same on every call.
const Driver* driver(std::string* why);

// True for the errors that leave the CUDA context unusable (a kernel's
// illegal address, a launch failure, ECC errors, ...): every later call
// fails too, so the instance reports KITE_ERROR_DEVICE_LOST.
bool is_sticky(CUresult r);

}  // namespace kite::cuda
