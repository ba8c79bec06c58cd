// The memory planner on whole models: in-place ops and views, the plan proof
// catching a planted overlap, poison mode exposing stale reads, and the
// memory budget cutting the arena of a skip connection with identical
// outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "kite/kite.h"
#include "memory/budget.h"
#include "test_models.h"

namespace {

using kite::ir::TensorKind;
using kite::test::make_const;
using kite::test::make_tensor;

kite::ir::Node node(const std::string& name, const std::string& op, std::vector<int> in,
                    std::vector<int> out) {
  kite::ir::Node n;
  n.name = name;
  n.op = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// y = Sigmoid(Reshape(Relu(x + x))) + x, x live to the end: Relu, Sigmoid
// and the final Add run in place, the Reshape is a view, so one buffer
// besides the input serves all (three without aliasing).
kite::ir::Model chain_model() {
  kite::ir::Model m;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Input));
  const int shape = m.add_tensor(make_tensor("shape", KITE_DTYPE_INT64, {2}, TensorKind::Constant));
  m.tensors[static_cast<size_t>(shape)].data.resize(16);
  const int64_t dims[2] = {4, 64};
  std::memcpy(m.tensors[static_cast<size_t>(shape)].data.data(), dims, 16);
  const int a = m.add_tensor(make_tensor("a", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Activation));
  const int b = m.add_tensor(make_tensor("b", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Activation));
  const int c = m.add_tensor(make_tensor("c", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Activation));
  const int d = m.add_tensor(make_tensor("d", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Output));
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y};
  g.nodes = {node("add", "Add", {x, x}, {a}), node("relu", "Relu", {a}, {b}),
             node("reshape", "Reshape", {b, shape}, {c}), node("sigmoid", "Sigmoid", {c}, {d}),
             node("residual", "Add", {d, x}, {y})};
  m.graphs.push_back(g);
  return m;
}

std::vector<float> run_model(const kite::ir::Model& m, const std::vector<float>& x, bool poison,
                             int output = 0) {
  const auto bytes = kite::test::serialize_or_die(m);
  kite_model* model = nullptr;
  EXPECT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &model), KITE_OK) << kite_last_error();
  kite_session_options* o = nullptr;
  kite_session_options_create(&o);
  kite_session_options_set_poison(o, poison ? 1 : 0);
  kite_session* s = nullptr;
  EXPECT_EQ(kite_session_create(model, o, &s), KITE_OK) << kite_last_error();
  kite_tensor_info info;
  kite_session_get_output_info(s, output, &info);
  std::vector<float> y(info.byte_size / 4);
  EXPECT_EQ(kite_session_set_input(s, 0, x.data(), x.size() * 4), KITE_OK);
  EXPECT_EQ(kite_session_run(s), KITE_OK) << kite_last_error();
  EXPECT_EQ(kite_session_get_output(s, output, y.data(), y.size() * 4), KITE_OK);
  kite_session_destroy(s);
  kite_session_options_destroy(o);
  kite_model_destroy(model);
  return y;
}

TEST(MemoryPlan, InPlaceOpsAndViewsShareBytes) {
  kite::ir::Model m = chain_model();
  kite::memory::PlanOptions options;
  kite::memory::PlanStats stats;
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, options, &stats, &err)) << err;
  EXPECT_EQ(stats.inplace_nodes, 3);  // relu over a, sigmoid over c, residual over d
  EXPECT_EQ(stats.view_nodes, 1);     // reshape
  const auto& off = m.plan.offsets;
  for (int t = 3; t <= 6; ++t) EXPECT_EQ(off[2], off[static_cast<size_t>(t)]) << t;  // a..y
  EXPECT_NE(off[0], off[2]);  // the input is never written over
  EXPECT_EQ(m.plan.arena_size, 2048u);  // x and one shared 1 KiB buffer
  EXPECT_EQ(stats.arena_without_aliasing, 3072u);
  EXPECT_EQ(kite::memory::check_plan(m), "");

  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  const std::vector<float> y = run_model(m, x, /*poison=*/true);
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = 1.0f / (1.0f + std::exp(-std::max(0.0f, 2.0f * x[i]))) + x[i];
    EXPECT_NEAR(y[i], expected, 1e-6f) << i;  // one exp, a few ulps
  }
  // Without aliasing the plan is bigger and the outputs are the same.
  kite::ir::Model plain = chain_model();
  options.allow_aliasing = false;
  ASSERT_TRUE(kite::memory::plan_memory(&plain, options, nullptr, &err)) << err;
  EXPECT_EQ(plain.plan.arena_size, 3072u);
  EXPECT_EQ(run_model(plain, x, true), y);
}

// y = Concat(x + x, Sigmoid(x)) along channels of a batch-1 tensor: both
// inputs are contiguous slices of y, so their producers write straight there.
kite::ir::Model concat_model() {
  kite::ir::Model m;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Input));
  const int a = m.add_tensor(make_tensor("a", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Activation));
  const int b = m.add_tensor(make_tensor("b", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {1, 8, 8, 8}, TensorKind::Output));
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y};
  kite::ir::Node concat = node("concat", "Concat", {a, b}, {y});
  kite::ir::Attr axis;
  axis.name = "axis";
  axis.type = KITE_ATTR_INT;
  axis.i = 1;
  concat.attrs = {axis};
  g.nodes = {node("double", "Add", {x, x}, {a}), node("sigmoid", "Sigmoid", {x}, {b}), concat};
  m.graphs.push_back(g);
  return m;
}

