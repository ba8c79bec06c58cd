// The loader against hostile files: each must be refused with the right
// status and a message that says what is wrong, and none may crash (this test
// also runs under the asan preset).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "kite/kite.h"
#include "kite/kite_generated.h"
#include "test_models.h"

namespace {

struct LoadResult {
  kite_status status;
  std::string message;
};

LoadResult load(const std::vector<uint8_t>& bytes) {
  kite_model* m = nullptr;
  kite_status s = kite_model_load_memory(bytes.data(), bytes.size(), &m);
  LoadResult r{s, kite_last_error()};
  kite_model_destroy(m);
  return r;
}

std::vector<uint8_t> good_bytes() { return kite::test::serialize_or_die(kite::test::add_relu_model()); }

kite::fb::Model* mutable_model(std::vector<uint8_t>& bytes) {
  return kite::fb::GetMutableModel(bytes.data());
}

TEST(Loader, AcceptsAGoodFile) {
  const auto bytes = good_bytes();
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(load(bytes).status, KITE_OK);
}

TEST(Loader, RejectsEmptyFile) {
  char path[] = "/tmp/kite_empty_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  kite_model* m = nullptr;
  EXPECT_EQ(kite_model_load_file(path, &m), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(std::string(kite_last_error()).find("empty"), std::string::npos) << kite_last_error();
  EXPECT_EQ(m, nullptr);
  std::remove(path);
  EXPECT_EQ(kite_model_load_memory(path, 0, &m), KITE_ERROR_INVALID_MODEL);
}

TEST(Loader, RejectsMissingFile) {
  kite_model* m = nullptr;
  EXPECT_EQ(kite_model_load_file("/nonexistent/model.kite", &m), KITE_ERROR_IO);
  EXPECT_NE(std::string(kite_last_error()).find("/nonexistent/model.kite"), std::string::npos);
}

TEST(Loader, RejectsRandomBytes) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> bytes(static_cast<size_t>(1 + rng() % 4096));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (trial % 2 == 0 && bytes.size() >= 8) std::memcpy(bytes.data() + 4, "KITE", 4);
    const LoadResult r = load(bytes);
    EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL) << "trial " << trial << ": " << r.message;
    EXPECT_FALSE(r.message.empty());
  }
}

TEST(Loader, RejectsTruncationAtEveryOffset) {
  const auto bytes = good_bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    const LoadResult r = load(cut);
    EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL) << "truncated to " << n << ": " << r.message;
  }
}

TEST(Loader, RejectsWrongIdentifier) {
  auto bytes = good_bytes();
  std::memcpy(bytes.data() + 4, "ONNX", 4);
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("file identifier is 'ONNX'"), std::string::npos) << r.message;
}

TEST(Loader, RejectsNewerMajorVersionNamingBoth) {
  auto bytes = good_bytes();
  ASSERT_TRUE(mutable_model(bytes)->mutate_format_major(KITE_FORMAT_MAJOR + 1));
  ASSERT_TRUE(mutable_model(bytes)->mutate_format_minor(3));
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_UNSUPPORTED_VERSION);
  const std::string newer = std::to_string(KITE_FORMAT_MAJOR + 1) + ".3";
  const std::string ours = std::to_string(KITE_FORMAT_MAJOR) + "." + std::to_string(KITE_FORMAT_MINOR);
  EXPECT_NE(r.message.find(newer), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(ours), std::string::npos) << r.message;
}

TEST(Loader, AcceptsNewerMinorVersion) {
  auto bytes = good_bytes();
  ASSERT_TRUE(mutable_model(bytes)->mutate_format_minor(KITE_FORMAT_MINOR + 7));
  EXPECT_EQ(load(bytes).status, KITE_OK);
}

TEST(Loader, RejectsTensorIndexOutOfRange) {
  kite::ir::Model m = kite::test::add_relu_model();
  m.main().nodes[1].inputs[0] = 99;
  const LoadResult r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("node 'relu0' input 0 refers to tensor 99, out of range"), std::string::npos)
      << r.message;
}

TEST(Loader, RejectsGraphOutputIndexOutOfRange) {
  kite::ir::Model m = kite::test::add_relu_model();
  m.main().outputs[0] = -5;
  const LoadResult r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("refers to tensor -5"), std::string::npos) << r.message;
}

