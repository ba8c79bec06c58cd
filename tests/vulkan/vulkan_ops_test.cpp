// Every op and fused pattern the Vulkan backend runs, against the CPU
// backend, through the backend ABI v2 (tests/vulkan/harness.h), with the
// Khronos validation layer on (ctest sets KITE_VULKAN_VALIDATION=1): any
// message of the layer fails the run (the backend turns it into an error at
// synchronize) and the test (the log must stay empty).
//
// Each case runs in two configurations: unified memory with the nodes
// recorded once into one segment and the device's default kernels (on
// lavapipe: GEMM and convolution without shared memory, "lanes"), and the
// staging path (unified=0) with per-node execution, tensors at 4-byte (not
// descriptor-aligned) offsets and the tiled shared-memory kernels that GPUs
// get (option kernels=tiled). Fused patterns also run as their bodies (the primitive nodes a
// backend without the fused kernel runs), compared with the CPU's fused
// kernel.
//
// Tolerances (normalised: max |vulkan - cpu| / max |cpu|):
//  - data movement, max/min, comparisons, relu/clip: 0 (bit exact);
//  - elementwise arithmetic: 1e-6 (GPU division may be off by 2.5 ulp);
//  - transcendental functions: 1e-5 (a few ulp each, a few ulp in the
//    composition, and erf from Abramowitz-Stegun 7.1.26, |error| <= 1.5e-7);
//  - sums of K products or values (GEMM, convolution, reductions,
//    normalisation, softmax, attention): 1e-4, from the float32 bound
//    K * 2^-24 * sum|terms| ~ 6e-5 for the largest K here (~1000) with both
//    sides rounding in different orders.
//
// float16: every case whose ops have float16 kernels on Vulkan (what
// kite-convert --precision puts in fp16) runs a second time as a float16
// graph (harness's to_half: fp16 storage, fp32 arithmetic on both sides).
// Both backends read the same halves, compute in float32 and round once to
// half with ties to even; where their float32 results differ (the float32
// tolerance above) the rounding may land on neighbouring halves, one half
// ulp apart: at most 2^-10 of the largest |value|. So the float16 tolerance
// is the float32 one plus 2^-10, and 0 stays 0 for data movement and for
// max/min/relu, which select a value without arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "harness.h"
#include "kite/ops/half.h"

