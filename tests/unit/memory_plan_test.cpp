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
using kite::test::make_node;
using kite::test::make_tensor;

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
  g.nodes = {make_node("add", "Add", {x, x}, {a}), make_node("relu", "Relu", {a}, {b}),
             make_node("reshape", "Reshape", {b, shape}, {c}), make_node("sigmoid", "Sigmoid", {c}, {d}),
             make_node("residual", "Add", {d, x}, {y})};
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
  // The banded and the whole convolutions must give the same bits: the
  // same algorithm for both (Winograd is for large images only, and its
  // rounding depends on where the 4x4 tiles fall; docs/MEMORY.md).
  EXPECT_EQ(kite_session_options_set_backend_option(o, "cpu", "winograd", "0"), KITE_OK);
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
  kite::ir::Node concat = make_node("concat", "Concat", {a, b}, {y});
  kite::ir::Attr axis;
  axis.name = "axis";
  axis.type = KITE_ATTR_INT;
  axis.i = 1;
  concat.attrs = {axis};
  g.nodes = {make_node("double", "Add", {x, x}, {a}), make_node("sigmoid", "Sigmoid", {x}, {b}), concat};
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

// Where the arena's peak is elsewhere (a wide tensor before the Concat),
// writing the Concat's inputs into its output costs no memory and saves
// the copy: the plan takes it on a tie too. y = Concat(x + x, Sigmoid(x)),
// z = a 1x1 Conv down from a wider 1x1 Conv of x.
TEST(MemoryPlan, ConcatInputsAreWrittenIntoTheOutputWhenTheArenaTies) {
  kite::ir::Model m;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Input));
  const int w1 = m.add_tensor(make_const("w1", {32, 4, 1, 1}, std::vector<float>(128, 0.125f)));
  const int w2 = m.add_tensor(make_const("w2", {4, 32, 1, 1}, std::vector<float>(128, 1.0f / 32.0f)));
  const int wide = m.add_tensor(make_tensor("wide", KITE_DTYPE_FLOAT32, {1, 32, 8, 8}, TensorKind::Activation));
  const int z = m.add_tensor(make_tensor("z", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Output));
  const int a = m.add_tensor(make_tensor("a", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Activation));
  const int b = m.add_tensor(make_tensor("b", KITE_DTYPE_FLOAT32, {1, 4, 8, 8}, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {1, 8, 8, 8}, TensorKind::Output));
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y, z};
  kite::ir::Attr axis;
  axis.name = "axis";
  axis.type = KITE_ATTR_INT;
  axis.i = 1;
  g.nodes = {make_node("widen", "Conv", {x, w1}, {wide}), make_node("narrow", "Conv", {wide, w2}, {z}),
             make_node("double", "Add", {x, x}, {a}), make_node("sigmoid", "Sigmoid", {x}, {b}),
             make_node("concat", "Concat", {a, b}, {y}, {axis})};
  m.graphs.push_back(g);
  kite::memory::PlanStats stats;
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, kite::memory::PlanOptions(), &stats, &err)) << err;
  // The peak is x, wide and z at the second Conv (1 + 8 + 1 KiB), with or
  // without the Concat written in place (x, z, a, b and y: 6 KiB; 4 KiB
  // in place).
  EXPECT_EQ(m.plan.arena_size, 10240u);
  EXPECT_EQ(stats.concat_nodes, 1);
  EXPECT_EQ(m.plan.offsets[static_cast<size_t>(a)], m.plan.offsets[static_cast<size_t>(y)]);
  EXPECT_EQ(m.plan.offsets[static_cast<size_t>(b)], m.plan.offsets[static_cast<size_t>(y)] + 1024u);
  EXPECT_EQ(kite::memory::check_plan(m), "");

  std::vector<float> xs(256);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 9) - 4.0f;
  const std::vector<float> ys = run_model(m, xs, /*poison=*/true);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(ys[i], 2.0f * xs[i]) << i;
    EXPECT_NEAR(ys[256 + i], 1.0f / (1.0f + std::exp(-xs[i])), 1e-6f) << i;  // one exp
  }
  const std::vector<float> zs = run_model(m, xs, /*poison=*/true, /*output=*/1);
  for (size_t p = 0; p < 64; ++p) {
    // 32 equal terms of 0.125 * (sum over the channels) / 32: integers
    // times 2^-8, exact in float whatever the order of the sums.
    float sum = 0.0f;
    for (size_t c = 0; c < 4; ++c) sum += xs[c * 64 + p];
    for (size_t c = 0; c < 4; ++c) EXPECT_EQ(zs[c * 64 + p], 0.125f * sum) << c << "," << p;
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
  g.nodes = {make_node("relu", "Relu", {x}, {a}), make_node("t1", "Transpose", {a}, {b}),
             make_node("t2", "Transpose", {b}, {c}), make_node("t3", "Transpose", {c}, {y})};
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
  g.nodes = {make_node("relu", "Relu", {x}, {y})};
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
  g.nodes.push_back(make_node("sigmoid", "Sigmoid", {x}, {s}));
  int prev = s;
  for (int i = 0; i < 6; ++i) {
    kite::ir::Node c = make_node("conv" + std::to_string(i), "Conv", {prev, wt}, {path[static_cast<size_t>(i)]});
    c.attrs = {pads};
    g.nodes.push_back(c);
    prev = path[static_cast<size_t>(i)];
  }
  g.nodes.push_back(make_node("gate", "Mul", {prev, s}, {gated}));
  g.nodes.push_back(make_node("residual", "Add", {gated, x}, {y}));
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
  ASSERT_TRUE(kite::memory::apply_memory_budget(&budgeted, unbudgeted - 1, 0,
                                                kite::memory::PlanOptions(), &report, &err)) << err;
  EXPECT_TRUE(report.met);
  ASSERT_EQ(report.recomputed.size(), 1u);
  EXPECT_EQ(report.recomputed[0].tensor, "s");
  EXPECT_EQ(report.recomputed[0].elements, 8u * 16 * 16);
  EXPECT_LT(budgeted.plan.arena_size, unbudgeted);
  EXPECT_EQ(kite::memory::check_plan(budgeted), "");
  // Patches run first (they lower the arena here without meeting the
  // budget); the recomputation then meets it with one clone of the Sigmoid.
  int clones = 0;
  for (const auto& n : budgeted.main().nodes) clones += n.name == "sigmoid/recompute";
  EXPECT_EQ(clones, 1);

  std::vector<float> x(8 * 16 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) / 5.5f - 1.0f;
  // Same kernels on the same values: bit-identical.
  EXPECT_EQ(run_model(budgeted, x, true), run_model(plain, x, true));
}

