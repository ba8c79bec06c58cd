#include "fuzz_harness.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kite/converter/convert.h"
#include "kite/kite.h"
#include "memory/budget.h"
#include "memory/planner.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "src/const_eval.h"
#include "src/infer_shapes.h"
#include "writer/kite_writer.h"

namespace kite::fuzz {
namespace {

// A contract the C API states (kite.h) that the fuzzer checks along the way.
void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

int run_loader_input(const uint8_t* data, size_t size) {
  kite_model* model = nullptr;
  if (kite_model_load_memory(data, size, &model) != KITE_OK) {
    check(model == nullptr);
    check(kite_last_error()[0] != '\0');
    return 0;
  }
  int32_t major = 0, minor = 0;
  check(kite_model_get_format_version(model, &major, &minor) == KITE_OK);
  (void)kite_model_get_producer(model);

  kite_session_options* options = nullptr;
  check(kite_session_options_create(&options) == KITE_OK);
  kite_session_options_set_threads(options, 1);
  kite_session_options_set_memory_limit(options, kLoaderMemoryLimit);
  kite_session* session = nullptr;
  const kite_status cs = kite_session_create(model, options, &session);
  kite_session_options_destroy(options);
  // The session keeps the model alive: drop the handle first, as apps may.
  kite_model_destroy(model);
  if (cs != KITE_OK) {
    check(session == nullptr);
    check(kite_last_error()[0] != '\0');
    return 0;
  }

  int32_t n_in = 0, n_out = 0, n_nodes = 0;
  check(kite_session_get_input_count(session, &n_in) == KITE_OK);
  check(kite_session_get_output_count(session, &n_out) == KITE_OK);
  check(kite_session_get_node_count(session, &n_nodes) == KITE_OK);
  for (int32_t i = 0; i < n_nodes; ++i) {
    kite_node_placement p;
    check(kite_session_get_node_placement(session, i, &p) == KITE_OK);
  }
  std::vector<uint8_t> buf;
  for (int32_t i = 0; i < n_in; ++i) {
    kite_tensor_info info;
    check(kite_session_get_input_info(session, i, &info) == KITE_OK);
    check(info.byte_size <= kLoaderMemoryLimit);  // it lives in the arena
    int32_t found = -1;
    check(kite_session_find_input(session, info.name, &found) == KITE_OK);
    buf.assign(static_cast<size_t>(info.byte_size) + 1, 0);
    // Input values: the file's own bytes, so NaN/Inf/huge values occur too.
    for (size_t k = 0; k < buf.size(); ++k) buf[k] = data[(k * 7 + 3) % size];
    check(kite_session_set_input(session, i, buf.data(), buf.size()) ==
          KITE_ERROR_SIZE_MISMATCH);
    check(kite_session_set_input(session, i, buf.data(), buf.size() - 1) == KITE_OK);
  }
  if (kite_session_run(session) == KITE_OK) {
    for (int32_t i = 0; i < n_out; ++i) {
      kite_tensor_info info;
      check(kite_session_get_output_info(session, i, &info) == KITE_OK);
      buf.assign(static_cast<size_t>(info.byte_size), 0);
      check(kite_session_get_output(session, i, buf.data(), buf.size()) == KITE_OK);
    }
  }
  kite_session_destroy(session);
  return 0;
}

int run_onnx_input(const uint8_t* data, size_t size) {
  // What kite::converter::convert_onnx_file does, on bytes: import, shape
  // inference, the CPU-support check, the optimizer, outputs materialized,
  // (for some inputs) a memory budget, the memory plan; then the plan's proof,
  // the writer, and the loader on what the writer wrote.
  using namespace kite::converter;
  ir::Model model;
  std::string err;
  ImportOptions options;
  if (!import_onnx_bytes(data, size, options, &model, &err) || !infer_shapes(&model, &err) ||
      !check_cpu_support(model, &err)) {
    check(!err.empty());
    return 0;
  }
  passes::PipelineOptions pipeline;
  passes::PipelineReport optimized;
  if (!passes::run_pipeline(&model, pipeline, &optimized, &err)) {
    check(!err.empty());
    return 0;
  }
  materialize_outputs(&model);
  kite::memory::PlanOptions plan_options;
  // One bit of the input picks the aliasing planner or not, another a budget.
  const uint8_t knobs = size > 0 ? data[size / 2] : 0;
  plan_options.allow_aliasing = (knobs & 1) == 0;
  if ((knobs & 6) == 6) {
    kite::memory::BudgetReport budget;
    if (!kite::memory::apply_memory_budget(&model, 4096, 0, plan_options, &budget, &err)) {
      check(!err.empty());
      return 0;
    }
  }
  kite::memory::PlanStats stats;
  if (!kite::memory::plan_memory(&model, plan_options, &stats, &err)) {
    check(!err.empty());
    return 0;
  }
  // The planner's own proof: no two live tensors share bytes.
  check(kite::memory::check_plan(model).empty());
  std::vector<uint8_t> bytes;
  if (!kite::writer::serialize(model, &bytes, &err)) {
    check(!err.empty());
    return 0;
  }
  // What the converter writes is a file the loader accepts (its verifier
  // re-checks everything, the plan's overlaps included).
  kite_model* loaded = nullptr;
  if (kite_model_load_memory(bytes.data(), bytes.size(), &loaded) != KITE_OK) {
    if (std::getenv("KITE_FUZZ_VERBOSE")) std::fprintf(stderr, "load back: %s\n", kite_last_error());
    check(false);
  }
  kite_model_destroy(loaded);
  return 0;
}

}  // namespace kite::fuzz
