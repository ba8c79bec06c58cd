// The plugin's one exported symbol (libkite_backend_cuda.so): the backend
// table. Embedded builds link kite_backend_cuda_static and register
// kite_backend_entry_cuda() instead.
#include "kite/backend.h"

#define KITE_CUDA_ENTRY_NAME2(name) kite_backend_entry_##name
#define KITE_CUDA_ENTRY_NAME(name) KITE_CUDA_ENTRY_NAME2(name)
extern "C" const kite_backend_api* KITE_CUDA_ENTRY_NAME(KITE_CUDA_ENTRY_SUFFIX)(void);

extern "C" __attribute__((visibility("default"))) const kite_backend_api* kite_backend_entry(void) {
  return KITE_CUDA_ENTRY_NAME(KITE_CUDA_ENTRY_SUFFIX)();
}
