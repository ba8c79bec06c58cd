// The code each fuzz target runs on one input, shared with the regression
// replay test (tests/unit/regression_replay_test.cpp) so that a crash file
// found by the fuzzer is replayed through exactly the same calls in the
// normal test run.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kite::fuzz {

// Memory cap the loader target gives each session
// (kite_session_options_set_memory_limit): a hostile file may declare an
// arena of any size; above this the session must refuse it cleanly. Small
// (every seed needs far less) so that each input stays fast: zeroing a
// large arena under ASan costs tens of milliseconds.
constexpr uint64_t kLoaderMemoryLimit = 4ull << 20;

// .kite bytes: kite_model_load_memory, then (if the model verifies) a CPU
// session with 1 worker thread, every input set (and a wrong-size set
// refused), one kite_session_run, every output read, placement queried.
// Returns 0; a bug shows up as a sanitizer report or a trap.
int run_loader_input(const uint8_t* data, size_t size);

// ONNX bytes through convert_onnx_file's steps: import_onnx_bytes,
// infer_shapes, check_cpu_support, the optimizer pipeline (-O2),
// materialize_outputs, an optional memory budget, plan_memory (aliasing on or
// off), check_plan, writer::serialize, and the written file loaded back.
int run_onnx_input(const uint8_t* data, size_t size);

}  // namespace kite::fuzz
