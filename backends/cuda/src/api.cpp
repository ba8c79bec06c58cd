// The CUDA backend behind the C ABI of kite/backend.h (v2). The entry
// points common to the device plugins (argument checks, exceptions turned
// into statuses, forwarding to Backend) are kite::abi::DevicePlugin's; this
// file has what only CUDA does: counting and describing its devices, and
// when a node it takes runs on float16 kernels.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend.h"
#include "kite/abi/plugin.h"

namespace kite::cuda {
namespace {

using abi::fail;
using abi::guarded;

struct CudaPlugin {
  using Device = cuda::Device;
  using Backend = cuda::Backend;
  using Kernel = cuda::Kernel;
  using Segment = cuda::Segment;
  using Buffer = cuda::Buffer;
  static std::string check_tables() { return kernels().check(); }
  // Taken on the _f16 kernels (which read and write halves and compute in
  // float): the note of kite/backend.h, worded as the CPU backend's.
  static std::string unsupported(Backend& backend, const kite_backend_node2& node, std::string* note) {
    Kernel scratch;
    std::string label;
    const std::string why = backend.plan(node, &scratch, &label, false);
    for (const Step& st : scratch.steps) {
      if (st.kind == Step::Kind::kLaunch && is_f16_kernel(st.fn)) *note = "fp16 storage, fp32 arithmetic";
    }
    return why;
  }
};
using Plugin = abi::DevicePlugin<CudaPlugin>;

kite_status cu_device_count(int32_t* out_count, char* err, size_t err_size) {
  if (!out_count) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_count is NULL");
  *out_count = 0;
  return guarded(err, err_size, "device_count", [&](std::string* message) {
    const Driver* d = driver(message);
    if (!d) return KITE_ERROR_BACKEND;
    int count = 0;
    const CUresult r = d->DeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
      *message = d->describe(r, "cuDeviceGetCount");
      return KITE_ERROR_BACKEND;
    }
    if (count == 0) {
      *message = "the CUDA driver (" + d->library + ") reports no device";
      return KITE_ERROR_BACKEND;
    }
    *out_count = count;
    return KITE_OK;
  });
}

kite_status cu_device_info(int32_t index, kite_backend_device_info* out, char* err, size_t err_size) {
  if (!out || out->struct_size < sizeof(uint32_t)) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_info is NULL or too small");
  }
  return guarded(err, err_size, "device_info", [&](std::string* message) {
    const Driver* d = driver(message);
    if (!d) return KITE_ERROR_BACKEND;
    DeviceProps p;
    if (!query_props(*d, index, &p, message)) return KITE_ERROR_INVALID_ARGUMENT;
    kite_backend_device_info info{};
    info.struct_size = out->struct_size;
    std::snprintf(info.name, sizeof info.name, "%s (sm_%d%d%s)", p.name.c_str(), p.cc_major, p.cc_minor,
                  p.integrated ? ", integrated" : "");
    info.memory_bytes = p.total_memory;
    // FP16_STORAGE: float16 nodes run on the _f16 kernels (half storage,
    // float arithmetic); no FP16_ARITH, they do not compute in half.
    uint32_t flags = KITE_DEVICE_TIMESTAMPS | KITE_DEVICE_EXTERNAL_BUFFERS | KITE_DEVICE_FP16_STORAGE;
    // Mapped pinned memory: an instance maps its arena when it runs unified
    // (integrated GPUs by default, unified=1 elsewhere); buffer_map says
    // KITE_ERROR_UNSUPPORTED otherwise.
    if (p.can_map_host) flags |= KITE_DEVICE_UNIFIED;
    if (p.can_map_host && p.host_register && p.read_only_register) flags |= KITE_DEVICE_HOST_IMPORT;
    info.flags = flags;
    info.min_offset_alignment = 16;  // vector loads of cuDNN/cuBLASLt; Kite's kernels need 8
    info.max_buffer_size = p.total_memory;
    std::memcpy(out, &info, std::min<size_t>(out->struct_size, sizeof info));
    return KITE_OK;
  });
}

kite_backend_api make_api() {
  kite_backend_api api = Plugin::api(KITE_CUDA_BACKEND_NAME);
  api.device_count = cu_device_count;
  api.device_info = cu_device_info;
  api.import_host = Plugin::import_host;
  api.import_external = Plugin::import_external;
  api.begin_run = Plugin::begin_run;
  return api;
}

}  // namespace
}  // namespace kite::cuda

// kite_backend_entry_cuda (or _cudaemu for the emulated test build).
#define KITE_CUDA_ENTRY_NAME2(name) kite_backend_entry_##name
#define KITE_CUDA_ENTRY_NAME(name) KITE_CUDA_ENTRY_NAME2(name)
extern "C" __attribute__((visibility("default"))) const kite_backend_api* KITE_CUDA_ENTRY_NAME(KITE_CUDA_ENTRY_SUFFIX)(void) {
  static const kite_backend_api api = kite::cuda::make_api();
  return &api;
}
