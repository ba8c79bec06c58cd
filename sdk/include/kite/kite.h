/*
 * Kite inference runtime: public C API (C99).
 *
 * Conventions
 *  - Every fallible call returns kite_status; results come back through
 *    trailing out_ pointers, which are written only on success.
 *  - kite_status_string() returns static text for a status. The detailed
 *    message of the last failure on the calling thread is kite_last_error().
 *  - kite_*_destroy(NULL) is a harmless no-op. Nothing here aborts on bad
 *    input.
 *
 * Thread safety
 *  - A kite_model is immutable after loading: any number of threads may use
 *    one model, and create sessions from it, at the same time.
 *  - A kite_session is NOT thread-safe: calls on one session must not overlap.
 *    Use one session per thread; sessions share the model's weights.
 *    Misuse is detected where it would corrupt data: a kite_session_run,
 *    kite_session_set_input or kite_session_get_output that overlaps another
 *    of these on the same session fails with KITE_ERROR_INVALID_ARGUMENT
 *    ("in use by another call") and touches nothing. Memory reached through
 *    kite_session_get_input/output_pointer is not guarded.
 *  - kite_last_error() is per thread.
 */
#ifndef KITE_KITE_H
#define KITE_KITE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KITE_API __declspec(dllexport)
#else
#define KITE_API __attribute__((visibility("default")))
#endif

/* KITE_VERSION_MAJOR/MINOR/PATCH, KITE_VERSION_NUMBER, KITE_VERSION_STRING */
#include "kite/version.h"

/* The newest .kite format this header's library reads. */
#define KITE_FORMAT_MAJOR 1
#define KITE_FORMAT_MINOR 1

typedef enum kite_status {
  KITE_OK = 0,
  KITE_ERROR_INVALID_ARGUMENT = 1, /* NULL handle, bad name or index, ...   */
  KITE_ERROR_IO = 2,               /* file cannot be opened or mapped        */
  KITE_ERROR_INVALID_MODEL = 3,    /* file fails verification                */
  KITE_ERROR_UNSUPPORTED_VERSION = 4, /* file of a newer major format      */
  KITE_ERROR_UNSUPPORTED = 5,      /* op, dtype or shape no backend runs     */
  KITE_ERROR_OUT_OF_MEMORY = 6,
  KITE_ERROR_BACKEND = 7,          /* a backend failed or is not available   */
  KITE_ERROR_SIZE_MISMATCH = 8,    /* buffer size does not match the tensor  */
  KITE_ERROR_NOT_FOUND = 9,        /* no input/output of that name           */
  KITE_ERROR_INTERNAL = 10,
  KITE_ERROR_DEVICE_LOST = 11      /* a backend's device is gone (reset, removed,
                                      driver crash); the session cannot run again */
} kite_status;

/* Values match the .kite format's DType. */
typedef enum kite_dtype {
  KITE_DTYPE_UNDEFINED = 0,
  KITE_DTYPE_FLOAT32 = 1,
  KITE_DTYPE_INT64 = 2,
  KITE_DTYPE_INT32 = 3,
  KITE_DTYPE_BOOL = 4,
  KITE_DTYPE_FLOAT16 = 5,
  KITE_DTYPE_INT8 = 6,
  KITE_DTYPE_UINT8 = 7
} kite_dtype;

#define KITE_MAX_RANK 8

/* Precision a session allows its backends (kite_session_options_set_precision).
 * Default 0: fp32 everywhere. A backend that cannot honour a flag ignores it. */
#define KITE_PRECISION_FP16_STORAGE (1u << 0) /* may keep fp32 tensors in fp16 on a device */
#define KITE_PRECISION_FP16_COMPUTE (1u << 1) /* may compute fp32 nodes in fp16 (fp32 accumulation) */
#define KITE_PRECISION_TF32         (1u << 2) /* may use TF32 tensor cores for fp32 GEMM/Conv */

