/* A minimal device backend for ABI v2: the worked example of
 * docs/BACKENDS.md. Its "device" is ordinary memory that only it touches
 * (a stand-in for a GPU buffer): the runtime sees opaque buffer handles and
 * offsets, never an address. It runs Relu and Add on float32 (Add's second
 * input equal to the first's shape or to its trailing dims) and declines the
 * rest, which then runs on the CPU with copies at the edges.
 *
 * Built as libkite_backend_minimal.so by tests/backend/CMakeLists.txt and run
 * by tests/unit/devsim_test.cpp (MinimalDeviceBackend). C99. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kite/backend.h"

/* A buffer: the backend's own object. A Vulkan backend would wrap a VkBuffer
 * and its VkDeviceMemory here, a CUDA backend a CUdeviceptr. */
struct kite_backend_buffer_s {
  uint8_t *memory;
  uint64_t size;
};

typedef struct {
  const kite_backend_node2 *node; /* valid until release (the ABI's promise) */
  int is_add;
} kernel;

static void say(char *err, size_t size, const char *text) {
  if (err != NULL && size > 0) snprintf(err, size, "%s", text);
}

/* Where a tensor's bytes are: its buffer plus its offset, on "the device". */
static float *at(const kite_backend_tensor2 *t) {
  return (float *)(t->buffer->memory + t->offset);
}

/* ---- instances: nothing to set up for this device ---- */

static kite_status create2(void *device, const kite_backend_create_info *info, void **out,
                           char *err, size_t err_size) {
  int32_t i;
  (void)device; /* no device_count: one implicit device, NULL here */
  for (i = 0; info != NULL && i < info->num_options; ++i) {
    say(err, err_size, "the minimal backend takes no options");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  *out = malloc(1);
  return *out != NULL ? KITE_OK : KITE_ERROR_OUT_OF_MEMORY;
}

static void destroy(void *backend) { free(backend); }

/* ---- what it runs: decided from op, dtypes and shapes only ---- */

static int supports2(void *backend, const kite_backend_node2 *n, char *reason, size_t size) {
  const kite_backend_tensor2 *a, *b;
  int32_t k;
  (void)backend;
  if (n->fused_pattern[0] != '\0' || n->num_outputs != 1 || n->outputs[0] == NULL ||
      n->outputs[0]->dtype != KITE_DTYPE_FLOAT32) {
    say(reason, size, "only float32 Relu and Add");
    return 0;
  }
  a = n->inputs[0];
  if (strcmp(n->op, "Relu") == 0 && n->num_inputs == 1 && a->dtype == KITE_DTYPE_FLOAT32) return 1;
  if (strcmp(n->op, "Add") != 0 || n->num_inputs != 2 || a->dtype != KITE_DTYPE_FLOAT32 ||
      n->inputs[1]->dtype != KITE_DTYPE_FLOAT32 || n->outputs[0]->byte_size != a->byte_size) {
    say(reason, size, "only float32 Relu and Add");
    return 0;
  }
  b = n->inputs[1];
  for (k = 0; k < b->rank; ++k) {
    if (b->rank > a->rank || b->shape[k] != a->shape[a->rank - b->rank + k]) {
      say(reason, size, "Add broadcasts only a second input of trailing dims");
      return 0;
    }
  }
  return b->byte_size > 0;
}

/* prepare2: validate and build the kernel. A GPU backend picks a pipeline
 * here; buffers and offsets are already final, so it may also write its
 * descriptor sets. */
static kite_status prepare2(void *backend, const kite_backend_node2 *n, void **out, char *err,
                            size_t err_size) {
  kernel *k;
  if (!supports2(backend, n, err, err_size)) return KITE_ERROR_UNSUPPORTED;
  k = (kernel *)malloc(sizeof *k);
  if (k == NULL) return KITE_ERROR_OUT_OF_MEMORY;
  k->node = n;
  k->is_add = strcmp(n->op, "Add") == 0;
  *out = k;
  return KITE_OK;
}

/* execute: compute only (a GPU backend records or enqueues a dispatch). */
static kite_status execute(void *backend, void *kernel_handle, char *err, size_t err_size) {
  const kernel *k = (const kernel *)kernel_handle;
  const kite_backend_node2 *n = k->node;
  const float *a = at(n->inputs[0]);
  float *y = at(n->outputs[0]);
  size_t count = (size_t)(n->outputs[0]->byte_size / sizeof(float)), i;
  (void)backend;
  (void)err;
  (void)err_size;
  if (!k->is_add) {
    for (i = 0; i < count; ++i) y[i] = a[i] > 0.0f ? a[i] : 0.0f;
  } else {
    const float *b = at(n->inputs[1]);
    size_t period = (size_t)(n->inputs[1]->byte_size / sizeof(float));
    for (i = 0; i < count; ++i) y[i] = a[i] + b[i % period];
  }
  return KITE_OK;
}

static void release(void *backend, void *k) {
  (void)backend;
  free(k);
}

/* ---- memory: buffers, and typed copies of one tensor each way ---- */

static kite_status buffer_alloc(void *backend, uint64_t size, kite_buffer_usage usage,
                                kite_backend_buffer *out, char *err, size_t err_size) {
  kite_backend_buffer b = (kite_backend_buffer)malloc(sizeof *b);
  (void)backend;
  (void)usage; /* arena, weights or workspace: one kind of memory here */
  if (b != NULL) b->memory = (uint8_t *)malloc((size_t)size);
  if (b == NULL || b->memory == NULL) {
    free(b);
    say(err, err_size, "out of device memory");
    return KITE_ERROR_OUT_OF_MEMORY;
  }
  b->size = size;
  *out = b;
  return KITE_OK;
}

static void buffer_free(void *backend, kite_backend_buffer b) {
  (void)backend;
  if (b != NULL) free(b->memory);
  free(b);
}

static kite_status upload(void *backend, const kite_backend_tensor2 *dst, const void *src,
                          char *err, size_t err_size) {
  (void)backend;
  if (dst->offset > dst->buffer->size || dst->byte_size > dst->buffer->size - dst->offset) {
    say(err, err_size, "upload outside its buffer");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  memcpy(dst->buffer->memory + dst->offset, src, (size_t)dst->byte_size);
  return KITE_OK;
}

static kite_status download(void *backend, void *dst, const kite_backend_tensor2 *src, char *err,
                            size_t err_size) {
  (void)backend;
  if (src->offset > src->buffer->size || src->byte_size > src->buffer->size - src->offset) {
    say(err, err_size, "download outside its buffer");
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  memcpy(dst, src->buffer->memory + src->offset, (size_t)src->byte_size);
  return KITE_OK;
}

/* Work is synchronous here, so there is nothing to wait for. */
static kite_status synchronize2(void *backend, char *err, size_t err_size) {
  (void)backend;
  (void)err;
  (void)err_size;
  return KITE_OK;
}

__attribute__((visibility("default"))) const kite_backend_api *kite_backend_entry(void) {
  static kite_backend_api api;
  api.abi_version = KITE_BACKEND_ABI_VERSION;
  api.struct_size = sizeof(kite_backend_api);
  api.name = "minimal";
  api.memory = KITE_BACKEND_MEMORY_DEVICE;
  api.destroy = destroy;
  api.execute = execute;
  api.release = release;
  api.create2 = create2;
  api.supports2 = supports2;
  api.prepare2 = prepare2;
  api.buffer_alloc = buffer_alloc;
  api.buffer_free = buffer_free;
  api.upload = upload;
  api.download = download;
  api.synchronize2 = synchronize2;
  return &api;
}