TEST(MemoryPlan, ConcatInputsAreWrittenIntoTheOutput) {
  kite::ir::Model m = concat_model();
  kite::memory::PlanStats stats;
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, kite::memory::PlanOptions(), &stats, &err)) << err;
  EXPECT_EQ(stats.concat_nodes, 1);
  EXPECT_EQ(m.plan.offsets[1], m.plan.offsets[3]);           // a: first slice of y
  EXPECT_EQ(m.plan.offsets[2], m.plan.offsets[3] + 1024u);   // b: second slice
  EXPECT_EQ(m.plan.arena_size, 3072u);                       // x and y's 2 KiB
  EXPECT_EQ(stats.arena_without_aliasing, 5120u);            // x, a, b and y at the Concat
  EXPECT_EQ(kite::memory::check_plan(m), "");
  // A slice at the wrong place is caught.
  kite::ir::Model bad = m;
  bad.plan.offsets[2] = bad.plan.offsets[3];
  EXPECT_NE(kite::memory::check_plan(bad).find("share bytes"), std::string::npos);

  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 9) - 4.0f;
  const std::vector<float> y = run_model(m, x, /*poison=*/true);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], 2.0f * x[i]) << i;
    EXPECT_NEAR(y[256 + i], 1.0f / (1.0f + std::exp(-x[i])), 1e-6f) << i;  // one exp
  }
}

TEST(MemoryPlan, InputsSurviveARunSoItCanBeRepeated) {
  // x dies at the first node; without care its bytes would be reused by the
  // later Transposes, and a second run on the same inputs would read garbage.
  kite::ir::Model m;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Input));
  const int a = m.add_tensor(make_tensor("a", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Activation));
  const int b = m.add_tensor(make_tensor("b", KITE_DTYPE_FLOAT32, {64, 4}, TensorKind::Activation));
  const int c = m.add_tensor(make_tensor("c", KITE_DTYPE_FLOAT32, {4, 64}, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {64, 4}, TensorKind::Output));
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y};
  g.nodes = {node("relu", "Relu", {x}, {a}), node("t1", "Transpose", {a}, {b}),
             node("t2", "Transpose", {b}, {c}), node("t3", "Transpose", {c}, {y})};
  m.graphs.push_back(g);
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  for (int t = 1; t <= 4; ++t) EXPECT_NE(m.plan.offsets[0], m.plan.offsets[static_cast<size_t>(t)]) << t;
  const auto bytes = kite::test::serialize_or_die(m);
  kite_model* model = nullptr;
  ASSERT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &model), KITE_OK);
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(model, nullptr, &s), KITE_OK) << kite_last_error();
  std::vector<float> in(256), first(256), second(256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) - 100.0f;
  ASSERT_EQ(kite_session_set_input(s, 0, in.data(), 1024), KITE_OK);
  ASSERT_EQ(kite_session_run(s), KITE_OK);
  ASSERT_EQ(kite_session_get_output(s, 0, first.data(), 1024), KITE_OK);
  ASSERT_EQ(kite_session_run(s), KITE_OK);  // inputs not set again
  ASSERT_EQ(kite_session_get_output(s, 0, second.data(), 1024), KITE_OK);
  EXPECT_EQ(first, second);
  kite_session_destroy(s);
  kite_model_destroy(model);
}

TEST(MemoryPlan, InputIsNotOverwrittenInPlace) {
  kite::ir::Model m;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {8}, TensorKind::Input));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {8}, TensorKind::Output));
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y};
  g.nodes = {node("relu", "Relu", {x}, {y})};
  m.graphs.push_back(g);
  kite::memory::PlanStats stats;
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, kite::memory::PlanOptions(), &stats, &err)) << err;
  EXPECT_EQ(stats.inplace_nodes, 0);
  EXPECT_NE(m.plan.offsets[0], m.plan.offsets[1]);
}

TEST(MemoryPlan, CheckerCatchesPlantedOverlapNamingTensors) {
  kite::ir::Model m = kite::test::conv_relu_add_model(false);
  ASSERT_EQ(kite::memory::check_plan(m), "");
  // 'conv' and 'x' are both live at the Conv: put them on the same bytes.
  m.plan.offsets[3] = m.plan.offsets[0];
  const std::string problem = kite::memory::check_plan(m);
  EXPECT_NE(problem.find("share bytes"), std::string::npos) << problem;
  EXPECT_NE(problem.find("'x'"), std::string::npos) << problem;
  m = kite::test::conv_relu_add_model(false);
  m.plan.offsets[5] = m.plan.arena_size;  // 'y' past the end
  EXPECT_NE(kite::memory::check_plan(m).find("leaves the arena"), std::string::npos);
}

