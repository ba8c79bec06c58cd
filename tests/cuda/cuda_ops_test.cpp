// Every op and fused pattern the CUDA backend runs, on shapes that reach
// each kernel's corners (partial tiles, groups, strides, broadcasting,
// negative steps, masks), against the CPU backend. Strict sessions: a node
// the backend declines fails the test. Tolerance 1e-4 x max|ref|: float32
// sums of up to ~10^3 terms in another order differ by a few hundred ulps
// of the largest partial sum at most (1e3 x 6e-8 = 6e-5).
//
// The tests of the ops a float16 node can be (files converted with
// kite-convert --precision fp16|mixed) run twice, /float32 and /float16: the
// second with float16 tensors, which the CUDA backend runs with fp16 storage
// and fp32 arithmetic (the _f16 kernels of kernels/kernel_list.h), as the
// CPU backend does (backends/cpu/half_bridge.h). Tolerance, per element:
// |a - b| <= 2^-10 x max(|a|, |b|) + 1e-4 x max|ref| + 2^-24. Both sides
// read the same halves, compute in float and round the result once to half
// (ties to even), so the float results differ only by the order of their
// float32 sums (1e-4 x max|ref|, as above) and, where they straddle a
// rounding boundary, the halves then differ by one ulp of the output: at
// most 2^-10 of its magnitude (2^-24 for a subnormal).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cuda_cases.h"
#include "kite/ops/half.h"

