// Replays every file under tests/regressions/{loader,onnx} (inputs that once
// crashed a fuzz target, kept after the fix) and every seed of the fuzz
// corpora through the fuzz targets' own code (tests/fuzz/fuzz_harness.cpp),
// so the normal test run, and the asan preset's, proves they stay fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_harness.h"

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

TEST(RegressionReplay, LoaderCrashFiles) {
  size_t n = 0;
  replay(fs::path(KITE_REGRESSION_DIR) / "loader", kite::fuzz::run_loader_input, &n);
  RecordProperty("files", static_cast<int>(n));
}

TEST(RegressionReplay, OnnxCrashFiles) {
  size_t n = 0;
  replay(fs::path(KITE_REGRESSION_DIR) / "onnx", kite::fuzz::run_onnx_input, &n);
  RecordProperty("files", static_cast<int>(n));
}

TEST(RegressionReplay, LoaderSeedCorpus) {
  size_t n = 0;
  replay(fs::path(KITE_FUZZ_CORPUS_DIR) / "loader", kite::fuzz::run_loader_input, &n);
  EXPECT_GT(n, 0u) << "no seeds: run tests/fuzz/make_corpus.sh";
}

TEST(RegressionReplay, OnnxSeedCorpus) {
  size_t n = 0;
  replay(fs::path(KITE_FUZZ_CORPUS_DIR) / "onnx", kite::fuzz::run_onnx_input, &n);
  EXPECT_GT(n, 0u) << "no seeds: run tests/fuzz/make_corpus.sh";
}

}  // namespace