// A high-resolution stem whose layers exercise every halo rule: a stride-2
// Conv, a dilated Conv, a MaxPool and a depthwise Conv (all padded, so band
// edges inside the image must not be padded), a long skip (Add with the
// stem's Relu), a branch (1x1 Conv from the same Relu) joined by a channel
// Concat, and a small 1x1 head. The peak sits in the 16-channel layers.
kite::ir::Model halo_model() {
  kite::ir::Model m;
  auto weights = [&](const std::string& name, std::vector<int64_t> shape, int salt) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> w(static_cast<size_t>(n));
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<float>((i * 37 + static_cast<size_t>(salt) * 11) % 17) / 34.0f - 0.24f;
    }
    return m.add_tensor(make_const(name, std::move(shape), w));
  };
  auto act = [&](const std::string& name, std::vector<int64_t> shape, TensorKind kind = TensorKind::Activation) {
    return m.add_tensor(make_tensor(name, KITE_DTYPE_FLOAT32, std::move(shape), kind));
  };
  auto ints = [](const std::string& name, std::vector<int64_t> v) { return kite::ops::ints_attr(name, v); };
  const std::vector<int64_t> s16 = {1, 16, 65, 24};
  const int x = act("x", {1, 3, 130, 48}, TensorKind::Input);
  const int w1 = weights("w1", {16, 3, 3, 3}, 1), w2 = weights("w2", {16, 16, 3, 3}, 2);
  const int w3 = weights("w3", {16, 1, 3, 3}, 3), w4 = weights("w4", {16, 16, 1, 1}, 4);
  const int w5 = weights("w5", {2, 32, 1, 1}, 5), b1 = weights("b1", {16}, 6);
  const int c1 = act("c1", s16), r1 = act("r1", s16), c2 = act("c2", s16), p = act("p", s16);
  const int d = act("d", s16), sk = act("skip", s16), br = act("branch", s16);
  const int cat = act("cat", {1, 32, 65, 24}), y = act("y", {1, 2, 65, 24}, TensorKind::Output);
  kite::ir::Graph g;
  g.inputs = {x};
  g.outputs = {y};
  kite::ir::Node n = make_node("stem", "Conv", {x, w1, b1}, {c1});
  n.attrs = {ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})};
  g.nodes.push_back(n);
  g.nodes.push_back(make_node("relu", "Relu", {c1}, {r1}));
  n = make_node("dilated", "Conv", {r1, w2}, {c2});
  n.attrs = {ints("dilations", {2, 2}), ints("pads", {2, 2, 2, 2})};
  g.nodes.push_back(n);
  n = make_node("pool", "MaxPool", {c2}, {p});
  n.attrs = {ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})};
  g.nodes.push_back(n);
  n = make_node("depthwise", "Conv", {p, w3}, {d});
  n.attrs = {kite::ops::int_attr("group", 16), ints("pads", {1, 1, 1, 1})};
  g.nodes.push_back(n);
  g.nodes.push_back(make_node("skip_add", "Add", {d, r1}, {sk}));
  g.nodes.push_back(make_node("branch", "Conv", {r1, w4}, {br}));
  n = make_node("concat", "Concat", {sk, br}, {cat});
  n.attrs = {kite::ops::int_attr("axis", 1)};
  g.nodes.push_back(n);
  g.nodes.push_back(make_node("head", "Conv", {cat, w5}, {y}));
  m.graphs.push_back(g);
  return m;
}