namespace kite::cudatest {
namespace {

constexpr double kTolerance = 1e-4;

// float16 outputs: the worst element's |a - b| over its bound (the header
// comment; <= 1 passes). Other outputs must match exactly.
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
      const double bound = std::ldexp(big, -10) + kTolerance * max_ref + std::ldexp(1.0, -24);
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

// Runs g on the CPU and on the backend under test, every node on the latter.
void check(Graph& g, const Options& options = {}, double tolerance = kTolerance) {
  const Result ref = run(g, "cpu");
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  const Result got = run(g, backend(), options);
  ASSERT_EQ(got.status, KITE_OK) << got.error;
  for (size_t i = 0; i < got.placement.size(); ++i) EXPECT_EQ(got.placement[i], backend()) << "node " << i;
  std::string where;
  if (g.float16()) {
    EXPECT_LE(half_error(ref, got, &where), 1.0) << where;
  } else {
    EXPECT_LE(normalized_error(ref, got, &where), tolerance) << where;
  }
}

// A case of the shared sweeps (cuda_cases.h).
void check_case(Graph& g, const std::string& label) {
  SCOPED_TRACE(label);
  check(g);
}

// The suites that run in both float dtypes: GetParam() is true for float16.
class FloatDtypes : public testing::TestWithParam<bool> {
 protected:
  bool half() const { return GetParam(); }
  // A graph of this run's float dtype.
  Graph graph() const {
    Graph g;
    if (half()) g.use_float16();
    return g;
  }
};
std::string dtype_name(const testing::TestParamInfo<bool>& info) { return info.param ? "float16" : "float32"; }
#define KITE_FLOAT_DTYPES(suite)             \
  class suite : public FloatDtypes {};       \
  INSTANTIATE_TEST_SUITE_P(, suite, testing::Values(false, true), dtype_name)

// ---- convolutions ----------------------------------------------------------

KITE_FLOAT_DTYPES(CudaConv);

TEST_P(CudaConv, Shapes) { sweep_convs(half(), check_case); }

TEST_P(CudaConv, FusedActivations) { sweep_fused_convs(half(), check_case); }

TEST_P(CudaConv, OwnKernelsInLeanMode) {
  Graph g = graph();
  conv_graph(g, {{1, 16, 15, 15}, {40, 16, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true}, "Relu");
  check(g, {{"lean", "1"}});
}

TEST(CudaConvFloat16, OwnKernelsWithTheNote) {
  // cuDNN is float32: a float16 convolution is Kite's own kernel whatever
  // the conv option says, and its placement says how it runs.
  for (const char* conv : {"auto", "own"}) {
    SCOPED_TRACE(conv);
    Graph g;
    g.use_float16();
    conv_graph(g, {{1, 16, 15, 15}, {40, 16, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true}, "Relu");
    check(g, {{"conv", conv}});
    const Result r = run(g, backend(), {{"conv", conv}});
    ASSERT_EQ(r.status, KITE_OK) << r.error;
    ASSERT_EQ(r.reasons.size(), 1u);
    EXPECT_NE(r.reasons[0].find("fp16 storage, fp32 arithmetic"), std::string::npos) << r.reasons[0];
  }
}

// ---- matrix products ---------------------------------------------------------

KITE_FLOAT_DTYPES(CudaGemm);

TEST_P(CudaGemm, MatMulShapes) { sweep_matmuls(half(), check_case); }

TEST_P(CudaGemm, GemmAttributes) { sweep_gemms(half(), check_case); }

TEST_P(CudaGemm, FusedMatMulAndGemm) { sweep_fused_products(half(), check_case); }

// ---- elementwise ------------------------------------------------------------

KITE_FLOAT_DTYPES(CudaElementwise);

TEST_P(CudaElementwise, BinaryBroadcasting) {
  sweep_binary(half(), check_case);
  Graph pow = graph();
  pow.op("Pow", {pow.input({3, 7}, 0.1f, 2.0f), pow.input({7}, -2.0f, 2.0f)});
  check(pow);
  Graph prelu = graph();
  prelu.op("PRelu", {prelu.input({1, 4, 5, 5}), prelu.weight({4, 1, 1})});
  check(prelu);
}

TEST_P(CudaElementwise, Unary) {
  sweep_unary(half(), check_case);
  for (const char* approximate : {"none", "tanh"}) {
    Graph gelu = graph();
    const int x = gelu.input({5, 40}, -4.0f, 4.0f);
    gelu.begin_body();
    // The erf formula as exporters write it; the tanh form as the ONNX op.
    int y;
    if (std::string(approximate) == "none") {
      const int e = gelu.op("Erf", {gelu.op("Div", {x, gelu.const_float({}, {1.41421356f})})});
      y = gelu.op("Mul", {gelu.op("Mul", {x, gelu.op("Add", {e, gelu.const_float({}, {1.0f})})}), gelu.const_float({}, {0.5f})});
    } else {
      y = gelu.op("Gelu", {x}, {as("approximate", "tanh")});
    }
    gelu.fuse("Gelu", std::string(approximate) == "none" ? "Gelu" : "Gelu(tanh)", {x}, {as("approximate", approximate)}, {y});
    check(gelu);
  }
}

TEST_P(CudaElementwise, Variadic) {
  for (const char* op : {"Sum", "Mean", "Max", "Min"}) {
    SCOPED_TRACE(op);
    Graph g = graph();
    g.op(op, {g.input({2, 3, 4}), g.input({4}), g.input({3, 1})});
    check(g);
  }
}

TEST(CudaElementwiseFloat32, CastsAndBatchNorm) {
  Graph cast;
  const int f = cast.op("Cast", {cast.input({20}, -50.0f, 50.0f)}, {ai("to", 7)});  // int64
  cast.op("Cast", {f}, {ai("to", 1)});
  check(cast);
  Graph bn;
  const int x = bn.input({2, 3, 4, 4});
  bn.op("BatchNormalization", {x, bn.weight({3}), bn.weight({3}), bn.weight({3}), bn.weight({3}, 0.5f, 2.0f)});
  check(bn);
}

TEST(CudaElementwiseFloat16, Casts) {
  // float32 -> float16 (rounded to nearest even, both sides), float16 ->
  // float32 (exact) and float16 -> float16 (a copy), each checked exactly.
  Graph g;
  const int x = g.input({1000}, -70000.0f, 70000.0f);  // past half's range too
  const int h = g.op("Cast", {x}, {ai("to", 10)});      // ONNX FLOAT16
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

TEST(CudaElementwiseFloat16, MixedFloatTensorsDecline) {
  // Pow may raise float16 to a float32 exponent (ONNX's T1, T2); the CUDA
  // kernels take a node's float tensors all of one dtype, so it declines,
  // naming the tensor, and the node runs on the CPU.
  Graph g;
  g.use_float16();
  g.op("Pow", {g.input({3, 7}, 0.1f, 2.0f), g.const_f32({7}, {-2, -1, -0.5f, 0, 0.5f, 1, 2})});
  const Result r = run(g, backend() + ",cpu", {}, false);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  ASSERT_EQ(r.placement.size(), 1u);
  EXPECT_EQ(r.placement[0], "cpu");
  EXPECT_NE(r.reasons[0].find("input 1 'w"), std::string::npos) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("float32 in a node of float16"), std::string::npos) << r.reasons[0];
}

// ---- data movement -------------------------------------------------------------

KITE_FLOAT_DTYPES(CudaData);

TEST_P(CudaData, CopiesOfEveryKind) { sweep_copies(half(), check_case); }

TEST_P(CudaData, Gather) {
  Graph g = graph();
  const int data = g.input({10, 6});
  g.op("Gather", {data, g.input_i64({2, 3}, {0, 9, -1, 4, 4, -10})}, {ai("axis", 0)});
  check(g);
  Graph inner = graph();
  inner.op("Gather", {inner.input({3, 7, 2}), inner.const_i64({2}, {6, 0})}, {ai("axis", 1)});
  check(inner);
}

TEST(CudaDataFloat32, GatherIndexOutOfRangeIsAnError) {
  Graph g;
  g.op("Gather", {g.input({10, 6}), g.input_i64({2}, {1, 10})}, {ai("axis", 0)});
  const Result r = run(g, backend());
  EXPECT_NE(r.status, KITE_OK);
  EXPECT_NE(r.error.find("index 10 is out of range"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("Gather"), std::string::npos) << r.error;
}

// float16: roi and scales stay float32.
TEST_P(CudaData, Resize) { sweep_resizes(half(), check_case); }

// ---- pooling, reductions, normalisation -----------------------------------------

KITE_FLOAT_DTYPES(CudaPool);

TEST_P(CudaPool, MaxAndAverage) {
  struct Case {
    const char* op;
    Shape x;
    std::vector<kite::ops::Attr> attrs;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {1, 4, 13, 13}, {aints("kernel_shape", {3, 3}), aints("strides", {2, 2}), aints("pads", {1, 1, 1, 1})}},
      {"MaxPool", {1, 2, 10, 10}, {aints("kernel_shape", {3, 3}), aints("strides", {2, 2}), ai("ceil_mode", 1)}},
      {"MaxPool", {2, 3, 10, 9}, {aints("kernel_shape", {2, 3}), aints("strides", {2, 2}), ai("ceil_mode", 1)}},
      {"AveragePool", {2, 3, 9, 9}, {aints("kernel_shape", {3, 3}), aints("pads", {1, 1, 1, 1})}},
      {"AveragePool", {2, 3, 9, 9}, {aints("kernel_shape", {3, 3}), aints("pads", {1, 1, 1, 1}), ai("count_include_pad", 1)}},
      {"AveragePool",
       {1, 5, 11, 11},
       {aints("kernel_shape", {3, 3}), aints("strides", {2, 2}), aints("pads", {1, 1, 1, 1}), ai("count_include_pad", 1)}},
      {"AveragePool", {2, 4, 30}, {aints("kernel_shape", {4}), aints("strides", {3})}},  // 1-D
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    Graph g = graph();
    g.op(cases[i].op, {g.input(cases[i].x)}, cases[i].attrs);
    check(g);
  }
}

TEST(CudaPoolFloat32, GlobalPoolsAndReductions) {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    Graph g;
    g.op(op, {g.input({2, 5, 7, 9})});
    check(g);
  }
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp", "ReduceProd"}) {
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{2, 3}, {-1}, {1}, {}}) {
      SCOPED_TRACE(std::string(op) + " axes " + std::to_string(axes.size()));
      Graph g;
      const int x = g.input({2, 6, 5, 40}, 0.5f, 1.5f);
      std::vector<int> in = {x};
      if (!axes.empty()) in.push_back(g.const_i64({static_cast<int64_t>(axes.size())}, axes));
      g.op(op, in, {ai("keepdims", 1)});
      check(g, {}, std::string(op) == "ReduceProd" ? 1e-3 : kTolerance);
    }
  }
}

