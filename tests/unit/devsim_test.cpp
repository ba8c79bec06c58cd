// Backend ABI v2 on devsim, the simulated GPU (backends/devsim): its
// non-dereferenceable buffers, poisoned memory and deferred work catch what a
// real device would. Counted by hand on a small graph, the calls devsim sees
// must equal what the runtime reports; unified memory means no copies; a
// failure at every stage is a clear error naming the backend and the call;
// removing a transfer or a synchronize (KITE_TEST_MUTATION) is caught; a v1
// plugin still loads and runs; devices are shared; application buffers and
// asynchronous runs work. Outputs are compared with the CPU's bit for bit:
// devsim runs the CPU's kernels on the same values in the same order.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kite/kite.h"
#include "test_models.h"

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

// The counters devsim wrote (option stats=FILE), by phase.
struct DevsimStats {
  std::map<std::string, long long> setup, run;
  long long runs = 0;
  bool ok = false;
};

long long number_after(const std::string& text, size_t from, const std::string& key) {
  const size_t at = text.find("\"" + key + "\": ", from);
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + key.size() + 4));
}

DevsimStats read_stats(const std::string& path) {
  DevsimStats s;
  std::ifstream f(path);
  std::stringstream buffer;
  buffer << f.rdbuf();
  const std::string text = buffer.str();
  if (text.empty()) return s;
  s.runs = number_after(text, 0, "runs");
  const size_t setup = text.find("\"setup\"");
  const size_t run = text.find("\"run\"");
  for (const char* key : {"allocs", "maps", "imports", "external_imports", "uploads", "downloads",
                          "buffer_copies", "kernels_prepared", "segments_prepared", "execute_calls",
                          "segments_executed", "kernels_executed", "syncs"}) {
    s.setup[key] = number_after(text, setup, key);
    s.run[key] = number_after(text, run, key);
  }
  s.ok = setup != std::string::npos && run != std::string::npos;
  return s;
}

std::string temp_path(const char* stem) {
  return "/tmp/kite_devsim_" + std::to_string(::getpid()) + "_" + stem + ".json";
}

std::vector<float> input_values() {
  std::vector<float> x(100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 13) % 23) / 11.0f - 1.0f;
  return x;
}

struct Result {
  kite_status status = KITE_OK;
  std::string error;
  std::vector<float> y;
  kite_run_stats stats{};
  std::vector<kite_session_backend> backends;  // strings cleared: the session is gone
  std::vector<std::string> backend_names;
  std::vector<std::string> placement;
  DevsimStats devsim;
};

// A model loaded from memory and session options naming `backends` and the
// test plugins' folder, both destroyed with it; the tests make and destroy
// their sessions themselves.
struct ModelAndOptions {
  ModelAndOptions(const kite::ir::Model& model, const char* backends) : bytes(kite::test::serialize_or_die(model)) {
    EXPECT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &m), KITE_OK) << kite_last_error();
    kite_session_options_create(&o);
    kite_session_options_set_backends(o, backends);
    kite_session_options_set_backend_path(o, KITE_TEST_PLUGIN_DIR);
  }
  ~ModelAndOptions() {
    kite_session_options_destroy(o);
    kite_model_destroy(m);
  }
  ModelAndOptions(const ModelAndOptions&) = delete;
  ModelAndOptions& operator=(const ModelAndOptions&) = delete;
  void devsim_option(const char* key, const char* value) {
    EXPECT_EQ(kite_session_options_set_backend_option(o, "devsim", key, value), KITE_OK) << kite_last_error();
  }
  std::vector<uint8_t> bytes;
  kite_model* m = nullptr;
  kite_session_options* o = nullptr;
};

