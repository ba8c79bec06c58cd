// The CPU backend: always linked into the runtime, host memory, kernels from
// the explicit table in kernel_table.cpp.
#ifndef KITE_CPU_BACKEND_H
#define KITE_CPU_BACKEND_H

#include "kite/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU backend's function table (static linking; never NULL). The
 * runtime registers it like any statically linked backend, through
 * kite_backend_entry_cpu(). */
const kite_backend_api* kite_cpu_backend_api(void);
const kite_backend_api* kite_backend_entry_cpu(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KITE_CPU_BACKEND_H */
