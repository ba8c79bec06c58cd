/* A backend plugin written against the frozen ABI v1 header
 * (tests/backend/v1/kite/backend.h), as a plugin built before ABI v2 was:
 * the runtime must still load and run it. It runs Relu and Add on float32
 * (Add: the second input equal to the first's shape or to its trailing
 * dims) and declines everything else, so the CPU runs the rest.
 *
 * KITE_V1_PLUGIN=device makes it a v1 device-memory backend: tensors in
 * memory from its alloc (filled with garbage), which the runtime reaches
 * only through copy_to_device / copy_to_host. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign in C99 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kite/backend.h"

typedef struct {
  int op; /* 0 Relu, 1 Add */
  const kite_backend_node *node;
} v1_kernel;

static int is_f32(const kite_backend_tensor *t) { return t != NULL && t->dtype == KITE_DTYPE_FLOAT32; }

static void say(char *buf, size_t size, const char *text) {
  if (buf != NULL && size > 0) snprintf(buf, size, "%s", text);
}

static kite_status v1_create(const kite_backend_options *options, void **out, char *err, size_t err_size) {
  (void)options;
  (void)err;
  (void)err_size;
  *out = malloc(1);
  return *out != NULL ? KITE_OK : KITE_ERROR_OUT_OF_MEMORY;
}

static void v1_destroy(void *backend) { free(backend); }

static int v1_supports(void *backend, const kite_backend_node *node, char *reason, size_t size) {
  (void)backend;
  if (node->fused_pattern[0] != '\0' || node->domain[0] != '\0') {
    say(reason, size, "v1 test plugin: no fused nodes");
    return 0;
  }
  if (strcmp(node->op, "Relu") == 0 && node->num_inputs == 1 && is_f32(node->inputs[0]) &&
      node->num_outputs == 1 && is_f32(node->outputs[0])) {
    return 1;
  }
  if (strcmp(node->op, "Add") == 0 && node->num_inputs == 2 && is_f32(node->inputs[0]) &&
      is_f32(node->inputs[1]) && node->num_outputs == 1 && is_f32(node->outputs[0])) {
    const kite_backend_tensor *a = node->inputs[0], *b = node->inputs[1], *y = node->outputs[0];
    int32_t k;
    if (b->rank > a->rank || y->byte_size != a->byte_size || b->byte_size == 0) {
      say(reason, size, "v1 test plugin: Add broadcasts only a trailing-dims second input");
      return 0;
    }
    for (k = 0; k < b->rank; ++k) {
      if (b->shape[k] != a->shape[a->rank - b->rank + k]) {
        say(reason, size, "v1 test plugin: Add broadcasts only a trailing-dims second input");
        return 0;
      }
    }
    return 1;
  }
  say(reason, size, "v1 test plugin: only Relu and Add");
  return 0;
}

static kite_status v1_prepare(void *backend, const kite_backend_node *node, void **out_kernel, char *err,
                              size_t err_size) {
  v1_kernel *k;
  if (!v1_supports(backend, node, err, err_size)) return KITE_ERROR_UNSUPPORTED;
  k = (v1_kernel *)malloc(sizeof(v1_kernel));
  if (k == NULL) return KITE_ERROR_OUT_OF_MEMORY;
  k->op = strcmp(node->op, "Relu") == 0 ? 0 : 1;
  k->node = node; /* valid until release (v1 contract) */
  *out_kernel = k;
  return KITE_OK;
}

static kite_status v1_execute(void *backend, void *kernel, char *err, size_t err_size) {
  const v1_kernel *k = (const v1_kernel *)kernel;
  const kite_backend_node *n = k->node;
  const float *a = (const float *)n->inputs[0]->data;
  float *y = (float *)n->outputs[0]->data;
  size_t count = (size_t)(n->outputs[0]->byte_size / sizeof(float)), i;
  (void)backend;
  (void)err;
  (void)err_size;
  if (k->op == 0) {
    for (i = 0; i < count; ++i) y[i] = a[i] > 0.0f ? a[i] : 0.0f;
  } else {
    const float *b = (const float *)n->inputs[1]->data;
    size_t period = (size_t)(n->inputs[1]->byte_size / sizeof(float));
    for (i = 0; i < count; ++i) y[i] = a[i] + b[i % period];
  }
  return KITE_OK;
}

static void v1_release(void *backend, void *kernel) {
  (void)backend;
  free(kernel);
}

static kite_status v1_alloc(void *backend, uint64_t size, uint64_t alignment, void **out) {
  uint64_t rounded;
  (void)backend;
  if (alignment < 64) alignment = 64;
  rounded = (size + alignment - 1) / alignment * alignment;
  if (posix_memalign(out, (size_t)alignment, (size_t)rounded) != 0) {
    *out = NULL;
    return KITE_ERROR_OUT_OF_MEMORY;
  }
  memset(*out, 0xA5, (size_t)rounded); /* garbage: a missing upload shows */
  return KITE_OK;
}

static void v1_free(void *backend, void *ptr) {
  (void)backend;
  free(ptr);
}

static kite_status v1_copy(void *backend, void *dst, const void *src, uint64_t size) {
  (void)backend;
  if (size > 0) memcpy(dst, src, (size_t)size);
  return KITE_OK;
}

static kite_status v1_sync(void *backend) {
  (void)backend;
  return KITE_OK;
}

static kite_backend_api g_api;

/* The mode is read on every call of the entry point (the runtime calls it
 * once per load), so tests can switch it between sessions. */
__attribute__((visibility("default"))) const kite_backend_api *kite_backend_entry(void) {
  const char *mode = getenv("KITE_V1_PLUGIN");
  const int device = mode != NULL && strcmp(mode, "device") == 0;
  g_api.abi_version = KITE_BACKEND_ABI_VERSION; /* 1: this header's */
  g_api.struct_size = sizeof(kite_backend_api);
  g_api.name = "v1test";
  g_api.memory = device ? KITE_BACKEND_MEMORY_DEVICE : KITE_BACKEND_MEMORY_HOST;
  g_api.create = v1_create;
  g_api.destroy = v1_destroy;
  g_api.supports = v1_supports;
  g_api.prepare = v1_prepare;
  g_api.execute = v1_execute;
  g_api.release = v1_release;
  g_api.alloc = device ? v1_alloc : NULL;
  g_api.free = device ? v1_free : NULL;
  g_api.copy_to_device = device ? v1_copy : NULL;
  g_api.copy_to_host = device ? v1_copy : NULL;
  g_api.synchronize = device ? v1_sync : NULL;
  return &g_api;
}