// Creates a session of `model` on `backends` with devsim `options`, runs it
// `runs` times, and reads everything back.
Result run(const kite::ir::Model& model, const char* backends, Options options, int runs = 1,
           const char* stats_stem = "run") {
  Result r;
  const std::string stats_file = temp_path(stats_stem);
  std::remove(stats_file.c_str());
  options.emplace_back("stats", stats_file);
  ModelAndOptions setup(model, backends);
  kite_session_options_set_threads(setup.o, 1);
  if (std::string(backends).find("devsim") != std::string::npos) {
    for (const auto& kv : options) setup.devsim_option(kv.first.c_str(), kv.second.c_str());
  }
  kite_session* s = nullptr;
  r.status = kite_session_create(setup.m, setup.o, &s);
  r.error = kite_last_error();
  if (r.status == KITE_OK) {
    const auto x = input_values();
    EXPECT_EQ(kite_session_set_input(s, 0, x.data(), x.size() * 4), KITE_OK);
    for (int i = 0; i < runs && r.status == KITE_OK; ++i) {
      r.status = kite_session_run(s);
      r.error = kite_last_error();
    }
    if (r.status == KITE_OK) {
      r.y.resize(100);
      EXPECT_EQ(kite_session_get_output(s, 0, r.y.data(), 400), KITE_OK);
    }
    r.stats.struct_size = sizeof r.stats;
    EXPECT_EQ(kite_session_get_run_stats(s, &r.stats), KITE_OK);
    int32_t n = 0;
    kite_session_get_backend_count(s, &n);
    for (int32_t i = 0; i < n; ++i) {
      kite_session_backend b{};
      b.struct_size = sizeof b;
      kite_session_get_backend(s, i, &b);
      r.backend_names.push_back(b.name);
      b.name = b.reason = b.device_name = nullptr;
      r.backends.push_back(b);
    }
    kite_session_get_node_count(s, &n);
    for (int32_t i = 0; i < n; ++i) {
      kite_node_placement p;
      kite_session_get_node_placement(s, i, &p);
      r.placement.push_back(p.backend);
    }
  }
  kite_session_destroy(s);  // devsim writes its counters now
  r.devsim = read_stats(stats_file);
  std::remove(stats_file.c_str());
  return r;
}

const kite_session_backend* find_backend(const Result& r, const char* name) {
  for (size_t i = 0; i < r.backends.size(); ++i) {
    if (r.backend_names[i] == name) return &r.backends[i];
  }
  return nullptr;
}

class Devsim : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("KITE_TEST_MUTATION");
    reference_ = run(kite::test::conv_relu_add_model(false), "cpu", {});
    ASSERT_EQ(reference_.status, KITE_OK) << reference_.error;
    for (float v : reference_.y) ASSERT_TRUE(std::isfinite(v));
  }
  Result reference_;
};

// ---- counts: devsim's own == hand analysis == the runtime's -------------------
// conv_relu_add_model: y = Relu(Conv(x, w, b)) + x, three kernels.

TEST_F(Devsim, AllAcceptedDiscrete) {
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {}, 3);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  // Hand analysis. Setup: arena, weights and workspace (the Conv's im2col)
  // allocated; w and b uploaded; three kernels prepared into one segment.
  // Each run: x up, the segment, y down (the download waits for the work).
  ASSERT_TRUE(r.devsim.ok);
  EXPECT_EQ(r.devsim.setup["allocs"], 3);
  EXPECT_EQ(r.devsim.setup["uploads"], 2);
  EXPECT_EQ(r.devsim.setup["kernels_prepared"], 3);
  EXPECT_EQ(r.devsim.setup["segments_prepared"], 1);
  EXPECT_EQ(r.devsim.runs, 3);
  EXPECT_EQ(r.devsim.run["uploads"], 3 * 1);
  EXPECT_EQ(r.devsim.run["downloads"], 3 * 1);
  EXPECT_EQ(r.devsim.run["segments_executed"], 3 * 1);
  EXPECT_EQ(r.devsim.run["kernels_executed"], 3 * 3);
  EXPECT_EQ(r.devsim.run["syncs"], 0);
  // The runtime reports the same per run.
  EXPECT_EQ(r.stats.uploads, 1);
  EXPECT_EQ(r.stats.downloads, 1);
  EXPECT_EQ(r.stats.transfers, 2);
  EXPECT_EQ(r.stats.segments, 1);
  EXPECT_EQ(r.stats.syncs, 0);
  const kite_session_backend* d = find_backend(r, "devsim");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->weight_uploads, r.devsim.setup["uploads"]);
  EXPECT_EQ(d->kernels, 3);
  EXPECT_EQ(d->segments, 1);
  EXPECT_EQ(d->unified, 0);
  EXPECT_EQ(d->weights_imported, 0);
  EXPECT_GE(d->weights_bytes, (4u * 4 * 3 * 3 + 4) * 4);
  EXPECT_GT(d->workspace_bytes, 0u);
}

