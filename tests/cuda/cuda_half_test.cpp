// float16 nodes (files converted with kite-convert --precision fp16|mixed)
// on the CUDA backend: fp16 storage, fp32 arithmetic (the _f16 kernels of
// kernels/kernel_list.h), against the CPU backend, which runs them the same
// way (backends/cpu/half_bridge.h). Strict sessions: a float16 node the
// backend declines fails the test.
//
// Tolerance, per element: |a - b| <= 2^-10 * max(|a|, |b|) + 1e-4 * max|ref|
// + 2^-24. Both sides read the same halves, compute in float and round the
// result once to half (ties to even), so the float results differ only by
// the order of their float32 sums (the 1e-4 x max|ref| of cuda_ops_test.cpp:
// sums of up to ~10^3 terms) and, where they straddle a rounding boundary,
// the halves then differ by one ulp of the output: at most 2^-10 of its
// magnitude (2^-24 for a subnormal).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cuda_cases.h"
#include "kite/ops/half.h"

namespace kite::cudatest {
namespace {

constexpr double kSumSlack = 1e-4;

// The worst element's |a - b| over its bound above (<= 1 passes); float16
// outputs only, others must match exactly.
double half_error(const Result& ref, const Result& got, std::string* where) {
  if (ref.outputs.size() != got.outputs.size()) {
    *where = "output count differs";
    return 2.0;
  }
  double worst = 0.0;
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    if (ref.outputs[k].size() != got.outputs[k].size() || ref.dtypes[k] != got.dtypes[k]) {
      *where = "output " + std::to_string(k) + " size or dtype differs";
      return 2.0;
    }
    if (ref.dtypes[k] != KITE_DTYPE_FLOAT16) {
      if (ref.outputs[k] != got.outputs[k]) {
        *where = "output " + std::to_string(k) + " (not float16) differs";
        return 2.0;
      }
      continue;
    }
    const size_t n = ref.outputs[k].size() / 2;
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      uint16_t ha, hb;
      std::memcpy(&ha, ref.outputs[k].data() + 2 * i, 2);
      std::memcpy(&hb, got.outputs[k].data() + 2 * i, 2);
      a[i] = kite::half_to_float(ha);
      b[i] = kite::half_to_float(hb);
    }
    double max_ref = 0.0;
    for (float v : a) {
      if (!std::isnan(v)) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
    }
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(a[i]) != std::isnan(b[i])) {
        *where = "output " + std::to_string(k) + " element " + std::to_string(i) + ": NaN on one side only";
        return 2.0;
      }
      if (std::isnan(a[i])) continue;
      const double big = std::max(std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i])));
      const double bound = std::ldexp(big, -10) + kSumSlack * max_ref + std::ldexp(1.0, -24);
      const double e = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])) / bound;
      if (e > worst) {
        worst = e;
        *where = "output " + std::to_string(k) + " element " + std::to_string(i) + ": " + std::to_string(a[i]) +
                 " vs " + std::to_string(b[i]);
      }
    }
  }
  return worst;
}

// Runs g (built with use_float16) on the CPU and the backend under test;
// every node must run on the backend, float16 nodes with the note of
// kite/backend.h's supports2.
void check(Graph& g, const Options& options = {}) {
  const Result ref = run(g, "cpu");
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  const Result got = run(g, backend(), options);
  ASSERT_EQ(got.status, KITE_OK) << got.error;
  for (size_t i = 0; i < got.placement.size(); ++i) EXPECT_EQ(got.placement[i], backend()) << "node " << i;
  std::string where;
  EXPECT_LE(half_error(ref, got, &where), 1.0) << where;
}

// ---- convolutions ----------------------------------------------------------

// A graph of float16 tensors.
struct HalfGraph : Graph {
  HalfGraph() { use_float16(); }
};

// A case of the shared sweeps (cuda_cases.h), built with float16 tensors.
void check_case(Graph& g, const std::string& label) {
  SCOPED_TRACE(label);
  check(g);
}

TEST(CudaHalfConv, Shapes) { sweep_convs(true, check_case); }

TEST(CudaHalfConv, FusedActivations) { sweep_fused_convs(true, check_case); }

TEST(CudaHalfConv, LeanModeAndTheNote) {
  // cuDNN is float32: a float16 convolution is Kite's own kernel whatever
  // the conv option says, and its placement says how it runs.
  for (const char* conv : {"auto", "own"}) {
    SCOPED_TRACE(conv);
    HalfGraph g;
    conv_graph(g, {{1, 16, 15, 15}, {40, 16, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true}, "Relu");
    check(g, {{"conv", conv}});
    const Result r = run(g, backend(), {{"conv", conv}});
    ASSERT_EQ(r.status, KITE_OK) << r.error;
    ASSERT_EQ(r.reasons.size(), 1u);
    EXPECT_NE(r.reasons[0].find("fp16 storage, fp32 arithmetic"), std::string::npos) << r.reasons[0];
  }
}

// ---- matrix products ---------------------------------------------------------

TEST(CudaHalfGemm, MatMulShapes) { sweep_matmuls(true, check_case); }

TEST(CudaHalfGemm, GemmAttributes) { sweep_gemms(true, check_case); }

TEST(CudaHalfGemm, FusedMatMulAndGemm) { sweep_fused_products(true, check_case); }

// ---- elementwise ------------------------------------------------------------

TEST(CudaHalfElementwise, BinaryBroadcasting) {
  sweep_binary(true, check_case);
  HalfGraph prelu;
  prelu.op("PRelu", {prelu.input({1, 4, 5, 5}), prelu.weight({4, 1, 1})});
  check(prelu);
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    SCOPED_TRACE(op);
    HalfGraph g;
    g.op(op, {g.input({2, 3, 4}), g.input({4}), g.input({3, 1})});
    check(g);
  }
}