namespace kite::vktest {
namespace {

constexpr double kExact = 0.0;
constexpr double kArith = 1e-6;
constexpr double kTranscendental = 1e-5;
constexpr double kSum = 1e-4;

const VulkanOptions kUnifiedSegment = [] {
  VulkanOptions o;
  o.unified = true;
  o.segment = true;
  return o;
}();
const VulkanOptions kStagingPerNode = [] {
  VulkanOptions o;
  o.unified = false;
  o.segment = false;
  o.alignment = 4;
  // The GPU kernels (tiled through shared memory) even on lavapipe, where
  // the default is the lanes kernels: both variants run in CI.
  o.options = {{"kernels", "tiled"}};
  return o;
}();

// True if every op of g has a float16 kernel on Vulkan (the ops the
// converter runs in fp16) and g has float tensors.
bool half_capable(const Graph& g) {
  static const std::set<std::string> ops = {
      "Conv", "FusedConv", "MatMul", "Gemm", "FusedMatMul", "FusedGemm", "Gelu", "Add", "Sub", "Mul",
      "Div", "Pow", "PRelu", "Sum", "Mean", "Max", "Min", "Relu", "Sigmoid", "Tanh", "Clip", "Sqrt",
      "Reciprocal", "Exp", "Log", "Abs", "Neg", "Erf", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish",
      "Softplus", "Sign", "Ceil", "Floor", "Round", "Sin", "Cos", "Mish", "MaxPool", "AveragePool",
      "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
      "Expand", "Gather", "Pad", "Resize"};
  for (const Node& n : g.nodes) {
    if (!ops.count(n.op)) return false;
  }
  for (const Tensor& t : g.tensors) {
    if (t.dtype == KITE_DTYPE_FLOAT32) return true;
  }
  return false;
}

double half_tolerance(double tol) { return tol == 0.0 ? 0.0 : tol + std::ldexp(1.0, -10); }

void expect_match_once(const Graph& g, double tol, const char* what);

void expect_match(const Graph& g, double tol, const char* what = "") {
  expect_match_once(g, tol, what);
  if (half_capable(g)) {
    SCOPED_TRACE("float16");
    expect_match_once(to_half(g), half_tolerance(tol), what);
  }
}

void expect_match_once(const Graph& g, double tol, const char* what) {
  Values ref;
  std::string err;
  ASSERT_TRUE(run_cpu(g, &ref, &err)) << err;
  for (const VulkanOptions* o : {&kUnifiedSegment, &kStagingPerNode}) {
    SCOPED_TRACE(o->unified ? "unified, one segment" : "unified=0, per node, 4-byte offsets, tiled kernels");
    Values got;
    ASSERT_TRUE(run_vulkan(g, *o, &got, &err)) << what << " " << err;
    std::string where;
    const double e = normalized_error(g, ref, got, &where);
    EXPECT_LE(e, tol) << what << " worst at " << where;
    const std::vector<std::string> log = take_log_messages();
    EXPECT_TRUE(log.empty()) << log.size() << " validation messages, first: " << log.front();
  }
}

void expect_fused_and_body_once(const Graph& fused, const Graph& body, double tol);

// The fused node and its body on Vulkan, both against the CPU's fused node
// (and in float16, where the ops have half kernels).
void expect_fused_and_body(const Graph& fused, const Graph& body, double tol) {
  expect_fused_and_body_once(fused, body, tol);
  if (half_capable(fused) && half_capable(body)) {
    SCOPED_TRACE("float16");
    expect_fused_and_body_once(to_half(fused), to_half(body), half_tolerance(tol));
  }
}

void expect_fused_and_body_once(const Graph& fused, const Graph& body, double tol) {
  Values ref;
  std::string err;
  ASSERT_TRUE(run_cpu(fused, &ref, &err)) << err;
  for (const Graph* g : {&fused, &body}) {
    SCOPED_TRACE(g == &fused ? "fused node" : "body");
    Values got;
    ASSERT_TRUE(run_vulkan(*g, kUnifiedSegment, &got, &err)) << err;
    std::string where;
    EXPECT_LE(normalized_error(*g, ref, got, &where), tol) << where;
    const std::vector<std::string> log = take_log_messages();
    EXPECT_TRUE(log.empty()) << log.front();
  }
  // The fused node also on the staging path, per node.
  Values got;
  ASSERT_TRUE(run_vulkan(fused, kStagingPerNode, &got, &err)) << err;
  std::string where;
  EXPECT_LE(normalized_error(fused, ref, got, &where), tol) << where;
}

using kite::ops::Attr;

// ---------------------------------------------------------------- conv --

Graph conv_graph(const Shape& x, const Shape& w, bool bias, std::vector<Attr> attrs) {
  Graph g;
  const int xi = g.input("x", x);
  const int wi = g.constant("w", w, -0.5f, 0.5f);
  std::vector<int> ins = {xi, wi};
  if (bias) ins.push_back(g.constant("b", {w[0]}));
  g.node("Conv", ins, std::move(attrs));
  return g;
}

TEST(VulkanConv, Direct3x3Pad1) {
  expect_match(conv_graph({1, 3, 10, 9}, {4, 3, 3, 3}, true, {attr_ints("pads", {1, 1, 1, 1})}), kSum);
}
TEST(VulkanConv, Strided3x3Batch2NoBias) {
  expect_match(conv_graph({2, 8, 9, 11}, {16, 8, 3, 3}, false,
                          {attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {2, 2})}),
               kSum);
}
TEST(VulkanConv, PointwiseAsGemm) {
  expect_match(conv_graph({1, 16, 7, 7}, {24, 16, 1, 1}, true, {}), kSum);
}
TEST(VulkanConv, PointwiseStrided) {
  expect_match(conv_graph({1, 16, 8, 8}, {8, 16, 1, 1}, true, {attr_ints("strides", {2, 2})}), kSum);
}
TEST(VulkanConv, Depthwise) {
  expect_match(conv_graph({1, 8, 10, 10}, {8, 1, 3, 3}, true,
                          {attr_i("group", 8), attr_ints("pads", {1, 1, 1, 1})}),
               kSum);
}
TEST(VulkanConv, DepthwiseStridedWithMultiplier) {
  expect_match(conv_graph({2, 4, 11, 11}, {8, 1, 5, 5}, true,
                          {attr_i("group", 4), attr_ints("pads", {2, 2, 2, 2}), attr_ints("strides", {2, 2})}),
               kSum);
}
TEST(VulkanConv, Grouped) {
  expect_match(conv_graph({1, 8, 6, 6}, {12, 4, 3, 3}, true, {attr_i("group", 2)}), kSum);
}
TEST(VulkanConv, Dilated) {
  expect_match(conv_graph({1, 4, 12, 12}, {6, 4, 3, 3}, true,
                          {attr_ints("dilations", {2, 2}), attr_ints("pads", {2, 2, 2, 2})}),
               kSum);
}
TEST(VulkanConv, OneDimensional) {
  expect_match(conv_graph({1, 4, 20}, {5, 4, 3}, true, {attr_ints("pads", {1, 1})}), kSum);
}
TEST(VulkanConv, AutoPadSameUpperAsymmetricKernel) {
  expect_match(conv_graph({1, 3, 9, 8}, {4, 3, 2, 3}, false, {attr_s("auto_pad", "SAME_UPPER")}), kSum);
}
TEST(VulkanConv, LargeTilesAndRemainders) {
  // M = 70, N = 14*14 = 196, K = 576: several tiles with ragged edges.
  expect_match(conv_graph({1, 64, 14, 14}, {70, 64, 3, 3}, true, {attr_ints("pads", {1, 1, 1, 1})}), kSum);
}

// Conv + activation: the fused node and its body.
void fused_conv_case(const std::string& act, std::vector<Attr> act_attrs,
                     const std::function<std::vector<int>(Graph&, int)>& body_act) {
  const Shape x = {1, 6, 8, 8}, w = {10, 6, 3, 3};
  Graph fused;
  {
    const int xi = fused.input("x", x, -2.0f, 2.0f);
    const int wi = fused.constant("w", w, -0.5f, 0.5f);
    const int bi = fused.constant("b", {10});
    std::vector<Attr> attrs = {attr_ints("pads", {1, 1, 1, 1}), attr_s("activation", act)};
    attrs.insert(attrs.end(), act_attrs.begin(), act_attrs.end());
    fused.node("FusedConv", {xi, wi, bi}, attrs, 1, {{1, 10, 8, 8}}, "kite", "Conv+" + act);
  }
  Graph body;
  {
    const int xi = body.input("x", x, -2.0f, 2.0f);
    const int wi = body.constant("w", w, -0.5f, 0.5f);
    const int bi = body.constant("b", {10});
    const int y = body.node("Conv", {xi, wi, bi}, {attr_ints("pads", {1, 1, 1, 1})})[0];
    body.mark_output(body_act(body, y).back());
  }
  expect_fused_and_body(fused, body, kSum);
}

TEST(VulkanFusedConv, Relu) {
  fused_conv_case("Relu", {}, [](Graph& g, int y) { return g.node("Relu", {y}); });
}
TEST(VulkanFusedConv, Clip) {
  fused_conv_case("Clip", {attr_f("activation_alpha", 0.0f), attr_f("activation_beta", 6.0f)},
                  [](Graph& g, int y) {
                    const int lo = g.constant_f32("lo", {}, {0.0f});
                    const int hi = g.constant_f32("hi", {}, {6.0f});
                    return g.node("Clip", {y, lo, hi});
                  });
}
TEST(VulkanFusedConv, Sigmoid) {
  fused_conv_case("Sigmoid", {}, [](Graph& g, int y) { return g.node("Sigmoid", {y}); });
}
TEST(VulkanFusedConv, SiLU) {
  fused_conv_case("SiLU", {}, [](Graph& g, int y) {
    const int s = g.node("Sigmoid", {y})[0];
    return g.node("Mul", {y, s});
  });
}
TEST(VulkanFusedConv, HardSigmoid) {
  fused_conv_case("HardSigmoid", {attr_f("activation_alpha", 0.2f), attr_f("activation_beta", 0.5f)},
                  [](Graph& g, int y) { return g.node("HardSigmoid", {y}, {attr_f("alpha", 0.2f), attr_f("beta", 0.5f)}); });
}
TEST(VulkanFusedConv, HardSwish) {
  fused_conv_case("HardSwish", {}, [](Graph& g, int y) { return g.node("HardSwish", {y}); });
}
TEST(VulkanFusedConv, LeakyRelu) {
  fused_conv_case("LeakyRelu", {attr_f("activation_alpha", 0.1f)},
                  [](Graph& g, int y) { return g.node("LeakyRelu", {y}, {attr_f("alpha", 0.1f)}); });
}
TEST(VulkanFusedConv, Tanh) {
  fused_conv_case("Tanh", {}, [](Graph& g, int y) { return g.node("Tanh", {y}); });
}

// ---------------------------------------------------------- matmul/gemm --

Graph matmul_graph(const Shape& a, const Shape& b, bool b_const = false) {
  Graph g;
  const int ai = g.input("a", a);
  const int bi = b_const ? g.constant("b", b) : g.input("b", b);
  g.node("MatMul", {ai, bi});
  return g;
}

TEST(VulkanMatMul, Plain2D) { expect_match(matmul_graph({33, 17}, {17, 29}), kSum); }
TEST(VulkanMatMul, TileRemainders) { expect_match(matmul_graph({130, 70}, {70, 90}, true), kSum); }
TEST(VulkanMatMul, FewRows) { expect_match(matmul_graph({3, 64}, {64, 100}, true), kSum); }
TEST(VulkanMatMul, Batched) { expect_match(matmul_graph({4, 32, 16}, {4, 16, 32}), kSum); }
TEST(VulkanMatMul, BroadcastWeights) { expect_match(matmul_graph({2, 3, 8, 5}, {5, 7}, true), kSum); }
TEST(VulkanMatMul, PartialBroadcast) { expect_match(matmul_graph({2, 1, 4, 5}, {1, 3, 5, 6}), kSum); }
TEST(VulkanMatMul, VectorTimesMatrix) { expect_match(matmul_graph({5}, {5, 3}), kSum); }
TEST(VulkanMatMul, MatrixTimesVector) { expect_match(matmul_graph({2, 4, 5}, {5}), kSum); }

Graph gemm_graph(const Shape& a, const Shape& b, const Shape& c, std::vector<Attr> attrs) {
  Graph g;
  const int ai = g.input("a", a);
  const int bi = g.constant("b", b);
  std::vector<int> ins = {ai, bi};
  if (c != Shape{-1}) ins.push_back(g.constant("c", c));  // {-1}: no C; {}: a scalar C
  g.node("Gemm", ins, std::move(attrs));
  return g;
}

TEST(VulkanGemm, TransBWithBiasVector) {
  expect_match(gemm_graph({20, 30}, {40, 30}, {40}, {attr_i("transB", 1)}), kSum);
}
TEST(VulkanGemm, TransAAlphaBetaFullC) {
  expect_match(gemm_graph({30, 20}, {30, 25}, {20, 25},
                          {attr_i("transA", 1), attr_f("alpha", 0.5f), attr_f("beta", 2.0f)}),
               kSum);
}
TEST(VulkanGemm, ColumnBiasAndScalarBias) {
  expect_match(gemm_graph({17, 9}, {9, 11}, {17, 1}, {}), kSum);
  expect_match(gemm_graph({17, 9}, {9, 11}, {}, {}), kSum);
}
TEST(VulkanGemm, NoBias) { expect_match(gemm_graph({5, 9}, {9, 11}, {-1}, {}), kSum); }
TEST(VulkanGemm, ClassifierRow) {
  expect_match(gemm_graph({1, 512}, {1000, 512}, {1000}, {attr_i("transB", 1)}), kSum);
}

TEST(VulkanFused, GemmHardSwish) {
  Graph fused, body;
  for (Graph* g : {&fused, &body}) {
    const int a = g->input("a", {1, 96}, -2.0f, 2.0f);
    const int b = g->constant("b", {64, 96}, -0.3f, 0.3f);
    const int c = g->constant("c", {64});
    if (g == &fused) {
      g->node("FusedGemm", {a, b, c}, {attr_i("transB", 1), attr_s("activation", "HardSwish")}, 1, {{1, 64}},
              "kite", "Gemm+HardSwish");
    } else {
      const int y = g->node("Gemm", {a, b, c}, {attr_i("transB", 1)})[0];
      g->mark_output(g->node("HardSwish", {y})[0]);
    }
  }
  expect_fused_and_body(fused, body, kSum);
}

void fused_matmul_case(bool gelu) {
  Graph fused, body;
  for (Graph* g : {&fused, &body}) {
    const int a = g->input("a", {32, 1, 64});
    const int b = g->constant("b", {64, 192}, -0.2f, 0.2f);
    const int c = g->constant("bias", {192});
    if (g == &fused) {
      std::vector<Attr> attrs;
      if (gelu) attrs.push_back(attr_s("activation", "Gelu"));
      g->node("FusedMatMul", {a, b, c}, attrs, 1, {{32, 1, 192}}, "kite", gelu ? "MatMul+Add+Gelu" : "MatMul+Add");
    } else {
      const int y = g->node("MatMul", {a, b})[0];
      int z = g->node("Add", {c, y})[0];
      if (gelu) {
        // GELU's erf formula, as the exporter writes it.
        const int sqrt2 = g->constant_f32("sqrt2", {}, {1.4142135381698608f});
        const int one = g->constant_f32("one", {}, {1.0f});
        const int half = g->constant_f32("half", {}, {0.5f});
        const int d = g->node("Div", {z, sqrt2})[0];
        const int e = g->node("Erf", {d})[0];
        const int s = g->node("Add", {e, one})[0];
        const int m = g->node("Mul", {z, s})[0];
        z = g->node("Mul", {m, half})[0];
      }
      g->mark_output(z);
    }
  }
  expect_fused_and_body(fused, body, kSum);
}

TEST(VulkanFused, MatMulAdd) { fused_matmul_case(false); }
TEST(VulkanFused, MatMulAddGelu) { fused_matmul_case(true); }

// ---------------------------------------------------------- elementwise --

Graph binary_graph(const std::string& op, const Shape& a, const Shape& b, float lo = -1.0f, float hi = 1.0f) {
  Graph g;
  const int ai = g.input("a", a, lo, hi);
  const int bi = g.input("b", b, lo, hi);
  g.node(op, {ai, bi});
  return g;
}

TEST(VulkanElementwise, AddSameShape) { expect_match(binary_graph("Add", {2, 3, 4, 5}, {2, 3, 4, 5}), kArith); }
TEST(VulkanElementwise, AddBroadcast) { expect_match(binary_graph("Add", {2, 3, 4, 5}, {3, 1, 5}), kArith); }
TEST(VulkanElementwise, MulPerChannel) { expect_match(binary_graph("Mul", {1, 8, 4, 4}, {1, 8, 1, 1}), kArith); }
TEST(VulkanElementwise, SubScalar) { expect_match(binary_graph("Sub", {7, 9}, {}), kArith); }
TEST(VulkanElementwise, DivBothBroadcast) { expect_match(binary_graph("Div", {4, 1, 6}, {1, 5, 6}, 0.5f, 2.0f), kArith); }
TEST(VulkanElementwise, PowPositiveBase) { expect_match(binary_graph("Pow", {3, 10}, {3, 10}, 0.5f, 2.0f), kTranscendental); }
TEST(VulkanElementwise, PRelu) { expect_match(binary_graph("PRelu", {1, 4, 3, 3}, {4, 1, 1}), kArith); }
TEST(VulkanElementwise, MaxMinSumMean) {
  expect_match(binary_graph("Max", {3, 4}, {4}), kExact);
  expect_match(binary_graph("Min", {3, 4}, {3, 1}), kExact);
  expect_match(binary_graph("Sum", {3, 4}, {3, 4}), kArith);
  expect_match(binary_graph("Mean", {3, 4}, {1, 4}), kArith);
}
TEST(VulkanElementwise, ManyDimsCollapse) {
  // 7 dims, broadcasting in a pattern that collapses to at most 6.
  expect_match(binary_graph("Add", {2, 1, 3, 2, 1, 2, 3}, {1, 2, 3, 1, 2, 2, 1}), kArith);
}

Graph unary_graph(const std::string& op, float lo, float hi, std::vector<Attr> attrs = {}) {
  Graph g;
  const int x = g.input("x", {3, 5, 7}, lo, hi);
  g.node(op, {x}, std::move(attrs));
  return g;
}

TEST(VulkanElementwise, UnaryExact) {
  for (const char* op : {"Relu", "Abs", "Neg", "Ceil", "Floor", "Sign"}) {
    SCOPED_TRACE(op);
    expect_match(unary_graph(op, -3.0f, 3.0f), kExact);
  }
  expect_match(unary_graph("Round", -3.0f, 3.0f), kExact);
}
TEST(VulkanElementwise, UnaryTranscendental) {
  for (const char* op : {"Sigmoid", "Tanh", "Exp", "Erf", "Sin", "Cos", "Softplus", "Mish", "HardSwish", "Gelu"}) {
    SCOPED_TRACE(op);
    expect_match(unary_graph(op, -4.0f, 4.0f), kTranscendental);
  }
  for (const char* op : {"Sqrt", "Log", "Reciprocal"}) {
    SCOPED_TRACE(op);
    expect_match(unary_graph(op, 0.1f, 4.0f), kTranscendental);
  }
  expect_match(unary_graph("Gelu", -4.0f, 4.0f, {attr_s("approximate", "tanh")}), kTranscendental);
  expect_match(unary_graph("Tanh", -40.0f, 40.0f), kTranscendental);  // large |x|: no inf/inf
  expect_match(unary_graph("Sigmoid", -100.0f, 100.0f), kTranscendental);
}
TEST(VulkanElementwise, UnaryWithAttributes) {
  expect_match(unary_graph("LeakyRelu", -2.0f, 2.0f, {attr_f("alpha", 0.3f)}), kArith);
  expect_match(unary_graph("Elu", -2.0f, 2.0f, {attr_f("alpha", 0.7f)}), kTranscendental);
  expect_match(unary_graph("HardSigmoid", -4.0f, 4.0f, {attr_f("alpha", 0.3f), attr_f("beta", 0.4f)}), kArith);
}
TEST(VulkanElementwise, ClipFromConstants) {
  Graph g;
  const int x = g.input("x", {4, 6}, -8.0f, 8.0f);
  const int lo = g.constant_f32("lo", {}, {-1.5f});
  const int hi = g.constant_f32("hi", {}, {6.0f});
  g.node("Clip", {x, lo, hi});
  expect_match(g, kExact);
}
TEST(VulkanFused, GeluAndGeluTanh) {
  for (bool tanh_form : {false, true}) {
    Graph fused, body;
    for (Graph* g : {&fused, &body}) {
      const int x = g->input("x", {4, 33}, -4.0f, 4.0f);
      if (g == &fused) {
        g->node("Gelu", {x}, {attr_s("approximate", tanh_form ? "tanh" : "none")}, 1, {{4, 33}}, "kite",
                tanh_form ? "Gelu(tanh)" : "Gelu");
        continue;
      }
      const int half = g->constant_f32("half", {}, {0.5f});
      const int one = g->constant_f32("one", {}, {1.0f});
      int inner;
      if (tanh_form) {
        const int three = g->constant_f32("three", {}, {3.0f});
        const int c = g->constant_f32("c", {}, {0.044715f});
        const int k = g->constant_f32("k", {}, {0.7978845608028654f});
        const int cube = g->node("Pow", {x, three})[0];
        const int t = g->node("Mul", {cube, c})[0];
        const int s = g->node("Add", {x, t})[0];
        const int u = g->node("Mul", {s, k})[0];
        inner = g->node("Tanh", {u})[0];
      } else {
        const int r = g->constant_f32("r", {}, {0.7071067811865476f});
        const int u = g->node("Mul", {x, r})[0];
        inner = g->node("Erf", {u})[0];
      }
      const int p1 = g->node("Add", {inner, one})[0];
      const int m = g->node("Mul", {x, p1})[0];
      g->mark_output(g->node("Mul", {m, half})[0]);
    }
    expect_fused_and_body(fused, body, kTranscendental);
  }
}

// ------------------------------------------------------------- pooling --

Graph pool_graph(const std::string& op, const Shape& x, std::vector<Attr> attrs) {
  Graph g;
  const int xi = g.input("x", x);
  g.node(op, {xi}, std::move(attrs));
  return g;
}

TEST(VulkanPool, MaxPool3x3Stride2Pad1) {
  expect_match(pool_graph("MaxPool", {1, 4, 15, 15},
                          {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}),
                           attr_ints("pads", {1, 1, 1, 1})}),
               kExact);
}
TEST(VulkanPool, MaxPool2x2AndCeilMode) {
  expect_match(pool_graph("MaxPool", {2, 3, 8, 8}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})}),
               kExact);
  expect_match(pool_graph("MaxPool", {1, 3, 9, 9},
                          {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_i("ceil_mode", 1)}),
               kExact);
}
TEST(VulkanPool, AveragePoolPadCounting) {
  for (int include : {0, 1}) {
    expect_match(pool_graph("AveragePool", {1, 3, 7, 7},
                            {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1}),
                             attr_i("count_include_pad", include)}),
                 kArith);
  }
}
TEST(VulkanPool, OneAndThreeDims) {
  expect_match(pool_graph("MaxPool", {1, 2, 10}, {attr_ints("kernel_shape", {3})}), kExact);
  expect_match(pool_graph("AveragePool", {1, 2, 4, 5, 6}, {attr_ints("kernel_shape", {2, 2, 2})}), kArith);
}
TEST(VulkanPool, Global) {
  expect_match(pool_graph("GlobalAveragePool", {2, 5, 7, 7}, {}), kSum);
  expect_match(pool_graph("GlobalMaxPool", {2, 5, 3, 4}, {}), kExact);
}