TEST_F(Devsim, AllAcceptedUnifiedCopiesNothing) {
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {{"unified", "1"}}, 2);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  ASSERT_TRUE(r.devsim.ok);
  // The arena is mapped and is the host arena; the weights are imported from
  // the model's bytes: no weights buffer, no uploads at all.
  EXPECT_EQ(r.devsim.setup["allocs"], 2);  // arena, workspace
  EXPECT_EQ(r.devsim.setup["maps"], 1);
  EXPECT_EQ(r.devsim.setup["imports"], 1);
  EXPECT_EQ(r.devsim.setup["uploads"], 0);
  EXPECT_EQ(r.devsim.run["uploads"], 0);
  EXPECT_EQ(r.devsim.run["downloads"], 0);
  // One synchronize per run, at its end, before the host reads y.
  EXPECT_EQ(r.devsim.run["syncs"], 2 * 1);
  EXPECT_EQ(r.stats.transfers, 0);
  EXPECT_EQ(r.stats.syncs, 1);
  const kite_session_backend* d = find_backend(r, "devsim");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->unified, 1);
  EXPECT_EQ(d->weights_imported, 1);
}

TEST_F(Devsim, DeclinedOpCopiesOnlyAtSegmentEdges) {
  // Relu on the CPU between two devsim segments: x up, conv down, relu up,
  // y down.
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {{"decline_ops", "Relu"}});
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.placement, (std::vector<std::string>{"devsim", "cpu", "devsim"}));
  EXPECT_EQ(r.devsim.run["uploads"], 2);
  EXPECT_EQ(r.devsim.run["downloads"], 2);
  EXPECT_EQ(r.devsim.run["segments_executed"], 2);
  EXPECT_EQ(r.stats.uploads, 2);
  EXPECT_EQ(r.stats.downloads, 2);
  EXPECT_EQ(r.stats.segments, 3);
  // Unified: no copies, but the host must wait for the Conv before running
  // Relu, and for the Add before the run returns.
  r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {{"decline_ops", "Relu"}, {"unified", "1"}});
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.devsim.run["uploads"] + r.devsim.run["downloads"], 0);
  EXPECT_EQ(r.devsim.run["syncs"], 2);
  EXPECT_EQ(r.stats.syncs, 2);
  EXPECT_EQ(r.stats.transfers, 0);
}

TEST_F(Devsim, FusedNodesDeclinedRunTheirBodiesOnTheDevice) {
  Result ref = run(kite::test::conv_relu_add_model(true), "cpu", {});
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  Result r = run(kite::test::conv_relu_add_model(true), "devsim,cpu", {{"decline_fused", "1"}});
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.placement[0], "devsim");
  // Conv and Relu of the body plus the Add: one segment of three kernels.
  EXPECT_EQ(r.devsim.setup["kernels_prepared"], 3);
  EXPECT_EQ(r.devsim.run["segments_executed"], 1);
  EXPECT_EQ(r.stats.transfers, 2);
  // The fused kernel and the body agree within float reassociation here
  // (both sum the 36 Conv terms in the same order: bit-identical).
  EXPECT_EQ(r.y, ref.y);
}

TEST_F(Devsim, WithoutSegmentsKernelsRunOneByOne) {
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {{"segments", "0"}});
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.devsim.setup["segments_prepared"], 0);
  EXPECT_EQ(r.devsim.run["segments_executed"], 0);
  EXPECT_EQ(r.devsim.run["execute_calls"], 3);
  EXPECT_EQ(r.stats.segments, 1);  // one segment of the schedule, run kernel by kernel
}