TEST(CudaFloat16, ChainStaysOnTheDevice) {
  // Activations stay float16 between the nodes, on the device.
  Graph g;
  g.use_float16();
  const int x = g.input({1, 3, 16, 16});
  const int c = g.op("Conv", {x, g.weight({8, 3, 3, 3}, -0.5f, 0.5f), g.weight({8})}, {aints("pads", {1, 1, 1, 1})});
  const int p = g.op("MaxPool", {g.op("Relu", {c})}, {aints("kernel_shape", {2, 2}), aints("strides", {2, 2})});
  const int r = g.op("Reshape", {p, g.const_i64({2}, {1, 512})});
  g.op("Gemm", {r, g.weight({10, 512}, -0.1f, 0.1f), g.weight({10})}, {ai("transB", 1)});
  check(g);
}

TEST(CudaNorm, SoftmaxAndNorms) {
  for (int axis : {-1, 1}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      Graph g;
      g.op(op, {g.input({2, 7, 300}, -5.0f, 5.0f)}, {ai("axis", axis)});
      check(g);
    }
  }
  {
    Graph g;
    const int x = g.input({3, 5, 96});
    g.op("LayerNormalization", {x, g.weight({96}), g.weight({96})}, {ai("axis", -1), af("epsilon", 1e-5f)});
    check(g);
  }
  {
    Graph g;
    const int x = g.input({3, 64});
    const int scale = g.weight({64});
    const std::vector<kite::ops::Attr> attrs = {ai("axis", -1), af("epsilon", 1e-6f)};
    g.begin_body();
    const int y = g.op("LayerNormalization", {x, scale}, attrs);
    g.fuse("LayerNormalization", "LayerNormalization", {x, scale}, attrs, {y});
    check(g);
  }
  {
    Graph g;
    const int a = g.input({2, 9, 384});
    const int b = g.input({2, 9, 384});
    const int scale = g.weight({384}), bias = g.weight({384});
    g.begin_body();
    const int sum = g.op("Add", {a, b});
    const int y = g.op("LayerNormalization", {sum, scale, bias}, {ai("axis", -1)});
    g.fuse("SkipLayerNormalization", "Add+LayerNormalization", {a, b, scale, bias}, {ai("axis", -1)}, {y, sum});
    g.output(y);
    g.output(sum);
    check(g);
  }
  {
    Graph g;
    g.op("InstanceNormalization", {g.input({2, 3, 6, 7}), g.weight({3}), g.weight({3})});
    check(g);
  }
}

