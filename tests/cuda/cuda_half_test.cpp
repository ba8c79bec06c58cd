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

#include "cuda_graphs.h"
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

struct ConvCase {
  Shape x, w;
  std::vector<kite::ops::Attr> attrs;
  bool bias;
};

void conv_graph(Graph& g, const ConvCase& c, const std::string& act = "") {
  g.use_float16();
  const int x = g.input(c.x);
  const int w = g.weight(c.w, -0.5f, 0.5f);
  std::vector<int> in = {x, w};
  if (c.bias) in.push_back(g.weight({c.w[0]}));
  if (act.empty()) {
    g.op("Conv", in, c.attrs);
    return;
  }
  g.begin_body();
  const int y = activation(g, g.op("Conv", in, c.attrs), act);
  auto attrs = c.attrs;
  for (const auto& a : activation_attrs(act)) attrs.push_back(a);
  g.fuse("FusedConv", "Conv+" + act, in, attrs, {y});
}

TEST(CudaHalfConv, Shapes) {
  const std::vector<ConvCase> cases = {
      {{1, 3, 9, 11}, {8, 3, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true},
      {{2, 16, 13, 13}, {70, 16, 3, 3}, {aints("strides", {2, 2}), aints("pads", {1, 1, 1, 1})}, true},
      {{1, 32, 10, 10}, {32, 1, 3, 3}, {ai("group", 32), aints("pads", {1, 1, 1, 1})}, true},          // depthwise
      {{1, 24, 9, 7}, {24, 1, 5, 5}, {ai("group", 24), aints("pads", {2, 2, 2, 2}), aints("strides", {2, 1})}, false},
      {{1, 32, 12, 12}, {64, 8, 3, 3}, {ai("group", 4), aints("dilations", {2, 2})}, false},          // grouped, dilated
      {{1, 64, 7, 7}, {24, 64, 1, 1}, {}, true},                                                      // 1x1
      {{1, 8, 9, 10}, {16, 8, 3, 2}, {aints("pads", {0, 1, 2, 0}), aints("strides", {1, 2})}, true},  // asymmetric
      {{2, 6, 40}, {12, 6, 5}, {aints("pads", {2, 2})}, true},                                        // 1-D
      {{1, 130, 5, 5}, {67, 130, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true},                         // K tails
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    Graph g;
    conv_graph(g, cases[i]);
    check(g);
  }
}

TEST(CudaHalfConv, FusedActivations) {
  for (const char* act : {"Relu", "Clip", "SiLU", "HardSwish", "Sigmoid", "LeakyRelu"}) {
    SCOPED_TRACE(act);
    Graph g;
    conv_graph(g, {{1, 8, 14, 14}, {20, 8, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true}, act);
    check(g);
    Graph dw;  // depthwise: the direct kernel's epilogue
    conv_graph(dw, {{1, 16, 9, 9}, {16, 1, 3, 3}, {ai("group", 16), aints("pads", {1, 1, 1, 1})}, true}, act);
    check(dw);
  }
}

TEST(CudaHalfConv, LeanModeAndTheNote) {
  // cuDNN is float32: a float16 convolution is Kite's own kernel whatever
  // the conv option says, and its placement says how it runs.
  for (const char* conv : {"auto", "own"}) {
    SCOPED_TRACE(conv);
    Graph g;
    conv_graph(g, {{1, 16, 15, 15}, {40, 16, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true}, "Relu");
    check(g, {{"conv", conv}});
    const Result r = run(g, backend(), {{"conv", conv}});
    ASSERT_EQ(r.status, KITE_OK) << r.error;
    ASSERT_EQ(r.reasons.size(), 1u);
    EXPECT_NE(r.reasons[0].find("fp16 storage, fp32 arithmetic"), std::string::npos) << r.reasons[0];
  }
}

// ---- matrix products ---------------------------------------------------------

TEST(CudaHalfGemm, MatMulShapes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{70, 33}, {33, 90}},             // partial tiles
      {{1, 512}, {512, 100}},           // row vector (simple kernel)
      {{3, 7}, {7, 5}},                 // tiny (simple kernel)
      {{2, 50, 64}, {64, 48}},          // batch times shared weight (one taller product)
      {{2, 3, 20, 16}, {2, 3, 16, 24}}, // batched
      {{2, 1, 20, 16}, {1, 3, 16, 24}}, // broadcast batch dims (two levels)
      {{33}, {33, 17}},                 // 1-D left
      {{5, 33}, {33}},                  // 1-D right
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    Graph g;
    g.use_float16();
    g.op("MatMul", {g.input(cases[i].first), g.input(cases[i].second)});
    check(g);
  }
}

TEST(CudaHalfGemm, GemmAttributes) {
  struct Case {
    bool ta, tb;
    Shape c;
    float alpha, beta;
  };
  const std::vector<Case> cases = {{false, false, {40}, 1.0f, 1.0f},      {false, true, {1, 40}, 0.5f, 2.0f},
                                   {true, false, {30, 40}, 1.0f, 0.5f},   {true, true, {30, 1}, 2.0f, 1.0f},
                                   {false, true, {}, 1.0f, 1.0f}};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& c = cases[i];
    Graph g;
    g.use_float16();
    const int a = g.input(c.ta ? Shape{50, 30} : Shape{30, 50});
    const int b = g.weight(c.tb ? Shape{40, 50} : Shape{50, 40});
    std::vector<int> in = {a, b};
    if (!c.c.empty()) in.push_back(g.weight(c.c));
    g.op("Gemm", in, {ai("transA", c.ta), ai("transB", c.tb), af("alpha", c.alpha), af("beta", c.beta)});
    check(g);
  }
}

TEST(CudaHalfGemm, FusedMatMulAndGemm) {
  for (const char* act : {"", "Relu", "Gelu", "GeluTanh", "HardSwish"}) {
    SCOPED_TRACE(act);
    Graph g;
    g.use_float16();
    const int a = g.input({1, 37, 48});
    const int b = g.weight({48, 80}, -0.3f, 0.3f);
    const int bias = g.weight({80});
    g.begin_body();
    int y = g.op("Add", {g.op("MatMul", {a, b}), bias});
    std::vector<kite::ops::Attr> attrs;
    std::string pattern = "MatMul+Add";
    if (act[0]) {
      y = activation(g, y, act);
      attrs = activation_attrs(act);
      pattern += std::string("+") + act;
    }
    g.fuse("FusedMatMul", pattern, {a, b, bias}, attrs, {y});
    check(g);
  }
  for (const Shape& a_shape : {Shape{4, 64}, Shape{33, 64}}) {
    Graph g;
    g.use_float16();
    const int a = g.input(a_shape);
    const int w = g.weight({10, 64});
    const int c = g.weight({10});
    g.begin_body();
    const int y = activation(g, g.op("Gemm", {a, w, c}, {ai("transB", 1)}), "HardSwish");
    auto attrs = activation_attrs("HardSwish");
    attrs.push_back(ai("transB", 1));
    g.fuse("FusedGemm", "Gemm+HardSwish", {a, w, c}, attrs, {y});
    check(g);
  }
}

// ---- elementwise ------------------------------------------------------------

TEST(CudaHalfElementwise, BinaryBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3, 4, 5}, {2, 3, 4, 5}}, {{2, 3, 4, 5}, {5}},
                                                       {{2, 3, 4, 5}, {3, 1, 1}},    {{4, 1}, {1, 6}},
                                                       {{2, 3, 4, 5}, {}},           {{7, 1, 9}, {7, 3, 1}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      SCOPED_TRACE(std::string(op) + " case " + std::to_string(i));
      Graph g;
      g.use_float16();
      g.op(op, {g.input(shapes[i].first), g.input(shapes[i].second, 0.5f, 1.5f)});
      check(g);
    }
  }
  Graph prelu;
  prelu.use_float16();
  prelu.op("PRelu", {prelu.input({1, 4, 5, 5}), prelu.weight({4, 1, 1})});
  check(prelu);
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    SCOPED_TRACE(op);
    Graph g;
    g.use_float16();
    g.op(op, {g.input({2, 3, 4}), g.input({4}), g.input({3, 1})});
    check(g);
  }
}

