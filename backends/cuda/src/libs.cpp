#include "libs.h"

#include "driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace kite::cuda {
namespace {

// Opens the first of `names` that loads; "" on success, else what failed.
void* open_first(const char* env_var, const std::vector<std::string>& names, std::string* opened,
                 std::string* why) {
  std::vector<std::string> tried;
  const char* env = std::getenv(env_var);
  if (env && env[0]) tried.push_back(env);
  else tried = names;
  std::string errors;
  for (const std::string& name : tried) {
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *opened = name;
      return h;
    }
    const char* e = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e ? e : name + ": dlopen failed");
  }
  *why = errors;
  return nullptr;
}

Loaded<Cudnn> load_cudnn() {
  Loaded<Cudnn> out;
  std::string why;
  void* h = open_first("KITE_CUDNN_LIBRARY", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"},
                       &out.table.library, &why);
  if (!h) {
    out.error = "cannot open cuDNN (" + why + ")";
    return out;
  }
#define KITE_LIB_LOAD(member, symbol, ret, params)                                        \
  {                                                                                       \
    void* sym = dlsym(h, symbol);                                                         \
    if (!sym) {                                                                           \
      out.error = out.table.library + " lacks " + symbol;                                \
      return out;                                                                         \
    }                                                                                     \
    out.table.member = reinterpret_cast<ret(*) params>(sym);                              \
  }
  KITE_CUDNN_FUNCTIONS(KITE_LIB_LOAD)
  out.table.version = out.table.GetVersion();
  if (out.table.version < 8000) {
    out.error = out.table.library + " is cuDNN " + std::to_string(out.table.version) + "; Kite needs 8.0 or newer";
    return out;
  }
  out.ok = true;
  return out;
}

Loaded<CublasLt> load_cublaslt() {
  Loaded<CublasLt> out;
  std::string why;
  void* h = open_first("KITE_CUBLASLT_LIBRARY",
                       {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"},
                       &out.table.library, &why);
  if (!h) {
    out.error = "cannot open cuBLASLt (" + why + ")";
    return out;
  }
  KITE_CUBLASLT_FUNCTIONS(KITE_LIB_LOAD)
#undef KITE_LIB_LOAD
  out.table.version = out.table.GetVersion();
  out.ok = true;
  return out;
}

}  // namespace

std::string Cudnn::describe(cudnnStatus_t s, const std::string& call) const {
  const char* text = GetErrorString ? GetErrorString(s) : nullptr;
  return call + " failed: " + (text ? text : "cudnnStatus " + std::to_string(static_cast<int>(s)));
}

std::string CublasLt::describe(cublasStatus_t s, const std::string& call) const {
  const char* name = "?";
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: name = "CUBLAS_STATUS_NOT_INITIALIZED"; break;
    case CUBLAS_STATUS_ALLOC_FAILED: name = "CUBLAS_STATUS_ALLOC_FAILED"; break;
    case CUBLAS_STATUS_INVALID_VALUE: name = "CUBLAS_STATUS_INVALID_VALUE"; break;
    case CUBLAS_STATUS_ARCH_MISMATCH: name = "CUBLAS_STATUS_ARCH_MISMATCH"; break;
    case CUBLAS_STATUS_MAPPING_ERROR: name = "CUBLAS_STATUS_MAPPING_ERROR"; break;
    case CUBLAS_STATUS_EXECUTION_FAILED: name = "CUBLAS_STATUS_EXECUTION_FAILED"; break;
    case CUBLAS_STATUS_INTERNAL_ERROR: name = "CUBLAS_STATUS_INTERNAL_ERROR"; break;
    case CUBLAS_STATUS_NOT_SUPPORTED: name = "CUBLAS_STATUS_NOT_SUPPORTED"; break;
    default: break;
  }
  return call + " failed: " + name + " (cublasStatus " + std::to_string(static_cast<int>(s)) + ")";
}

const Cudnn* cudnn_library(std::string* why) {
  static const Loaded<Cudnn> loaded = load_cudnn();
  return loaded_or(loaded, why);
}

const CublasLt* cublaslt_library(std::string* why) {
  static const Loaded<CublasLt> loaded = load_cublaslt();
  return loaded_or(loaded, why);
}

}  // namespace kite::cuda
