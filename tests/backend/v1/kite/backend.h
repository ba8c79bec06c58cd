/* A frozen copy of the ABI v1 header (KITE_BACKEND_ABI_VERSION 1) as it was
 * released. tests/backend/v1/v1_plugin.c is built against it, so the test
 * suite proves that a v1 plugin still loads and runs. Never edit. */
/*
 * Kite backend ABI (C99). A backend is a table of function pointers that the
 * runtime calls to learn what the backend supports, prepare kernels and run
 * them. The CPU backend is linked into the runtime; others are shared modules
 * exporting KITE_BACKEND_ENTRY_SYMBOL.
 *
 * Rules
 *  - The struct starts with abi_version and struct_size; members are only
 *    ever appended. The runtime refuses an abi_version it does not know and
 *    treats members past struct_size as NULL.
 *  - Optional members may be NULL.
 *  - No C++ type crosses this boundary.
 *  - Life cycle: create -> supports (per node) -> prepare (per node: validate,
 *    choose an algorithm, allocate, pack weights) -> execute (compute only:
 *    no allocation, no validation) -> release -> destroy.
 *
 * Writing a backend: fill a kite_backend_api, return it from
 * kite_backend_entry(). See backends/cpu/cpu_backend.cpp for one.
 */
#ifndef KITE_BACKEND_H
#define KITE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kite/kite.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KITE_BACKEND_ABI_VERSION 1
#define KITE_BACKEND_ENTRY_SYMBOL "kite_backend_entry"

/* Where a backend's tensors live. */
typedef enum kite_backend_memory {
  KITE_BACKEND_MEMORY_HOST = 0,   /* data pointers are host addresses        */
  KITE_BACKEND_MEMORY_DEVICE = 1  /* data pointers come from the backend's alloc */
} kite_backend_memory;

typedef enum kite_attr_type {
  KITE_ATTR_UNDEFINED = 0,
  KITE_ATTR_INT = 1,
  KITE_ATTR_FLOAT = 2,
  KITE_ATTR_STRING = 3,
  KITE_ATTR_INTS = 4,
  KITE_ATTR_FLOATS = 5,
  KITE_ATTR_STRINGS = 6,
  KITE_ATTR_GRAPH = 7
} kite_attr_type;

typedef struct kite_backend_tensor {
  const char *name;
  kite_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  uint64_t byte_size;
  void *data;            /* in the backend's memory; constants are read-only */
  int32_t is_constant;   /* weights: data stays valid and unchanged for the session */
} kite_backend_tensor;

typedef struct kite_backend_attr {
  const char *name;
  kite_attr_type type;
  int64_t i;                  /* INT, GRAPH (graph index) */
  float f;                    /* FLOAT */
  const char *s;              /* STRING */
  int32_t count;              /* INTS, FLOATS, STRINGS */
  const int64_t *ints;
  const float *floats;
  const char *const *strings;
} kite_backend_attr;

typedef struct kite_backend_node {
  const char *name;
  const char *op;
  const char *domain;          /* "" for ai.onnx */
  const char *fused_pattern;   /* "" for a primitive node */
  int32_t num_inputs;
  const kite_backend_tensor *const *inputs;  /* NULL entry: absent optional input */
  int32_t num_outputs;
  const kite_backend_tensor *const *outputs;
  int32_t num_attrs;
  const kite_backend_attr *attrs;
} kite_backend_node;

typedef struct kite_backend_options {
  int32_t threads;             /* 0: backend's choice */
} kite_backend_options;

typedef struct kite_backend_api {
  uint32_t abi_version;        /* KITE_BACKEND_ABI_VERSION */
  uint32_t struct_size;        /* sizeof(kite_backend_api) of the backend */
  const char *name;            /* "cpu", "vulkan", "cuda", ... */
  kite_backend_memory memory;

  /* Creates one backend instance (one per session). err: message on failure. */
  kite_status (*create)(const kite_backend_options *options, void **out_backend,
                        char *err, size_t err_size);
  void (*destroy)(void *backend);

  /* 1 if the backend runs this node as given (op, attributes, dtypes,
   * shapes), else 0 with a short reason in reason (may be NULL). Must not
   * read tensor data. */
  int (*supports)(void *backend, const kite_backend_node *node, char *reason,
                  size_t reason_size);

  /* Validates the node fully and builds its kernel. The node and everything
   * it points to stay valid until release. */
  kite_status (*prepare)(void *backend, const kite_backend_node *node, void **out_kernel,
                         char *err, size_t err_size);
  /* Computes. Must not allocate. */
  kite_status (*execute)(void *backend, void *kernel, char *err, size_t err_size);
  void (*release)(void *backend, void *kernel);

  /* ---- optional: device-memory backends (NULL for host backends) ----
   * The runtime gives a device backend a mirror of the arena (same offsets)
   * from alloc, uploads constants once with copy_to_device, and inserts
   * copies where a tensor crosses between host and device. execute may be
   * asynchronous; copy_to_host must return only when the bytes are on the
   * host (after all work queued before it). */
  kite_status (*alloc)(void *backend, uint64_t size, uint64_t alignment, void **out_ptr);
  void (*free)(void *backend, void *ptr);
  kite_status (*copy_to_device)(void *backend, void *dst, const void *src, uint64_t size);
  kite_status (*copy_to_host)(void *backend, void *dst, const void *src, uint64_t size);
  kite_status (*synchronize)(void *backend);
} kite_backend_api;

typedef const kite_backend_api *(*kite_backend_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KITE_BACKEND_H */