/* Log levels of kite_log_callback. */
#define KITE_LOG_ERROR 0
#define KITE_LOG_WARNING 1
#define KITE_LOG_INFO 2
#define KITE_LOG_DEBUG 3
/* Receives backends' log messages; backend is the backend's name. May be
 * called from any thread that uses the session or its device. */
typedef void (*kite_log_callback)(void *user, int32_t level, const char *backend,
                                  const char *message);

typedef struct kite_model kite_model;
typedef struct kite_session kite_session;
typedef struct kite_session_options kite_session_options;

/* Describes one input or output of a session. The pointers stay valid for
 * the session's lifetime. */
typedef struct kite_tensor_info {
  const char *name;
  kite_dtype dtype;
  int32_t rank;
  const int64_t *shape; /* rank entries */
  uint64_t byte_size;
} kite_tensor_info;

/* ---- versions and errors ------------------------------------------------ */
KITE_API int kite_version_number(void);
KITE_API const char *kite_version_string(void);
KITE_API const char *kite_status_string(kite_status status);
/* Message of the last failed call on this thread ("" if none). */
KITE_API const char *kite_last_error(void);
KITE_API const char *kite_dtype_name(kite_dtype dtype);
/* The newest .kite format version this library reads, and the backend ABI
 * versions it accepts (1 to kite_backend_abi_version()). */
KITE_API void kite_format_version_supported(int32_t *out_major, int32_t *out_minor);
KITE_API int32_t kite_backend_abi_version(void);
/* Bytes per element, 0 for KITE_DTYPE_UNDEFINED or unknown values. */
KITE_API size_t kite_dtype_size(kite_dtype dtype);

/* ---- models ------------------------------------------------------------- */
/* Maps the file read-only (mmap, MAP_PRIVATE) and verifies it completely;
 * the weights are used in place from the mapping, for the model's lifetime.
 * Replacing the file afterwards by writing a new one and renaming it over the
 * path (what kite-convert does) does not affect a loaded model: the mapping
 * keeps the old file. Modifying the file in place while it is loaded is not
 * supported: the model may see the new bytes, unverified, and truncating it
 * makes a later access to the lost pages raise SIGBUS. Where other processes
 * may truncate or rewrite the file, use kite_model_load_memory, which copies
 * the bytes once. */
KITE_API kite_status kite_model_load_file(const char *path, kite_model **out_model);
/* Copies size bytes from data (into page-aligned memory, so device backends
 * can import the weights from it as from a mapped file) and verifies them;
 * data may be freed after. */
KITE_API kite_status kite_model_load_memory(const void *data, size_t size,
                                            kite_model **out_model);
KITE_API void kite_model_destroy(kite_model *model);
/* Format version and producer recorded in the file. */
KITE_API kite_status kite_model_get_format_version(const kite_model *model,
                                                   int32_t *out_major,
                                                   int32_t *out_minor);
KITE_API const char *kite_model_get_producer(const kite_model *model);
/* The model's inputs and outputs, without creating a session (the same as
 * kite_session_get_input_info etc. report). The pointers in the info stay
 * valid for the model's lifetime. */
KITE_API kite_status kite_model_get_input_count(const kite_model *model, int32_t *out_count);
KITE_API kite_status kite_model_get_output_count(const kite_model *model, int32_t *out_count);
KITE_API kite_status kite_model_get_input_info(const kite_model *model, int32_t index,
                                               kite_tensor_info *out_info);
KITE_API kite_status kite_model_get_output_info(const kite_model *model, int32_t index,
                                                kite_tensor_info *out_info);

/* ---- model introspection -------------------------------------------------
 * Read-only views of a loaded model, for tools and embedders: graphs,
 * nodes (with fused patterns, attributes and bodies), tensors and the
 * memory plan. Pointers in the returned structs stay valid for the model's
 * lifetime. Tensors and graphs are referred to by index. */