TEST(Loader, RejectsBlobPastEndOfFile) {
  auto bytes = good_bytes();
  auto* blob = mutable_model(bytes)->mutable_blobs()->GetMutableObject(0);
  blob->mutate_offset((bytes.size() + 63) / 64 * 64);  // aligned, beyond the last byte
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("past the end of the file"), std::string::npos) << r.message;

  auto bytes2 = good_bytes();
  // An offset near 2^64 must not wrap around in the range check.
  mutable_model(bytes2)->mutable_blobs()->GetMutableObject(0)->mutate_offset(~0ull - 63);
  const LoadResult r2 = load(bytes2);
  EXPECT_EQ(r2.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r2.message.find("past the end of the file"), std::string::npos) << r2.message;
}

TEST(Loader, RejectsBlobSizeNotMatchingShape) {
  auto bytes = good_bytes();
  mutable_model(bytes)->mutable_blobs()->GetMutableObject(0)->mutate_size(8);
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("'bias'"), std::string::npos) << r.message;
}

TEST(Loader, RejectsArenaOffsetPastArena) {
  auto bytes = good_bytes();
  auto* plan = mutable_model(bytes)->mutable_plan();
  // Tensor 2 ('sum') moved just past the arena's end.
  plan->mutable_offsets()->Mutate(2, plan->arena_size());
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("'sum' arena range"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("past the arena's end"), std::string::npos) << r.message;
}

TEST(Loader, RejectsNegativeAndOverflowingShapes) {
  kite::ir::Model m = kite::test::add_relu_model();
  m.tensors[2].shape = {2, -3};
  LoadResult r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("'sum' has negative dim -3"), std::string::npos) << r.message;

  m = kite::test::add_relu_model();
  m.tensors[2].shape = {1ll << 40, 1ll << 40};
  r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("overflows"), std::string::npos) << r.message;
}

TEST(Loader, RejectsUnknownDtype) {
  // Patched in the file: 42 is no kite_dtype (and no valid enum value in C++).
  auto bytes = good_bytes();
  ASSERT_TRUE(mutable_model(bytes)->mutable_tensors()->GetMutableObject(2)->mutate_dtype(
      static_cast<kite::fb::DType>(42)));
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("unknown dtype 42"), std::string::npos) << r.message;
}

TEST(Loader, RejectsFileSizeMismatch) {
  auto bytes = good_bytes();
  bytes.resize(bytes.size() + 64, 0);
  const LoadResult r = load(bytes);
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("header says"), std::string::npos) << r.message;
}

TEST(Loader, RejectsSubgraphPointingBackwards) {
  kite::ir::Model m = kite::test::add_relu_model();
  // Graph 0 is the main graph itself: following it would recurse forever.
  m.main().nodes[1].attrs.push_back(kite::ops::graph_attr("then_branch", 0));
  const LoadResult r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("refers to graph 0"), std::string::npos) << r.message;
}

// A file whose shapes are well-formed but wrong for the op is caught at
// load, against the op rules (kite_ops), naming the node: no backend (a
// plugin without the op library) ever sees it.
TEST(Loader, LoaderRejectsShapeInconsistentWithOp) {
  kite::ir::Model m = kite::test::add_relu_model();
  m.tensors[3].shape = {3, 2};  // Relu output transposed
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err));
  const LoadResult r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("relu0"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("Relu"), std::string::npos) << r.message;
}

// The same for a fused node: its body is checked node by node, and it must
// have one.
TEST(Loader, LoaderRejectsFusedNodeWhoseBodyBreaksTheOpRules) {
  kite::ir::Model m = kite::test::conv_relu_add_model(true);
  m.tensors[static_cast<size_t>(m.find_tensor("conv"))].shape = {1, 4, 4, 4};  // Conv with pads 1 makes 5x5
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err));
  LoadResult r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("conv0+relu0"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("conv0"), std::string::npos) << r.message;

  m = kite::test::conv_relu_add_model(true);
  m.main().nodes[0].body.clear();
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err));
  r = load(kite::test::serialize_or_die(m));
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(r.message.find("has no body"), std::string::npos) << r.message;
}

}  // namespace
