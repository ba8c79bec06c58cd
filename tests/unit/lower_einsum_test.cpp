// lower_einsum: Einsums that are batched matrix products become
// Transpose/Reshape/MatMul, the rest stay Einsum nodes. Each rewritten graph
// runs on the CPU backend against the Einsum kernel on the graph as built.
//
// Tolerance, per output element: the Einsum kernel sums its K products in
// double and rounds once (error <= 2^-24 |y|); MatMul rounds each product
// and each of its K - 1 float additions, in any order (error <= (K + 1) *
// 2^-24 * sum |a||b| to first order). Both together stay below
// (K + 2) * 2^-23 * sum |a||b|, twice that first-order bound, and sum |a||b|
// is the Einsum kernel's own output on |A| and |B|. A lost or misplaced index
// is off by the size of the values (inputs in [-1, 1]), far above it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/ops/attr.h"
#include "kite/ops/einsum.h"
#include "passes/pass.h"
#include "test_models.h"

namespace {

using kite::ir::Model;
using kite::ir::TensorKind;
using kite::test::make_tensor;
using Shape = std::vector<int64_t>;

// One Einsum over graph inputs x0, x1, ... with output y.
Model einsum_model(const std::string& equation, const std::vector<Shape>& shapes) {
  kite::ops::EinsumPlan plan;
  std::string err;
  EXPECT_TRUE(kite::ops::resolve_einsum(equation, shapes, &plan, &err)) << err;
  Model m;
  m.source_opset = 12;
  m.producer = "lower_einsum_test";
  kite::ir::Graph g;
  g.name = "main";
  kite::ir::Node n;
  n.name = "einsum";
  n.op = "Einsum";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int x = m.add_tensor(make_tensor("x" + std::to_string(i), KITE_DTYPE_FLOAT32, shapes[i], TensorKind::Input));
    g.inputs.push_back(x);
    n.inputs.push_back(x);
  }
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, plan.output_shape, TensorKind::Output));
  g.outputs = {y};
  n.outputs = {y};
  n.attrs = {kite::ops::string_attr("equation", equation)};
  g.nodes = {n};
  m.graphs.push_back(g);
  return m;
}

kite::passes::PassResult lower(Model* m) {
  kite::converter::CpuEvaluator evaluator;
  kite::passes::PassContext ctx;
  ctx.model = m;
  ctx.evaluator = &evaluator;
  kite::passes::PassResult result;
  EXPECT_TRUE(kite::passes::lower_einsum(ctx, &result)) << ctx.error;
  return result;
}

std::vector<std::string> ops_of(const Model& m) {
  std::vector<std::string> ops;
  for (const kite::ir::Node& n : m.main().nodes) ops.push_back(n.op);
  return ops;
}

// Lowers the Einsum `equation` and checks the ops it became and, on seeded
// inputs in [-1, 1], the outputs against the Einsum kernel (bound above).
void expect_lowered(const std::string& equation, const std::vector<Shape>& shapes,
                    const std::vector<std::string>& want_ops) {
  SCOPED_TRACE(equation);
  const Model original = einsum_model(equation, shapes);
  Model lowered = original;
  const kite::passes::PassResult r = lower(&lowered);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.counters.count("lowered") ? r.counters.at("lowered") : 0, 1);
  EXPECT_EQ(ops_of(lowered), want_ops);

  kite::ops::EinsumPlan plan;
  std::string err;
  ASSERT_TRUE(kite::ops::resolve_einsum(equation, shapes, &plan, &err)) << err;
  int64_t k = 1;
  for (int l : plan.summed_labels) k *= plan.label_dims[static_cast<size_t>(l)];

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> inputs, magnitudes;
  for (const Shape& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    std::vector<float> v(static_cast<size_t>(n)), a(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = dist(rng);
      a[i] = std::fabs(v[i]);
    }
    inputs.push_back(v);
    magnitudes.push_back(a);
  }
  const auto want = kite::test::run_on_cpu(original, inputs);
  const auto got = kite::test::run_on_cpu(lowered, inputs);
  const auto scale = kite::test::run_on_cpu(original, magnitudes);  // sum |a||b| per element
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(scale.size(), 1u);
  ASSERT_EQ(got[0].size(), want[0].size());
  const double ulp = std::ldexp(1.0, -23);
  for (size_t i = 0; i < want[0].size(); ++i) {
    const double bound = static_cast<double>(k + 2) * ulp * scale[0][i];
    ASSERT_LE(std::fabs(static_cast<double>(got[0][i]) - want[0][i]), bound)
        << "element " << i << ": " << got[0][i] << " vs " << want[0][i];
  }
}

void expect_kept(const std::string& equation, const std::vector<Shape>& shapes) {
  SCOPED_TRACE(equation);
  Model m = einsum_model(equation, shapes);
  const kite::passes::PassResult r = lower(&m);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(ops_of(m), std::vector<std::string>{"Einsum"});
}

TEST(LowerEinsum, AttentionForms) {
  // Scores: K moves to [b, h, d, k], Q is already [b, h, q, d].
  expect_lowered("bhqd,bhkd->bhqk", {{2, 3, 5, 8}, {2, 3, 7, 8}}, {"Transpose", "MatMul"});
  // Weighted values: already a batched MatMul.
  expect_lowered("bhqk,bhkd->bhqd", {{2, 3, 5, 7}, {2, 3, 7, 4}}, {"MatMul"});
}

TEST(LowerEinsum, MatrixProducts) {
  expect_lowered("ij,jk->ik", {{4, 6}, {6, 3}}, {"MatMul"});
  expect_lowered("ij,jk", {{4, 6}, {6, 3}}, {"MatMul"});  // implicit output "ik"
  expect_lowered("bij,bjk->bik", {{2, 4, 6}, {2, 6, 3}}, {"MatMul"});
  expect_lowered("...ij,...jk->...ik", {{2, 3, 4, 5}, {2, 3, 5, 2}}, {"MatMul"});
}

