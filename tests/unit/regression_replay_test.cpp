// Replays every file under tests/regressions/{loader,onnx} (inputs that once
// crashed a fuzz target, kept after the fix) and every seed of the fuzz
// corpora through the fuzz targets' own code (tests/fuzz/fuzz_harness.cpp),
// so the normal test run, and the asan preset's, proves they stay fixed.
// A folder that is missing or empty fails its test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_harness.h"
#include "kite/kite.h"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name == "README.md" || name == ".gitkeep") continue;
    out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// libFuzzer never passes a NULL pointer: an empty file is replayed as a
// one-past-nothing buffer of size 0, like the fuzzer's empty input.
void replay(const fs::path& dir, int (*target)(const uint8_t*, size_t), size_t* count) {
  for (const fs::path& p : files_in(dir)) {
    SCOPED_TRACE(p.string());
    std::vector<uint8_t> bytes = read_all(p);
    static const uint8_t empty = 0;
    target(bytes.empty() ? &empty : bytes.data(), bytes.size());
    ++*count;
  }
}

// Each folder must hold at least one file: a folder that was renamed, moved
// or emptied would otherwise make these tests pass without replaying anything.
void replay_folder(const fs::path& dir, int (*target)(const uint8_t*, size_t), const char* fix) {
  ASSERT_TRUE(fs::is_directory(dir)) << dir.string() << " is missing; " << fix;
  size_t n = 0;
  replay(dir, target, &n);
  EXPECT_GT(n, 0u) << dir.string() << " holds no files to replay; " << fix;
  std::printf("replayed %zu file(s) from %s\n", n, dir.string().c_str());
  ::testing::Test::RecordProperty("files", static_cast<int>(n));
}

constexpr const char* kCrashFix =
    "the fuzzers' crash files belong there (tests/regressions/README.md)";
constexpr const char* kSeedFix = "run tests/fuzz/make_corpus.sh";

TEST(RegressionReplay, LoaderCrashFiles) {
  replay_folder(fs::path(KITE_REGRESSION_DIR) / "loader", kite::fuzz::run_loader_input, kCrashFix);
}

TEST(RegressionReplay, OnnxCrashFiles) {
  replay_folder(fs::path(KITE_REGRESSION_DIR) / "onnx", kite::fuzz::run_onnx_input, kCrashFix);
}

TEST(RegressionReplay, LoaderSeedCorpus) {
  replay_folder(fs::path(KITE_FUZZ_CORPUS_DIR) / "loader", kite::fuzz::run_loader_input, kSeedFix);
}

TEST(RegressionReplay, OnnxSeedCorpus) {
  replay_folder(fs::path(KITE_FUZZ_CORPUS_DIR) / "onnx", kite::fuzz::run_onnx_input, kSeedFix);
}

// The seeds of the ops issue 19 added: the verifier takes them (op types are
// strings, so the format version did not change; docs/FORMAT.md) and the CPU
// backend prepares and runs them (inputs zero-filled).
TEST(RegressionReplay, Issue19OpSeedsLoadAndRun) {
  const char* const seeds[] = {"isnan_f32", "isinf_both", "mod_int64_floor", "trilu_upper",
                               "cumsum_axis1", "gather_elements_axis0", "scatter_elements_axis0",
                               "gather_nd_elements", "scatter_nd_rows", "depth_to_space_dcr",
                               "space_to_depth_b2", "topk_largest", "onehot_default",
                               "einsum_attention_scores"};
  for (const char* seed : seeds) {
    const std::string path = (fs::path(KITE_FUZZ_CORPUS_DIR) / "loader" / (std::string(seed) + ".kite")).string();
    kite_model* model = nullptr;
    ASSERT_EQ(kite_model_load_file(path.c_str(), &model), KITE_OK) << seed << ": " << kite_last_error();
    kite_session* session = nullptr;
    ASSERT_EQ(kite_session_create(model, nullptr, &session), KITE_OK) << seed << ": " << kite_last_error();
    // Zero inputs: Mod's divisors are constants, every index is then 0.
    int32_t inputs = 0;
    ASSERT_EQ(kite_model_get_input_count(model, &inputs), KITE_OK);
    for (int32_t i = 0; i < inputs; ++i) {
      kite_tensor_info info = {};
      ASSERT_EQ(kite_model_get_input_info(model, i, &info), KITE_OK);
      const std::vector<char> zeros(static_cast<size_t>(info.byte_size), 0);
      ASSERT_EQ(kite_session_set_input(session, i, zeros.data(), zeros.size()), KITE_OK) << seed;
    }
    EXPECT_EQ(kite_session_run(session), KITE_OK) << seed << ": " << kite_last_error();
    kite_session_destroy(session);
    kite_model_destroy(model);
  }
}

// The half-precision seed (kite-convert --precision fp16 of the digits CNN,
// format 1.0 unchanged: docs/PRECISION.md) loads, runs on the CPU (fp16
// storage, fp32 arithmetic) and gives the fp32 seed's logits within
// 1e-2 x max|logit| (kite-convert's default --fp16-tolerance; measured
// about 5e-4 on the model set).
TEST(RegressionReplay, HalfPrecisionSeedMatchesFp32) {
  std::vector<float> image(64);
  for (size_t k = 0; k < image.size(); ++k) image[k] = static_cast<float>(std::sin(0.7 * static_cast<double>(k)));
  std::vector<std::vector<float>> logits;
  for (const char* seed : {"digits_cnn", "digits_cnn_fp16"}) {
    const std::string path = (fs::path(KITE_FUZZ_CORPUS_DIR) / "loader" / (std::string(seed) + ".kite")).string();
    kite_model* model = nullptr;
    ASSERT_EQ(kite_model_load_file(path.c_str(), &model), KITE_OK) << seed << ": " << kite_last_error();
    kite_session* session = nullptr;
    ASSERT_EQ(kite_session_create(model, nullptr, &session), KITE_OK) << seed << ": " << kite_last_error();
    ASSERT_EQ(kite_session_set_input(session, 0, image.data(), image.size() * sizeof(float)), KITE_OK)
        << seed << ": " << kite_last_error();
    ASSERT_EQ(kite_session_run(session), KITE_OK) << seed << ": " << kite_last_error();
    std::vector<float> out(10);
    ASSERT_EQ(kite_session_get_output(session, 0, out.data(), out.size() * sizeof(float)), KITE_OK)
        << seed << ": " << kite_last_error();
    logits.push_back(out);
    kite_session_destroy(session);
    kite_model_destroy(model);
  }
  float peak = 0;
  for (float v : logits[0]) peak = std::max(peak, std::fabs(v));
  ASSERT_GT(peak, 0.0f);
  for (size_t k = 0; k < logits[0].size(); ++k) EXPECT_NEAR(logits[1][k], logits[0][k], 1e-2f * peak) << k;
}

}  // namespace