TEST_F(Devsim, CpuWorkspaceIsAllocatedByTheRuntimeAndCounted) {
  Result r = run(kite::test::conv_relu_add_model(false), "cpu", {});
  const kite_session_backend* cpu = find_backend(r, "cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_GT(cpu->workspace_bytes, 0u) << "the Conv's im2col scratch";
  EXPECT_EQ(cpu->arena_bytes, 0u);
}

// ---- mutation checks: the tests above catch a missing transfer or wait ------

TEST_F(Devsim, MutationSkipTransferIsCaught) {
  setenv("KITE_TEST_MUTATION", "skip_transfer", 1);
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {});
  unsetenv("KITE_TEST_MUTATION");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  // x never reaches the device: the Conv reads poisoned memory.
  EXPECT_NE(r.y, reference_.y);
  EXPECT_EQ(r.devsim.run["uploads"], 0);
}

TEST_F(Devsim, MutationSkipSyncIsCaught) {
  setenv("KITE_TEST_MUTATION", "skip_sync", 1);
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu",
                       {{"unified", "1"}, {"decline_ops", "Relu"}});
  unsetenv("KITE_TEST_MUTATION");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  // Relu runs on the host before the device ran the Conv, and y is read
  // before the device ran the Add.
  EXPECT_NE(r.y, reference_.y);
  EXPECT_EQ(r.devsim.run["syncs"], 0);
}

// ---- a failing call at every stage -------------------------------------------

struct Failure {
  const char* fail;
  const char* fail_after;
  const char* unified;
  const char* call;  // what the message must name
  kite_status status;
  bool at_run;       // fails in kite_session_run, not at creation
};

void PrintTo(const Failure& f, std::ostream* os) {
  *os << "fail=" << f.fail << " fail_after=" << f.fail_after << " unified=" << f.unified;
}

class DevsimFailure : public ::testing::TestWithParam<Failure> {};