TEST(LowerEinsum, PermutedOutputAndBatchInTheMiddle) {
  expect_lowered("ij,jk->ki", {{4, 6}, {6, 3}}, {"MatMul", "Transpose"});
  expect_lowered("ibj,jbk->bik", {{4, 2, 6}, {6, 2, 3}}, {"Transpose", "Transpose", "MatMul"});
}

TEST(LowerEinsum, SeveralFreeAndContractedLabelsAreReshaped) {
  // k = (b, c): A reshaped to [a, b*c], B moved to [b, c, d] and reshaped.
  expect_lowered("abc,cbd->ad", {{3, 4, 5}, {5, 4, 2}}, {"Reshape", "Transpose", "Reshape", "MatMul"});
  // m = (i, j): the product [i*j, l] is split and moved to [l, i, j].
  expect_lowered("ijk,kl->lij", {{2, 3, 4}, {4, 5}}, {"Reshape", "MatMul", "Reshape", "Transpose"});
  // No contracted label: an outer product through K = 1.
  expect_lowered("i,j->ij", {{5}, {3}}, {"Reshape", "Reshape", "MatMul"});
  // Dot products: [1, K] x [K, 1], the product reshaped to a scalar / [b].
  expect_lowered("i,i->", {{7}, {7}}, {"Reshape", "Reshape", "MatMul", "Reshape"});
  expect_lowered("bi,bi->b", {{3, 7}, {3, 7}}, {"Reshape", "Reshape", "MatMul", "Reshape"});
}

TEST(LowerEinsum, OtherFormsStayForTheKernel) {
  expect_kept("bn,anm,bm->ba", {{3, 4}, {2, 4, 5}, {3, 5}});  // bilinear: three operands
  expect_kept("ii->i", {{4, 4}});                             // one operand: diagonal
  expect_kept("ij->j", {{4, 3}});                             // one operand: a sum
  expect_kept("iij,jk->ik", {{3, 3, 4}, {4, 2}});             // repeated label in one operand
  expect_kept("ij,jk->k", {{4, 6}, {6, 3}});                  // i summed out of A only
  expect_kept("...ij,...jk->...ik", {{2, 1, 3, 4}, {1, 5, 4, 2}});  // broadcast ellipsis
}

TEST(LowerEinsum, PipelineLowersAtO2Only) {
  for (int level : {1, 2}) {
    Model m = einsum_model("bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}});
    kite::passes::PipelineOptions options;
    options.level = level;
    kite::passes::PipelineReport report;
    std::string err;
    ASSERT_TRUE(kite::passes::run_pipeline(&m, options, &report, &err)) << err;
    int einsums = 0;
    for (const kite::ir::Node& n : m.main().nodes) einsums += n.op == "Einsum";
    EXPECT_EQ(einsums, level == 2 ? 0 : 1) << "level " << level;
  }
}

// Einsum attention (scores, Softmax, weighted values) through the whole
// pipeline: lowered, then fused into one Attention node (the key's
// Transpose stays in front of it). Tolerance: the fused kernel sums the same
// 4 + 5 products in float and evaluates Softmax with its own exp (within a
// few 1e-7 relative), so the outputs (|y| <= 1) agree to ~1e-6; 1e-5 is a
// 10x margin, while a wrong layout moves them by 1e-1.
TEST(LowerEinsum, EinsumAttentionBecomesAnAttentionNode) {
  Model m = einsum_model("bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}});
  kite::ir::Graph& g = m.graphs[0];
  const int scores = g.outputs[0];
  m.tensors[static_cast<size_t>(scores)].kind = TensorKind::Activation;
  const int v = m.add_tensor(make_tensor("v", KITE_DTYPE_FLOAT32, {1, 2, 5, 6}, TensorKind::Input));
  const int probs = m.add_tensor(make_tensor("probs", KITE_DTYPE_FLOAT32, {1, 2, 3, 5}, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("out", KITE_DTYPE_FLOAT32, {1, 2, 3, 6}, TensorKind::Output));
  g.inputs.push_back(v);
  g.outputs = {y};
  kite::ir::Node softmax;
  softmax.name = "softmax";
  softmax.op = "Softmax";
  softmax.inputs = {scores};
  softmax.outputs = {probs};
  softmax.attrs = {kite::ops::int_attr("axis", -1)};
  kite::ir::Node values;
  values.name = "values";
  values.op = "Einsum";
  values.inputs = {probs, v};
  values.outputs = {y};
  values.attrs = {kite::ops::string_attr("equation", "bhqk,bhkd->bhqd")};
  g.nodes.push_back(softmax);
  g.nodes.push_back(values);

  Model opt = m;
  kite::passes::PipelineReport report;
  std::string err;
  ASSERT_TRUE(kite::passes::run_pipeline(&opt, kite::passes::PipelineOptions(), &report, &err)) << err;
  EXPECT_EQ(ops_of(opt), (std::vector<std::string>{"Transpose", "Attention"}));

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> inputs = {std::vector<float>(24), std::vector<float>(40),
                                            std::vector<float>(60)};
  for (auto& in : inputs) {
    for (float& x : in) x = dist(rng);
  }
  const auto want = kite::test::run_on_cpu(m, inputs);
  const auto got = kite::test::run_on_cpu(opt, inputs);
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), want[0].size());
  for (size_t i = 0; i < want[0].size(); ++i) {
    EXPECT_NEAR(got[0][i], want[0][i], 1e-5) << "element " << i;
  }
}

}  // namespace
