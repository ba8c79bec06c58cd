/*
 * Kite converter: public C API (C99). ONNX in, .kite out, as kite-convert
 * does, for programs and language bindings (the Python package uses it).
 *
 * Library libkite_converter (CMake: find_package(Kite COMPONENTS converter),
 * target Kite::converter; pkg-config: kite-converter). It needs only this
 * header and kite.h (for kite_status); it does not link libkite.
 *
 * Conventions as in kite.h: every fallible call returns kite_status; the
 * detailed message of the last failure on the calling thread is
 * kite_converter_last_error(); kite_convert_options_destroy(NULL) is a no-op.
 * Any number of threads may convert at the same time (one options object
 * per thread, or a shared one that nobody modifies meanwhile).
 */
#ifndef KITE_CONVERTER_H
#define KITE_CONVERTER_H

#include <stdint.h>

#include "kite/kite.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kite_convert_options kite_convert_options;

/* The version of the converter library (compare with KITE_VERSION_NUMBER). */
KITE_API int kite_converter_version_number(void);
/* Message of the last failed converter call on this thread ("" if none). */
KITE_API const char *kite_converter_last_error(void);

KITE_API kite_status kite_convert_options_create(kite_convert_options **out_options);
KITE_API void kite_convert_options_destroy(kite_convert_options *options);
/* Fixes the shape of graph input name: rank entries of dims, each >= 0
 * (kite-convert --input-shape). Setting a name again replaces its shape. */
KITE_API kite_status kite_convert_options_set_input_shape(kite_convert_options *options,
                                                          const char *name,
                                                          const int64_t *dims, int32_t rank);
/* Graph optimizer: 0 none, 1 folding and elimination, 2 also fusion (the
 * default; kite-convert -O). */
KITE_API kite_status kite_convert_options_set_opt_level(kite_convert_options *options,
                                                        int32_t level);
/* Skips one optimizer pass (kite-convert --disable-pass); an unknown name is
 * KITE_ERROR_INVALID_ARGUMENT and the message lists the passes. */
KITE_API kite_status kite_convert_options_disable_pass(kite_convert_options *options,
                                                       const char *pass_name);
/* Keeps the activation arena within bytes by running high-resolution layers
 * in patches and recomputing tensors (docs/MEMORY.md); 0 (default): no
 * budget (kite-convert --memory-budget). Clears a ratio set before. */
KITE_API kite_status kite_convert_options_set_memory_budget(kite_convert_options *options,
                                                            uint64_t bytes);
/* The same budget as ratio times the lower bound of the unbudgeted plan
 * (kite-convert --memory-budget 0.6x); 0 (default): no budget. A ratio that
 * is negative, not finite or above 1e6 is KITE_ERROR_INVALID_ARGUMENT.
 * Clears a byte budget set before. */
KITE_API kite_status kite_convert_options_set_memory_budget_ratio(kite_convert_options *options,
                                                                  double ratio);
/* allow != 0 (default): in-place ops and views in the memory plan. */
KITE_API kite_status kite_convert_options_set_inplace(kite_convert_options *options,
                                                      int32_t allow);

/* Half precision (kite-convert --precision, docs/PRECISION.md): precision
 * is "fp32" (default), "fp16" (every node that can, float16 weights and
 * activations, casts at the boundaries) or "mixed" (fp16 where the measured
 * error at the outputs stays within fp16_tolerance x max|ref|, seeded random
 * inputs); fp16_tolerance must be > 0 and finite (kite-convert's default is
 * 1e-2). Anything else is KITE_ERROR_INVALID_ARGUMENT. */
KITE_API kite_status kite_convert_options_set_precision(kite_convert_options *options,
                                                        const char *precision,
                                                        double fp16_tolerance);

/* Weights pre-packed for the CPU kernels of these ISA levels (kite-convert
 * --pack-for, format 1.1, docs/FORMAT.md): a comma-separated list of
 * "x86-avx512", "x86-avx2", "arm64-neon", "portable", "host" (the converting
 * machine's level: the default) and "none". An empty list or an unknown
 * name is KITE_ERROR_INVALID_ARGUMENT. */
KITE_API kite_status kite_convert_options_set_pack_for(kite_convert_options *options,
                                                       const char *levels);

/* Converts the ONNX file onnx_path and writes kite_path atomically (nothing
 * is written on failure). options may be NULL for defaults. If out_report_json
 * is not NULL it receives the conversion report, the JSON object that
 * kite-convert --report writes (docs/FUSIONS.md), NUL-terminated, to be freed
 * with kite_converter_free_string.
 * Statuses: KITE_ERROR_IO (onnx_path cannot be read, kite_path cannot be
 * written), KITE_ERROR_UNSUPPORTED (ops or dtypes no backend runs; the
 * message lists every such node), KITE_ERROR_OUT_OF_MEMORY (the memory
 * budget cannot be met), KITE_ERROR_INVALID_MODEL (anything else that makes
 * the model unconvertible: malformed ONNX, unknown shapes, ...). */
KITE_API kite_status kite_convert_file(const char *onnx_path, const char *kite_path,
                                       const kite_convert_options *options,
                                       char **out_report_json);
KITE_API void kite_converter_free_string(char *string);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KITE_CONVERTER_H */