TEST(MemoryBudget, PatchesMeetARatioBelowTheLowerBoundBitIdentically) {
  kite::ir::Model plain = halo_model();
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&plain, 256, &err)) << err;
  const uint64_t bound = plain.plan.lower_bound;

  kite::ir::Model budgeted = halo_model();
  kite::memory::BudgetReport report;
  ASSERT_TRUE(kite::memory::apply_memory_budget(&budgeted, 0, 0.6, kite::memory::PlanOptions(),
                                                &report, &err)) << err;
  EXPECT_EQ(report.lower_bound, bound);
  EXPECT_EQ(report.budget, static_cast<uint64_t>(0.6 * static_cast<double>(bound)));
  EXPECT_TRUE(report.met) << report.arena_after << " > " << report.budget;
  EXPECT_LE(budgeted.plan.arena_size, report.budget);
  ASSERT_FALSE(report.patches.empty());
  EXPECT_GE(report.patches[0].tiles, 2);
  EXPECT_GT(report.flops_added, 0u);  // the halos
  EXPECT_EQ(kite::memory::check_plan(budgeted), "");

  std::vector<float> x(3 * 130 * 48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 13) % 23) / 11.5f - 1.0f;
  // Each output element sums the same products in the same order in a band
  // as in the whole image (the GEMM's k blocking does not depend on the
  // number of pixels; the depthwise loop skips the same out-of-image taps):
  // bit-identical, with the arena poisoned.
  EXPECT_EQ(run_model(budgeted, x, true), run_model(plain, x, true));
}

TEST(MemoryBudget, EveryBandCountGivesTheSameOutputs) {
  // Direct rewrites of the whole stem into 2..13 bands, including counts
  // that leave bands of unequal heights and bands whose halo reaches both
  // image borders.
  kite::ir::Model plain = halo_model();
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&plain, 256, &err)) << err;
  std::vector<float> x(3 * 130 * 48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 19) / 9.5f - 1.0f;
  const std::vector<float> want = run_model(plain, x, true);
  for (int tiles : {2, 3, 5, 13}) {
    kite::ir::Model m = halo_model();
    ASSERT_TRUE(kite::memory::patch_nodes(&m, 0, m.main().nodes.size() - 1, tiles, nullptr, &err))
        << tiles << ": " << err;
    ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
    EXPECT_EQ(kite::memory::check_plan(m), "");
    EXPECT_EQ(run_model(m, x, true), want) << tiles << " bands";
  }
}

