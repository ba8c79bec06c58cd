/*
 * classify.c: the smallest complete Kite program.
 *
 *   kite-example-classify MODEL.kite [INPUT.f32]
 *
 * Loads MODEL, creates a session with default options (CPU backend), fills
 * input 0 with a fixed pattern (or with the raw little-endian float32 values
 * in INPUT.f32), runs the model once and prints the index and value of the
 * largest element of output 0 (the "argmax", i.e. the predicted class).
 *
 * Every Kite call returns a kite_status. On failure, kite_last_error() holds
 * a message that says what went wrong, e.g. which file or tensor.
 */
#include <stdio.h>
#include <stdlib.h>

#include <kite/kite.h>

/* Prints the message of the last failed Kite call and jumps to cleanup. */
#define CHECK(call)                                                        \
  do {                                                                     \
    kite_status check_status_ = (call);                                    \
    if (check_status_ != KITE_OK) {                                        \
      fprintf(stderr, "%s failed: %s: %s\n", #call,                        \
              kite_status_string(check_status_), kite_last_error());       \
      goto cleanup;                                                        \
    }                                                                      \
  } while (0)

/* Reads exactly size bytes from path into buffer; returns 0 on success. */
static int read_raw_file(const char *path, void *buffer, size_t size) {
  FILE *f = fopen(path, "rb");
  size_t got;
  int extra;
  if (!f) {
    perror(path);
    return -1;
  }
  got = fread(buffer, 1, size, f);
  extra = fgetc(f); /* the file must hold exactly one input, no more */
  fclose(f);
  if (got != size || extra != EOF) {
    fprintf(stderr, "%s: expected exactly %lu bytes of float32 data\n", path,
            (unsigned long)size);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  kite_model *model = NULL;
  kite_session *session = NULL;
  float *input = NULL;
  const void *output_data = NULL;
  const float *output;
  kite_tensor_info in_info, out_info;
  size_t i, count, best;
  int exit_code = 1;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s MODEL.kite [INPUT.f32]\n", argv[0]);
    return 2;
  }

  /* The header and the library must be the same version. */
  if (kite_version_number() != KITE_VERSION_NUMBER) {
    fprintf(stderr, "kite.h is %s but the library is %s\n", KITE_VERSION_STRING,
            kite_version_string());
    return 1;
  }

  /* 1. Load and verify the model file. */
  CHECK(kite_model_load_file(argv[1], &model));

  /* 2. Create a session: it plans where each node runs and allocates all
   *    memory once. NULL options = defaults. */
  CHECK(kite_session_create(model, NULL, &session));

  /* 3. Fill input 0. Its shape and dtype are fixed in the model file. */
  CHECK(kite_session_get_input_info(session, 0, &in_info));
  if (in_info.dtype != KITE_DTYPE_FLOAT32) {
    fprintf(stderr, "input '%s' is %s; this example handles float32 only\n", in_info.name,
            kite_dtype_name(in_info.dtype));
    goto cleanup;
  }
  count = (size_t)in_info.byte_size / sizeof(float);
  input = (float *)malloc(count ? count * sizeof(float) : 1);
  if (!input) {
    fprintf(stderr, "out of memory\n");
    goto cleanup;
  }
  if (argc == 3) {
    if (read_raw_file(argv[2], input, (size_t)in_info.byte_size) != 0) goto cleanup;
  } else {
    for (i = 0; i < count; ++i) input[i] = (float)(i % 256) / 255.0f; /* a fixed ramp */
  }
  CHECK(kite_session_set_input(session, 0, input, (size_t)in_info.byte_size));

  /* 4. Run. */
  CHECK(kite_session_run(session));

  /* 5. Read output 0 in place (no copy) and find its largest element. */
  CHECK(kite_session_get_output_info(session, 0, &out_info));
  if (out_info.dtype != KITE_DTYPE_FLOAT32 || out_info.byte_size == 0) {
    fprintf(stderr, "output '%s' is not a non-empty float32 tensor\n", out_info.name);
    goto cleanup;
  }
  CHECK(kite_session_get_output_pointer(session, 0, &output_data));
  output = (const float *)output_data;
  count = (size_t)out_info.byte_size / sizeof(float);
  best = 0;
  for (i = 1; i < count; ++i)
    if (output[i] > output[best]) best = i;
  printf("output '%s': argmax %lu, value %g\n", out_info.name, (unsigned long)best,
         (double)output[best]);
  exit_code = 0;

cleanup:
  /* Destroy functions accept NULL, so cleanup needs no checks. */
  free(input);
  kite_session_destroy(session);
  kite_model_destroy(model);
  return exit_code;
}
