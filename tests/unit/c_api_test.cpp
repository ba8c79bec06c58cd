// The C API end to end on a tiny model, and its answers to misuse: NULL
// handles, wrong names, wrong sizes, out-of-range indices.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>

#include "kite/kite.h"
#include "kite/kite.hpp"
#include "test_models.h"

namespace {

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = kite::test::serialize_or_die(kite::test::add_relu_model());
    ASSERT_FALSE(bytes_.empty());
    ASSERT_EQ(kite_model_load_memory(bytes_.data(), bytes_.size(), &model_), KITE_OK)
        << kite_last_error();
    ASSERT_EQ(kite_session_create(model_, nullptr, &session_), KITE_OK) << kite_last_error();
  }
  void TearDown() override {
    kite_session_destroy(session_);
    kite_model_destroy(model_);
  }
  std::vector<uint8_t> bytes_;
  kite_model* model_ = nullptr;
  kite_session* session_ = nullptr;
};

std::string last() { return kite_last_error(); }

TEST(CApiVersion, MacroMatchesLibrary) {
  EXPECT_EQ(kite_version_number(), KITE_VERSION_NUMBER);
  EXPECT_STREQ(kite_version_string(), KITE_VERSION_STRING);
  EXPECT_STREQ(kite_status_string(KITE_OK), "ok");
  EXPECT_STREQ(kite_status_string(KITE_ERROR_SIZE_MISMATCH), "size mismatch");
  EXPECT_STREQ(kite_status_string(static_cast<kite_status>(999)), "unknown status");
  EXPECT_EQ(kite_dtype_size(KITE_DTYPE_FLOAT32), 4u);
  EXPECT_EQ(kite_dtype_size(KITE_DTYPE_INT64), 8u);
  EXPECT_EQ(kite_dtype_size(static_cast<kite_dtype>(77)), 0u);
}

TEST_F(CApi, RunsAndComputesReluOfSum) {
  int32_t n_in = 0, n_out = 0;
  ASSERT_EQ(kite_session_get_input_count(session_, &n_in), KITE_OK);
  ASSERT_EQ(kite_session_get_output_count(session_, &n_out), KITE_OK);
  EXPECT_EQ(n_in, 1);
  EXPECT_EQ(n_out, 1);
  kite_tensor_info info;
  ASSERT_EQ(kite_session_get_input_info(session_, 0, &info), KITE_OK);
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, KITE_DTYPE_FLOAT32);
  ASSERT_EQ(info.rank, 2);
  EXPECT_EQ(info.shape[0], 2);
  EXPECT_EQ(info.shape[1], 3);
  EXPECT_EQ(info.byte_size, 24u);

  const float x[6] = {0.5f, 0.5f, 0.5f, -2.0f, -0.25f, -1.5f};
  ASSERT_EQ(kite_session_set_input_by_name(session_, "x", x, sizeof(x)), KITE_OK);
  ASSERT_EQ(kite_session_run(session_), KITE_OK) << last();
  float y[6];
  ASSERT_EQ(kite_session_get_output_by_name(session_, "y", y, sizeof(y)), KITE_OK);
  // relu(x + {-1, 0, 1}), exact in float32.
  const float expected[6] = {0.0f, 0.5f, 1.5f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], expected[i]) << i;

  // Direct pointers see the same arena.
  void* in_ptr = nullptr;
  const void* out_ptr = nullptr;
  ASSERT_EQ(kite_session_get_input_pointer(session_, 0, &in_ptr), KITE_OK);
  ASSERT_EQ(kite_session_get_output_pointer(session_, 0, &out_ptr), KITE_OK);
  static_cast<float*>(in_ptr)[0] = 3.0f;
  ASSERT_EQ(kite_session_run(session_), KITE_OK);
  EXPECT_EQ(static_cast<const float*>(out_ptr)[0], 2.0f);
}