TEST_P(DevsimFailure, IsAClearErrorNamingTheBackendAndTheCall) {
  const Failure& f = GetParam();
  Options options = {{"fail", f.fail}, {"unified", f.unified}};
  if (f.fail_after[0] != '\0') options.emplace_back("fail_after", f.fail_after);
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", options, 2, f.fail);
  EXPECT_EQ(r.status, f.status) << r.error;
  EXPECT_NE(r.error.find("backend 'devsim'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(f.call), std::string::npos) << r.error;
  // The backend's own message is carried.
  EXPECT_NE(r.error.find(std::string(f.fail) == "lost" ? "device lost" : "simulated failure"), std::string::npos)
      << r.error;
  // Creation failures leave no session; run failures one that ran before.
  EXPECT_EQ(r.backends.empty(), !f.at_run) << r.error;
}

std::string failure_name(const ::testing::TestParamInfo<Failure>& info) {
  std::string name = std::string(info.param.fail) + (info.param.fail_after[0] ? std::string("_after_") + info.param.fail_after : "") +
                     (info.param.unified[0] == '1' ? "_unified" : "");
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    EveryStage, DevsimFailure,
    ::testing::Values(Failure{"create", "", "0", "create2", KITE_ERROR_BACKEND, false},
                      Failure{"alloc", "", "0", "buffer_alloc of the arena", KITE_ERROR_BACKEND, false},
                      Failure{"alloc", "1", "0", "buffer_alloc of the weights", KITE_ERROR_BACKEND, false},
                      Failure{"alloc", "2", "0", "buffer_alloc of the workspace", KITE_ERROR_BACKEND, false},
                      Failure{"map", "", "1", "buffer_map of the arena", KITE_ERROR_BACKEND, false},
                      Failure{"import", "", "1", "import_host of the weights", KITE_ERROR_BACKEND, false},
                      Failure{"upload", "", "0", "upload of 'w'", KITE_ERROR_BACKEND, false},
                      Failure{"upload", "2", "0", "upload of 'x'", KITE_ERROR_BACKEND, true},
                      Failure{"prepare", "", "0", "prepare2 of Conv 'conv0'", KITE_ERROR_BACKEND, false},
                      Failure{"prepare", "2", "0", "prepare2 of Add 'add0'", KITE_ERROR_BACKEND, false},
                      Failure{"workspace", "", "0", "workspace_size", KITE_ERROR_BACKEND, false},
                      Failure{"bind", "", "0", "bind", KITE_ERROR_BACKEND, false},
                      Failure{"segment", "", "0", "prepare_segment", KITE_ERROR_BACKEND, false},
                      Failure{"begin_run", "", "0", "begin_run", KITE_ERROR_BACKEND, true},
                      Failure{"execute", "", "0", "execute_segment", KITE_ERROR_BACKEND, true},
                      Failure{"end_run", "", "0", "end_run", KITE_ERROR_BACKEND, true},
                      Failure{"download", "", "0", "download of 'y'", KITE_ERROR_BACKEND, true},
                      Failure{"synchronize", "", "1", "synchronize2", KITE_ERROR_BACKEND, true},
                      Failure{"lost", "", "1", "synchronize2", KITE_ERROR_DEVICE_LOST, true},
                      Failure{"lost", "", "0", "download of 'y'", KITE_ERROR_DEVICE_LOST, true}),
    failure_name);

TEST(DevsimFailures, ALostDeviceStaysLost) {
  ModelAndOptions setup(kite::test::conv_relu_add_model(false), "devsim,cpu");
  kite_model* m = setup.m;
  kite_session_options* o = setup.o;
  kite_session_options_set_backend_option(o, "devsim", "unified", "1");
  kite_session_options_set_backend_option(o, "devsim", "fail", "lost");
  kite_session_options_set_backend_option(o, "devsim", "fail_after", "1");
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  EXPECT_EQ(kite_session_run(s), KITE_OK) << kite_last_error();
  EXPECT_EQ(kite_session_run(s), KITE_ERROR_DEVICE_LOST);
  EXPECT_STREQ(kite_status_string(KITE_ERROR_DEVICE_LOST), "device lost");
  EXPECT_EQ(kite_session_run(s), KITE_ERROR_DEVICE_LOST);
  EXPECT_NE(std::string(kite_last_error()).find("lost earlier"), std::string::npos) << kite_last_error();
  kite_session_destroy(s);
}

// ---- options --------------------------------------------------------------------

TEST(DevsimOptions, UnknownKeysAndBackendsAreErrors) {
  Result r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", {{"colour", "blue"}});
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("unknown option 'colour'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("backend 'devsim'"), std::string::npos) << r.error;

  kite_session_options* o = nullptr;
  kite_session_options_create(&o);
  kite_session_options_set_backends(o, "cpu");
  kite_session_options_set_backend_option(o, "vulkan", "x", "1");
  const auto bytes = kite::test::serialize_or_die(kite::test::add_relu_model());
  kite_model* m = nullptr;
  ASSERT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &m), KITE_OK);
  kite_session* s = nullptr;
  EXPECT_EQ(kite_session_create(m, o, &s), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kite_last_error()).find("'vulkan', which is not in the backend list"), std::string::npos)
      << kite_last_error();
  // CPU options: threads, fused.
  kite_session_options_destroy(o);
  kite_session_options_create(&o);
  kite_session_options_set_backend_option(o, "cpu", "threads", "2");
  kite_session_options_set_backend_option(o, "cpu", "fused", "0");
  EXPECT_EQ(kite_session_options_set_precision(o, KITE_PRECISION_FP16_STORAGE | KITE_PRECISION_TF32), KITE_OK);
  EXPECT_EQ(kite_session_options_set_precision(o, 1u << 20), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_options_set_cache_dir(o, "/tmp"), KITE_OK);
  EXPECT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  kite_session_destroy(s);
  kite_session_options_set_backend_option(o, "cpu", "threads", "-1");
  EXPECT_EQ(kite_session_create(m, o, &s), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kite_last_error()).find("threads=-1"), std::string::npos) << kite_last_error();
  kite_session_options_destroy(o);
  kite_model_destroy(m);
}

