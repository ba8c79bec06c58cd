// The converter's precision rewrite (converter/src/precision.cpp) on tiny IR
// models, and the files it writes run by the runtime's CPU backend:
// - fp32 leaves the model alone;
// - fp16 stores the MatMuls' weights as float16, keeps Softmax in fp32 and
//   inserts Casts exactly at the four precision boundaries (input -> fp16,
//   fp16 -> Softmax, Softmax -> fp16, fp16 -> the float32 output);
// - the written file loads (the verifier checks every dtype) and its output
//   matches the fp32 model's within the bound below;
// - mixed keeps a MatMul whose values exceed half's range in fp32 and says
//   so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kite/converter/precision.h"
#include "kite/kite.h"
#include "memory/planner.h"
#include "test_models.h"

namespace {

using kite::ir::TensorKind;
using kite::test::make_const;
using kite::test::make_tensor;

std::vector<float> values(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = scale * u(rng);
  return v;
}

// y = MatMul(Softmax(MatMul(x, w1)), w2); x 1x8, w1 8x8 (entries up to
// w1_scale), w2 8x4.
kite::ir::Model softmax_model(float w1_scale) {
  kite::ir::Model m;
  m.source_opset = 17;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {1, 8}, TensorKind::Input));
  const int w1 = m.add_tensor(make_const("w1", {8, 8}, values(64, w1_scale, 1)));
  const int w2 = m.add_tensor(make_const("w2", {8, 4}, values(32, 1.0f, 2)));
  const int h = m.add_tensor(make_tensor("h", KITE_DTYPE_FLOAT32, {1, 8}, TensorKind::Activation));
  const int s = m.add_tensor(make_tensor("s", KITE_DTYPE_FLOAT32, {1, 8}, TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {1, 4}, TensorKind::Output));
  kite::ir::Graph g;
  g.name = "main";
  g.inputs = {x};
  g.outputs = {y};
  kite::ir::Node a, b, c;
  a.name = "mm1";
  a.op = "MatMul";
  a.inputs = {x, w1};
  a.outputs = {h};
  b.name = "softmax";
  b.op = "Softmax";
  b.inputs = {h};
  b.outputs = {s};
  c.name = "mm2";
  c.op = "MatMul";
  c.inputs = {s, w2};
  c.outputs = {y};
  g.nodes = {a, b, c};
  m.graphs.push_back(g);
  return m;
}

// The model's one output y for its one input x (CPU backend).
std::vector<float> run(const kite::ir::Model& m, const std::vector<float>& x) {
  std::vector<std::vector<float>> out = kite::test::run_on_cpu(m, {x});
  return out.size() == 1 ? out[0] : std::vector<float>(4, NAN);
}

TEST(Precision, Fp32LeavesTheModelAlone) {
  kite::ir::Model m = softmax_model(1.0f);
  kite::converter::PrecisionOptions o;
  kite::converter::PrecisionReport r;
  std::string err;
  ASSERT_TRUE(kite::converter::apply_precision(&m, o, &r, &err)) << err;
  EXPECT_EQ(m.main().nodes.size(), 3u);
  EXPECT_EQ(r.casts, 0);
  EXPECT_EQ(r.fp16_nodes, 0);
  for (const auto& t : m.tensors) EXPECT_EQ(t.dtype, KITE_DTYPE_FLOAT32) << t.name;
}

TEST(Precision, Fp16CastsOnlyAtBoundariesAndRuns) {
  const kite::ir::Model reference = softmax_model(1.0f);
  kite::ir::Model m = reference;
  kite::converter::PrecisionOptions o;
  o.precision = kite::converter::Precision::kFp16;
  kite::converter::PrecisionReport r;
  std::string err;
  ASSERT_TRUE(kite::converter::apply_precision(&m, o, &r, &err)) << err;
  std::vector<std::string> ops;
  for (const auto& n : m.main().nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Cast", "MatMul", "Cast", "Softmax", "Cast", "MatMul", "Cast"}));
  EXPECT_EQ(r.casts, 4);
  EXPECT_EQ(r.fp16_nodes, 2);
  // Every weight is float16 now (the float32 originals are dropped), the
  // graph's input and output keep float32.
  for (const auto& t : m.tensors) {
    if (t.is_constant()) {
      EXPECT_EQ(t.dtype, KITE_DTYPE_FLOAT16) << t.name;
      EXPECT_EQ(t.data.size(), t.byte_size()) << t.name;
    }
  }
  EXPECT_EQ(m.tensors[static_cast<size_t>(m.main().inputs[0])].dtype, KITE_DTYPE_FLOAT32);
  EXPECT_EQ(m.tensors[static_cast<size_t>(m.main().outputs[0])].dtype, KITE_DTYPE_FLOAT32);
  EXPECT_EQ(r.weight_bytes_after * 2, r.weight_bytes_before);

  // Runs, and matches fp32. Bound: x, w in [-1, 1]; each MatMul output is a
  // sum of 8 products whose factors carry a half rounding each (relative
  // 2^-11), plus the rounding of the result: |error| <= (2 * 2^-11 + 2^-11)
  // * sum|x_i w_ij| + ..., about 3 * 4.9e-4 * 8 = 1.2e-2 absolute at
  // worst for the first MatMul, damped by the Softmax (Lipschitz 1/2 in
  // each input up to the sum) and summed over 8 weights <= 1 in the
  // second: 2e-2 absolute covers it with room; max|y| is O(1).
  const std::vector<float> x = values(8, 1.0f, 3);
  const std::vector<float> want = run(reference, x);
  const std::vector<float> got = run(m, x);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 2e-2) << k;
}

TEST(Precision, MixedKeepsAnOverflowingNodeInFp32) {
  // w1 entries up to 1e5: beyond half's range already, and so are the first
  // MatMul's results; the Softmax then saturates; the second MatMul is
  // harmless.
  kite::ir::Model m = softmax_model(1e5f);
  kite::converter::PrecisionOptions o;
  o.precision = kite::converter::Precision::kMixed;
  kite::converter::CalibrationValue v;
  v.dtype = KITE_DTYPE_FLOAT32;
  v.shape = {1, 8};
  const std::vector<float> ones(8, 1.0f);
  v.data.resize(8 * sizeof(float));
  std::memcpy(v.data.data(), ones.data(), v.data.size());
  o.samples = {{{"x", v}}};
  kite::converter::PrecisionReport r;
  std::string err;
  ASSERT_TRUE(kite::converter::apply_precision(&m, o, &r, &err)) << err;
  ASSERT_EQ(r.nodes.size(), 3u);
  EXPECT_FALSE(r.nodes[0].fp16);
  EXPECT_EQ(r.nodes[0].reason.rfind("overflow", 0), 0u) << r.nodes[0].reason;
  EXPECT_FALSE(r.nodes[1].fp16);  // Softmax
  EXPECT_TRUE(r.nodes[2].fp16) << r.nodes[2].reason;
  EXPECT_LE(r.final_error, 1e-2);
}

}  // namespace