TEST_F(CApi, ModelInfoWithoutSessionMatchesSessionInfo) {
  int32_t n_in = 0, n_out = 0;
  ASSERT_EQ(kite_model_get_input_count(model_, &n_in), KITE_OK);
  ASSERT_EQ(kite_model_get_output_count(model_, &n_out), KITE_OK);
  EXPECT_EQ(n_in, 1);
  EXPECT_EQ(n_out, 1);
  kite_tensor_info m, s;
  ASSERT_EQ(kite_model_get_input_info(model_, 0, &m), KITE_OK);
  ASSERT_EQ(kite_session_get_input_info(session_, 0, &s), KITE_OK);
  EXPECT_STREQ(m.name, "x");
  EXPECT_STREQ(m.name, s.name);
  EXPECT_EQ(m.dtype, s.dtype);
  ASSERT_EQ(m.rank, 2);
  EXPECT_EQ(m.shape[0], 2);
  EXPECT_EQ(m.shape[1], 3);
  EXPECT_EQ(m.byte_size, s.byte_size);
  ASSERT_EQ(kite_model_get_output_info(model_, 0, &m), KITE_OK);
  EXPECT_STREQ(m.name, "y");
  EXPECT_EQ(m.byte_size, 24u);

  EXPECT_EQ(kite_model_get_input_info(model_, 1, &m), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("input index 1 out of range (1 inputs)"), std::string::npos) << last();
  EXPECT_EQ(kite_model_get_output_info(model_, -1, &m), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_model_get_input_count(nullptr, &n_in), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_model_get_output_info(nullptr, 0, &m), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_model_get_input_info(model_, 0, nullptr), KITE_ERROR_INVALID_ARGUMENT);
}