// The application's queue reaches the backend it names (the CUDA backend's
// tests show it used); a NULL backend or one not in the list is an error.
TEST(DevsimOptions, ExternalQueueIsCheckedLikeOtherOptions) {
  kite_session_options* o = nullptr;
  kite_session_options_create(&o);
  int queue = 0;
  EXPECT_EQ(kite_session_options_set_external_queue(o, nullptr, &queue), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_options_set_external_queue(nullptr, "devsim", &queue), KITE_ERROR_INVALID_ARGUMENT);
  kite_session_options_set_backends(o, "cpu");
  EXPECT_EQ(kite_session_options_set_external_queue(o, "cuda", &queue), KITE_OK);
  const auto bytes = kite::test::serialize_or_die(kite::test::add_relu_model());
  kite_model* m = nullptr;
  ASSERT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &m), KITE_OK);
  kite_session* s = nullptr;
  EXPECT_EQ(kite_session_create(m, o, &s), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kite_last_error()).find("external queue for backend 'cuda'"), std::string::npos)
      << kite_last_error();
  // NULL removes it again.
  EXPECT_EQ(kite_session_options_set_external_queue(o, "cuda", nullptr), KITE_OK);
  EXPECT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  kite_session_destroy(s);
  kite_session_options_destroy(o);
  kite_model_destroy(m);
}

TEST(DevsimOptions, LogCallbackReceivesTheBackendsMessages) {
  ModelAndOptions setup(kite::test::add_relu_model(), "devsim,cpu");
  kite_model* m = setup.m;
  kite_session_options* o = setup.o;
  kite_session_options_set_backend_option(o, "devsim", "unified", "1");
  std::vector<std::string> log;
  ASSERT_EQ(kite_session_options_set_log_callback(
                o,
                [](void* user, int32_t level, const char* backend, const char* message) {
                  static_cast<std::vector<std::string>*>(user)->push_back(std::to_string(level) + " " + backend +
                                                                           ": " + message);
                },
                &log),
            KITE_OK);
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], "2 devsim: instance on device 0 (unified=1)");
  kite_session_destroy(s);
}

// ---- devices: one per process and index, shared by sessions -------------------

TEST(DevsimDevices, SessionsOnADeviceShareOneContext) {
  ModelAndOptions setup(kite::test::add_relu_model(), "devsim,cpu");
  kite_model* m = setup.m;
  kite_session_options* o = setup.o;
  kite_session* a = nullptr;
  kite_session* b = nullptr;
  ASSERT_EQ(kite_session_create(m, o, &a), KITE_OK) << kite_last_error();
  // The plugin is loaded now; read its process-wide counter of device_open.
  void* handle = dlopen(KITE_DEVSIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto opens = reinterpret_cast<int (*)(int)>(dlsym(handle, "kite_devsim_device_opens"));
  ASSERT_NE(opens, nullptr);
  const int before = opens(0);
  ASSERT_EQ(kite_session_create(m, o, &b), KITE_OK) << kite_last_error();
  EXPECT_EQ(opens(0), before) << "a second session on device 0 must share the open device";
  kite_session_backend info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(kite_session_get_backend(b, 0, &info), KITE_OK);
  EXPECT_STREQ(info.device_name, "devsim 0 (simulated GPU)");
  // Device 1 is another device.
  kite_session_options_set_device_index(o, "devsim", 1);
  kite_session* c = nullptr;
  const int before1 = opens(1);
  ASSERT_EQ(kite_session_create(m, o, &c), KITE_OK) << kite_last_error();
  EXPECT_EQ(opens(1), before1 + 1);
  ASSERT_EQ(kite_session_get_backend(c, 0, &info), KITE_OK);
  EXPECT_EQ(info.device_index, 1);
  kite_session_destroy(c);
  // No device 2: an error naming the backend and the count.
  kite_session_options_set_device_index(o, "devsim", 2);
  kite_session_options_set_strict(o, 1);
  EXPECT_NE(kite_session_create(m, o, &c), KITE_OK);
  EXPECT_NE(std::string(kite_last_error()).find("has 2 device(s), no device 2"), std::string::npos)
      << kite_last_error();
  kite_session_destroy(a);
  kite_session_destroy(b);
  dlclose(handle);
}

// Sessions created, run and destroyed on many threads at once share the
// device (its opening and closing serialized by the runtime) and give the
// CPU's results (run under ThreadSanitizer by the tsan preset).
TEST_F(Devsim, ThreadsSessionsShareOneDevice) {
  const auto bytes = kite::test::serialize_or_die(kite::test::conv_relu_add_model(false));
  kite_model* m = nullptr;
  ASSERT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &m), KITE_OK);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      kite_session_options* o = nullptr;
      kite_session_options_create(&o);
      kite_session_options_set_backends(o, "devsim,cpu");
      kite_session_options_set_backend_path(o, KITE_TEST_PLUGIN_DIR);
      kite_session_options_set_threads(o, 1);
      kite_session_options_set_backend_option(o, "devsim", "unified", t % 2 ? "1" : "0");
      for (int round = 0; round < 3; ++round) {
        kite_session* s = nullptr;
        if (kite_session_create(m, o, &s) != KITE_OK) break;
        const auto x = input_values();
        std::vector<float> y(100);
        const bool good = kite_session_set_input(s, 0, x.data(), 400) == KITE_OK &&
                          kite_session_run(s) == KITE_OK &&
                          kite_session_get_output(s, 0, y.data(), 400) == KITE_OK && y == reference_.y;
        kite_session_destroy(s);
        if (!good) break;
        ok[static_cast<size_t>(t)] += 1;
      }
      kite_session_options_destroy(o);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, (std::vector<int>{3, 3, 3, 3}));
  kite_model_destroy(m);
}

