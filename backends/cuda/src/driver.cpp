#include "driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace kite::cuda {

std::string Driver::describe(CUresult r, const std::string& call) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (GetErrorName) GetErrorName(r, &name);
  if (GetErrorString) GetErrorString(r, &text);
  std::string out = call + " failed: ";
  out += name ? name : ("CUresult " + std::to_string(static_cast<int>(r)));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

bool is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_DEINITIALIZED:
      return true;
    default:
      return false;
  }
}

void finish_driver_load(Loaded<Driver>* out) {
  Driver& d = out->table;
  const CUresult r = d.Init(0);
  if (r != CUDA_SUCCESS) {
    out->error = r == CUDA_ERROR_NO_DEVICE ? "cuInit found no CUDA device (" + d.describe(r, "cuInit") + ")"
                                           : d.describe(r, "cuInit");
    return;
  }
  d.DriverGetVersion(&d.version);
  out->ok = true;
}

#ifndef KITE_CUDA_EMULATOR
namespace {

Loaded<Driver> load() {
  Loaded<Driver> out;
  // KITE_CUDA_DRIVER names another libcuda (tests point it at a missing file).
  const char* env = std::getenv("KITE_CUDA_DRIVER");
  const std::string path = env && env[0] ? env : "libcuda.so.1";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    out.error = "cannot open the CUDA driver " + path + " (" + (e ? e : "dlopen failed") +
                "): no NVIDIA driver is installed here";
    return out;
  }
  Driver& d = out.table;
  d.library = path;
#define KITE_CUDA_DRIVER_LOAD(member, symbol, ret, params)                                         \
  {                                                                                                \
    void* sym = dlsym(handle, symbol);                                                             \
    if (!sym) {                                                                                    \
      out.error = std::string("the CUDA driver ") + path + " lacks " + symbol +                    \
                  " (Kite needs a driver for CUDA 11.4 or newer)";                                 \
      return out;                                                                                  \
    }                                                                                              \
    d.member = reinterpret_cast<ret(CUDAAPI*) params>(sym);                                        \
  }
  KITE_CUDA_DRIVER_FUNCTIONS(KITE_CUDA_DRIVER_LOAD)
#undef KITE_CUDA_DRIVER_LOAD
  // The handle stays open for the life of the process: CUDA keeps state
  // (contexts, threads) that must not outlive the library's code.
  finish_driver_load(&out);
  return out;
}

}  // namespace

const Driver* driver(std::string* why) {
  static const Loaded<Driver> loaded = load();
  return loaded_or(loaded, why);
}
#endif

}  // namespace kite::cuda