// -------------------------------------------------------- normalisation --

TEST(VulkanNorm, SoftmaxLastAndMiddleAxis) {
  for (int64_t axis : {-1, 1}) {
    Graph g;
    const int x = g.input("x", {3, 70, 5}, -5.0f, 5.0f);
    g.node("Softmax", {x}, {attr_i("axis", axis)});
    expect_match(g, kSum);
  }
  Graph g;
  const int x = g.input("x", {4, 100}, -5.0f, 5.0f);
  g.node("LogSoftmax", {x});
  expect_match(g, kSum);
}
TEST(VulkanNorm, LayerNormalization) {
  Graph g;
  const int x = g.input("x", {2, 17, 96}, -3.0f, 3.0f);
  const int s = g.constant("scale", {96});
  const int b = g.constant("bias", {96});
  g.node("LayerNormalization", {x, s, b}, {attr_i("axis", -1), attr_f("epsilon", 1e-5f)});
  expect_match(g, kSum);
}
TEST(VulkanNorm, InstanceAndBatchNormalization) {
  Graph g;
  const int x = g.input("x", {2, 3, 6, 5}, -3.0f, 3.0f);
  const int s = g.constant("scale", {3});
  const int b = g.constant("bias", {3});
  g.node("InstanceNormalization", {x, s, b}, {attr_f("epsilon", 1e-5f)});
  expect_match(g, kSum);
  Graph h;
  const int y = h.input("x", {2, 3, 6, 5}, -3.0f, 3.0f);
  const int hs = h.constant("scale", {3});
  const int hb = h.constant("bias", {3});
  const int hm = h.constant("mean", {3});
  const int hv = h.constant("var", {3}, 0.5f, 1.5f);
  h.node("BatchNormalization", {y, hs, hb, hm, hv}, {attr_f("epsilon", 1e-5f)});
  expect_match(h, kArith * 10);
}