TEST_F(CApi, NullHandlesAreErrorsNotCrashes) {
  int32_t n = 0;
  kite_tensor_info info;
  float buf[6] = {0};
  EXPECT_EQ(kite_session_run(nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("session is NULL"), std::string::npos) << last();
  EXPECT_EQ(kite_session_get_input_count(nullptr, &n), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_get_input_count(session_, nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_get_input_info(nullptr, 0, &info), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_set_input(nullptr, 0, buf, sizeof(buf)), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_set_input(session_, 0, nullptr, 24), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("'x'"), std::string::npos) << last();
  EXPECT_EQ(kite_session_get_output(session_, 0, nullptr, 24), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_set_input_by_name(session_, nullptr, buf, 24), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_create(nullptr, nullptr, &session_), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("model is NULL"), std::string::npos) << last();
  kite_model* m = nullptr;
  EXPECT_EQ(kite_model_load_file(nullptr, &m), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_model_load_memory(nullptr, 10, &m), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_model_load_memory(bytes_.data(), bytes_.size(), nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_options_set_backends(nullptr, "cpu"), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_session_options_set_threads(nullptr, 2), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_model_get_format_version(nullptr, nullptr, nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kite_model_get_producer(nullptr), "");
  // Destroying NULL is a no-op.
  kite_session_destroy(nullptr);
  kite_model_destroy(nullptr);
  kite_session_options_destroy(nullptr);
}

TEST_F(CApi, WrongNamesListTheRealOnes) {
  float buf[6] = {0};
  EXPECT_EQ(kite_session_set_input_by_name(session_, "image", buf, sizeof(buf)), KITE_ERROR_NOT_FOUND);
  EXPECT_NE(last().find("no input 'image'"), std::string::npos) << last();
  EXPECT_NE(last().find("'x'"), std::string::npos) << last();
  EXPECT_EQ(kite_session_get_output_by_name(session_, "logits", buf, sizeof(buf)), KITE_ERROR_NOT_FOUND);
  EXPECT_NE(last().find("'y'"), std::string::npos) << last();
}

TEST_F(CApi, WrongSizesAndIndices) {
  float buf[7] = {0};
  EXPECT_EQ(kite_session_set_input(session_, 0, buf, 7 * sizeof(float)), KITE_ERROR_SIZE_MISMATCH);
  EXPECT_NE(last().find("takes 24 bytes, got 28"), std::string::npos) << last();
  EXPECT_EQ(kite_session_get_output(session_, 0, buf, 4), KITE_ERROR_SIZE_MISMATCH);
  EXPECT_NE(last().find("holds 24 bytes"), std::string::npos) << last();
  EXPECT_EQ(kite_session_set_input(session_, 1, buf, 24), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("input index 1 out of range"), std::string::npos) << last();
  EXPECT_EQ(kite_session_set_input(session_, -1, buf, 24), KITE_ERROR_INVALID_ARGUMENT);
  kite_tensor_info info;
  EXPECT_EQ(kite_session_get_output_info(session_, 5, &info), KITE_ERROR_INVALID_ARGUMENT);
  kite_node_placement p;
  EXPECT_EQ(kite_session_get_node_placement(session_, 2, &p), KITE_ERROR_INVALID_ARGUMENT);
}

TEST_F(CApi, SuccessClearsLastError) {
  EXPECT_EQ(kite_session_run(nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(last().empty());
  int32_t n = 0;
  EXPECT_EQ(kite_session_get_input_count(session_, &n), KITE_OK);
  EXPECT_EQ(last(), "");
}

TEST_F(CApi, PlacementNamesTheBackend) {
  int32_t n = 0;
  ASSERT_EQ(kite_session_get_node_count(session_, &n), KITE_OK);
  ASSERT_EQ(n, 2);
  kite_node_placement p;
  ASSERT_EQ(kite_session_get_node_placement(session_, 1, &p), KITE_OK);
  EXPECT_STREQ(p.node_name, "relu0");
  EXPECT_STREQ(p.op, "Relu");
  EXPECT_STREQ(p.backend, "cpu");
  EXPECT_EQ(p.fused, 0);
  EXPECT_EQ(p.decomposed, 0);
}

TEST_F(CApi, UnknownBackendFallsBackOrFailsWhenStrict) {
  kite_session_options* o = nullptr;
  ASSERT_EQ(kite_session_options_create(&o), KITE_OK);
  ASSERT_EQ(kite_session_options_set_backends(o, "warp-drive,cpu"), KITE_OK);
  ASSERT_EQ(kite_session_options_set_backend_path(o, "/nonexistent"), KITE_OK);
  EXPECT_EQ(kite_session_options_set_threads(o, -3), KITE_ERROR_INVALID_ARGUMENT);
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(model_, o, &s), KITE_OK) << last();
  kite_node_placement p;
  ASSERT_EQ(kite_session_get_node_placement(s, 0, &p), KITE_OK);
  EXPECT_STREQ(p.backend, "cpu");
  EXPECT_NE(std::string(p.reason).find("backend 'warp-drive' not found"), std::string::npos) << p.reason;
  kite_session_destroy(s);
  s = nullptr;
  ASSERT_EQ(kite_session_options_set_strict(o, 1), KITE_OK);
  EXPECT_EQ(kite_session_create(model_, o, &s), KITE_ERROR_BACKEND);
  EXPECT_NE(last().find("libkite_backend_warp-drive.so"), std::string::npos) << last();
  EXPECT_EQ(s, nullptr);
  kite_session_options_destroy(o);
}

TEST_F(CApi, SessionOutlivesModelHandle) {
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(model_, nullptr, &s), KITE_OK);
  kite_model_destroy(model_);
  model_ = nullptr;
  const float x[6] = {1, 1, 1, 1, 1, 1};
  EXPECT_EQ(kite_session_set_input(s, 0, x, sizeof(x)), KITE_OK);
  EXPECT_EQ(kite_session_run(s), KITE_OK);
  kite_session_destroy(s);
}

TEST_F(CApi, SessionsOnSeveralThreadsShareOneModel) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t]() {
      kite_session* s = nullptr;
      if (kite_session_create(model_, nullptr, &s) != KITE_OK) return;
      const float v = static_cast<float>(t);
      const float x[6] = {v, v, v, v, v, v};
      float y[6];
      bool good = true;
      for (int iter = 0; iter < 50 && good; ++iter) {
        good = kite_session_set_input(s, 0, x, sizeof(x)) == KITE_OK &&
               kite_session_run(s) == KITE_OK &&
               kite_session_get_output(s, 0, y, sizeof(y)) == KITE_OK && y[2] == v + 1.0f;
      }
      ok[static_cast<size_t>(t)] = good ? 1 : 0;
      kite_session_destroy(s);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[static_cast<size_t>(t)], 1) << "thread " << t;
}

TEST(CppWrapper, RaiiAndExceptions) {
  const auto bytes = kite::test::serialize_or_die(kite::test::add_relu_model());
  kite::Model model = kite::Model::load_memory(bytes.data(), bytes.size());
  EXPECT_EQ(model.producer(), "kite-test");
  kite::SessionOptions options;
  options.threads(1).backends("cpu");
  kite::Session session(model, &options);
  EXPECT_EQ(session.input_info(0).shape, (std::vector<int64_t>{2, 3}));
  session.set_input<float>("x", {1, 2, 3, 4, 5, 6});
  session.run();
  const std::vector<float> y = session.output<float>("y");
  EXPECT_EQ(y, (std::vector<float>{0, 2, 4, 3, 5, 7}));
  try {
    session.set_input<float>("x", {1, 2});
    FAIL() << "expected kite::Error";
  } catch (const kite::Error& e) {
    EXPECT_EQ(e.status(), KITE_ERROR_SIZE_MISMATCH);
    EXPECT_NE(std::string(e.what()).find("takes 24 bytes, got 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kite::Model::load_memory("nope", 4), kite::Error);
}

}  // namespace
