// The converter's C API (kite/converter.h): conversion with a report, the
// statuses of its failures, and its answers to misuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "kite/converter.h"
#include "kite/kite.h"

namespace {

std::string last() { return kite_converter_last_error(); }

std::string digits_onnx() { return std::string(KITE_SOURCE_DIR) + "/models/digits/digits_cnn.onnx"; }

std::string out_path(const char* name) {
  return ::testing::TempDir() + "converter_c_api_" + name;
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

TEST(ConverterCApi, ConvertsWithReportAndTheFileLoads) {
  const std::string out = out_path("digits.kite");
  std::remove(out.c_str());
  kite_convert_options* o = nullptr;
  ASSERT_EQ(kite_convert_options_create(&o), KITE_OK);
  ASSERT_EQ(kite_convert_options_set_opt_level(o, 2), KITE_OK);
  char* report = nullptr;
  ASSERT_EQ(kite_convert_file(digits_onnx().c_str(), out.c_str(), o, &report), KITE_OK) << last();
  kite_convert_options_destroy(o);
  ASSERT_NE(report, nullptr);
  const std::string json = report;
  kite_converter_free_string(report);
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"fusions\": {\"Conv+Relu\": 2}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"opt_level\": 2"), std::string::npos);
  EXPECT_EQ(last(), "");

  kite_model* model = nullptr;
  ASSERT_EQ(kite_model_load_file(out.c_str(), &model), KITE_OK) << kite_last_error();
  EXPECT_EQ(std::string(kite_model_get_producer(model)),
            std::string("kite-convert ") + KITE_VERSION_STRING);
  kite_model_destroy(model);
  EXPECT_EQ(kite_converter_version_number(), KITE_VERSION_NUMBER);
}

TEST(ConverterCApi, DefaultsWithoutOptionsOrReport) {
  const std::string out = out_path("defaults.kite");
  ASSERT_EQ(kite_convert_file(digits_onnx().c_str(), out.c_str(), nullptr, nullptr), KITE_OK)
      << last();
  EXPECT_TRUE(exists(out));
}

TEST(ConverterCApi, FailuresHaveTheirStatusAndWriteNothing) {
  const std::string out = out_path("never.kite");
  std::remove(out.c_str());
  char* report = nullptr;
  EXPECT_EQ(kite_convert_file("/nonexistent/model.onnx", out.c_str(), nullptr, &report),
            KITE_ERROR_IO);
  EXPECT_NE(last().find("cannot open '/nonexistent/model.onnx'"), std::string::npos) << last();

  const std::string not_onnx = std::string(KITE_SOURCE_DIR) + "/README.md";
  EXPECT_EQ(kite_convert_file(not_onnx.c_str(), out.c_str(), nullptr, &report),
            KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(last(), "");

  kite_convert_options* o = nullptr;
  ASSERT_EQ(kite_convert_options_create(&o), KITE_OK);
  ASSERT_EQ(kite_convert_options_set_memory_budget(o, 64), KITE_OK);
  EXPECT_EQ(kite_convert_file(digits_onnx().c_str(), out.c_str(), o, &report),
            KITE_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(last().find("memory budget 64 bytes not met"), std::string::npos) << last();
  // A ratio of the lower bound: 0.001x cannot be met either, and says so.
  ASSERT_EQ(kite_convert_options_set_memory_budget_ratio(o, 0.001), KITE_OK);
  EXPECT_EQ(kite_convert_file(digits_onnx().c_str(), out.c_str(), o, &report),
            KITE_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(last().find("(0.001x the lower bound"), std::string::npos) << last();
  kite_convert_options_destroy(o);

  EXPECT_EQ(report, nullptr);
  EXPECT_FALSE(exists(out));
  EXPECT_EQ(kite_convert_file(digits_onnx().c_str(), "/nonexistent/dir/x.kite", nullptr, &report),
            KITE_ERROR_IO);
  EXPECT_EQ(report, nullptr);
}

TEST(ConverterCApi, MisuseIsAnErrorNotACrash) {
  kite_convert_options* o = nullptr;
  EXPECT_EQ(kite_convert_options_create(nullptr), KITE_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(kite_convert_options_create(&o), KITE_OK);
  const int64_t dims[4] = {1, 1, 8, 8};
  const int64_t negative[2] = {1, -3};
  EXPECT_EQ(kite_convert_options_set_input_shape(nullptr, "x", dims, 4), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_input_shape(o, nullptr, dims, 4), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_input_shape(o, "x", nullptr, 4), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_input_shape(o, "x", dims, -1), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_input_shape(o, "x", dims, KITE_MAX_RANK + 1),
            KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_input_shape(o, "x", negative, 2), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("input 'x': dimension 1 is -3"), std::string::npos) << last();
  EXPECT_EQ(kite_convert_options_set_input_shape(o, "x", dims, 4), KITE_OK);
  EXPECT_EQ(kite_convert_options_set_opt_level(o, 3), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_opt_level(nullptr, 1), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_disable_pass(o, "no_such_pass"), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("unknown pass 'no_such_pass' (passes: "), std::string::npos) << last();
  EXPECT_EQ(kite_convert_options_disable_pass(o, nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_memory_budget(nullptr, 1), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_memory_budget_ratio(nullptr, 0.5), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_memory_budget_ratio(o, -0.5), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_memory_budget_ratio(o, std::nan("")), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("is not in [0, 1e6]"), std::string::npos) << last();
  EXPECT_EQ(kite_convert_options_set_inplace(nullptr, 1), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_precision(nullptr, "fp16", 1e-2), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_precision(o, "half", 1e-2), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("precision 'half' (expected fp32, fp16 or mixed)"), std::string::npos) << last();
  EXPECT_EQ(kite_convert_options_set_precision(o, nullptr, 1e-2), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_precision(o, "mixed", 0.0), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_precision(o, "mixed", std::nan("")), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_precision(o, "mixed", 1e-2), KITE_OK);
  EXPECT_EQ(kite_convert_options_set_pack_for(nullptr, "host"), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_pack_for(o, nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_pack_for(o, ","), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_options_set_pack_for(o, "x86-avx512,riscv"), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last().find("unknown packing target 'riscv' (known: x86-avx512"), std::string::npos) << last();
  EXPECT_EQ(kite_convert_options_set_pack_for(o, "x86-avx2,arm64-neon"), KITE_OK);
  EXPECT_EQ(kite_convert_file(nullptr, "x.kite", o, nullptr), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kite_convert_file("x.onnx", nullptr, o, nullptr), KITE_ERROR_INVALID_ARGUMENT);
  kite_convert_options_destroy(o);
  kite_convert_options_destroy(nullptr);
  kite_converter_free_string(nullptr);
}

}  // namespace