void layer_norm_body(Graph& g, int x, int scale, int bias, int64_t axis_len) {
  (void)axis_len;
  const int m = g.node("ReduceMean", {x}, {attr_ints("axes", {-1})})[0];
  const int d = g.node("Sub", {x, m})[0];
  const int two = g.constant_f32("two", {}, {2.0f});
  const int sq = g.node("Pow", {d, two})[0];
  const int v = g.node("ReduceMean", {sq}, {attr_ints("axes", {-1})})[0];
  const int eps = g.constant_f32("eps", {}, {1e-5f});
  const int ve = g.node("Add", {v, eps})[0];
  const int sd = g.node("Sqrt", {ve})[0];
  const int n = g.node("Div", {d, sd})[0];
  const int ms = g.node("Mul", {n, scale})[0];
  g.mark_output(g.node("Add", {ms, bias})[0]);
}

TEST(VulkanFused, LayerNormalization) {
  Graph fused, body;
  for (Graph* g : {&fused, &body}) {
    const int x = g->input("x", {1, 17, 64}, -3.0f, 3.0f);
    const int s = g->constant("scale", {64});
    const int b = g->constant("bias", {64});
    if (g == &fused) {
      g->node("LayerNormalization", {x, s, b}, {attr_i("axis", -1), attr_f("epsilon", 1e-5f)}, 1, {{1, 17, 64}},
              "kite", "LayerNormalization");
    } else {
      layer_norm_body(*g, x, s, b, 64);
    }
  }
  expect_fused_and_body(fused, body, kSum);
}