typedef enum kite_tensor_kind {
  KITE_TENSOR_ACTIVATION = 0,
  KITE_TENSOR_INPUT = 1,
  KITE_TENSOR_OUTPUT = 2,
  KITE_TENSOR_CONSTANT = 3,
  KITE_TENSOR_SCRATCH = 4       /* an intermediate of a fused node's body */
} kite_tensor_kind;

typedef struct kite_model_tensor {
  const char *name;
  kite_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  uint64_t byte_size;
  kite_tensor_kind kind;
  uint64_t arena_offset;        /* its offset in the arena; 0 for constants */
} kite_model_tensor;

typedef struct kite_model_graph {
  const char *name;
  int32_t num_nodes;
  int32_t num_inputs;
  const int32_t *inputs;        /* tensor indices */
  int32_t num_outputs;
  const int32_t *outputs;
} kite_model_graph;

typedef struct kite_model_node {
  const char *name;
  const char *op;
  const char *domain;           /* "" for ai.onnx, "kite" for fused nodes */
  const char *fused_pattern;    /* "" for a primitive node */
  int32_t num_inputs;
  const int32_t *inputs;        /* tensor indices; -1: absent optional input */
  int32_t num_outputs;
  const int32_t *outputs;
  int32_t num_attrs;
  int32_t num_body_nodes;       /* the primitive nodes a fused node replaced */
} kite_model_node;

typedef struct kite_model_attr {
  const char *name;
  int32_t type;                 /* 1 int, 2 float, 3 string, 4 ints, 5 floats,
                                   6 strings, 7 graph (kite_attr_type's values) */
  int64_t i;                    /* int; graph: the graph's index */
  float f;
  const char *s;
  int32_t count;                /* ints, floats, strings */
  const int64_t *ints;
  const float *floats;
  const char *const *strings;
} kite_model_attr;

typedef struct kite_model_plan {
  uint64_t arena_size;          /* bytes of the one activation arena */
  uint64_t alignment;           /* of every offset in it */
  uint64_t lower_bound;         /* peak of live bytes: no plan can be smaller */
  uint64_t naive_size;          /* every tensor in its own place */
  const char *strategy;         /* the packing heuristic that won */
  uint64_t weights_bytes;       /* bytes of all constants */
} kite_model_plan;

KITE_API kite_status kite_model_get_source_opset(const kite_model *model, int64_t *out_opset);
KITE_API kite_status kite_model_get_plan(const kite_model *model, kite_model_plan *out_plan);
KITE_API kite_status kite_model_get_tensor_count(const kite_model *model, int32_t *out_count);
KITE_API kite_status kite_model_get_tensor(const kite_model *model, int32_t index,
                                           kite_model_tensor *out_tensor);
/* Graph 0 is the main graph; the others are branches of If nodes. */
KITE_API kite_status kite_model_get_graph_count(const kite_model *model, int32_t *out_count);
KITE_API kite_status kite_model_get_graph(const kite_model *model, int32_t graph,
                                          kite_model_graph *out_graph);
/* Node `node` of graph `graph`; body = -1 for the node itself, else the
 * index of one of its body nodes. */
KITE_API kite_status kite_model_get_node(const kite_model *model, int32_t graph, int32_t node,
                                         int32_t body, kite_model_node *out_node);
KITE_API kite_status kite_model_get_node_attr(const kite_model *model, int32_t graph,
                                              int32_t node, int32_t body, int32_t attr,
                                              kite_model_attr *out_attr);

/* ---- session options ---------------------------------------------------- */
KITE_API kite_status kite_session_options_create(kite_session_options **out_options);
KITE_API void kite_session_options_destroy(kite_session_options *options);
/* Comma-separated preference list, e.g. "vulkan,cpu". Default: "cpu". */
KITE_API kite_status kite_session_options_set_backends(kite_session_options *options,
                                                       const char *backends);