TEST(MemoryBudget, RecomputesAChainWithAConvolution) {
  // a = Relu(Conv(x)) is read by the first Conv of a long path and by the
  // final Add; x (a graph input) is live to the end anyway. Batch 2 keeps
  // patches out of the way (they band batch-1 images only), so the budget
  // has to recompute the chain Conv -> Relu before the Add.
  auto build = [] {
    kite::ir::Model m;
    const std::vector<int64_t> shape = {2, 8, 16, 16};
    std::vector<float> w(8 * 8 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 29) % 13) / 26.0f - 0.25f;
    const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, shape, TensorKind::Input));
    const int wt = m.add_tensor(make_const("w", {8, 8, 3, 3}, w));
    const int c = m.add_tensor(make_tensor("c", KITE_DTYPE_FLOAT32, shape, TensorKind::Activation));
    const int a = m.add_tensor(make_tensor("a", KITE_DTYPE_FLOAT32, shape, TensorKind::Activation));
    std::vector<int> path;
    for (int i = 0; i < 6; ++i) {
      path.push_back(m.add_tensor(make_tensor("p" + std::to_string(i), KITE_DTYPE_FLOAT32, shape,
                                              TensorKind::Activation)));
    }
    const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, shape, TensorKind::Output));
    const kite::ir::Attr pads = kite::ops::ints_attr("pads", {1, 1, 1, 1});
    kite::ir::Graph g;
    g.inputs = {x};
    g.outputs = {y};
    kite::ir::Node n = make_node("conv_a", "Conv", {x, wt}, {c});
    n.attrs = {pads};
    g.nodes.push_back(n);
    g.nodes.push_back(make_node("relu_a", "Relu", {c}, {a}));
    int prev = a;
    for (int i = 0; i < 6; ++i) {
      n = make_node("conv" + std::to_string(i), "Conv", {prev, wt}, {path[static_cast<size_t>(i)]});
      n.attrs = {pads};
      g.nodes.push_back(n);
      prev = path[static_cast<size_t>(i)];
    }
    g.nodes.push_back(make_node("residual", "Add", {prev, a}, {y}));
    m.graphs.push_back(g);
    return m;
  };
  kite::ir::Model plain = build();
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&plain, 256, &err)) << err;
  kite::ir::Model budgeted = build();
  kite::memory::BudgetReport report;
  ASSERT_TRUE(kite::memory::apply_memory_budget(&budgeted, plain.plan.arena_size - 1, 0,
                                                kite::memory::PlanOptions(), &report, &err)) << err;
  EXPECT_TRUE(report.met);
  EXPECT_TRUE(report.patches.empty());
  ASSERT_EQ(report.recomputed.size(), 1u);
  EXPECT_EQ(report.recomputed[0].tensor, "a");
  EXPECT_EQ(report.recomputed[0].nodes, 2);
  // The Conv's multiply-adds (2 per weight per output element) plus the Relu.
  EXPECT_EQ(report.recomputed[0].flops, 2u * (2 * 8 * 16 * 16) * (8 * 3 * 3) + 2 * 8 * 16 * 16);
  EXPECT_EQ(report.flops_added, report.recomputed[0].flops);
  EXPECT_EQ(kite::memory::check_plan(budgeted), "");
  std::vector<float> x(2 * 8 * 16 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 17) / 8.5f - 1.0f;
  EXPECT_EQ(run_model(budgeted, x, true), run_model(plain, x, true));
}

TEST(MemoryBudget, CeilModeMaxPoolBandsMatch) {
  // SqueezeNet-style pooling: kernel 3, stride 2, ceil_mode 1 on 27 rows
  // gives 13 output rows whose last window hangs past the input. Bands run
  // with ceil_mode 0 and a bottom pad covering their last window.
  auto build = [] {
    kite::ir::Model m;
    std::vector<float> w(4 * 3 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 31) % 17) / 17.0f - 0.5f;
    const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {1, 3, 28, 20}, TensorKind::Input));
    const int wt = m.add_tensor(make_const("w", {4, 3, 3, 3}, w));
    const int c = m.add_tensor(make_tensor("c", KITE_DTYPE_FLOAT32, {1, 4, 28, 20}, TensorKind::Activation));
    const int p = m.add_tensor(make_tensor("p", KITE_DTYPE_FLOAT32, {1, 4, 14, 10}, TensorKind::Activation));
    const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {1, 4, 14, 10}, TensorKind::Output));
    kite::ir::Graph g;
    g.inputs = {x};
    g.outputs = {y};
    kite::ir::Node n = make_node("conv", "Conv", {x, wt}, {c});
    n.attrs = {kite::ops::ints_attr("pads", {1, 1, 1, 1})};
    g.nodes.push_back(n);
    n = make_node("pool", "MaxPool", {c}, {p});
    n.attrs = {kite::ops::ints_attr("kernel_shape", {3, 3}), kite::ops::ints_attr("strides", {2, 2}),
               kite::ops::int_attr("ceil_mode", 1)};
    g.nodes.push_back(n);
    g.nodes.push_back(make_node("relu", "Relu", {p}, {y}));
    m.graphs.push_back(g);
    return m;
  };
  kite::ir::Model plain = build();
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&plain, 256, &err)) << err;
  std::vector<float> x(3 * 28 * 20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 11) % 29) / 14.5f - 1.0f;
  const std::vector<float> want = run_model(plain, x, true);
  for (int tiles : {2, 3, 5, 14}) {
    kite::ir::Model m = build();
    ASSERT_TRUE(kite::memory::patch_nodes(&m, 0, 2, tiles, nullptr, &err)) << tiles << ": " << err;
    ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
    EXPECT_EQ(run_model(m, x, true), want) << tiles << " bands";
  }
}

TEST(MemoryBudget, ImpossibleBudgetSaysByHowMuch) {
  kite::ir::Model m = gated_residual_model();
  kite::memory::BudgetReport report;
  std::string err;
  ASSERT_TRUE(kite::memory::apply_memory_budget(&m, 1024, 0, kite::memory::PlanOptions(), &report, &err));
  EXPECT_FALSE(report.met);
  EXPECT_GT(report.arena_after, 1024u);
}

}  // namespace