void skip_layer_norm_case(bool sum_output) {
  Graph fused, body;
  for (Graph* g : {&fused, &body}) {
    const int a = g->input("a", {1, 32, 64}, -2.0f, 2.0f);
    const int b = g->input("b", {1, 32, 64}, -2.0f, 2.0f);
    const int s = g->constant("scale", {64});
    const int bias = g->constant("bias", {64});
    if (g == &fused) {
      const std::vector<int> outs =
          g->node("SkipLayerNormalization", {a, b, s, bias}, {attr_i("axis", -1), attr_f("epsilon", 1e-5f)},
                  sum_output ? 2 : 1, sum_output ? std::vector<Shape>{{1, 32, 64}, {1, 32, 64}}
                                                 : std::vector<Shape>{{1, 32, 64}},
                  "kite", "Add+LayerNormalization");
      for (int o : outs) g->mark_output(o);
    } else {
      const int sum = g->node("Add", {a, b})[0];
      layer_norm_body(*g, sum, s, bias, 64);
      if (sum_output) g->mark_output(sum);
    }
  }
  expect_fused_and_body(fused, body, kSum);
}

TEST(VulkanFused, SkipLayerNormalization) { skip_layer_norm_case(false); }
TEST(VulkanFused, SkipLayerNormalizationWithSumOutput) { skip_layer_norm_case(true); }