// ---- application buffers and asynchronous runs -------------------------------

TEST_F(Devsim, ApplicationBuffersSkipTheHost) {
  ModelAndOptions setup(kite::test::conv_relu_add_model(false), "devsim,cpu");
  kite_model* m = setup.m;
  kite_session_options* o = setup.o;
  kite_session_options_set_threads(o, 1);
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  // devsim's "device memory" of the application: its native handle is the
  // address. The input sits at offset 64 in a bigger buffer.
  std::vector<float> camera(16 + 100, 0.0f), result(100, -1.0f);
  const auto x = input_values();
  std::memcpy(camera.data() + 16, x.data(), 400);
  ASSERT_EQ(kite_session_bind_input_buffer(s, 0, "devsim", reinterpret_cast<uintptr_t>(camera.data()), 64),
            KITE_OK) << kite_last_error();
  ASSERT_EQ(kite_session_bind_output_buffer(s, 0, "devsim", reinterpret_cast<uintptr_t>(result.data()), 0),
            KITE_OK) << kite_last_error();
  ASSERT_EQ(kite_session_run(s), KITE_OK) << kite_last_error();
  EXPECT_EQ(result, reference_.y);
  kite_run_stats stats{};
  stats.struct_size = sizeof stats;
  ASSERT_EQ(kite_session_get_run_stats(s, &stats), KITE_OK);
  EXPECT_EQ(stats.transfers, 0) << "nothing passes through the host";
  EXPECT_EQ(stats.buffer_copies, 2);
  float y[100];
  EXPECT_EQ(kite_session_get_output(s, 0, y, sizeof y), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kite_last_error()).find("bound to an application buffer"), std::string::npos);
  // The CPU cannot take application buffers.
  EXPECT_EQ(kite_session_bind_input_buffer(s, 0, "cpu", 1, 0), KITE_ERROR_UNSUPPORTED);
  // Unbound again: through the host.
  ASSERT_EQ(kite_session_bind_input_buffer(s, 0, nullptr, 0, 0), KITE_OK);
  ASSERT_EQ(kite_session_bind_output_buffer(s, 0, nullptr, 0, 0), KITE_OK);
  ASSERT_EQ(kite_session_set_input(s, 0, x.data(), 400), KITE_OK);
  ASSERT_EQ(kite_session_run(s), KITE_OK) << kite_last_error();
  ASSERT_EQ(kite_session_get_output(s, 0, y, sizeof y), KITE_OK);
  EXPECT_EQ(std::vector<float>(y, y + 100), reference_.y);
  kite_session_destroy(s);
}