/* Worker threads for CPU kernels; 0 (default) picks the number of cores. */
KITE_API kite_status kite_session_options_set_threads(kite_session_options *options,
                                                      int32_t threads);
/* Colon-separated folders searched first for backend plugins
 * (libkite_backend_<name>.so); then KITE_BACKEND_PATH, then the folder of
 * the Kite library itself, then its kite/backends subfolder (where an
 * installed Kite keeps its plugins: <libdir>/kite/backends). */
KITE_API kite_status kite_session_options_set_backend_path(kite_session_options *options,
                                                           const char *paths);
/* strict != 0: any fallback (a backend in the list that is not available, a
 * node not placed on the first backend, a fused node run as its body) makes
 * kite_session_create fail with a message naming the nodes. Default 0: fall
 * back and report it through the placement functions below. */
KITE_API kite_status kite_session_options_set_strict(kite_session_options *options,
                                                     int32_t strict);

/* Caps the memory a session allocates for the model: its host arena (unless
 * it is a unified device's mapped arena, counted once), each device
 * backend's arena and weights buffer (weights imported from the mapped file
 * cost nothing), and every backend's workspace (the CPU backend's scratch
 * included). CPU sessions use the mapped weights in place; they do not
 * count. A model that needs more makes kite_session_create fail with
 * KITE_ERROR_OUT_OF_MEMORY and a message naming the needed and the allowed
 * bytes, before the memory is allocated. 0 (default): no limit. */
KITE_API kite_status kite_session_options_set_memory_limit(kite_session_options *options,
                                                           uint64_t bytes);

/* poison != 0: before each run, fill every arena byte that is not a graph
 * input with 0xFF (NaN in float32), so a kernel or a memory plan that reads
 * stale data shows up as wrong output. A debugging aid; also enabled by the
 * environment variable KITE_POISON_ARENA. */
KITE_API kite_status kite_session_options_set_poison(kite_session_options *options,
                                                     int32_t poison);

/* A free-form option for one backend, handed to it at session creation
 * ("devsim", "unified", "1"; "cpu", "threads", "2"). Setting a key again
 * replaces its value. The backend refuses keys it does not know (session
 * creation fails naming the key); options for a backend that is not in the
 * preference list are an error too. */
KITE_API kite_status kite_session_options_set_backend_option(kite_session_options *options,
                                                             const char *backend,
                                                             const char *key,
                                                             const char *value);
/* Which of a backend's devices the session uses (0-based; default 0). */
KITE_API kite_status kite_session_options_set_device_index(kite_session_options *options,
                                                           const char *backend,
                                                           int32_t index);
/* The application's own queue for a device backend, on which the session
 * then enqueues all its work for that backend (a CUstream of the device's
 * primary context for "cuda"), so a run orders with the application's work
 * without a host wait. NULL (default): the backend's own. The queue must
 * outlive the session; a device backend that cannot use one fails session
 * creation (KITE_ERROR_UNSUPPORTED); host backends ignore it. */
KITE_API kite_status kite_session_options_set_external_queue(kite_session_options *options,
                                                             const char *backend, void *queue);
/* KITE_PRECISION_* flags (default 0: fp32). */
KITE_API kite_status kite_session_options_set_precision(kite_session_options *options,
                                                        uint32_t flags);
/* A folder where backends keep compiled pipelines and kernels between
 * processes (NULL or "": none). */
KITE_API kite_status kite_session_options_set_cache_dir(kite_session_options *options,
                                                        const char *dir);
/* Receives the backends' log messages (NULL: none). */
KITE_API kite_status kite_session_options_set_log_callback(kite_session_options *options,
                                                           kite_log_callback callback,
                                                           void *user);
/* profile != 0: backends measure every kernel's time (see
 * kite_session_get_node_profile). Costs a little per kernel. */
KITE_API kite_status kite_session_options_set_profiling(kite_session_options *options,
                                                        int32_t profile);