void attention_case(bool mask) {
  Graph fused, body;
  const float scale = 0.25f;
  for (Graph* g : {&fused, &body}) {
    const int q = g->input("q", {4, 17, 16}, -2.0f, 2.0f);
    const int kt = g->input("kt", {4, 16, 17}, -2.0f, 2.0f);
    const int v = g->input("v", {4, 17, 16});
    const int m = mask ? g->constant("mask", {1, 17, 17}, -3.0f, 0.0f) : -1;
    if (g == &fused) {
      std::vector<int> ins = {q, kt, v};
      if (mask) ins.push_back(m);
      g->node("Attention", ins, {attr_f("scale", scale)}, 1, {{4, 17, 16}}, "kite", "Attention");
    } else {
      const int c = g->constant_f32("c", {}, {scale});
      const int qs = g->node("Mul", {q, c})[0];
      int s = g->node("MatMul", {qs, kt})[0];
      if (mask) s = g->node("Add", {s, m})[0];
      const int p = g->node("Softmax", {s}, {attr_i("axis", -1)})[0];
      g->mark_output(g->node("MatMul", {p, v})[0]);
    }
  }
  expect_fused_and_body(fused, body, kSum);
}

TEST(VulkanFused, Attention) { attention_case(false); }
TEST(VulkanFused, AttentionWithMask) { attention_case(true); }

// Hugging Face's NaN guard fused (nan_to_zero = 1): query row 5's mask is
// all -inf, so its softmax is NaN and the guard makes the row 0, as on the
// CPU; the other rows are plain attention. The node must run on Vulkan
// (expect_match fails on a declined node).
TEST(VulkanFused, AttentionNanGuardOnAFullyMaskedRow) {
  const int64_t S = 17, T = 17;
  std::vector<float> mask(static_cast<size_t>(S * T));
  for (int64_t i = 0; i < S; ++i) {
    for (int64_t j = 0; j < T; ++j) {
      mask[static_cast<size_t>(i * T + j)] =
          i == 5 ? -std::numeric_limits<float>::infinity() : (j <= i ? 0.0f : -1e9f);
    }
  }
  Graph g;
  const int q = g.input("q", {4, S, 16}, -2.0f, 2.0f);
  const int kt = g.input("kt", {4, 16, T}, -2.0f, 2.0f);
  const int v = g.input("v", {4, T, 16});
  const int m = g.constant_f32("mask", {1, S, T}, mask);
  g.node("Attention", {q, kt, v, m}, {attr_f("scale", 0.25f), attr_i("nan_to_zero", 1)}, 1, {{4, S, 16}}, "kite",
         "Attention");
  expect_match(g, kSum);
}

// ----------------------------------------------------------- reductions --

TEST(VulkanReduce, MeanOverSpatialKeepdims) {
  Graph g;
  const int x = g.input("x", {1, 24, 7, 7});
  g.node("ReduceMean", {x}, {attr_ints("axes", {2, 3}), attr_i("keepdims", 1)});
  expect_match(g, kSum);
}
TEST(VulkanReduce, MiddleAxisColumns) {
  // [1, 32, 64] over axis 1: one invocation per output column.
  Graph g;
  const int x = g.input("x", {1, 32, 64});
  g.node("ReduceMean", {x}, {attr_ints("axes", {1}), attr_i("keepdims", 0)});
  expect_match(g, kSum);
}
TEST(VulkanReduce, EveryKind) {
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSumExp"}) {
    SCOPED_TRACE(op);
    Graph g;
    const int x = g.input("x", {3, 10, 4}, 0.5f, 1.5f);
    g.node(op, {x}, {attr_ints("axes", {1})});
    expect_match(g, kSum);
    Graph h;
    const int y = h.input("x", {5, 130}, 0.5f, 1.5f);
    h.node(op, {y}, {attr_ints("axes", {1}), attr_i("keepdims", 0)});
    expect_match(h, kSum);
  }
}
TEST(VulkanReduce, AxesAsInput) {
  Graph g;
  const int x = g.input("x", {2, 3, 4});
  const int axes = g.constant_i64("axes", {1}, {-1});
  g.node("ReduceSum", {x, axes});
  expect_match(g, kSum);
}

// -------------------------------------------------------- data movement --

