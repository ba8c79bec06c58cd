/*
 * Kite backend ABI (C99). A backend is a table of function pointers that the
 * runtime calls to learn what the backend supports, prepare kernels and run
 * them. The CPU backend is linked into the runtime; others are shared modules
 * exporting KITE_BACKEND_ENTRY_SYMBOL (or are linked statically in embedded
 * builds). docs/BACKENDS.md walks through a minimal device backend.
 *
 * Versions
 *  - kite_backend_api starts with abi_version and struct_size; members are
 *    only ever appended. The runtime accepts every abi_version from 1 to
 *    KITE_BACKEND_ABI_VERSION and reads a member only if it lies inside the
 *    plugin's struct_size (a member past it is NULL).
 *  - The v1 part of kite_backend_api, kite_backend_attr, kite_backend_tensor,
 *    kite_backend_node and kite_backend_options are frozen: a v1 plugin built
 *    against the v1 header (tests/backend/v1/) loads and runs unchanged.
 *  - Every struct the runtime hands a v2 backend (and every struct a backend
 *    fills for the runtime) starts with its own uint32_t struct_size, so it
 *    can grow too: a reader uses only members inside struct_size.
 *  - A plugin with abi_version >= 2 fills the v2 members. The v1 members
 *    create, supports, prepare, alloc, free, copy_to_device and copy_to_host
 *    are then ignored (leave them NULL); destroy, execute, release and
 *    synchronize keep their v1 signatures and meaning and are used by both.
 *  - Mandatory from v2 on: name, destroy, create2, supports2, prepare2,
 *    execute, release; a device-memory backend also buffer_alloc,
 *    buffer_free, upload, download and synchronize2 (or synchronize).
 *    Everything else may be NULL. The runtime refuses a table that breaks
 *    this, naming the missing member.
 *
 * A plugin loads anywhere
 *  - A plugin has no link-time dependency on a GPU's libraries: no DT_NEEDED
 *    on libvulkan, libcuda, libcudart, cuDNN, cuBLAS or the like. It opens
 *    them itself (dlopen) in device_count/device_open, and where a library or
 *    a device is missing it fails that call with KITE_ERROR_BACKEND and a
 *    message saying what is missing and where it looked. The runtime then
 *    reports the backend as unavailable (or, in strict mode, fails).
 *  - No C++ type crosses this boundary; nothing thrown crosses it either.
 *
 * Objects and threads
 *  - Device: one per process and device index, opened by the runtime the first
 *    time a session asks for it and shared (reference-counted) by every
 *    session on it: a VkDevice, a CUDA context with its library handles.
 *    A backend without device_count has one implicit device: create2 then
 *    gets device == NULL (device_open and device_close may be NULL too).
 *    The device's options (cache_dir, log) are those of the session that
 *    opened it.
 *    device_count, device_info, device_open and device_close may be called
 *    from any thread; the runtime never calls device_open/device_close for
 *    the same index concurrently. Everything a device holds that instances
 *    use concurrently (pipeline caches, allocators) is the backend's to lock.
 *  - Instance: one per session (create2 .. destroy), with its own queue or
 *    stream, command buffers and kernels. The runtime calls one instance from
 *    one thread at a time, but different instances of one device from many
 *    threads at once.
 *
 * Life cycle of an instance
 *   create2 -> supports2 (per node, while the runtime places nodes) ->
 *   [runtime allocates the arena and weights buffers (buffer_alloc, or
 *   buffer_map / import_host on unified devices) and uploads the weights] ->
 *   prepare2 (per node: validate, choose an algorithm, pack weights; every
 *   tensor's data, or buffer and offset, is final from here on) ->
 *   workspace_size -> [runtime allocates the workspace] -> bind (once) ->
 *   prepare_segment (per segment: record it) -> per run: begin_run,
 *   execute_segment / execute, uploads and downloads at segment edges,
 *   end_run, synchronize -> release_segment, release, buffer_free -> destroy.
 *   execute and execute_segment compute only: no allocation, no validation.
 *   The runtime uploads weights before prepare2 so that a host backend's
 *   kernels (and a unified device's mapped arena, which is the host arena)
 *   have final addresses when they are prepared; a backend that repacks a
 *   weight reads its host_data in prepare2 and keeps the packed copy in
 *   memory it declares through workspace_size or owns itself.
 *
 * Errors
 *  - Every call that can fail writes a message into err (NUL-terminated,
 *    truncated to err_size); the runtime shows it with the backend's name
 *    and the call. KITE_ERROR_DEVICE_LOST (from any call) means the device
 *    is gone: the session fails every later run with that status.
 *
 * Memory
 *  - A device tensor is (buffer, offset, byte_size). The runtime never does
 *    arithmetic on a device address and never dereferences a buffer handle.
 *  - The arena is one buffer (KITE_BUFFER_ARENA) holding every non-constant
 *    tensor at the offsets of the file's memory plan. The constants that this
 *    backend's nodes read (only those) sit in one weights buffer
 *    (KITE_BUFFER_WEIGHTS), uploaded once with upload(). Scratch the backend
 *    needs (im2col, cuDNN/cuBLASLt workspaces) is declared by workspace_size
 *    after every prepare2 and allocated by the runtime (KITE_BUFFER_WORKSPACE);
 *    all three count against the session's memory limit.
 *  - Host backends (memory == KITE_BACKEND_MEMORY_HOST) never see buffers:
 *    their tensors carry host addresses in data, and their workspace is
 *    handed over as a host pointer (bind's workspace_host).
 *  - Unified memory: a device whose memory the host can address
 *    (KITE_DEVICE_UNIFIED: Jetson, integrated GPUs, lavapipe) maps its arena
 *    with buffer_map; the runtime then uses that mapping as the session's
 *    host arena: no mirror, no copies, one copy of every value in DRAM. The
 *    mapping must be host-coherent; the runtime calls synchronize before the
 *    host reads what the device wrote. Where import_host is provided (and
 *    the device reports KITE_DEVICE_HOST_IMPORT), the mapped file's pages
 *    holding the weights are imported instead of copied. buffer_map and
 *    import_host may return KITE_ERROR_UNSUPPORTED for this instance (a
 *    discrete configuration): the runtime then mirrors the arena and
 *    uploads the weights.
 *  - Copies are typed (upload/download get the tensor), so a backend may
 *    keep a tensor in another form on its side (fp16, packed) as long as the
 *    host side is the tensor's dtype and shape.
 */
