// The scheduler with devsim (backends/devsim, the simulated GPU) in its
// configurations: fused nodes decomposed, CPU fallback with transfers,
// strict mode, plugin loading and its refusals. Every configuration must give
// the CPU's outputs exactly: the same kernels run on the same values in the
// same order, so results are bit-identical.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kite/kite.h"
#include "test_models.h"

namespace {

struct RunResult {
  kite_status status = KITE_OK;
  std::string error;
  std::vector<float> y;
  std::vector<kite_node_placement> placement;
  std::vector<std::string> reasons;
  std::vector<std::string> backends;
  int transfers = -1;
};

std::vector<float> input_values() {
  std::vector<float> x(100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 13) % 23) / 11.0f - 1.0f;
  return x;
}

// config: devsim options "key=value;key=value" (nullptr: none).
RunResult run(const kite::ir::Model& ir, const char* backends, const char* config,
              bool strict = false, const char* path = KITE_TEST_PLUGIN_DIR) {
  RunResult r;
  const auto bytes = kite::test::serialize_or_die(ir);
  kite_model* model = nullptr;
  kite_session_options* o = nullptr;
  kite_session* s = nullptr;
  EXPECT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &model), KITE_OK);
  kite_session_options_create(&o);
  kite_session_options_set_backends(o, backends);
  kite_session_options_set_backend_path(o, path);
  kite_session_options_set_strict(o, strict ? 1 : 0);
  for (std::string rest = config ? config : ""; !rest.empty();) {
    const size_t semi = rest.find(';');
    const std::string item = rest.substr(0, semi);
    rest = semi == std::string::npos ? "" : rest.substr(semi + 1);
    const size_t eq = item.find('=');
    EXPECT_EQ(kite_session_options_set_backend_option(o, "devsim", item.substr(0, eq).c_str(),
                                                      item.substr(eq + 1).c_str()),
              KITE_OK);
  }
  r.status = kite_session_create(model, o, &s);
  r.error = kite_last_error();
  if (r.status == KITE_OK) {
    const auto x = input_values();
    EXPECT_EQ(kite_session_set_input(s, 0, x.data(), x.size() * 4), KITE_OK);
    r.status = kite_session_run(s);
    r.error = kite_last_error();
    r.y.resize(100);
    EXPECT_EQ(kite_session_get_output(s, 0, r.y.data(), 400), KITE_OK);
    int32_t n = 0;
    kite_session_get_node_count(s, &n);
    for (int32_t i = 0; i < n; ++i) {
      kite_node_placement p;
      kite_session_get_node_placement(s, i, &p);
      r.placement.push_back(p);
      r.reasons.push_back(p.reason);
      r.backends.push_back(p.backend);
    }
    int32_t t = -1;
    kite_session_get_transfer_count(s, &t);
    r.transfers = t;
  }
  kite_session_destroy(s);
  kite_session_options_destroy(o);
  kite_model_destroy(model);
  return r;
}

class Scheduler : public ::testing::Test {
 protected:
  void SetUp() override {
    reference_ = run(kite::test::conv_relu_add_model(false), "cpu", nullptr);
    ASSERT_EQ(reference_.status, KITE_OK) << reference_.error;
  }
  RunResult reference_;
};

TEST_F(Scheduler, DeviceBackendAcceptingEverythingRunsEverything) {
  const RunResult r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", "");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.backends, (std::vector<std::string>{"devsim", "devsim", "devsim"}));
  // x up once (Conv and Add both read the device copy), y down once.
  EXPECT_EQ(r.transfers, 2);
}

TEST_F(Scheduler, UnifiedDeviceNeedsNoTransfers) {
  const RunResult r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", "unified=1");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.transfers, 0);
}

TEST_F(Scheduler, DeclinedOpFallsBackToCpuWithTransfers) {
  const RunResult r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", "decline_ops=Relu");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.backends, (std::vector<std::string>{"devsim", "cpu", "devsim"}));
  EXPECT_NE(r.reasons[1].find("configured to decline Relu"), std::string::npos) << r.reasons[1];
  // x up, conv down (for Relu on cpu), relu up, y down.
  EXPECT_EQ(r.transfers, 4);
}