TEST(CudaHalfElementwise, Unary) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Erf", "Softplus", "Mish", "Elu", "HardSigmoid",
                         "HardSwish", "Gelu", "Exp"}) {
    SCOPED_TRACE(op);
    Graph g;
    g.use_float16();
    g.op(op, {g.input({3, 51}, -3.0f, 3.0f)});
    check(g);
  }
  Graph leaky;
  leaky.use_float16();
  leaky.op("LeakyRelu", {leaky.input({65})}, {af("alpha", 0.2f)});
  check(leaky);
  Graph clip;
  clip.use_float16();
  const int x = clip.input({64}, -8.0f, 8.0f);
  clip.op("Clip", {x, clip.const_float({}, {-1.5f}), clip.const_float({}, {2.0f})});
  check(clip);
  for (const char* approximate : {"none", "tanh"}) {
    Graph gelu;
    gelu.use_float16();
    const int x = gelu.input({5, 40}, -4.0f, 4.0f);
    gelu.begin_body();
    const int y = gelu.op("Gelu", {x}, {as("approximate", approximate)});
    gelu.fuse("Gelu", std::string(approximate) == "none" ? "Gelu" : "Gelu(tanh)", {x}, {as("approximate", approximate)}, {y});
    check(gelu);
  }
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
  {
    Graph g;
    g.use_float16();
    g.op("Transpose", {g.input({2, 3, 4, 5})}, {aints("perm", {0, 2, 3, 1})});
    check(g);
  }
  {
    Graph g;
    g.use_float16();
    g.op("Concat", {g.input({2, 3, 5}), g.input({2, 5, 5}), g.input({2, 1, 5})}, {ai("axis", 1)});
    check(g);
  }
  {
    Graph g;
    g.use_float16();
    const auto parts = g.node("Split", {g.input({3, 11, 3}), g.const_i64({3}, {2, 6, 3})}, {ai("axis", 1)}, 3);
    for (int t : parts) g.output(t);
    check(g);
  }
  {
    Graph g;
    g.use_float16();
    const int x = g.input({6, 9, 5});
    g.op("Slice", {x, g.const_i64({2}, {5, 1}), g.const_i64({2}, {-100, 8}), g.const_i64({2}, {0, 1}),
                   g.const_i64({2}, {-2, 3})});
    check(g);
  }
  {
    Graph g;
    g.use_float16();
    g.op("Expand", {g.input({3, 1, 5}), g.const_i64({4}, {2, 3, 4, 5})});
    check(g);
  }
  {
    Graph g;
    g.use_float16();
    g.op("Reshape", {g.input({2, 3, 5}), g.const_i64({2}, {6, 5})});
    check(g);
  }
  {
    Graph g;
    g.use_float16();
    g.op("Gather", {g.input({10, 7}), g.input_i64({2, 3}, {0, 9, -1, 4, 4, -10})}, {ai("axis", 0)});
    check(g);
  }
  for (const char* mode : {"constant", "reflect", "edge"}) {
    SCOPED_TRACE(mode);
    Graph g;
    g.use_float16();
    g.op("Pad", {g.input({1, 2, 4, 5}), g.const_i64({8}, {0, 0, 2, 1, 0, 0, 1, 3}), g.const_float({}, {0.5f})},
         {as("mode", mode)});
    check(g);
  }
}

TEST(CudaHalfData, Resize) {
  struct Case {
    const char* mode;
    const char* ct;
    std::vector<float> scales;
  };
  const std::vector<Case> cases = {{"nearest", "asymmetric", {1, 1, 2, 2}},
                                   {"linear", "half_pixel", {1, 1, 2, 2}},
                                   {"linear", "align_corners", {1, 1, 2.5f, 1.5f}},
                                   {"cubic", "half_pixel", {1, 1, 2, 2}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.ct);
    Graph g;
    g.use_float16();
    const int x = g.input({1, 3, 6, 7});
    // roi and scales stay float32 in a float16 Resize.
    g.op("Resize", {x, g.const_f32({0}, {}), g.const_f32({4}, c.scales)},
         {as("mode", c.mode), as("coordinate_transformation_mode", c.ct)});
    check(g);
  }
}

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
    Graph g;
    g.use_float16();
    g.op(cases[i].op, {g.input(cases[i].x)}, cases[i].attrs);
    check(g);
  }
}

// ---- a float16 chain ------------------------------------------------------------

TEST(CudaHalfChain, ConvPoolMatMul) {
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

}  // namespace
}  // namespace kite::cudatest