/* ---- sessions ----------------------------------------------------------- */
/* options may be NULL for defaults. The session keeps the model alive: the
 * model may be destroyed before the session. Allocates the arena once. */
KITE_API kite_status kite_session_create(kite_model *model,
                                         const kite_session_options *options,
                                         kite_session **out_session);
KITE_API void kite_session_destroy(kite_session *session);

KITE_API kite_status kite_session_get_input_count(const kite_session *session,
                                                  int32_t *out_count);
KITE_API kite_status kite_session_get_output_count(const kite_session *session,
                                                   int32_t *out_count);
KITE_API kite_status kite_session_get_input_info(const kite_session *session, int32_t index,
                                                 kite_tensor_info *out_info);
KITE_API kite_status kite_session_get_output_info(const kite_session *session, int32_t index,
                                                  kite_tensor_info *out_info);
/* Index of the input/output called name; KITE_ERROR_NOT_FOUND otherwise. */
KITE_API kite_status kite_session_find_input(const kite_session *session, const char *name,
                                             int32_t *out_index);
KITE_API kite_status kite_session_find_output(const kite_session *session, const char *name,
                                              int32_t *out_index);

/* Copy in/out; size must equal the tensor's byte_size. */
KITE_API kite_status kite_session_set_input(kite_session *session, int32_t index,
                                            const void *data, size_t size);
KITE_API kite_status kite_session_set_input_by_name(kite_session *session, const char *name,
                                                    const void *data, size_t size);
KITE_API kite_status kite_session_get_output(const kite_session *session, int32_t index,
                                             void *data, size_t size);
KITE_API kite_status kite_session_get_output_by_name(const kite_session *session,
                                                     const char *name, void *data,
                                                     size_t size);
/* Direct pointers into the session's host arena, valid until the session is
 * destroyed. Write inputs before kite_session_run; read outputs after it.
 * Output buffers may be reused by the next run. */
KITE_API kite_status kite_session_get_input_pointer(kite_session *session, int32_t index,
                                                    void **out_data);
KITE_API kite_status kite_session_get_output_pointer(const kite_session *session,
                                                     int32_t index, const void **out_data);

/* Runs the graph once. Allocates nothing. */
KITE_API kite_status kite_session_run(kite_session *session);
/* Starts a run and returns as soon as the work is queued on the devices
 * (CPU nodes, and copies the host must wait for, still run before it
 * returns). kite_session_wait finishes it; until then the session accepts
 * no other call but kite_session_wait and kite_session_destroy (which waits). */
KITE_API kite_status kite_session_run_async(kite_session *session);
KITE_API kite_status kite_session_wait(kite_session *session);

/* ---- application buffers -------------------------------------------------
 * Binds input/output `index` to the application's own device memory on a
 * device backend of the session: native_handle is that backend's handle (a
 * CUdeviceptr, a VkBuffer, ...), and the tensor's bytes lie at `offset` in
 * it. Each run copies a bound input from that buffer into the session's
 * arena on the device, and a bound output from the arena into it, without
 * passing through the host. The buffer must stay valid while bound. A bound
 * output cannot be read with kite_session_get_output. backend == NULL
 * unbinds. Fails with KITE_ERROR_UNSUPPORTED when the backend cannot import
 * external buffers. */
KITE_API kite_status kite_session_bind_input_buffer(kite_session *session, int32_t index,
                                                    const char *backend,
                                                    uint64_t native_handle, uint64_t offset);
KITE_API kite_status kite_session_bind_output_buffer(kite_session *session, int32_t index,
                                                     const char *backend,
                                                     uint64_t native_handle, uint64_t offset);

/* ---- placement (what runs where) ---------------------------------------- */
KITE_API kite_status kite_session_get_node_count(const kite_session *session,
                                                 int32_t *out_count);