TEST(CudaHalfElementwise, Unary) {
  sweep_unary(true, check_case);
  for (const char* approximate : {"none", "tanh"}) {
    HalfGraph gelu;
    const int x = gelu.input({5, 40}, -4.0f, 4.0f);
    gelu.begin_body();
    const int y = gelu.op("Gelu", {x}, {as("approximate", approximate)});
    gelu.fuse("Gelu", std::string(approximate) == "none" ? "Gelu" : "Gelu(tanh)", {x}, {as("approximate", approximate)}, {y});
    check(gelu);
  }
}

TEST(CudaHalfElementwise, MixedFloatTensorsDecline) {
  // Pow may raise float16 to a float32 exponent (ONNX's T1, T2); the CUDA
  // kernels take a node's float tensors all of one dtype, so it declines,
  // naming the tensor, and the node runs on the CPU.
  HalfGraph g;
  g.op("Pow", {g.input({3, 7}, 0.1f, 2.0f), g.const_f32({7}, {-2, -1, -0.5f, 0, 0.5f, 1, 2})});
  const Result r = run(g, backend() + ",cpu", {}, false);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  ASSERT_EQ(r.placement.size(), 1u);
  EXPECT_EQ(r.placement[0], "cpu");
  EXPECT_NE(r.reasons[0].find("input 1 'w"), std::string::npos) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("float32 in a node of float16"), std::string::npos) << r.reasons[0];
}

TEST(CudaHalfElementwise, Casts) {
  // float32 -> float16 (rounded to nearest even, both sides), float16 ->
  // float32 (exact) and float16 -> float16 (a copy), each checked exactly.
  Graph g;
  const int x = g.input({1000}, -70000.0f, 70000.0f);  // past half's range too
  const int h = g.op("Cast", {x}, {ai("to", 10)});  // ONNX FLOAT16
  const int f = g.op("Cast", {h}, {ai("to", 1)});
  g.output(h);
  g.output(f);
  g.output(g.op("Cast", {h}, {ai("to", 10)}));
  const Result ref = run(g, "cpu");
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  const Result got = run(g, backend());
  ASSERT_EQ(got.status, KITE_OK) << got.error;
  for (size_t i = 0; i < got.placement.size(); ++i) EXPECT_EQ(got.placement[i], backend()) << "node " << i;
  ASSERT_EQ(got.outputs.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(ref.outputs[k], got.outputs[k]) << "output " << k;
}

// ---- data movement -------------------------------------------------------------

TEST(CudaHalfData, CopiesOfEveryKind) {
  sweep_copies(true, check_case);
  HalfGraph gather;
  gather.op("Gather", {gather.input({10, 7}), gather.input_i64({2, 3}, {0, 9, -1, 4, 4, -10})}, {ai("axis", 0)});
  check(gather);
}

// roi and scales stay float32 in a float16 Resize.
TEST(CudaHalfData, Resize) { sweep_resizes(true, check_case); }

// ---- pooling ---------------------------------------------------------------------

TEST(CudaHalfPool, MaxAndAverage) {
  struct Case {
    const char* op;
    Shape x;
    std::vector<kite::ops::Attr> attrs;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {1, 4, 13, 13}, {aints("kernel_shape", {3, 3}), aints("strides", {2, 2}), aints("pads", {1, 1, 1, 1})}},
      {"MaxPool", {2, 3, 10, 9}, {aints("kernel_shape", {2, 3}), aints("strides", {2, 2}), ai("ceil_mode", 1)}},
      {"AveragePool", {1, 5, 11, 11}, {aints("kernel_shape", {3, 3}), aints("pads", {1, 1, 1, 1})}},
      {"AveragePool",
       {1, 5, 11, 11},
       {aints("kernel_shape", {3, 3}), aints("strides", {2, 2}), aints("pads", {1, 1, 1, 1}), ai("count_include_pad", 1)}},
      {"AveragePool", {2, 4, 30}, {aints("kernel_shape", {4}), aints("strides", {3})}},  // 1-D
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    HalfGraph g;
    g.op(cases[i].op, {g.input(cases[i].x)}, cases[i].attrs);
    check(g);
  }
}

// ---- a float16 chain ------------------------------------------------------------

TEST(CudaHalfChain, ConvPoolMatMul) {
  // Activations stay float16 between the nodes, on the device.
  HalfGraph g;
  const int x = g.input({1, 3, 16, 16});
  const int c = g.op("Conv", {x, g.weight({8, 3, 3, 3}, -0.5f, 0.5f), g.weight({8})}, {aints("pads", {1, 1, 1, 1})});
  const int p = g.op("MaxPool", {g.op("Relu", {c})}, {aints("kernel_shape", {2, 2}), aints("strides", {2, 2})});
  const int r = g.op("Reshape", {p, g.const_i64({2}, {1, 512})});
  g.op("Gemm", {r, g.weight({10, 512}, -0.1f, 0.1f), g.weight({10})}, {ai("transB", 1)});
  check(g);
}

}  // namespace
}  // namespace kite::cudatest