// softmax(q kt * scale [+ mask]) v as the attention pattern's body.
void attention(Graph& g, const Shape& qs, const Shape& kts, const Shape& vs, const Shape& mask_shape) {
  const int q = g.input(qs), kt = g.input(kts), v = g.input(vs);
  std::vector<int> in = {q, kt, v};
  const int mask = mask_shape.empty() ? -1 : g.input(mask_shape, -4.0f, 0.0f);
  if (mask >= 0) in.push_back(mask);
  g.begin_body();
  int s = g.op("Mul", {g.op("MatMul", {q, kt}), g.const_f32({}, {0.125f})});
  if (mask >= 0) s = g.op("Add", {s, mask});
  const int y = g.op("MatMul", {g.op("Softmax", {s}, {ai("axis", -1)}), v});
  g.fuse("Attention", "Attention", in, {af("scale", 0.125f)}, {y});
}

TEST(CudaAttention, WithoutAndWithMask) {
  struct Case {
    Shape q, kt, v, mask;
  };
  const std::vector<Case> cases = {
      {{1, 6, 17, 64}, {1, 6, 64, 17}, {1, 6, 17, 64}, {}},
      {{2, 3, 5, 32}, {2, 3, 32, 300}, {2, 3, 300, 40}, {}},          // three key tiles
      {{2, 3, 5, 32}, {2, 3, 32, 150}, {2, 3, 150, 40}, {2, 1, 1, 150}},  // padding-style mask
      {{1, 2, 7, 16}, {1, 2, 16, 7}, {1, 2, 7, 16}, {7, 7}},           // causal-style mask
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& c = cases[i];
    Graph g;
    attention(g, c.q, c.kt, c.v, c.mask);
    check(g);
  }
}