TEST(VulkanData, Transpose) {
  Graph g;
  const int x = g.input("x", {2, 3, 4, 5});
  g.node("Transpose", {x}, {attr_ints("perm", {0, 2, 3, 1})});
  expect_match(g, kExact);
  Graph h;
  const int y = h.input("x", {32, 4, 16});
  h.node("Transpose", {y}, {attr_ints("perm", {1, 0, 2})});
  expect_match(h, kExact);
}
TEST(VulkanData, ConcatAxes) {
  for (int64_t axis : {0, 1, 2}) {
    Graph g;
    const int a = g.input("a", {2, 3, 4});
    const int b = g.input("b", {2, 3, 4});
    const int c = g.input("c", {2, 3, 4});
    g.node("Concat", {a, b, c}, {attr_i("axis", axis)});
    expect_match(g, kExact);
  }
}
TEST(VulkanData, SplitAndSlice) {
  Graph g;
  const int x = g.input("x", {2, 10, 3});
  const int split = g.constant_i64("split", {2}, {4, 6});
  const std::vector<int> outs = g.node("Split", {x, split}, {attr_i("axis", 1)}, 2);
  for (int o : outs) g.mark_output(o);
  expect_match(g, kExact);
  Graph h;
  const int y = h.input("x", {4, 10, 6});
  const int starts = h.constant_i64("starts", {2}, {1, -2});
  const int ends = h.constant_i64("ends", {2}, {9, 0});
  const int axes = h.constant_i64("axes", {2}, {1, 2});
  const int steps = h.constant_i64("steps", {2}, {3, -2});
  h.node("Slice", {y, starts, ends, axes, steps});
  expect_match(h, kExact);
}
TEST(VulkanData, ReshapeExpandFlatten) {
  Graph g;
  const int x = g.input("x", {2, 3, 4});
  const int shape = g.constant_i64("shape", {2}, {6, 4});
  const int r = g.node("Reshape", {x, shape})[0];
  const int to = g.constant_i64("to", {3}, {2, 6, 4});
  const int e = g.node("Expand", {r, to})[0];
  g.mark_output(g.node("Flatten", {e}, {attr_i("axis", 1)})[0]);
  expect_match(g, kExact);
}
TEST(VulkanData, GatherConstantAndRuntimeIndices) {
  Graph g;
  const int x = g.input("x", {1, 17, 64});
  const int idx = g.constant_i64("i", {}, {0});
  g.node("Gather", {x, idx}, {attr_i("axis", 1)});
  expect_match(g, kExact);
  Graph h;
  const int table = h.constant("table", {100, 16});
  const int ids = h.input_i64("ids", {2, 5}, {0, 99, 3, -1, 42, 7, 7, 0, -100, 50});
  h.node("Gather", {table, ids}, {attr_i("axis", 0)});
  expect_match(h, kExact);
}
TEST(VulkanData, GatherIndexOutOfRangeIsAnError) {
  Graph g;
  const int table = g.constant("table", {10, 4});
  const int ids = g.input_i64("ids", {3}, {1, 10, 2});
  g.node("Gather", {table, ids}, {attr_i("axis", 0)});
  Values got;
  std::string err;
  EXPECT_FALSE(run_vulkan(g, kUnifiedSegment, &got, &err));
  EXPECT_NE(err.find("index 10 is out of range"), std::string::npos) << err;
  EXPECT_NE(err.find("Gather"), std::string::npos) << err;
  EXPECT_TRUE(take_log_messages().empty());
}
TEST(VulkanData, PadModes) {
  for (const char* mode : {"constant", "reflect", "edge"}) {
    SCOPED_TRACE(mode);
    Graph g;
    const int x = g.input("x", {1, 2, 5, 6});
    const int pads = g.constant_i64("pads", {8}, {0, 0, 2, 1, 0, 0, 1, 3});
    std::vector<int> ins = {x, pads};
    if (std::string(mode) == "constant") ins.push_back(g.constant_f32("v", {}, {1.5f}));
    g.node("Pad", ins, {attr_s("mode", mode)});
    expect_match(g, kExact);
  }
}
TEST(VulkanData, Cast) {
  Graph g;
  const int x = g.input("x", {3, 7}, -1000.0f, 1000.0f);
  const int i32 = g.node("Cast", {x}, {attr_i("to", 6)})[0];
  g.mark_output(i32);
  const int i64 = g.node("Cast", {x}, {attr_i("to", 7)})[0];
  g.mark_output(i64);
  g.mark_output(g.node("Cast", {i64}, {attr_i("to", 1)})[0]);
  expect_match(g, kExact);
}
TEST(VulkanData, ResizeModes) {
  struct Mode {
    const char* mode;
    const char* coord;
  };
  for (const Mode& m : {Mode{"nearest", "asymmetric"}, Mode{"nearest", "half_pixel"}, Mode{"linear", "half_pixel"},
                        Mode{"linear", "align_corners"}, Mode{"cubic", "half_pixel"}}) {
    SCOPED_TRACE(std::string(m.mode) + " " + m.coord);
    Graph g;
    const int x = g.input("x", {1, 3, 5, 6});
    const int roi = g.constant_f32("roi", {0}, {});
    const int scales = g.constant_f32("scales", {4}, {1.0f, 1.0f, 2.0f, 1.5f});
    g.node("Resize", {x, roi, scales},
           {attr_s("mode", m.mode), attr_s("coordinate_transformation_mode", m.coord)});
    expect_match(g, kArith * 10);
  }
}

// ---------------------------------------------------- segments, barriers --

TEST(VulkanSegment, ChainReusingArenaBytes) {
  // Convolutions ping-pong between two places and each Relu runs in place:
  // every node reads what the previous wrote (read after write) and writes
  // bytes that an earlier node read (write after read): the barriers must
  // order both.
  Graph g;
  const int x = g.input("x", {1, 8, 16, 16});
  int y = x;
  int slots[2] = {-1, -1};
  for (int i = 0; i < 6; ++i) {
    const int w = g.constant("w" + std::to_string(i), {8, 8, 3, 3}, -0.3f, 0.3f);
    const int c = g.node("Conv", {y, w}, {attr_ints("pads", {1, 1, 1, 1})})[0];
    if (slots[i % 2] >= 0) g.place_in(c, slots[i % 2]);
    else slots[i % 2] = c;
    y = g.node("Relu", {c})[0];
    g.place_in(y, c);
  }
  g.mark_output(y);
  expect_match(g, kSum);
}

TEST(VulkanSegment, ConcatInputsWrittenInPlace) {
  // The planner may put Concat's inputs straight into their slices of the
  // output; the Concat's copies of those are then skipped.
  Graph g;
  const int a = g.input("a", {1, 4, 5, 5});
  const int b = g.input("b", {1, 6, 5, 5});
  const int ra = g.node("Relu", {a})[0];
  const int rb = g.node("Sigmoid", {b})[0];
  const int cat = g.node("Concat", {ra, rb}, {attr_i("axis", 1)})[0];
  g.place_in(ra, cat, 0);
  g.place_in(rb, cat, 4 * 25 * 4);
  expect_match(g, kTranscendental);
}