typedef struct kite_node_placement {
  const char *node_name;
  const char *op;
  const char *backend;    /* backend that executes it */
  int32_t fused;          /* 1: a fused node run as one kernel */
  int32_t decomposed;     /* 1: a fused node run as its body */
  const char *reason;     /* why this backend ("" when the first choice) */
} kite_node_placement;
KITE_API kite_status kite_session_get_node_placement(const kite_session *session,
                                                     int32_t index,
                                                     kite_node_placement *out_placement);
/* Copies between host and device memory that one run of the main graph
 * performs (as scheduled; a taken If branch may add more, see
 * kite_session_get_run_stats). */
KITE_API kite_status kite_session_get_transfer_count(const kite_session *session,
                                                     int32_t *out_count);

/* What the scheduler reports and could not avoid: a node that a device
 * declines sitting between two of that device's segments, costing copies
 * on every run. Strings stay valid for the session's lifetime. */
KITE_API kite_status kite_session_get_note_count(const kite_session *session,
                                                 int32_t *out_count);
KITE_API const char *kite_session_get_note(const kite_session *session, int32_t index);

/* What the last run did. Set struct_size = sizeof(kite_run_stats). */
typedef struct kite_run_stats {
  uint32_t struct_size;
  int32_t segments;        /* runs of consecutive nodes on one backend */
  int32_t transfers;       /* uploads + downloads */
  int32_t uploads;         /* host -> device copies */
  int32_t downloads;       /* device -> host copies */
  int32_t buffer_copies;   /* device-to-device copies (application buffers) */
  int32_t syncs;           /* waits for a device, end of run included */
} kite_run_stats;
KITE_API kite_status kite_session_get_run_stats(const kite_session *session,
                                                kite_run_stats *out_stats);

/* The backends of the session's preference list (and the CPU fallback),
 * available or not. Set struct_size = sizeof(kite_session_backend). */
KITE_API kite_status kite_session_get_backend_count(const kite_session *session,
                                                    int32_t *out_count);
typedef struct kite_session_backend {
  uint32_t struct_size;
  const char *name;
  int32_t available;         /* 0: not found or no device; reason says why */
  const char *reason;
  const char *device_name;   /* "" for host backends */
  int32_t device_index;
  int32_t abi_version;       /* the backend table's ABI version */
  int32_t device_memory;     /* 1: a device-memory backend */
  int32_t unified;           /* 1: its mapped arena is the session's host arena */
  int32_t weights_imported;  /* 1: its weights buffer wraps the mapped file */
  int32_t kernels;           /* kernels prepared on it */
  int32_t segments;          /* segments of the schedule on it (all graphs) */
  int32_t weight_uploads;    /* constants uploaded at session creation */
  uint64_t arena_bytes;      /* its arena on the device (0: the host arena) */
  uint64_t weights_bytes;    /* its weights buffer */
  uint64_t workspace_bytes;  /* its declared scratch */
} kite_session_backend;
KITE_API kite_status kite_session_get_backend(const kite_session *session, int32_t index,
                                              kite_session_backend *out_backend);

/* ---- profiling (kite_session_options_set_profiling) --------------------- */
/* Time of node `index` (the indices of kite_session_get_node_placement):
 * measured by its backend (device timestamps, CUDA events, the CPU's clock)
 * and summed over the body of a decomposed fused node; an If node is timed
 * by the session, branch included. */
typedef struct kite_node_profile {
  uint64_t runs;           /* runs measured */
  uint64_t total_ns;       /* summed over those runs */
  uint64_t mean_ns;        /* total_ns / runs */
  int32_t measured;        /* 0: its backend cannot measure (kernel_time) */
} kite_node_profile;
KITE_API kite_status kite_session_get_node_profile(const kite_session *session, int32_t index,
                                                   kite_node_profile *out_profile);
/* Forgets the times measured so far. */
KITE_API kite_status kite_session_reset_profile(kite_session *session);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KITE_KITE_H */