// Hugging Face's NaN guard fused (nan_to_zero = 1): a mask [S, T] with
// query row 2 all -inf gives that row a NaN softmax, which the guard makes
// 0, as on the CPU; row 4 is masked in the first key tile only.
TEST(CudaAttention, NanGuardOnAFullyMaskedRow) {
  for (int64_t T : {7, 300}) {
    SCOPED_TRACE("keys " + std::to_string(T));
    const int64_t S = 5;
    std::vector<float> mask(static_cast<size_t>(S * T), 0.0f);
    for (int64_t j = 0; j < T; ++j) {
      mask[static_cast<size_t>(2 * T + j)] = -INFINITY;
      if (j < 128) mask[static_cast<size_t>(4 * T + j)] = -INFINITY;
    }
    if (T <= 128) mask[static_cast<size_t>(4 * T)] = 0.0f;  // one key left
    Graph g;
    const int q = g.input({2, S, 32}), kt = g.input({2, 32, T}), v = g.input({2, T, 40});
    const int m = g.const_f32({S, T}, mask);
    g.begin_body();
    const int s = g.op("Add", {g.op("Mul", {g.op("MatMul", {q, kt}), g.const_f32({}, {0.125f})}), m});
    const int p = g.op("Softmax", {s}, {ai("axis", -1)});
    const int guarded = g.op("Where", {g.op("IsNaN", {p}), g.const_f32({}, {0.0f}), p});
    const int y = g.op("MatMul", {guarded, v});
    g.fuse("Attention", "Attention", {q, kt, v, m}, {af("scale", 0.125f), ai("nan_to_zero", 1)}, {y});
    check(g);
  }
}

// ---- what the backend declines, and why ------------------------------------------

TEST(CudaSupports, DeclinesWithAReason) {
  // A primitive node declined runs on the CPU; a fused node declined runs
  // its body on the CUDA backend (decomposed). The reason is kept.
  struct Case {
    std::string reason;
    Graph g;
    bool fused = false;
  };
  std::vector<Case> cases(3);
  cases[1].fused = true;
  cases[0].reason = "3-D convolution";
  cases[0].g.op("Conv", {cases[0].g.input({1, 2, 4, 4, 4}), cases[0].g.weight({3, 2, 2, 2, 2})});
  cases[1].reason = "head size 300";
  attention(cases[1].g, {1, 4, 300}, {1, 300, 4}, {1, 4, 8}, {});
  cases[2].reason = "resizing axis 1";
  {
    Graph& g = cases[2].g;
    g.op("Resize", {g.input({1, 2, 4, 4}), g.const_f32({0}, {}), g.const_f32({4}, {1, 2, 1, 1})});
  }
  for (Case& c : cases) {
    SCOPED_TRACE(c.reason);
    const Result r = run(c.g, backend() + ",cpu", {}, false);
    ASSERT_EQ(r.status, KITE_OK) << r.error;
    ASSERT_FALSE(r.placement.empty());
    EXPECT_EQ(r.placement[0], c.fused ? backend() : "cpu");
    EXPECT_EQ(r.decomposed[0], c.fused ? 1 : 0);
    EXPECT_NE(r.reasons[0].find(c.reason), std::string::npos) << r.reasons[0];
  }
}

}  // namespace
}  // namespace kite::cudatest