// ------------------------------------------------------------- float16 --

// Every half through Cast float16 -> float32: exact (NaN stays NaN).
TEST(VulkanHalf, WidenEveryHalfExactly) {
  Graph g;
  const int x = g.input("x", {65536});
  Tensor& t = g.tensors[static_cast<size_t>(x)];
  t.dtype = KITE_DTYPE_FLOAT16;
  t.data.resize(65536 * 2);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    std::memcpy(t.data.data() + 2 * h, &v, 2);
  }
  g.node("Cast", {x}, {attr_i("to", 1)});
  Values got;
  std::string err;
  ASSERT_TRUE(run_vulkan(g, kUnifiedSegment, &got, &err)) << err;
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), 65536u * 4);
  int wrong = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    float f;
    std::memcpy(&f, got[0].data() + 4 * h, 4);
    const float want = kite::half_to_float(static_cast<uint16_t>(h));
    const bool same = std::isnan(want) ? std::isnan(f) : std::memcmp(&f, &want, 4) == 0;
    if (!same && wrong++ < 5) ADD_FAILURE() << "half 0x" << std::hex << h << ": got " << f << ", want " << want;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(take_log_messages().empty());
}

// float32 -> float16 at every kind of boundary, bit for bit against the
// converter's rounding (kite::float_to_half: ties to even).
TEST(VulkanHalf, NarrowRoundsToNearestEven) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f,
                               65519.99f, 65520.0f, -65520.0f, 1e9f, -1e9f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::ldexp(1.0f, -14), std::ldexp(1.0f, -15), std::ldexp(1.0f, -24),
                               std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -26),
                               std::ldexp(3.0f, -25), 6.1e-5f, 1e-7f, -1e-7f};
  // Ties and their neighbours: halfway between consecutive halves, for
  // even and odd lower neighbours, normal and subnormal.
  for (uint16_t h : {uint16_t{0x3c00}, uint16_t{0x3c01}, uint16_t{0x0001}, uint16_t{0x0002}, uint16_t{0x03ff},
                     uint16_t{0x7bfe}, uint16_t{0x4000}, uint16_t{0xbc01}}) {
    const float lo = kite::half_to_float(h), hi = kite::half_to_float(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    values.push_back(mid);
    values.push_back(std::nextafter(mid, lo));
    values.push_back(std::nextafter(mid, hi));
  }
  Graph g;
  const int x = g.constant_f32("x", {static_cast<int64_t>(values.size())}, values);
  const int y = g.node("Identity", {x})[0];
  g.mark_output(g.node("Cast", {y}, {attr_i("to", 10)})[0]);
  Values got;
  std::string err;
  ASSERT_TRUE(run_vulkan(g, kUnifiedSegment, &got, &err)) << err;
  ASSERT_EQ(got[0].size(), values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, got[0].data() + 2 * i, 2);
    const uint16_t want = kite::float_to_half(values[i]);
    if (std::isnan(values[i])) {
      EXPECT_TRUE((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) << "NaN became 0x" << std::hex << h;
    } else {
      EXPECT_EQ(h, want) << "value " << values[i] << " (index " << i << ")";
    }
  }
}

// Tensors at 2-byte offsets (odd element counts packed back to back): the
// shaders' offsets count halves.
TEST(VulkanHalf, TwoByteOffsets) {
  Graph g;
  const int a = g.input("a", {3, 5});
  const int b = g.input("b", {5});
  const int s = g.node("Add", {a, b})[0];
  const int r = g.node("Relu", {s})[0];
  const int w = g.constant("w", {5, 7});
  const int m = g.node("MatMul", {r, w})[0];
  g.mark_output(g.node("Transpose", {m}, {attr_ints("perm", {1, 0})})[0]);
  const Graph h = to_half(g);
  Values ref, got;
  std::string err;
  ASSERT_TRUE(run_cpu(h, &ref, &err)) << err;
  VulkanOptions o = kStagingPerNode;
  o.alignment = 2;
  ASSERT_TRUE(run_vulkan(h, o, &got, &err)) << err;
  std::string where;
  EXPECT_LE(normalized_error(h, ref, got, &where), half_tolerance(kSum)) << where;
  EXPECT_TRUE(take_log_messages().empty());
}

// What has no float16 kernel, or mixes float16 with float32, is declined
// with the reason (the runtime then runs it on the CPU). run_vulkan stops
// at a declined node (false), after listing the declines in the report.
TEST(VulkanHalf, DeclinesWithReasons) {
  Graph soft;
  const int x = soft.input("x", {2, 8});
  soft.node("Softmax", {x}, {attr_i("axis", -1)});
  VulkanOptions o = kUnifiedSegment;
  o.allow_declined = true;
  RunReport report;
  Values got;
  std::string err;
  EXPECT_FALSE(run_vulkan(to_half(soft), o, &got, &err, nullptr, &report));
  ASSERT_EQ(report.declined.size(), 1u);
  EXPECT_NE(report.declined[0].find("float16 Softmax has no Vulkan kernel"), std::string::npos)
      << report.declined[0];

  Graph mixed;
  const int a = mixed.input("a", {4, 6});
  const int w = mixed.constant("w", {6, 3});
  mixed.node("MatMul", {a, w});
  Graph m = to_half(mixed);
  m.tensors[static_cast<size_t>(w)] = mixed.tensors[static_cast<size_t>(w)];  // float32 weights
  report = RunReport();
  EXPECT_FALSE(run_vulkan(m, o, &got, &err, nullptr, &report));
  ASSERT_EQ(report.declined.size(), 1u);
  // The op rules reject it first (one T for all inputs), naming the tensor.
  EXPECT_NE(report.declined[0].find("input 'w' has dtype float32, expected float16"), std::string::npos)
      << report.declined[0];
  EXPECT_TRUE(take_log_messages().empty());
}

}  // namespace
}  // namespace kite::vktest