TEST(MemoryPlan, FusedBodyScratchLivesInsideTheNodeOnly) {
  kite::ir::Model fused = kite::test::conv_relu_add_model(true);
  kite::ir::Model plain = kite::test::conv_relu_add_model(false);
  EXPECT_EQ(kite::memory::check_plan(fused), "");
  // The body's Relu takes over the Conv scratch, so the fused node costs no
  // more arena than the unfused graph.
  EXPECT_LE(fused.plan.arena_size, plain.plan.arena_size);
}

TEST(MemoryPlan, PoisonShowsReadsOfNeverWrittenBytes) {
  // 'z' is a graph output nothing writes: a stand-in for a stale read. It is
  // larger than the input, whose bytes are never poisoned, so its tail lies
  // in poisoned bytes wherever the planner puts it.
  kite::ir::Model m = kite::test::add_relu_model();
  const int z = m.add_tensor(make_tensor("z", KITE_DTYPE_FLOAT32, {64}, TensorKind::Output));
  m.main().outputs.push_back(z);
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  const std::vector<float> x(6, 1.0f);
  const std::vector<float> clean = run_model(m, x, /*poison=*/false, 1);
  const std::vector<float> poisoned = run_model(m, x, /*poison=*/true, 1);
  EXPECT_FALSE(std::isnan(clean[63]));
  EXPECT_TRUE(std::isnan(poisoned[63]));
  // The real output is unaffected by poisoning.
  EXPECT_EQ(run_model(m, x, true, 0), run_model(m, x, false, 0));
}

// A gated residual: s = Sigmoid(x) is used right away and again at the very
// end, while x itself stays live to the end. Recomputing s at the end frees
// its bytes across the long middle.
kite::ir::Model gated_residual_model() {
  kite::ir::Model m;
  const std::vector<int64_t> shape = {1, 8, 16, 16};
  std::vector<float> w(8 * 8 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 29) % 13) / 26.0f - 0.25f;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, shape, TensorKind::Input));
  const int wt = m.add_tensor(make_const("w", {8, 8, 3, 3}, w));
  const int s = m.add_tensor(make_tensor("s", KITE_DTYPE_FLOAT32, shape, TensorKind::Activation));
  std::vector<int> path;
  for (int i = 0; i < 6; ++i) {
    path.push_back(m.add_tensor(make_tensor("p" + std::to_string(i), KITE_DTYPE_FLOAT32, shape,
                                            TensorKind::Activation)));
  }
  const int gated = m.add_tensor(make_tensor("gated", KITE_DTYPE_FLOAT32, shape, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, shape, TensorKind::Output));
  kite::ir::Attr pads;
  pads.name = "pads";
  pads.type = KITE_ATTR_INTS;
  pads.ints = {1, 1, 1, 1};
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y};
  g.nodes.push_back(node("sigmoid", "Sigmoid", {x}, {s}));
  int prev = s;
  for (int i = 0; i < 6; ++i) {
    kite::ir::Node c = node("conv" + std::to_string(i), "Conv", {prev, wt}, {path[static_cast<size_t>(i)]});
    c.attrs = {pads};
    g.nodes.push_back(c);
    prev = path[static_cast<size_t>(i)];
  }
  g.nodes.push_back(node("gate", "Mul", {prev, s}, {gated}));
  g.nodes.push_back(node("residual", "Add", {gated, x}, {y}));
  m.graphs.push_back(g);
  return m;
}

TEST(MemoryBudget, RecomputingASkipConnectionShrinksTheArena) {
  kite::ir::Model plain = gated_residual_model();
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&plain, 256, &err)) << err;
  const uint64_t unbudgeted = plain.plan.arena_size;

  kite::ir::Model budgeted = gated_residual_model();
  kite::memory::BudgetReport report;
  ASSERT_TRUE(kite::memory::apply_memory_budget(&budgeted, unbudgeted - 1,
                                                kite::memory::PlanOptions(), &report, &err)) << err;
  EXPECT_TRUE(report.met);
  ASSERT_EQ(report.recomputed.size(), 1u);
  EXPECT_EQ(report.recomputed[0].tensor, "s");
  EXPECT_EQ(report.recomputed[0].elements, 8u * 16 * 16);
  EXPECT_LT(budgeted.plan.arena_size, unbudgeted);
  EXPECT_EQ(kite::memory::check_plan(budgeted), "");
  EXPECT_EQ(budgeted.main().nodes.size(), plain.main().nodes.size() + 1);

  std::vector<float> x(8 * 16 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) / 5.5f - 1.0f;
  // Same kernels on the same values: bit-identical.
  EXPECT_EQ(run_model(budgeted, x, true), run_model(plain, x, true));
}

TEST(MemoryBudget, ImpossibleBudgetSaysByHowMuch) {
  kite::ir::Model m = gated_residual_model();
  kite::memory::BudgetReport report;
  std::string err;
  ASSERT_TRUE(kite::memory::apply_memory_budget(&m, 1024, kite::memory::PlanOptions(), &report, &err));
  EXPECT_FALSE(report.met);
  EXPECT_GT(report.arena_after, 1024u);
}

}  // namespace