TEST_F(Scheduler, FusedNodeWithoutKernelRunsItsBody) {
  const RunResult fused = run(kite::test::conv_relu_add_model(true), "devsim,cpu", "decline_fused=1");
  ASSERT_EQ(fused.status, KITE_OK) << fused.error;
  EXPECT_EQ(fused.y, reference_.y);
  ASSERT_EQ(fused.placement.size(), 2u);
  EXPECT_EQ(fused.placement[0].fused, 1);
  EXPECT_EQ(fused.placement[0].decomposed, 1);
  EXPECT_EQ(fused.backends[0], "devsim");
  EXPECT_NE(fused.reasons[0].find("configured to decline fused nodes"), std::string::npos);
}

TEST_F(Scheduler, StrictModeNamesTheFallbackNodes) {
  RunResult r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", "decline_ops=Relu", true);
  EXPECT_EQ(r.status, KITE_ERROR_UNSUPPORTED);
  EXPECT_NE(r.error.find("strict mode"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("Relu 'relu0' -> cpu"), std::string::npos) << r.error;
  r = run(kite::test::conv_relu_add_model(true), "devsim,cpu", "decline_fused=1", true);
  EXPECT_EQ(r.status, KITE_ERROR_UNSUPPORTED);
  EXPECT_NE(r.error.find("FusedConv 'conv0+relu0' decomposed"), std::string::npos) << r.error;
  r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", "", true);
  EXPECT_EQ(r.status, KITE_OK) << r.error;
}

TEST_F(Scheduler, MissingPluginFallsBackOrFailsWhenStrict) {
  RunResult r = run(kite::test::conv_relu_add_model(false), "vulkan,cpu", nullptr, false);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.y, reference_.y);
  EXPECT_EQ(r.backends[0], "cpu");
  EXPECT_NE(r.reasons[0].find("backend 'vulkan' not found: no libkite_backend_vulkan.so"),
            std::string::npos) << r.reasons[0];
  r = run(kite::test::conv_relu_add_model(false), "vulkan,cpu", nullptr, true);
  EXPECT_EQ(r.status, KITE_ERROR_BACKEND);
  EXPECT_NE(r.error.find("libkite_backend_vulkan.so"), std::string::npos) << r.error;
}

TEST_F(Scheduler, PluginWithUnknownAbiIsRefusedNamingTheFile) {
  const RunResult r = run(kite::test::conv_relu_add_model(false), "badabi,cpu", nullptr);
  EXPECT_EQ(r.status, KITE_ERROR_BACKEND);
  EXPECT_NE(r.error.find("libkite_backend_badabi.so"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("ABI version 999 is not supported"), std::string::npos) << r.error;
}

TEST_F(Scheduler, PluginWithoutEntryPointIsRefused) {
  const RunResult r = run(kite::test::conv_relu_add_model(false), "noentry,cpu", nullptr);
  EXPECT_EQ(r.status, KITE_ERROR_BACKEND);
  EXPECT_NE(r.error.find("libkite_backend_noentry.so' does not export 'kite_backend_entry'"),
            std::string::npos) << r.error;
}

TEST_F(Scheduler, FileThatIsNotALibraryIsRefused) {
  char dir[] = "/tmp/kite_plugins_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/libkite_backend_junk.so";
  std::ofstream(path) << "not an ELF file\n";
  const RunResult r = run(kite::test::conv_relu_add_model(false), "junk,cpu", nullptr, false, dir);
  EXPECT_EQ(r.status, KITE_ERROR_BACKEND);
  EXPECT_NE(r.error.find("cannot load backend plugin '" + path + "'"), std::string::npos) << r.error;
  std::remove(path.c_str());
  rmdir(dir);
}

TEST_F(Scheduler, EnvironmentVariableFindsPlugins) {
  setenv("KITE_BACKEND_PATH", KITE_TEST_PLUGIN_DIR, 1);
  const RunResult r = run(kite::test::conv_relu_add_model(false), "devsim,cpu", "", false, "");
  unsetenv("KITE_BACKEND_PATH");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.backends[0], "devsim");
}

}  // namespace