#ifndef KITE_BACKEND_H
#define KITE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kite/kite.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KITE_BACKEND_ABI_VERSION 2
#define KITE_BACKEND_ENTRY_SYMBOL "kite_backend_entry"

/* ======================= v1 (frozen) ===================================== */

/* Where a backend's tensors live. */
typedef enum kite_backend_memory {
  KITE_BACKEND_MEMORY_HOST = 0,   /* data pointers are host addresses        */
  KITE_BACKEND_MEMORY_DEVICE = 1  /* v1: pointers from alloc; v2: buffers    */
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

/* v1 only. */
typedef struct kite_backend_tensor {
  const char *name;
  kite_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  uint64_t byte_size;
  void *data;            /* in the backend's memory; constants are read-only */
  int32_t is_constant;   /* weights: data stays valid and unchanged for the session */
} kite_backend_tensor;

/* Shared by v1 and v2. */
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

/* v1 only. */
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

/* v1 only. */
typedef struct kite_backend_options {
  int32_t threads;             /* 0: backend's choice */
} kite_backend_options;

/* ======================= v2 ============================================== */

/* A buffer of device memory, opaque to the runtime (a VkBuffer wrapper, a
 * CUdeviceptr wrapper, ...). Never dereferenced by the runtime. */
typedef struct kite_backend_buffer_s *kite_backend_buffer;

/* What a buffer is for (a backend may pick memory types by it). */
typedef enum kite_buffer_usage {
  KITE_BUFFER_ARENA = 0,      /* activations, inputs, outputs: read and written */
  KITE_BUFFER_WEIGHTS = 1,    /* constants: written by upload, then read only   */
  KITE_BUFFER_WORKSPACE = 2   /* the backend's scratch                          */
} kite_buffer_usage;

/* Device capability flags (kite_backend_device_info.flags). */
#define KITE_DEVICE_UNIFIED        (1u << 0) /* host-addressable memory: buffer_map works on every buffer */
#define KITE_DEVICE_FP16_STORAGE   (1u << 1) /* 16-bit storage in kernels          */
#define KITE_DEVICE_FP16_ARITH     (1u << 2) /* fp16 arithmetic at full speed      */
#define KITE_DEVICE_HOST_IMPORT    (1u << 3) /* import_host can wrap host memory   */
#define KITE_DEVICE_TIMESTAMPS     (1u << 4) /* kernel_time works (profiling)      */
#define KITE_DEVICE_EXTERNAL_BUFFERS (1u << 5) /* import_external works (app buffers) */

typedef struct kite_backend_device_info {
  uint32_t struct_size;          /* set by the caller: sizeof of its struct */
  char name[128];                /* "NVIDIA Orin (nvgpu)", "llvmpipe (LLVM 15, 256 bits)" */
  uint64_t memory_bytes;         /* device memory (for unified: what the device may use) */
  uint32_t flags;                /* KITE_DEVICE_* */
  uint64_t min_offset_alignment; /* a tensor's offset in a buffer must be a multiple */
  uint64_t max_buffer_size;      /* largest single buffer (arena, weights)          */
} kite_backend_device_info;

/* Precision flags (kite_backend_create_info.precision): KITE_PRECISION_* of
 * kite.h. Log levels: KITE_LOG_* of kite.h. */
typedef kite_log_callback kite_log_fn;

/* Options of one device (device_open). */
typedef struct kite_backend_device_options {
  uint32_t struct_size;
  int32_t device_index;          /* 0-based, < device_count */
  const char *cache_dir;         /* NULL or a folder for pipeline/kernel caches */
  kite_log_fn log;               /* may be NULL */
  void *log_user;
} kite_backend_device_options;

/* Options of one instance (create2). Strings stay valid until destroy. */
typedef struct kite_backend_create_info {
  uint32_t struct_size;
  int32_t threads;               /* host worker threads, 0: backend's choice   */
  uint32_t precision;            /* KITE_PRECISION_*                           */
  int32_t profile;               /* 1: measure per-kernel times (kernel_time)  */
  const char *cache_dir;         /* as in the device options                   */
  int32_t num_options;           /* free-form key=value options for this backend */
  const char *const *option_keys;
  const char *const *option_values;
  kite_log_fn log;               /* may be NULL */
  void *log_user;
  void *external_queue;          /* NULL, or the application's stream/queue (cudaStream_t ...) */
} kite_backend_create_info;

/* A pre-packed form of a constant stored in the file for this backend. */
typedef struct kite_backend_packed_form {
  uint32_t struct_size;
  const char *key;               /* "cpu/x86-avx512/gemm-b16", ... */
  const void *data;              /* host bytes (inside the mapped file)    */
  uint64_t byte_size;
} kite_backend_packed_form;

typedef struct kite_backend_tensor2 {
  uint32_t struct_size;
  const char *name;
  kite_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  uint64_t byte_size;
  int32_t is_constant;           /* weights: value fixed for the session       */
  /* Host backends: the tensor's host address (arena or mapped file).
   * Device backends: NULL. */
  void *data;
  /* Device backends: where the tensor lives (the arena or the weights
   * buffer); final from prepare2 on (supports2 must not rely on it: it may
   * be NULL then). Host backends: NULL. (Application buffers bound to graph inputs/outputs are reached by
   * copy_buffer into and out of the arena, so kernels only ever see the
   * arena and the weights.) */
  kite_backend_buffer buffer;
  uint64_t offset;
  /* Constants: their bytes in host memory (the mapped file), readable in
   * prepare2 (small constants, weight packing). NULL otherwise. */
  const void *host_data;
  /* Constants: pre-packed forms the file carries (may be 0). */
  int32_t num_packed;
  const kite_backend_packed_form *packed;
} kite_backend_tensor2;

typedef struct kite_backend_node2 {
  uint32_t struct_size;
  int32_t index;               /* the node's position in the session's schedule */
  const char *name;
  const char *op;
  const char *domain;          /* "" for ai.onnx, "kite" for fused nodes */
  const char *fused_pattern;   /* "" for a primitive node */
  int32_t num_inputs;
  const kite_backend_tensor2 *const *inputs;  /* NULL entry: absent optional input */
  int32_t num_outputs;
  const kite_backend_tensor2 *const *outputs; /* NULL entry: unused optional output */
  int32_t num_attrs;
  const kite_backend_attr *attrs;
} kite_backend_node2;

/* Buffers of an instance, final from bind on. */
typedef struct kite_backend_bindings {
  uint32_t struct_size;
  kite_backend_buffer arena;        /* device backends; NULL for host backends */
  kite_backend_buffer weights;      /* NULL when this backend reads no constants */
  kite_backend_buffer workspace;    /* NULL when workspace_size was 0 */
  void *workspace_host;             /* host backends: the workspace's address */
  uint64_t workspace_size;
} kite_backend_bindings;

/* Consecutive kernels of one instance that run as one unit. */
typedef struct kite_backend_segment {
  uint32_t struct_size;
  int32_t num_kernels;
  void *const *kernels;                        /* from prepare2, in order */
  const kite_backend_node2 *const *nodes;      /* the nodes, same order   */
} kite_backend_segment;

typedef struct kite_backend_api {
  /* ---- v1 (frozen) ---- */
  uint32_t abi_version;        /* KITE_BACKEND_ABI_VERSION of the header built against */
  uint32_t struct_size;        /* sizeof(kite_backend_api) of the backend */
  const char *name;            /* "cpu", "vulkan", "cuda", ... */
  kite_backend_memory memory;

  /* v1: one instance per session. v2: ignored (create2). */
  kite_status (*create)(const kite_backend_options *options, void **out_backend,
                        char *err, size_t err_size);
  /* v1 and v2: destroys an instance. */
  void (*destroy)(void *backend);

  /* v1 only (v2: supports2). */
  int (*supports)(void *backend, const kite_backend_node *node, char *reason,
                  size_t reason_size);
  /* v1 only (v2: prepare2). */
  kite_status (*prepare)(void *backend, const kite_backend_node *node, void **out_kernel,
                         char *err, size_t err_size);
  /* v1 and v2: runs one prepared kernel (v2: enqueues it; it may complete
   * later, before synchronize returns). Must not allocate. */
  kite_status (*execute)(void *backend, void *kernel, char *err, size_t err_size);
  /* v1 and v2. */
  void (*release)(void *backend, void *kernel);

  /* v1 only: raw device pointers (v2: buffers below). */
  kite_status (*alloc)(void *backend, uint64_t size, uint64_t alignment, void **out_ptr);
  void (*free)(void *backend, void *ptr);
  kite_status (*copy_to_device)(void *backend, void *dst, const void *src, uint64_t size);
  kite_status (*copy_to_host)(void *backend, void *dst, const void *src, uint64_t size);
  /* v1 and v2 (v2: with an error message, below, preferred when present):
   * waits until all work queued on the instance is complete. */
  kite_status (*synchronize)(void *backend);

  /* ---- v2 ---- */

  /* Devices. device_count loads the backend's libraries; a missing library
   * or driver is KITE_ERROR_BACKEND with the reason. */
  kite_status (*device_count)(int32_t *out_count, char *err, size_t err_size);
  kite_status (*device_info)(int32_t index, kite_backend_device_info *out_info,
                             char *err, size_t err_size);
  kite_status (*device_open)(const kite_backend_device_options *options, void **out_device,
                             char *err, size_t err_size);
  void (*device_close)(void *device);

  /* Instances (one per session) on an open device. */
  kite_status (*create2)(void *device, const kite_backend_create_info *info,
                         void **out_backend, char *err, size_t err_size);
  /* 1 if the backend runs this node as given (op, attributes, dtypes, shapes),
   * else 0 with a short reason. Must not read tensor data (host_data of
   * constants may be read). When it returns 1 it may leave a short note on
   * how it runs the node in reason (the CPU backend: "fp16 storage, fp32
   * arithmetic"), which the node's placement reason shows; reason arrives
   * zeroed, so a backend that writes nothing adds no note. */
  int (*supports2)(void *backend, const kite_backend_node2 *node, char *reason,
                   size_t reason_size);
  /* Validates the node fully and builds its kernel. The node and everything
   * it points to stay valid (and at the same addresses) until release; the
   * buffers are filled in before bind. */
  kite_status (*prepare2)(void *backend, const kite_backend_node2 *node, void **out_kernel,
                          char *err, size_t err_size);
  /* Scratch bytes the prepared kernels need (at most one of them runs at a
   * time, or the backend sums what runs concurrently). Called after every
   * prepare2. May be NULL: none. */
  kite_status (*workspace_size)(void *backend, uint64_t *out_bytes, char *err, size_t err_size);
  /* Hands over the workspace (and, again, the arena and weights buffers),
   * after every prepare2 and workspace_size. Called once per instance. */
  kite_status (*bind)(void *backend, const kite_backend_bindings *bindings, char *err,
                      size_t err_size);

  /* Buffers (device backends). alloc must fill the buffer with nothing in
   * particular: the runtime never assumes zeros. */
  kite_status (*buffer_alloc)(void *backend, uint64_t size, kite_buffer_usage usage,
                              kite_backend_buffer *out_buffer, char *err, size_t err_size);
  void (*buffer_free)(void *backend, kite_backend_buffer buffer);
  /* Unified devices: the buffer's host address, valid until buffer_free. */
  kite_status (*buffer_map)(void *backend, kite_backend_buffer buffer, void **out_host,
                            char *err, size_t err_size);
  /* Optional: wraps host memory (page-aligned; e.g. the mapped file) as a
   * read-only buffer without copying. */
  kite_status (*import_host)(void *backend, const void *host, uint64_t size,
                             kite_backend_buffer *out_buffer, char *err, size_t err_size);
  /* Optional: wraps an application's own device memory (a CUdeviceptr, a
   * VkBuffer handle) as a buffer. */
  kite_status (*import_external)(void *backend, uint64_t native_handle, uint64_t size,
                                 kite_backend_buffer *out_buffer, char *err, size_t err_size);

  /* Typed copies of one tensor's value (its buffer and offset say where it
   * lives on the device). upload may return before the copy is done: the
   * runtime keeps src unchanged until the next synchronize. download returns
   * when dst holds the value, after all work queued before it. */
  kite_status (*upload)(void *backend, const kite_backend_tensor2 *dst, const void *src,
                        char *err, size_t err_size);
  kite_status (*download)(void *backend, void *dst, const kite_backend_tensor2 *src,
                          char *err, size_t err_size);
  /* Optional: device-to-device copy of size bytes (application buffers). */
  kite_status (*copy_buffer)(void *backend, kite_backend_buffer src, uint64_t src_offset,
                             kite_backend_buffer dst, uint64_t dst_offset, uint64_t size,
                             char *err, size_t err_size);
  /* Waits for all queued work, with a message on failure. Preferred over the
   * v1 synchronize when present. A lost device returns KITE_ERROR_DEVICE_LOST. */
  kite_status (*synchronize2)(void *backend, char *err, size_t err_size);

  /* Segments (optional: without them the runtime calls execute per kernel).
   * prepare_segment records the kernels once (a command buffer, a CUDA
   * graph) after bind; execute_segment replays it. prepare_segment may
   * return KITE_ERROR_UNSUPPORTED for a segment it does not record: the
   * runtime then runs that segment's kernels with execute, one by one. */
  kite_status (*prepare_segment)(void *backend, const kite_backend_segment *segment,
                                 void **out_segment, char *err, size_t err_size);
  kite_status (*execute_segment)(void *backend, void *segment, char *err, size_t err_size);
  void (*release_segment)(void *backend, void *segment);
  /* Optional: around every run (begin: reset queries, wait for the previous
   * run's resources; end: submit what is queued). */
  kite_status (*begin_run)(void *backend, char *err, size_t err_size);
  kite_status (*end_run)(void *backend, char *err, size_t err_size);

  /* Optional (profiling): the time the kernel took in the last completed run,
   * in nanoseconds, measured on the device where it can (timestamps, CUDA
   * events). Valid after synchronize. KITE_ERROR_UNSUPPORTED: not measured. */
  kite_status (*kernel_time)(void *backend, void *kernel, uint64_t *out_ns);
} kite_backend_api;

/* The size of the v1 table, for runtimes reading v1 plugins. */
#define KITE_BACKEND_API_V1_SIZE (offsetof(kite_backend_api, synchronize) + sizeof(void *))

typedef const kite_backend_api *(*kite_backend_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KITE_BACKEND_H */