TEST(DevsimFailures, AFailingDeviceCopyOfAnApplicationBufferNamesIt) {
  ModelAndOptions setup(kite::test::conv_relu_add_model(false), "devsim,cpu");
  kite_model* m = setup.m;
  kite_session_options* o = setup.o;
  kite_session_options_set_backend_option(o, "devsim", "fail", "copy");
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  std::vector<float> camera(100, 0.5f);
  ASSERT_EQ(kite_session_bind_input_buffer(s, 0, "devsim", reinterpret_cast<uintptr_t>(camera.data()), 0), KITE_OK);
  EXPECT_EQ(kite_session_run(s), KITE_ERROR_BACKEND);
  const std::string error = kite_last_error();
  EXPECT_NE(error.find("backend 'devsim' failed in copy_buffer of input 'x' from its application buffer"),
            std::string::npos) << error;
  EXPECT_NE(error.find("simulated failure of copy"), std::string::npos) << error;
  kite_session_destroy(s);
}

TEST_F(Devsim, AsyncRunFinishesInWait) {
  ModelAndOptions setup(kite::test::conv_relu_add_model(false), "devsim,cpu");
  kite_model* m = setup.m;
  kite_session_options* o = setup.o;
  kite_session_options_set_backend_option(o, "devsim", "unified", "1");
  kite_session_options_set_threads(o, 1);
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(m, o, &s), KITE_OK) << kite_last_error();
  const auto x = input_values();
  ASSERT_EQ(kite_session_set_input(s, 0, x.data(), 400), KITE_OK);
  ASSERT_EQ(kite_session_run_async(s), KITE_OK) << kite_last_error();
  float y[100];
  EXPECT_EQ(kite_session_get_output(s, 0, y, sizeof y), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_run(s), KITE_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(kite_session_wait(s), KITE_OK) << kite_last_error();
  ASSERT_EQ(kite_session_get_output(s, 0, y, sizeof y), KITE_OK);
  EXPECT_EQ(std::vector<float>(y, y + 100), reference_.y);
  // Destroying a session with a run in flight waits for it.
  ASSERT_EQ(kite_session_run_async(s), KITE_OK);
  kite_session_destroy(s);
}

// ---- the worked example of docs/BACKENDS.md ----------------------------------

TEST_F(Devsim, MinimalDeviceBackendRunsWhatItSupports) {
  const Result r = run(kite::test::conv_relu_add_model(false), "minimal,cpu", {});
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.placement, (std::vector<std::string>{"cpu", "minimal", "minimal"}));
  // conv's result and x up, y down.
  EXPECT_EQ(r.stats.transfers, 3);
}

// ---- the v1 plugin -------------------------------------------------------------

TEST_F(Devsim, V1PluginStillLoadsAndRuns) {
  for (const char* mode : {"host", "device"}) {
    setenv("KITE_V1_PLUGIN", mode, 1);
    const Result r = run(kite::test::conv_relu_add_model(false), "v1test,cpu", {});
    unsetenv("KITE_V1_PLUGIN");
    ASSERT_EQ(r.status, KITE_OK) << mode << ": " << r.error;
    EXPECT_EQ(r.y, reference_.y) << mode;
    // It runs Relu and Add; the Conv falls back to the CPU.
    EXPECT_EQ(r.placement, (std::vector<std::string>{"cpu", "v1test", "v1test"})) << mode;
    const kite_session_backend* v1 = find_backend(r, "v1test");
    ASSERT_NE(v1, nullptr);
    EXPECT_EQ(v1->abi_version, 1);
    // Device mode: conv's result up, y down; x up too (Add reads it).
    EXPECT_EQ(r.stats.transfers, std::string(mode) == "device" ? 3 : 0) << mode;
  }
}

}  // namespace
