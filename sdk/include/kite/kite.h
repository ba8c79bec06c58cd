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

#define KITE_VERSION_MAJOR 0
#define KITE_VERSION_MINOR 1
#define KITE_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define KITE_VERSION_NUMBER \
  (KITE_VERSION_MAJOR * 10000 + KITE_VERSION_MINOR * 100 + KITE_VERSION_PATCH)
#define KITE_VERSION_STRING "0.1.0"

/* The newest .kite format this header's library reads. */
#define KITE_FORMAT_MAJOR 1
#define KITE_FORMAT_MINOR 0

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
  KITE_ERROR_INTERNAL = 10
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
/* Copies size bytes from data and verifies them; data may be freed after. */
KITE_API kite_status kite_model_load_memory(const void *data, size_t size,
                                            kite_model **out_model);
KITE_API void kite_model_destroy(kite_model *model);
/* Format version and producer recorded in the file. */
KITE_API kite_status kite_model_get_format_version(const kite_model *model,
                                                   int32_t *out_major,
                                                   int32_t *out_minor);
KITE_API const char *kite_model_get_producer(const kite_model *model);

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
 * the Kite library itself. */
KITE_API kite_status kite_session_options_set_backend_path(kite_session_options *options,
                                                           const char *paths);
/* strict != 0: any fallback (a backend in the list that is not available, a
 * node not placed on the first backend, a fused node run as its body) makes
 * kite_session_create fail with a message naming the nodes. Default 0: fall
 * back and report it through the placement functions below. */
KITE_API kite_status kite_session_options_set_strict(kite_session_options *options,
                                                     int32_t strict);

/* Caps the memory a session allocates for the model: its host arena and, for
 * each device-memory backend, that backend's arena plus its copy of the
 * weights (CPU sessions use the mapped weights in place; they do not count).
 * A model that needs more makes kite_session_create fail with
 * KITE_ERROR_OUT_OF_MEMORY and a message naming the needed and the allowed
 * bytes, before the arena is allocated. 0 (default): no limit. */
KITE_API kite_status kite_session_options_set_memory_limit(kite_session_options *options,
                                                           uint64_t bytes);

/* poison != 0: before each run, fill every arena byte that is not a graph
 * input with 0xFF (NaN in float32), so a kernel or a memory plan that reads
 * stale data shows up as wrong output. A debugging aid; also enabled by the
 * environment variable KITE_POISON_ARENA. */
KITE_API kite_status kite_session_options_set_poison(kite_session_options *options,
                                                     int32_t poison);

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
/* Copies between host and device memory that one run performs. */
KITE_API kite_status kite_session_get_transfer_count(const kite_session *session,
                                                     int32_t *out_count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KITE_KITE_H */
