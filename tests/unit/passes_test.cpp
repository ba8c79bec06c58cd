// The graph optimizer's passes, one at a time, on tiny IR graphs: each test
// checks the resulting structure and that the optimized graph gives the same
// outputs as the unoptimized one through the CPU runtime on seeded random
// inputs; and a case where the pass must NOT apply (an intermediate with a
// second reader, a run-time If condition, ...). Last, the fused kernels
// against their bodies: the same file run fused and decomposed.
//
// Tolerance (kTol): max|optimized - reference| <= 2e-5 * max|reference|
// (absolute 2e-5 when the reference is all zero). The passes change float
// rounding only: folded weights (W * a, bias * a + b) round once more per
// element (<= 1.2e-7 relative), the fused kernels sum in another order, and
// GELU/softmax/LayerNorm formulas evaluate in float with a different
// association; over these graphs' sums of <= 72 terms that stays below 1e-6
// of max|ref| (measured ~1e-7). 2e-5 is a 20x margin; a wrong fold (a missed
// epsilon, a transposed channel, a lost bias) is off by 1e-3 or more.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "kite/converter/convert.h"
#include "kite/abi/node.h"
#include "kite/kite.h"
#include "memory/planner.h"
#include "passes/pass.h"
#include "src/fold_policy.h"
#include "src/infer_shapes.h"
#include "src/ref_eval.h"
#include "test_models.h"
#include "writer/kite_writer.h"

namespace {

using kite::ir::Attr;
using kite::ir::Model;
using kite::ir::Node;
using kite::ir::Tensor;
using kite::ir::TensorKind;
using kite::ops::float_attr;
using kite::ops::graph_attr;
using kite::ops::int_attr;
using kite::ops::ints_attr;
using Shape = std::vector<int64_t>;

constexpr double kTol = 2e-5;

// Builds a model node by node; every output's dtype and shape come from the
// shared op rules (kite::ops::infer_types), without folding anything.
class Builder {
 public:
  Builder() {
    m_.source_opset = 17;
    m_.producer = "passes_test";
    m_.graphs.emplace_back();
    m_.graphs[0].name = "main";
  }

  int input(const std::string& name, Shape shape, kite_dtype dtype = KITE_DTYPE_FLOAT32) {
    const int t = add(name, dtype, std::move(shape), TensorKind::Input);
    m_.graphs[0].inputs.push_back(t);
    return t;
  }
  int constant(const std::string& name, Shape shape, const std::vector<float>& values) {
    const int t = add(name, KITE_DTYPE_FLOAT32, std::move(shape), TensorKind::Constant);
    bytes(t, values.data(), values.size() * 4);
    return t;
  }
  int scalar(const std::string& name, float v) { return constant(name, {}, {v}); }
  int ints_constant(const std::string& name, const std::vector<int64_t>& values) {
    const int t = add(name, KITE_DTYPE_INT64, {static_cast<int64_t>(values.size())}, TensorKind::Constant);
    bytes(t, values.data(), values.size() * 8);
    return t;
  }
  // A constant of any dtype and shape from raw little-endian bytes.
  int typed_constant(const std::string& name, kite_dtype dtype, Shape shape, const void* data, size_t size) {
    const int t = add(name, dtype, std::move(shape), TensorKind::Constant);
    bytes(t, data, size);
    return t;
  }
  int bool_constant(const std::string& name, bool v) {
    const int t = add(name, KITE_DTYPE_BOOL, {}, TensorKind::Constant);
    const uint8_t b = v ? 1 : 0;
    bytes(t, &b, 1);
    return t;
  }
  // Seeded values in [lo, hi).
  int random_constant(const std::string& name, Shape shape, float lo = -1.0f, float hi = 1.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::mt19937 rng(seed_++);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    return constant(name, std::move(shape), v);
  }

  // One node in graph g; returns its outputs.
  std::vector<int> node_n(const std::string& op, std::vector<int> inputs, std::vector<Attr> attrs,
                          int num_outputs, int g = 0) {
    Node n;
    n.name = op + "_" + std::to_string(counter_++);
    n.op = op;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    kite::ops::OpNode op_node = kite::ir::to_op_node(m_, n);
    op_node.num_outputs = num_outputs;
    std::vector<kite::ops::TensorType> types;
    std::string err;
    EXPECT_TRUE(kite::ops::infer_types(op_node, &types, &err)) << err;
    std::vector<int> outs;
    for (int k = 0; k < num_outputs; ++k) {
      const auto& type = types.at(static_cast<size_t>(k));
      outs.push_back(add(n.name + "_out" + std::to_string(k), type.dtype, type.shape, TensorKind::Activation));
    }
    n.outputs = outs;
    m_.graphs[static_cast<size_t>(g)].nodes.push_back(std::move(n));
    return outs;
  }
  int node(const std::string& op, std::vector<int> inputs, std::vector<Attr> attrs = {}, int g = 0) {
    return node_n(op, std::move(inputs), std::move(attrs), 1, g)[0];
  }
  // A node whose output type the op rules cannot infer before folding (a
  // Reshape to a computed shape): declared, as an ONNX file would.
  int declared(const std::string& op, std::vector<int> inputs, kite_dtype dtype, Shape shape) {
    Node n;
    n.name = op + "_" + std::to_string(counter_++);
    n.op = op;
    n.inputs = std::move(inputs);
    n.outputs = {add(n.name + "_out0", dtype, std::move(shape), TensorKind::Activation)};
    m_.graphs[0].nodes.push_back(n);
    return n.outputs[0];
  }

  int graph(const std::string& name) {
    m_.graphs.emplace_back();
    m_.graphs.back().name = name;
    return static_cast<int>(m_.graphs.size()) - 1;
  }
  void graph_output(int g, int t) { m_.graphs[static_cast<size_t>(g)].outputs.push_back(t); }
  // An If in the main graph; its output takes the then branch's output type.
  int if_node(int cond, int then_g, int else_g) {
    const int src = m_.graphs[static_cast<size_t>(then_g)].outputs.at(0);
    const Tensor& like = m_.tensors[static_cast<size_t>(src)];
    const int out = add("if_out", like.dtype, like.shape, TensorKind::Activation);
    Node n;
    n.name = "if";
    n.op = "If";
    n.inputs = {cond};
    n.outputs = {out};
    n.attrs = {graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)};
    m_.graphs[0].nodes.push_back(n);
    return out;
  }
  void output(int t) {
    m_.tensors[static_cast<size_t>(t)].kind = TensorKind::Output;
    m_.graphs[0].outputs.push_back(t);
  }
  const Model& model() const { return m_; }

 private:
  int add(const std::string& name, kite_dtype dtype, Shape shape, TensorKind kind) {
    Tensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.shape_known = true;
    t.kind = kind;
    return m_.add_tensor(std::move(t));
  }
  void bytes(int t, const void* data, size_t size) {
    auto& d = m_.tensors[static_cast<size_t>(t)].data;
    d.resize(size);
    if (size) std::memcpy(d.data(), data, size);
  }

  Model m_;
  int counter_ = 0;
  uint32_t seed_ = 100;
};

// ---- running a model through the runtime ---------------------------------

struct RunResult {
  std::vector<std::vector<float>> outputs;
  int fused = 0;       // fused nodes run by a fused kernel
  int decomposed = 0;  // fused nodes run as their body
};

enum class Path { kDefault, kDecomposed };

std::vector<std::vector<float>> random_inputs(const Model& m, uint32_t seed) {
  std::vector<std::vector<float>> inputs;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int t : m.main().inputs) {
    const Tensor& tensor = m.tensors[static_cast<size_t>(t)];
    std::vector<float> v(static_cast<size_t>(tensor.byte_size() / 4));
    for (float& x : v) x = dist(rng);
    inputs.push_back(std::move(v));
  }
  return inputs;
}

// Plans, writes and runs a copy of m (its outputs materialized) on the CPU.
// Path::kDecomposed turns the CPU backend's fused kernels off (option
// fused=0): the session then runs each fused node's body, never the fused
// kernel.
RunResult run(const Model& in, const std::vector<std::vector<float>>& inputs, Path path = Path::kDefault) {
  RunResult r;
  Model m = in;
  kite::converter::materialize_outputs(&m);
  kite::test::CpuRunOptions options;
  options.fused_kernels = path != Path::kDecomposed;
  options.fused = &r.fused;
  options.decomposed = &r.decomposed;
  r.outputs = kite::test::run_on_cpu(m, inputs, options);
  return r;
}

void expect_close(const std::vector<std::vector<float>>& ref, const std::vector<std::vector<float>>& got,
                  double tol = kTol) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].size(), got[k].size()) << "output " << k;
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < ref[k].size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[k][i])) << "output " << k << " element " << i << " is " << got[k][i];
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[k][i])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(ref[k][i]) - got[k][i]));
    }
    const double bound = max_ref > 0.0 ? tol * max_ref : tol;
    EXPECT_LE(max_diff, bound) << "output " << k << ": max|diff| " << max_diff << ", max|ref| " << max_ref;
  }
}

// ---- running passes -------------------------------------------------------

using kite::passes::PassContext;
using kite::passes::PassFn;
using kite::passes::PassResult;

// Runs the passes in order on m (then DCE and compaction, as the pipeline
// does between rounds) and returns the last pass's result.
PassResult apply(Model* m, std::initializer_list<PassFn> passes) {
  kite::converter::CpuEvaluator evaluator;
  PassContext ctx;
  ctx.model = m;
  ctx.evaluator = &evaluator;
  PassResult last;
  for (PassFn fn : passes) {
    last = PassResult();
    EXPECT_TRUE(fn(ctx, &last)) << ctx.error;
  }
  PassResult dce;
  EXPECT_TRUE(kite::passes::eliminate_dead_code(ctx, &dce)) << ctx.error;
  return last;
}

std::map<std::string, int> op_counts(const Model& m) {
  std::map<std::string, int> counts;
  for (const Node& n : m.main().nodes) ++counts[n.op];
  return counts;
}

const Node* find_op(const Model& m, const std::string& op) {
  for (const Node& n : m.main().nodes) {
    if (n.op == op) return &n;
  }
  return nullptr;
}

std::vector<std::string> body_ops(const Node& n) {
  std::vector<std::string> ops;
  for (const Node& b : n.body) ops.push_back(b.op);
  return ops;
}

// Every tensor a fused body produces but the fused node does not output is
// Scratch.
void expect_scratch_intermediates(const Model& m, const Node& fused) {
  for (const Node& b : fused.body) {
    for (int t : b.outputs) {
      if (t < 0) continue;
      bool is_output = false;
      for (int o : fused.outputs) is_output = is_output || o == t;
      EXPECT_EQ(m.tensors[static_cast<size_t>(t)].kind == TensorKind::Scratch, !is_output)
          << "tensor '" << m.tensors[static_cast<size_t>(t)].name << "'";
    }
  }
}

// Optimizes a copy with `passes`, checks the numerics against m (on two
// seeds) and returns the copy for structural checks.
Model optimized(const Model& m, std::initializer_list<PassFn> passes, PassResult* result = nullptr) {
  Model opt = m;
  PassResult r = apply(&opt, passes);
  if (result) *result = r;
  for (uint32_t seed : {1u, 2u}) {
    const auto inputs = random_inputs(m, seed);
    expect_close(run(m, inputs).outputs, run(opt, inputs).outputs);
  }
  return opt;
}

// ---- constant folding -------------------------------------------------------

TEST(FoldConstants, ConstantChainBecomesOneMul) {
  Builder b;
  const int x = b.input("x", {2, 3});
  const int a = b.node("Mul", {b.scalar("pi", 3.14f), b.scalar("two", 2.0f)});
  const int c = b.node("Add", {a, b.scalar("one", 1.0f)});
  b.output(b.node("Mul", {x, c}));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fold_constants}, &r);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.counters["folded"], 2);
  ASSERT_EQ(opt.main().nodes.size(), 1u);
  const Node& mul = opt.main().nodes[0];
  EXPECT_EQ(mul.op, "Mul");
  const Tensor& k = opt.tensors[static_cast<size_t>(mul.inputs[1])];
  ASSERT_TRUE(k.is_constant());
  float value = 0.0f;
  std::memcpy(&value, k.data.data(), 4);
  EXPECT_EQ(value, 3.14f * 2.0f + 1.0f);
  EXPECT_NEAR(value, 7.28f, 1e-6f);
}

TEST(FoldConstants, NodeWithARuntimeInputIsKept) {
  Builder b;
  const int x = b.input("x", {4});
  b.output(b.node("Add", {b.node("Relu", {x}), b.scalar("one", 1.0f)}));
  Model m = b.model();
  const PassResult r = apply(&m, {kite::passes::fold_constants});
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(m.main().nodes.size(), 2u);
}

TEST(FoldConstants, ShapeSubgraphFoldsCompletely) {
  // Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): the exporters' way
  // of writing x.reshape(x.shape[0], -1).
  Builder b;
  const int x = b.input("x", {2, 3, 4});
  const int shape = b.node("Shape", {x});
  const int dim0 = b.node("Gather", {shape, b.ints_constant("zero", {0})}, {int_attr("axis", 0)});
  const int rest = b.ints_constant("minus_one", {-1});
  const int target = b.node("Concat", {dim0, rest}, {int_attr("axis", 0)});
  b.output(b.declared("Reshape", {b.node("Relu", {x}), target}, KITE_DTYPE_FLOAT32, {2, 12}));
  const Model opt = optimized(b.model(), {kite::passes::fold_constants});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Relu", 1}, {"Reshape", 1}}));
}

TEST(FoldConstants, BroadcastIsNotWrittenUnlessItsConsumerFolds) {
  Builder b;
  const int x = b.input("x", {64, 64});
  const int big_shape = b.ints_constant("shape", {64, 64});
  // Expand(scalar) read by a run-time Add: folding would write 16 KiB for 4 bytes.
  const int expanded = b.node("Expand", {b.scalar("c", 0.5f), big_shape});
  const int y1 = b.node("Add", {x, expanded});
  // Expand(scalar) read only by a folding ReduceSum: folds away completely.
  const int expanded2 = b.node("Expand", {b.scalar("d", 0.25f), big_shape});
  const int total = b.node("ReduceSum", {expanded2, b.ints_constant("axes", {0, 1})}, {int_attr("keepdims", 0)});
  b.output(b.node("Mul", {y1, total}));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fold_constants}, &r);
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Add", 1}, {"Expand", 1}, {"Mul", 1}}));
  EXPECT_EQ(r.counters["skipped_bloat"], 1);
  uint64_t constant_bytes = 0;
  for (const Tensor& t : opt.tensors) constant_bytes += t.is_constant() ? t.data.size() : 0;
  EXPECT_LT(constant_bytes, 1024u);
}

TEST(FoldConstants, CastFoldsOnlyWhenExact) {
  for (const float v : {2.0f, 2.5f}) {
    Builder b;
    const int x = b.input("x", {3});
    const int as_int = b.node("Cast", {b.scalar("v", v)}, {int_attr("to", 7)});  // INT64
    const int back = b.node("Cast", {as_int}, {int_attr("to", 1)});                // FLOAT
    b.output(b.node("Mul", {x, back}));
    const Model opt = optimized(b.model(), {kite::passes::fold_constants});
    if (v == 2.0f) {
      EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Mul", 1}}));
    } else {
      // 2.5 -> 2 changes the value: the Cast stays (and so does its reader).
      EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Cast", 2}, {"Mul", 1}}));
    }
  }
}

// ---- one folding policy (src/fold_policy.h) -------------------------------------
//
// Shape inference folds while it infers; fold_constants folds after it. Both
// ask the same policy, so on each boundary case below the two paths, run
// separately on copies of one graph, must leave the same nodes.

using kite::converter::FoldDecision;
using kite::converter::FoldPolicy;
using kite::converter::FoldVerdict;

struct FoldPaths {
  Model inferred;  // after infer_shapes alone
  Model folded;    // after fold_constants alone (then DCE, as apply() does)
  bool infer_ok = false;
  bool fold_ok = false;
  std::string infer_error;
  std::string fold_error;
  PassResult fold_result;
};

FoldPaths fold_both_ways(const Model& m) {
  FoldPaths p;
  p.inferred = m;
  p.infer_ok = kite::converter::infer_shapes(&p.inferred, &p.infer_error);
  p.folded = m;
  kite::converter::CpuEvaluator evaluator;
  PassContext ctx;
  ctx.model = &p.folded;
  ctx.evaluator = &evaluator;
  p.fold_ok = kite::passes::fold_constants(ctx, &p.fold_result);
  p.fold_error = ctx.error;
  if (p.fold_ok) {
    PassResult dce;
    EXPECT_TRUE(kite::passes::eliminate_dead_code(ctx, &dce)) << ctx.error;
  }
  return p;
}

// Both paths succeed and leave these nodes.
void expect_both_leave(const FoldPaths& p, const std::map<std::string, int>& ops) {
  ASSERT_TRUE(p.infer_ok) << p.infer_error;
  ASSERT_TRUE(p.fold_ok) << p.fold_error;
  EXPECT_EQ(op_counts(p.inferred), ops) << "shape inference";
  EXPECT_EQ(op_counts(p.folded), ops) << "fold_constants";
}

// The decision for the last main-graph node of m.
FoldDecision decide_last(const Model& m) {
  kite::converter::CpuEvaluator evaluator;
  const FoldPolicy policy(m, &evaluator);
  return policy.decide(m, m.main().nodes.back());
}

TEST(FoldPolicy, SizeCapIsTheSameOnBothPaths) {
  // Expand(scalar) to exactly kMaxFoldBytes and to one row more. Only the
  // decision is asked for (nothing is computed), so no 256 MiB are touched.
  constexpr int64_t kRow = 1024;
  constexpr int64_t kRows = static_cast<int64_t>(kite::converter::kMaxFoldBytes / (kRow * 4));
  for (const int64_t rows : {kRows, kRows + 1}) {
    Builder b;
    const int x = b.input("x", {1});
    const int big = b.node("Expand", {b.scalar("c", 0.5f), b.ints_constant("shape", {rows, kRow})});
    const int sum = b.node("ReduceSum", {big}, {int_attr("keepdims", 0)});
    b.output(b.node("Add", {x, sum}));
    Model m = b.model();
    m.main().nodes.resize(1);  // only the Expand, to ask about it alone
    const FoldDecision d = decide_last(m);
    if (rows == kRows) {
      // At the cap: allowed, but 256 MiB from 12 bytes is bloat.
      EXPECT_EQ(d.verdict, FoldVerdict::kFoldIfReadersFold) << d.reason;
    } else {
      EXPECT_EQ(d.verdict, FoldVerdict::kRefused);
      EXPECT_STREQ(d.counter, "skipped_too_large");
      // Both paths leave it to run time.
      const FoldPaths p = fold_both_ways(b.model());
      expect_both_leave(p, {{"Add", 1}, {"Expand", 1}, {"ReduceSum", 1}});
      EXPECT_EQ(p.fold_result.counters.at("skipped_too_large"), 1);
    }
  }
}

TEST(FoldPolicy, BloatBoundaryIsTheSameOnBothPaths) {
  // Expand(float scalar, int64 shape [n]): 12 bytes of constant inputs, so
  // results up to kBloatRatio * 12 + kBloatSlack bytes are not bloat.
  const int64_t limit = static_cast<int64_t>(kite::converter::kBloatRatio * 12 +
                                             kite::converter::kBloatSlack) / 4;
  for (const int64_t n : {limit, limit + 1}) {
    Builder b;
    const int x = b.input("x", {n});
    const int expanded = b.node("Expand", {b.scalar("c", 0.5f), b.ints_constant("shape", {n})});
    b.output(b.node("Add", {x, expanded}));  // a reader that runs at run time
    const FoldPaths p = fold_both_ways(b.model());
    if (n == limit) {
      expect_both_leave(p, {{"Add", 1}});
    } else {
      expect_both_leave(p, {{"Add", 1}, {"Expand", 1}});
      EXPECT_EQ(p.fold_result.counters.at("skipped_bloat"), 1);
    }
  }
}

TEST(FoldPolicy, BloatReadOnlyByFoldingNodesFoldsAfterShapeInference) {
  // Shape inference cannot see ahead, so it leaves the bloating Expand (and
  // its reader) to fold_constants; the two in sequence end where
  // fold_constants alone does.
  const int64_t n = 4096;
  Builder b;
  const int x = b.input("x", {2});
  const int expanded = b.node("Expand", {b.scalar("c", 0.25f), b.ints_constant("shape", {n})});
  const int total = b.node("ReduceSum", {expanded}, {int_attr("keepdims", 0)});
  b.output(b.node("Mul", {x, total}));
  const FoldPaths p = fold_both_ways(b.model());
  ASSERT_TRUE(p.infer_ok) << p.infer_error;
  ASSERT_TRUE(p.fold_ok) << p.fold_error;
  EXPECT_EQ(op_counts(p.inferred), (std::map<std::string, int>{{"Expand", 1}, {"Mul", 1}, {"ReduceSum", 1}}));
  EXPECT_EQ(op_counts(p.folded), (std::map<std::string, int>{{"Mul", 1}}));
  Model both = p.inferred;
  apply(&both, {kite::passes::fold_constants});
  EXPECT_EQ(op_counts(both), op_counts(p.folded));
  const Tensor& sum = both.tensors[static_cast<size_t>(both.main().nodes[0].inputs[1])];
  ASSERT_TRUE(sum.is_constant());
  float value = 0.0f;
  std::memcpy(&value, sum.data.data(), 4);
  EXPECT_EQ(value, 0.25f * n);  // 4096 quarters: exact in float
}

TEST(FoldPolicy, CastAcrossDtypesIsTheSameOnBothPaths) {
  struct Case {
    const char* what;
    bool exact;
  };
  // float 2.0 -> int64 keeps the value; 2.5 -> 2 does not; int64 2^53 + 1
  // -> float rounds (and is beyond what the check can prove anyway).
  for (int k = 0; k < 3; ++k) {
    Builder b;
    const int x = b.input("x", {1});
    int cast;
    if (k < 2) {
      cast = b.node("Cast", {b.scalar("v", k == 0 ? 2.0f : 2.5f)}, {int_attr("to", 7)});  // INT64
      cast = b.node("Cast", {cast}, {int_attr("to", 1)});  // back to FLOAT: exact either way
    } else {
      cast = b.node("Cast", {b.ints_constant("big", {9007199254740993})}, {int_attr("to", 1)});
    }
    b.output(b.node("Mul", {x, cast}));
    const FoldPaths p = fold_both_ways(b.model());
    SCOPED_TRACE(k);
    if (k == 0) {
      expect_both_leave(p, {{"Mul", 1}});
    } else {
      // The value-changing Cast stays; in case 1 so does the Cast reading it.
      expect_both_leave(p, {{"Cast", k == 1 ? 2 : 1}, {"Mul", 1}});
      EXPECT_EQ(p.fold_result.counters.at("skipped_dtype_rule"), 1);
    }
  }
}

TEST(FoldPolicy, RandomOpsAreNeverFolded) {
  // The op rules do not know the random ops (the importer refuses them), so
  // the graph declares the output type and only the policy and
  // fold_constants are asked.
  for (const char* op : {"RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}) {
    Builder b;
    const int x = b.input("x", {3});
    const int r = b.declared(op, {b.constant("like", {3}, {0.1f, 0.5f, 0.9f})}, KITE_DTYPE_FLOAT32, {3});
    b.output(b.node("Add", {x, r}));
    Model m = b.model();
    m.main().nodes.resize(1);
    EXPECT_EQ(decide_last(m).verdict, FoldVerdict::kNever) << op;
    Model folded = b.model();
    apply(&folded, {kite::passes::fold_constants});
    EXPECT_EQ(op_counts(folded), (std::map<std::string, int>{{"Add", 1}, {op, 1}}));
  }
}

TEST(FoldPolicy, ShapeWritingAGraphOutputFoldsOnBothPaths) {
  Builder b;
  const int x = b.input("x", {2, 5});
  b.output(b.node("Relu", {x}));
  b.output(b.node("Shape", {x}));
  const FoldPaths p = fold_both_ways(b.model());
  expect_both_leave(p, {{"Relu", 1}});
  for (const Model* m : {&p.inferred, &p.folded}) {
    const Tensor& shape = m->tensors[static_cast<size_t>(m->main().outputs[1])];
    ASSERT_TRUE(shape.is_constant());
    std::vector<int64_t> dims(2);
    std::memcpy(dims.data(), shape.data.data(), 16);
    EXPECT_EQ(dims, (std::vector<int64_t>{2, 5}));
  }
}

// ---- control flow -------------------------------------------------------------

// y = If(cond) then x * 2 else Relu(x + 1).
// The converter's reference evaluator (issue 19) computes what the CPU
// kernels compute (those are checked against onnxruntime by the op sweep):
// integers and bools exactly, floats within 1e-6 relative (the reference sums
// in double, the kernels in float).
TEST(ReferenceEvaluator, AgreesWithTheCpuKernels) {
  Builder b;
  const std::vector<int64_t> ia = {-7, -3, 0, 3, 7, 11, -12, 5, 9, -1, 4, -8};
  const std::vector<int64_t> ib = {3, -4, 5, -2};
  const int a = b.typed_constant("ia", KITE_DTYPE_INT64, {3, 4}, ia.data(), ia.size() * 8);
  const int d = b.typed_constant("ib", KITE_DTYPE_INT64, {4}, ib.data(), ib.size() * 8);
  const int f = b.random_constant("f", {3, 4}, -5.0f, 5.0f);
  const int g = b.random_constant("g", {4}, 0.5f, 2.0f);
  const std::vector<float> specials = {1.0f, NAN, INFINITY, -INFINITY, 0.0f, -2.0f};
  const int sp = b.constant("sp", {2, 3}, specials);
  const int64_t k = -1, axis = 1;
  const int kc = b.typed_constant("k", KITE_DTYPE_INT64, {}, &k, 8);
  const int ax = b.typed_constant("axis", KITE_DTYPE_INT64, {}, &axis, 8);
  const std::vector<int64_t> gi = {3, 0, -1, 2, 1, 1, 0, -4, 2, 3, 3, 0};
  const int gic = b.typed_constant("gi", KITE_DTYPE_INT64, {3, 4}, gi.data(), gi.size() * 8);
  const std::vector<int64_t> si = {1, 2, 1};
  const int sic = b.typed_constant("si", KITE_DTYPE_INT64, {3, 1}, si.data(), si.size() * 8);
  const int upd = b.random_constant("upd", {3, 4});
  std::vector<std::pair<std::string, int>> cases;
  auto add = [&](const std::string& what, int out) { cases.emplace_back(what, out); };
  add("Mod int64 fmod=0", b.node("Mod", {a, d}));
  add("Mod int64 fmod=1", b.node("Mod", {a, d}, {int_attr("fmod", 1)}));
  add("Mod float fmod=1", b.node("Mod", {f, g}, {int_attr("fmod", 1)}));
  add("IsNaN", b.node("IsNaN", {sp}));
  add("IsInf positive", b.node("IsInf", {sp}, {int_attr("detect_negative", 0)}));
  add("Trilu upper", b.node("Trilu", {f}));
  add("Trilu lower k=-1", b.node("Trilu", {a, kc}, {int_attr("upper", 0)}));
  add("CumSum", b.node("CumSum", {f, ax}));
  add("CumSum exclusive reverse", b.node("CumSum", {a, ax}, {int_attr("exclusive", 1), int_attr("reverse", 1)}));
  add("GatherElements", b.node("GatherElements", {f, gic}, {int_attr("axis", 1)}));
  for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
    // "none" with a repeated index keeps the last update, on both sides.
    add(std::string("ScatterND ") + reduction,
        b.node("ScatterND", {f, sic, upd}, {kite::ops::string_attr("reduction", reduction)}));
  }
  const Model& m = b.model();
  for (size_t c = 0; c < cases.size(); ++c) {
    const Node& n = m.graphs[0].nodes[c];
    ASSERT_EQ(n.outputs[0], cases[c].second);
    std::vector<std::vector<uint8_t>> cpu;
    std::vector<kite::converter::RefValue> ref;
    std::string err;
    ASSERT_TRUE(kite::converter::evaluate_node_on_cpu(m, n, &cpu, &err)) << cases[c].first << ": " << err;
    ASSERT_TRUE(kite::converter::reference_evaluate(m, n, &ref, &err)) << cases[c].first << ": " << err;
    const Tensor& out = m.tensors[static_cast<size_t>(n.outputs[0])];
    ASSERT_EQ(ref.size(), 1u);
    EXPECT_EQ(ref[0].dtype, out.dtype) << cases[c].first;
    EXPECT_EQ(ref[0].shape, out.shape) << cases[c].first;
    ASSERT_EQ(ref[0].data.size(), cpu[0].size()) << cases[c].first;
    if (out.dtype != KITE_DTYPE_FLOAT32) {
      EXPECT_EQ(ref[0].data, cpu[0]) << cases[c].first;
      continue;
    }
    for (size_t e = 0; e < cpu[0].size() / 4; ++e) {
      float x = 0, y = 0;
      std::memcpy(&x, &ref[0].data[e * 4], 4);
      std::memcpy(&y, &cpu[0][e * 4], 4);
      EXPECT_NEAR(x, y, 1e-6f * std::max(1.0f, std::fabs(y))) << cases[c].first << " element " << e;
    }
  }
}

Builder if_model(int cond_kind /* 0: const false, 1: const true, 2: run time */) {
  Builder b;
  const int x = b.input("x", {2, 3});
  const int then_g = b.graph("then");
  b.graph_output(then_g, b.node("Mul", {x, b.scalar("two", 2.0f)}, {}, then_g));
  const int else_g = b.graph("else");
  b.graph_output(else_g, b.node("Relu", {b.node("Add", {x, b.scalar("one", 1.0f)}, {}, else_g)}, {}, else_g));
  int cond;
  if (cond_kind == 2) {
    const int sum = b.node("ReduceSum", {x}, {int_attr("keepdims", 0)});
    cond = b.node("Greater", {sum, b.scalar("zero", 0.0f)});
  } else {
    cond = b.bool_constant("cond", cond_kind == 1);
  }
  b.output(b.node("Neg", {b.if_node(cond, then_g, else_g)}));
  return b;
}

TEST(InlineConstantIf, FalseConditionLeavesOnlyTheElseBranch) {
  const Model m = if_model(0).model();
  const Model opt = optimized(m, {kite::passes::inline_constant_if});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Add", 1}, {"Neg", 1}, {"Relu", 1}}));
  EXPECT_EQ(opt.graphs.size(), 1u);
}

TEST(InlineConstantIf, TrueConditionLeavesOnlyTheThenBranch) {
  const Model opt = optimized(if_model(1).model(), {kite::passes::inline_constant_if});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Mul", 1}, {"Neg", 1}}));
}

TEST(InlineConstantIf, RunTimeConditionKeepsBothBranches) {
  const Model m = if_model(2).model();
  Model opt = m;
  const PassResult r = apply(&opt, {kite::passes::inline_constant_if, kite::passes::fold_constants});
  EXPECT_EQ(op_counts(opt)["If"], 1);
  EXPECT_EQ(opt.graphs.size(), 3u);
  // Both branches still run correctly: inputs with a positive and a negative sum.
  for (float sign : {1.0f, -1.0f}) {
    std::vector<std::vector<float>> inputs = {{1, 2, 3, 4, 5, 6}};
    for (float& v : inputs[0]) v *= sign;
    expect_close(run(m, inputs).outputs, run(opt, inputs).outputs);
  }
}

// ---- elimination ---------------------------------------------------------------

TEST(EliminateIdentity, IdentityAndDropoutAreRemoved) {
  Builder b;
  const int x = b.input("x", {2, 5});
  const int a = b.node("Identity", {x});
  const int r = b.node("Relu", {a});
  const int d = b.node("Dropout", {r});
  b.output(b.node("Identity", {d}));
  const Model opt = optimized(b.model(), {kite::passes::eliminate_identity});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Relu", 1}}));
  // The output keeps its tensor: Relu now writes it.
  EXPECT_EQ(opt.main().nodes[0].outputs[0], opt.main().outputs[0]);
}

TEST(EliminateIdentity, CopyOfAGraphInputIntoTheOutputStays) {
  Builder b;
  const int x = b.input("x", {3});
  b.output(b.node("Identity", {x}));
  const Model opt = optimized(b.model(), {kite::passes::eliminate_identity});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Identity", 1}}));
}

TEST(EliminateCommonSubexpressions, IdenticalNodesMerge) {
  Builder b;
  const int x = b.input("x", {4, 4});
  const int r1 = b.node("Sigmoid", {x});
  const int r2 = b.node("Sigmoid", {x});
  // Equal but separate constants also merge, so these two Adds match.
  const int a1 = b.node("Add", {r1, b.scalar("one_a", 1.0f)});
  const int a2 = b.node("Add", {r2, b.scalar("one_b", 1.0f)});
  b.output(b.node("Mul", {a1, a2}));
  const Model opt = optimized(b.model(), {kite::passes::eliminate_common_subexpressions});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Add", 1}, {"Mul", 1}, {"Sigmoid", 1}}));
}

TEST(EliminateCommonSubexpressions, DifferentAttributesDoNotMerge) {
  Builder b;
  const int x = b.input("x", {4});
  const int l1 = b.node("LeakyRelu", {x}, {float_attr("alpha", 0.1f)});
  const int l2 = b.node("LeakyRelu", {x}, {float_attr("alpha", 0.2f)});
  b.output(b.node("Add", {l1, l2}));
  const Model opt = optimized(b.model(), {kite::passes::eliminate_common_subexpressions});
  EXPECT_EQ(op_counts(opt)["LeakyRelu"], 2);
}

TEST(EliminateDeadCode, UnusedNodesAndInitializersGo) {
  Builder b;
  const int x = b.input("x", {3});
  b.node("Exp", {b.node("Mul", {x, b.scalar("unused_weight", 3.0f)})});  // reaches no output
  b.output(b.node("Relu", {x}));
  Model m = b.model();
  const size_t tensors = m.tensors.size();
  const Model opt = optimized(m, {});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Relu", 1}}));
  EXPECT_EQ(opt.tensors.size(), tensors - 3);  // the weight and the Mul and Exp results
  for (const Tensor& t : opt.tensors) EXPECT_NE(t.name, "unused_weight");
}

// ---- folding into weights -------------------------------------------------------

// BatchNormalization with non-trivial statistics over `channels`.
int batch_norm(Builder& b, int x, int64_t channels, float epsilon = 1e-3f) {
  const int scale = b.random_constant("bn_scale", {channels}, 0.5f, 1.5f);
  const int bias = b.random_constant("bn_bias", {channels}, -0.5f, 0.5f);
  const int mean = b.random_constant("bn_mean", {channels}, -0.3f, 0.3f);
  const int var = b.random_constant("bn_var", {channels}, 0.2f, 1.5f);
  return b.node("BatchNormalization", {x, scale, bias, mean, var}, {float_attr("epsilon", epsilon)});
}

TEST(FoldBatchNorm, IntoConvConvTransposeAndGemm) {
  Builder b;
  const int x = b.input("x", {1, 4, 6, 6});
  const int conv = b.node("Conv", {x, b.random_constant("w", {6, 2, 3, 3}), b.random_constant("cb", {6})},
                          {ints_attr("pads", {1, 1, 1, 1}), int_attr("group", 2)});
  const int y1 = batch_norm(b, conv, 6);
  const int deconv = b.node("ConvTranspose", {y1, b.random_constant("wt", {6, 2, 2, 2})},
                            {int_attr("group", 3), ints_attr("strides", {2, 2})});
  const int y2 = batch_norm(b, deconv, 6);
  const int flat = b.node("Flatten", {y2});
  const int gemm = b.node("Gemm", {flat, b.random_constant("gw", {5, 864}), b.random_constant("gc", {5})},
                          {int_attr("transB", 1), float_attr("beta", 0.5f)});
  b.output(batch_norm(b, gemm, 5, 1e-5f));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fold_batch_norm}, &r);
  EXPECT_EQ(op_counts(opt),
            (std::map<std::string, int>{{"Conv", 1}, {"ConvTranspose", 1}, {"Flatten", 1}, {"Gemm", 1}}));
  EXPECT_EQ(r.counters["into_Conv"], 1);
  EXPECT_EQ(r.counters["into_ConvTranspose"], 1);
  EXPECT_EQ(r.counters["into_Gemm"], 1);
}

TEST(FoldBatchNorm, ConvOutputWithASecondReaderIsKept) {
  Builder b;
  const int x = b.input("x", {1, 3, 5, 5});
  const int conv = b.node("Conv", {x, b.random_constant("w", {3, 3, 1, 1})});
  const int bn = batch_norm(b, conv, 3);
  b.output(b.node("Add", {bn, b.node("Relu", {conv})}));
  const Model opt = optimized(b.model(), {kite::passes::fold_batch_norm});
  EXPECT_EQ(op_counts(opt)["BatchNormalization"], 1);
}

TEST(FoldScaleIntoWeights, PerChannelMulAndAddFoldIntoConvAndMatMul) {
  Builder b;
  const int x = b.input("x", {1, 3, 4, 4});
  const int conv = b.node("Conv", {x, b.random_constant("w", {5, 3, 3, 3})}, {ints_attr("pads", {1, 1, 1, 1})});
  const int scaled = b.node("Mul", {b.random_constant("s", {5, 1, 1}, 0.5f, 2.0f), conv});
  const int shifted = b.node("Sub", {scaled, b.random_constant("h", {1, 5, 1, 1})});
  const int divided = b.node("Div", {shifted, b.scalar("d", 4.0f)});
  // MatMul + bias then a per-column scale (a layer scale).
  const int t = b.node("Transpose", {divided}, {ints_attr("perm", {0, 2, 3, 1})});
  const int mm = b.node("MatMul", {t, b.random_constant("mw", {5, 7})});
  const int biased = b.node("Add", {mm, b.random_constant("mb", {7})});
  b.output(b.node("Mul", {biased, b.random_constant("gamma", {7}, 0.1f, 1.0f)}));
  const Model opt = optimized(b.model(), {kite::passes::fold_scale_into_weights});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Add", 1}, {"Conv", 1}, {"MatMul", 1}, {"Transpose", 1}}));
}

TEST(FoldScaleIntoWeights, LayerScaleAfterAPermuteMovesThroughTheTranspose) {
  // ConvNeXt: Linear in channels-last, permute back, then gamma [C, 1, 1].
  Builder b;
  const int x = b.input("x", {1, 2, 2, 6});
  const int mm = b.node("MatMul", {x, b.random_constant("w", {6, 4})});
  const int lin = b.node("Add", {mm, b.random_constant("bias", {4})});
  const int nchw = b.node("Transpose", {lin}, {ints_attr("perm", {0, 3, 1, 2})});
  b.output(b.node("Mul", {b.random_constant("gamma", {4, 1, 1}, 0.1f, 1.0f), nchw}));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fold_scale_into_weights}, &r);
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Add", 1}, {"MatMul", 1}, {"Transpose", 1}}));
  EXPECT_EQ(r.counters["Mul_moved_before_Transpose"], 1);
}

TEST(FoldScaleIntoWeights, SpatiallyVaryingConstantIsKept) {
  Builder b;
  const int x = b.input("x", {1, 2, 3, 3});
  const int conv = b.node("Conv", {x, b.random_constant("w", {2, 2, 1, 1})});
  b.output(b.node("Mul", {conv, b.random_constant("s", {1, 2, 3, 3})}));
  const Model opt = optimized(b.model(), {kite::passes::fold_scale_into_weights});
  EXPECT_EQ(op_counts(opt)["Mul"], 1);
}

TEST(MergeTransposeReshape, ChainsCollapse) {
  Builder b;
  const int x = b.input("x", {2, 3, 4, 5});
  const int t1 = b.node("Transpose", {x}, {ints_attr("perm", {0, 2, 3, 1})});
  const int t2 = b.node("Transpose", {t1}, {ints_attr("perm", {0, 3, 1, 2})});  // undoes t1
  const int t3 = b.node("Transpose", {b.node("Relu", {t2})}, {ints_attr("perm", {1, 0, 2, 3})});
  const int t4 = b.node("Transpose", {t3}, {ints_attr("perm", {0, 1, 3, 2})});  // t3 then t4: one Transpose
  const int r1 = b.node("Reshape", {t4, b.ints_constant("s1", {6, 20})});
  const int f = b.node("Flatten", {r1}, {int_attr("axis", 0)});
  b.output(b.node("Unsqueeze", {f, b.ints_constant("axes", {0})}));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::merge_transpose_reshape}, &r);
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Relu", 1}, {"Reshape", 1}, {"Transpose", 1}}));
  const Node* t = find_op(opt, "Transpose");
  ASSERT_NE(t, nullptr);
  ASSERT_NE(t->find_attr("perm"), nullptr);
  EXPECT_EQ(t->find_attr("perm")->ints, (std::vector<int64_t>{1, 0, 3, 2}));
}

TEST(MergeTransposeReshape, InnerResultWithAnotherReaderIsKept) {
  Builder b;
  const int x = b.input("x", {2, 3, 4});
  const int t1 = b.node("Transpose", {x}, {ints_attr("perm", {1, 0, 2})});
  const int t2 = b.node("Transpose", {t1}, {ints_attr("perm", {0, 2, 1})});
  b.output(t2);
  b.output(b.node("Relu", {t1}));
  const Model opt = optimized(b.model(), {kite::passes::merge_transpose_reshape});
  EXPECT_EQ(op_counts(opt)["Transpose"], 2);
}

// ---- fusions --------------------------------------------------------------------

// 0.5 * x * (1 + erf(x / sqrt 2)) in torch's order.
int gelu_erf(Builder& b, int x) {
  const int d = b.node("Div", {x, b.scalar("sqrt2", 1.4142135f)});
  const int e = b.node("Erf", {d});
  const int a = b.node("Add", {e, b.scalar("one", 1.0f)});
  const int m = b.node("Mul", {x, a});
  return b.node("Mul", {m, b.scalar("half", 0.5f)});
}

// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), half first.
int gelu_tanh(Builder& b, int x) {
  const int cube = b.node("Pow", {x, b.scalar("three", 3.0f)});
  const int k = b.node("Mul", {b.scalar("c", 0.044715f), cube});
  const int inner = b.node("Add", {x, k});
  const int s = b.node("Mul", {inner, b.scalar("sqrt2pi", 0.7978845608f)});
  const int t = b.node("Tanh", {s});
  const int a = b.node("Add", {b.scalar("one", 1.0f), t});
  const int h = b.node("Mul", {x, b.scalar("half", 0.5f)});
  return b.node("Mul", {h, a});
}

TEST(FuseGelu, ErfAndTanhFormsBecomeFusedNodes) {
  Builder b;
  const int x = b.input("x", {3, 8});
  const int y1 = gelu_erf(b, x);
  b.output(gelu_tanh(b, y1));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fuse_gelu}, &r);
  ASSERT_EQ(opt.main().nodes.size(), 2u);
  const Node& erf = opt.main().nodes[0];
  const Node& tanh = opt.main().nodes[1];
  EXPECT_EQ(erf.domain, "kite");
  EXPECT_EQ(erf.op, "Gelu");
  EXPECT_EQ(erf.fused_pattern, "Gelu");
  EXPECT_EQ(body_ops(erf), (std::vector<std::string>{"Div", "Erf", "Add", "Mul", "Mul"}));
  EXPECT_EQ(tanh.fused_pattern, "Gelu(tanh)");
  EXPECT_EQ(body_ops(tanh).size(), 8u);
  expect_scratch_intermediates(opt, erf);
  expect_scratch_intermediates(opt, tanh);
}

TEST(FuseGelu, IntermediateWithAnotherReaderIsNotFused) {
  Builder b;
  const int x = b.input("x", {8});
  const int y = gelu_erf(b, x);
  // The Erf result is read outside the pattern.
  const Node& erf = b.model().main().nodes[1];
  ASSERT_EQ(erf.op, "Erf");
  b.output(b.node("Add", {y, erf.outputs[0]}));
  const Model opt = optimized(b.model(), {kite::passes::fuse_gelu});
  EXPECT_EQ(find_op(opt, "Gelu"), nullptr);
}

// torch's LayerNorm below opset 17.
int layer_norm_decomposed(Builder& b, int x, int64_t d) {
  const int mean = b.node("ReduceMean", {x}, {ints_attr("axes", {-1})});
  const int diff = b.node("Sub", {x, mean});
  const int sq = b.node("Pow", {diff, b.scalar("two", 2.0f)});
  const int var = b.node("ReduceMean", {sq}, {ints_attr("axes", {-1})});
  const int ve = b.node("Add", {var, b.scalar("eps", 1e-5f)});
  const int sd = b.node("Sqrt", {ve});
  const int norm = b.node("Div", {diff, sd});
  const int scaled = b.node("Mul", {norm, b.random_constant("gamma", {d}, 0.5f, 1.5f)});
  return b.node("Add", {scaled, b.random_constant("beta", {d})});
}

TEST(FuseLayerNorm, DecomposedPatternBecomesOneNode) {
  Builder b;
  const int x = b.input("x", {2, 5, 16});
  b.output(layer_norm_decomposed(b, x, 16));
  const Model opt = optimized(b.model(), {kite::passes::fuse_layer_norm});
  ASSERT_EQ(opt.main().nodes.size(), 1u);
  const Node& ln = opt.main().nodes[0];
  EXPECT_EQ(ln.op, "LayerNormalization");
  EXPECT_EQ(ln.domain, "kite");
  EXPECT_EQ(ln.body.size(), 9u);
  EXPECT_EQ(ln.inputs.size(), 3u);
  ASSERT_NE(ln.find_attr("axis"), nullptr);
  EXPECT_EQ(ln.find_attr("axis")->i, 2);
  EXPECT_EQ(ln.find_attr("epsilon")->f, 1e-5f);
  expect_scratch_intermediates(opt, ln);
}

TEST(FuseLayerNorm, MeanReadElsewhereIsNotFused) {
  Builder b;
  const int x = b.input("x", {4, 8});
  const int y = layer_norm_decomposed(b, x, 8);
  b.output(y);
  b.output(b.model().main().nodes[0].outputs[0]);  // the mean is also an output
  const Model opt = optimized(b.model(), {kite::passes::fuse_layer_norm});
  EXPECT_EQ(opt.main().nodes.size(), 9u);
}

TEST(FuseSkipLayerNorm, AddThenLayerNorm) {
  Builder b;
  const int x = b.input("x", {2, 4, 8});
  const int skip = b.input("skip", {2, 4, 8});
  const int sum = b.node("Add", {x, skip});
  const int y = b.node("LayerNormalization", {sum, b.random_constant("g", {8}), b.random_constant("bb", {8})},
                       {int_attr("axis", -1), float_attr("epsilon", 1e-6f)});
  b.output(y);
  const Model opt = optimized(b.model(), {kite::passes::fuse_skip_layer_norm});
  ASSERT_EQ(opt.main().nodes.size(), 1u);
  const Node& n = opt.main().nodes[0];
  EXPECT_EQ(n.op, "SkipLayerNormalization");
  EXPECT_EQ(n.outputs.size(), 1u);
  EXPECT_EQ(n.find_attr("axis")->i, 2);
  expect_scratch_intermediates(opt, n);
}

TEST(FuseSkipLayerNorm, SumReadElsewhereBecomesASecondOutput) {
  // A pre-norm block: the sum also feeds the next residual Add.
  Builder b;
  const int x = b.input("x", {3, 8});
  const int r = b.input("r", {3, 8});
  const int sum = b.node("Add", {x, r});
  const int normed = layer_norm_decomposed(b, sum, 8);
  b.output(b.node("Add", {sum, b.node("Relu", {normed})}));
  const Model opt = optimized(b.model(), {kite::passes::fuse_layer_norm, kite::passes::fuse_skip_layer_norm});
  const Node* n = find_op(opt, "SkipLayerNormalization");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->outputs.size(), 2u);
  EXPECT_EQ(n->body.size(), 10u);  // the Add and the nine LayerNorm primitives, flattened
  EXPECT_EQ(opt.tensors[static_cast<size_t>(n->outputs[1])].kind, TensorKind::Activation);
}

TEST(FuseSkipLayerNorm, BroadcastingAddIsNotAResidual) {
  // x + bias (a broadcast) is not a skip connection: the addends differ in shape.
  Builder b;
  const int x = b.input("x", {2, 4, 8});
  const int sum = b.node("Add", {x, b.input("row", {1, 1, 8})});
  b.output(b.node("LayerNormalization", {sum, b.random_constant("g", {8})}, {int_attr("axis", -1)}));
  const Model opt = optimized(b.model(), {kite::passes::fuse_skip_layer_norm});
  EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Add", 1}, {"LayerNormalization", 1}}));
}

// softmax(q kt / sqrt(d) + mask) v over [1, 2, S, D] heads.
int attention(Builder& b, int q, int k, int v, bool mask, bool scale_q) {
  const int kt = b.node("Transpose", {k}, {ints_attr("perm", {0, 1, 3, 2})});
  int qq = q;
  if (scale_q) qq = b.node("Mul", {q, b.scalar("qscale", 0.5f)});
  int s = b.node("MatMul", {qq, kt});
  if (!scale_q) s = b.node("Div", {s, b.scalar("sqrt_d", 2.0f)});
  if (mask) s = b.node("Add", {s, b.random_constant("mask", {1, 1, 5, 6}, -3.0f, 0.0f)});
  const int p = b.node("Softmax", {s}, {int_attr("axis", -1)});
  return b.node("MatMul", {p, v});
}

TEST(FuseAttention, ScaledMaskedAttentionBecomesOneNode) {
  for (bool scale_q : {false, true}) {
    Builder b;
    const int q = b.input("q", {1, 2, 5, 4});
    const int k = b.input("k", {1, 2, 6, 4});
    const int v = b.input("v", {1, 2, 6, 3});
    b.output(attention(b, q, k, v, /*mask=*/true, scale_q));
    const Model opt = optimized(b.model(), {kite::passes::fuse_attention});
    const Node* n = find_op(opt, "Attention");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(op_counts(opt), (std::map<std::string, int>{{"Attention", 1}, {"Transpose", 1}}));
    EXPECT_EQ(n->inputs.size(), 4u);
    EXPECT_EQ(n->find_attr("scale")->f, 0.5f);
    expect_scratch_intermediates(opt, *n);
  }
}

TEST(FuseAttention, ProbabilitiesReadElsewhereAreNotFused) {
  Builder b;
  const int q = b.input("q", {1, 2, 5, 4});
  const int k = b.input("k", {1, 2, 6, 4});
  const int v = b.input("v", {1, 2, 6, 3});
  b.output(attention(b, q, k, v, false, false));
  const Node* sm = find_op(b.model(), "Softmax");
  b.output(sm->outputs[0]);  // need_weights: the probabilities are an output too
  const Model opt = optimized(b.model(), {kite::passes::fuse_attention});
  EXPECT_EQ(find_op(opt, "Attention"), nullptr);
}

TEST(FuseMatMulBias, MatMulAddActivationAndGemmActivation) {
  Builder b;
  const int x = b.input("x", {2, 3, 6});
  const int mm = b.node("MatMul", {x, b.random_constant("w", {6, 5})});
  const int y = b.node("Relu", {b.node("Add", {b.random_constant("bias", {1, 1, 5}), mm})});
  const int flat = b.node("Reshape", {y, b.ints_constant("shape", {6, 5})});
  const int g = b.node("Gemm", {flat, b.random_constant("gw", {5, 4})});
  b.output(gelu_erf(b, g));
  const Model opt = optimized(b.model(), {kite::passes::fuse_gelu, kite::passes::fuse_matmul_bias});
  const Node* fm = find_op(opt, "FusedMatMul");
  const Node* fg = find_op(opt, "FusedGemm");
  ASSERT_NE(fm, nullptr);
  ASSERT_NE(fg, nullptr);
  EXPECT_EQ(fm->fused_pattern, "MatMul+Add+Relu");
  EXPECT_EQ(opt.tensors[static_cast<size_t>(fm->inputs[2])].shape, (Shape{5}));
  EXPECT_EQ(fg->fused_pattern, "Gemm+Gelu");
  // The GELU's body is flattened into the Gemm's: bodies never nest.
  EXPECT_EQ(body_ops(*fg), (std::vector<std::string>{"Gemm", "Div", "Erf", "Add", "Mul", "Mul"}));
  for (const Node& n : fg->body) EXPECT_TRUE(n.body.empty());
}

TEST(FuseMatMulBias, ProductReadElsewhereIsNotFused) {
  Builder b;
  const int x = b.input("x", {2, 6});
  const int mm = b.node("MatMul", {x, b.random_constant("w", {6, 5})});
  b.output(b.node("Add", {mm, b.random_constant("bias", {5})}));
  b.output(mm);
  const Model opt = optimized(b.model(), {kite::passes::fuse_matmul_bias});
  EXPECT_EQ(find_op(opt, "FusedMatMul"), nullptr);
}

TEST(FuseConvActivation, EveryActivationKind) {
  struct Case {
    const char* pattern;
    std::function<int(Builder&, int)> act;
  };
  const std::vector<Case> cases = {
      {"Conv+Relu", [](Builder& b, int c) { return b.node("Relu", {c}); }},
      {"Conv+Clip", [](Builder& b, int c) {
         return b.node("Clip", {c, b.scalar("lo", 0.0f), b.scalar("hi", 6.0f)});
       }},
      {"Conv+Sigmoid", [](Builder& b, int c) { return b.node("Sigmoid", {c}); }},
      {"Conv+SiLU", [](Builder& b, int c) { return b.node("Mul", {c, b.node("Sigmoid", {c})}); }},
      {"Conv+HardSwish", [](Builder& b, int c) {
         const int gate = b.node("HardSigmoid", {c}, {float_attr("alpha", 1.0f / 6.0f), float_attr("beta", 0.5f)});
         return b.node("Mul", {gate, c});
       }},
      {"Conv+HardSwish", [](Builder& b, int c) { return b.node("HardSwish", {c}); }},
      {"Conv+LeakyRelu", [](Builder& b, int c) { return b.node("LeakyRelu", {c}, {float_attr("alpha", 0.2f)}); }},
      {"Conv+Gelu", [](Builder& b, int c) { return gelu_erf(b, c); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    Builder b;
    const int x = b.input("x", {1, 3, 6, 6});
    const int conv = b.node("Conv", {x, b.random_constant("w", {4, 3, 3, 3}), b.random_constant("b", {4})},
                            {ints_attr("pads", {1, 1, 1, 1}), int_attr("group", 1)});
    b.output(c.act(b, conv));
    const Model opt = optimized(b.model(), {kite::passes::fuse_gelu, kite::passes::fuse_conv_activation});
    ASSERT_EQ(opt.main().nodes.size(), 1u);
    const Node& n = opt.main().nodes[0];
    EXPECT_EQ(n.op, "FusedConv");
    EXPECT_EQ(n.fused_pattern, c.pattern);
    EXPECT_EQ(n.body[0].op, "Conv");
    expect_scratch_intermediates(opt, n);
  }
}

TEST(FuseConvActivation, ConvOutputWithAnotherReaderIsNotFused) {
  Builder b;
  const int x = b.input("x", {1, 2, 4, 4});
  const int conv = b.node("Conv", {x, b.random_constant("w", {2, 2, 1, 1})});
  b.output(b.node("Add", {b.node("Relu", {conv}), conv}));
  const Model opt = optimized(b.model(), {kite::passes::fuse_conv_activation});
  EXPECT_EQ(find_op(opt, "FusedConv"), nullptr);
}

TEST(FuseConvResidual, ResidualAddAndTheActivationAfterIt) {
  // ResNet's basic block end: Conv -> Add(skip) -> Relu; MobileNetV2's
  // projection: Conv (no bias) -> Add(skip), nothing after.
  Builder b;
  const int x = b.input("x", {1, 4, 5, 5});
  const int c1 = b.node("Conv", {x, b.random_constant("w1", {4, 4, 3, 3}), b.random_constant("b1", {4})},
                        {ints_attr("pads", {1, 1, 1, 1})});
  const int y1 = b.node("Relu", {b.node("Add", {c1, x})});
  const int c2 = b.node("Conv", {y1, b.random_constant("w2", {4, 4, 1, 1})});
  b.output(b.node("Add", {y1, c2}));
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fuse_conv_residual}, &r);
  ASSERT_EQ(opt.main().nodes.size(), 2u);
  const Node& first = opt.main().nodes[0];
  const Node& second = opt.main().nodes[1];
  EXPECT_EQ(first.fused_pattern, "Conv+Add+Relu");
  EXPECT_EQ(body_ops(first), (std::vector<std::string>{"Conv", "Add", "Relu"}));
  ASSERT_EQ(first.inputs.size(), 4u);
  EXPECT_EQ(first.inputs[3], x);
  EXPECT_EQ(first.find_attr("activation")->s, "Relu");
  EXPECT_EQ(second.fused_pattern, "Conv+Add");
  ASSERT_EQ(second.inputs.size(), 4u);
  EXPECT_EQ(second.inputs[2], -1);  // no bias
  EXPECT_EQ(second.find_attr("activation"), nullptr);
  expect_scratch_intermediates(opt, first);
  // The CPU kernel's hook gives the body's bits.
  const auto inputs = random_inputs(opt, 9);
  const RunResult fused = run(opt, inputs, Path::kDefault);
  const RunResult body = run(opt, inputs, Path::kDecomposed);
  EXPECT_EQ(fused.fused, 2);
  expect_close(body.outputs, fused.outputs, 0.0);
}

TEST(FuseConvResidual, BroadcastOrSharedOperandsAreNotFused) {
  Builder b;
  const int x = b.input("x", {1, 4, 3, 3});
  const int w = b.random_constant("w", {4, 4, 1, 1});
  // A per-channel bias added (a broadcast), not a residual.
  b.output(b.node("Add", {b.node("Conv", {x, w}), b.input("bias", {1, 4, 1, 1})}));
  // The Conv's output read by another node too.
  const int c = b.node("Conv", {x, w});
  b.output(b.node("Add", {c, x}));
  b.output(b.node("Sigmoid", {c}));
  const Model opt = optimized(b.model(), {kite::passes::fuse_conv_residual});
  EXPECT_EQ(find_op(opt, "FusedConv"), nullptr);
}

// ---- the pipeline ---------------------------------------------------------------

// A small network touching most passes: BatchNorm, SiLU, a shape subgraph,
// Identity, a transformer block with decomposed LayerNorm and GELU.
Model small_network() {
  Builder b;
  const int x = b.input("x", {1, 3, 8, 8});
  const int conv = b.node("Conv", {x, b.random_constant("w", {8, 3, 3, 3})},
                          {ints_attr("pads", {1, 1, 1, 1}), ints_attr("strides", {2, 2})});
  const int bn = batch_norm(b, conv, 8);
  const int act = b.node("Mul", {bn, b.node("Sigmoid", {bn})});
  const int id = b.node("Identity", {act});
  // tokens: [1, 16, 8] via a Shape-computed Reshape, then Transpose.
  const int shape = b.node("Shape", {id});
  const int batch = b.node("Gather", {shape, b.ints_constant("i0", {0})}, {int_attr("axis", 0)});
  const int target = b.node("Concat", {batch, b.ints_constant("c8", {8}), b.ints_constant("m1", {-1})},
                            {int_attr("axis", 0)});
  const int tokens = b.node("Transpose", {b.declared("Reshape", {id, target}, KITE_DTYPE_FLOAT32, {1, 8, 16})},
                            {ints_attr("perm", {0, 2, 1})});
  const int ln = layer_norm_decomposed(b, tokens, 8);
  const int q = b.node("Add", {b.node("MatMul", {ln, b.random_constant("wq", {8, 8})}), b.random_constant("bq", {8})});
  const int k = b.node("MatMul", {ln, b.random_constant("wk", {8, 8})});
  const int v = b.node("MatMul", {ln, b.random_constant("wv", {8, 8})});
  const int kt = b.node("Transpose", {k}, {ints_attr("perm", {0, 2, 1})});
  const int s = b.node("Div", {b.node("MatMul", {q, kt}), b.scalar("sqrt8", 2.828427f)});
  const int att = b.node("MatMul", {b.node("Softmax", {s}, {int_attr("axis", -1)}), v});
  const int res = b.node("Add", {tokens, att});
  const int ln2 = layer_norm_decomposed(b, res, 8);
  const int h = gelu_erf(b, b.node("Add", {b.node("MatMul", {ln2, b.random_constant("w1", {8, 16})}),
                                            b.random_constant("b1", {16})}));
  const int out = b.node("Add", {res, b.node("MatMul", {h, b.random_constant("w2", {16, 8})})});
  b.output(out);
  return b.model();
}

// ShuffleNet's channel shuffle of two branches: Concat, Reshape to
// [N, 2, C / 2, H, W], Transpose [0, 2, 1, 3, 4], Reshape back; then
// `slices` channel Slices of the result (0: the shuffled tensor itself).
int channel_shuffle(Builder& b, int x0, int x1, int64_t c, int64_t h, int64_t w) {
  const int cat = b.node("Concat", {x0, x1}, {int_attr("axis", 1)});
  const int split = b.node("Reshape", {cat, b.ints_constant("to5", {1, 2, c / 2, h, w})});
  const int t = b.node("Transpose", {split}, {ints_attr("perm", {0, 2, 1, 3, 4})});
  return b.node("Reshape", {t, b.ints_constant("to4", {1, c, h, w})});
}

TEST(FuseChannelShuffle, ConcatShuffleAndSlicesBecomeOneNodeWithTheBodysBits) {
  Builder b;
  const int x0 = b.input("x0", {1, 6, 3, 5}), x1 = b.input("x1", {1, 6, 3, 5});
  const int y = channel_shuffle(b, b.node("Relu", {x0}), b.node("Relu", {x1}), 12, 3, 5);
  const int axes = b.ints_constant("axes", {1});
  const int lo = b.node("Slice", {y, b.ints_constant("s0", {0}), b.ints_constant("e0", {6}), axes});
  // An end past the axis clamps to it (ONNX Slice).
  const int hi = b.node("Slice", {y, b.ints_constant("s1", {6}), b.ints_constant("e1", {1 << 20}), axes});
  b.output(b.node("Sigmoid", {lo}));
  b.output(hi);
  PassResult r;
  const Model opt = optimized(b.model(), {kite::passes::fuse_channel_shuffle}, &r);
  const Node* n = find_op(opt, "ChannelShuffle");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->domain, "kite");
  EXPECT_EQ(n->fused_pattern, "Concat+ChannelShuffle+Slice");
  EXPECT_EQ(body_ops(*n), (std::vector<std::string>{"Concat", "Reshape", "Transpose", "Reshape", "Slice", "Slice"}));
  EXPECT_EQ(n->inputs.size(), 2u);
  EXPECT_EQ(n->outputs.size(), 2u);
  EXPECT_EQ(n->find_attr("group")->i, 2);
  EXPECT_EQ(n->find_attr("channel_starts")->ints, (std::vector<int64_t>{0, 6}));
  expect_scratch_intermediates(opt, *n);
  // Copies only: the fused kernel gives the body's bits.
  const auto inputs = random_inputs(opt, 5);
  const RunResult fused = run(opt, inputs, Path::kDefault);
  const RunResult body = run(opt, inputs, Path::kDecomposed);
  EXPECT_EQ(fused.fused, 1);
  EXPECT_EQ(body.decomposed, 1);
  expect_close(body.outputs, fused.outputs, 0.0);
}

TEST(FuseChannelShuffle, ShuffleAloneAndShuffleReadByOtherNodes) {
  // No Concat before it (the input is a graph input) and a reader that is
  // not a Slice: the shuffle alone, its result the output.
  Builder b;
  const int x = b.input("x", {1, 8, 4, 4});
  const int split = b.node("Reshape", {x, b.ints_constant("to5", {1, 4, 2, 4, 4})});
  const int t = b.node("Transpose", {split}, {ints_attr("perm", {0, 2, 1, 3, 4})});
  const int y = b.node("Reshape", {t, b.ints_constant("to4", {1, 8, 4, 4})});
  b.output(b.node("Relu", {y}));
  const Model opt = optimized(b.model(), {kite::passes::fuse_channel_shuffle});
  const Node* n = find_op(opt, "ChannelShuffle");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->fused_pattern, "ChannelShuffle");
  EXPECT_EQ(n->find_attr("group")->i, 4);
  const auto inputs = random_inputs(opt, 6);
  expect_close(run(opt, inputs, Path::kDecomposed).outputs, run(opt, inputs, Path::kDefault).outputs, 0.0);
}

TEST(FuseChannelShuffle, TransposedTensorReadElsewhereIsNotFused) {
  Builder b;
  const int x0 = b.input("x0", {1, 4, 2, 2}), x1 = b.input("x1", {1, 4, 2, 2});
  const int y = channel_shuffle(b, x0, x1, 8, 2, 2);
  b.output(y);
  // The 5-D transposed tensor is also an output.
  b.output(b.model().main().nodes[2].outputs[0]);
  const Model opt = optimized(b.model(), {kite::passes::fuse_channel_shuffle});
  EXPECT_EQ(find_op(opt, "ChannelShuffle"), nullptr);
}

TEST(Pipeline, O2FusesAndMatchesTheUnoptimizedGraph) {
  const Model m = small_network();
  Model opt = m;
  kite::passes::PipelineOptions options;
  kite::passes::PipelineReport report;
  std::string err;
  const int64_t launches_before = kite::passes::count_kernel_launches(m);
  ASSERT_TRUE(kite::passes::run_pipeline(&opt, options, &report, &err)) << err;
  EXPECT_LT(kite::passes::count_kernel_launches(opt), launches_before / 2);
  EXPECT_EQ(op_counts(opt).count("BatchNormalization"), 0u);
  EXPECT_EQ(op_counts(opt).count("Identity"), 0u);
  EXPECT_EQ(op_counts(opt).count("Shape"), 0u);
  EXPECT_EQ(report.fusions["Conv+SiLU"], 1);
  EXPECT_EQ(report.fusions["Attention"], 1);
  EXPECT_EQ(report.fusions["Add+LayerNormalization"], 1);
  EXPECT_EQ(report.fusions["MatMul+Add+Gelu"], 1);
  EXPECT_FALSE(report.hit_round_limit);
  const auto inputs = random_inputs(m, 7);
  expect_close(run(m, inputs).outputs, run(opt, inputs).outputs);
}

TEST(Pipeline, O1FoldsButDoesNotFuse) {
  Model opt = small_network();
  kite::passes::PipelineOptions options;
  options.level = 1;
  std::string err;
  ASSERT_TRUE(kite::passes::run_pipeline(&opt, options, nullptr, &err)) << err;
  EXPECT_EQ(op_counts(opt).count("BatchNormalization"), 0u);
  for (const Node& n : opt.main().nodes) EXPECT_TRUE(n.fused_pattern.empty()) << n.op;
}

TEST(Pipeline, DisabledPassDoesNotRunAndUnknownNameIsRefused) {
  Model opt = small_network();
  kite::passes::PipelineOptions options;
  options.disabled = {"fold_batch_norm", "fuse_attention"};
  kite::passes::PipelineReport report;
  std::string err;
  ASSERT_TRUE(kite::passes::run_pipeline(&opt, options, &report, &err)) << err;
  EXPECT_EQ(op_counts(opt)["BatchNormalization"], 1);
  EXPECT_EQ(report.fusions.count("Attention"), 0u);
  for (const auto& p : report.passes) EXPECT_NE(p.name, "fold_batch_norm");
  options.disabled = {"no_such_pass"};
  Model again = small_network();
  EXPECT_FALSE(kite::passes::run_pipeline(&again, options, &report, &err));
  EXPECT_NE(err.find("unknown pass 'no_such_pass'"), std::string::npos) << err;
}

// ---- fused kernels against their bodies -------------------------------------------

TEST(FusedKernels, FusedPathMatchesBodyPath) {
  Model opt = small_network();
  std::string err;
  ASSERT_TRUE(kite::passes::run_pipeline(&opt, kite::passes::PipelineOptions(), nullptr, &err)) << err;
  int fused_nodes = 0;
  for (const Node& n : opt.main().nodes) fused_nodes += n.fused_pattern.empty() ? 0 : 1;
  ASSERT_GT(fused_nodes, 4);
  for (uint32_t seed : {3u, 4u}) {
    const auto inputs = random_inputs(opt, seed);
    const RunResult fused = run(opt, inputs, Path::kDefault);
    const RunResult body = run(opt, inputs, Path::kDecomposed);
    EXPECT_EQ(fused.fused, fused_nodes) << "the CPU backend should run every fused node fused";
    EXPECT_EQ(fused.decomposed, 0);
    EXPECT_EQ(body.decomposed, fused_nodes);
    expect_close(body.outputs, fused.outputs);
  }
}

// ---- hostile fused nodes ------------------------------------------------------------
//
// The CPU backend must refuse, with a message, a fused node whose shapes or
// attributes do not fit, before any kernel touches memory.

struct AbiTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  kite_backend_tensor t{};
  AbiTensor(std::string n, std::vector<int64_t> s) : name(std::move(n)), shape(std::move(s)) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    data.assign(static_cast<size_t>(count), 0.5f);
    t.name = name.c_str();
    t.dtype = KITE_DTYPE_FLOAT32;
    t.rank = static_cast<int32_t>(shape.size());
    t.shape = shape.data();
    t.byte_size = data.size() * 4;
    t.data = data.data();
  }
};

struct AbiAttr {
  std::string name, s;
  kite_backend_attr a{};
};

// supports2() and prepare2() of the CPU backend on one fused node (built
// with kite/abi/node.h, as the runtime builds it); returns the refusal
// reason ("" if accepted and prepared).
std::string cpu_verdict(const char* op, const char* pattern, std::vector<AbiTensor*> inputs,
                        std::vector<AbiTensor*> outputs, std::vector<kite_backend_attr> attrs) {
  const kite_backend_api* api = kite_cpu_backend_api();
  void* backend = nullptr;
  kite_backend_create_info info{};
  info.struct_size = sizeof info;
  info.threads = 1;
  char message[512] = {};
  EXPECT_EQ(api->create2(nullptr, &info, &backend, message, sizeof message), KITE_OK) << message;
  kite::abi::TensorTable table;
  kite::abi::Node::Spec spec;
  spec.name = "hostile";
  spec.op = op;
  spec.domain = "kite";
  spec.fused_pattern = pattern;
  spec.num_raw_attrs = static_cast<int32_t>(attrs.size());
  spec.raw_attrs = attrs.data();
  auto add = [&table](AbiTensor* t) {
    if (t == nullptr) return -1;
    kite::abi::TensorDesc d;
    d.name = t->t.name;
    d.dtype = t->t.dtype;
    d.rank = t->t.rank;
    d.shape = t->t.shape;
    d.byte_size = t->t.byte_size;
    const int index = table.add(d);
    table.at(index).data = t->t.data;
    return index;
  };
  for (AbiTensor* t : inputs) spec.inputs.push_back(add(t));
  for (AbiTensor* t : outputs) spec.outputs.push_back(add(t));
  kite::abi::Node node;
  node.build(spec, &table);
  std::string verdict;
  char reason[512] = {};
  const int supported = api->supports2(backend, node.v2(), reason, sizeof reason);
  void* kernel = nullptr;
  const kite_status prepared = api->prepare2(backend, node.v2(), &kernel, message, sizeof message);
  EXPECT_EQ(supported != 0, prepared == KITE_OK) << "supports2() and prepare2() disagree: " << reason << " / " << message;
  if (prepared == KITE_OK) {
    uint64_t bytes = 0;
    EXPECT_EQ(api->workspace_size(backend, &bytes, message, sizeof message), KITE_OK) << message;
    std::vector<float> workspace(static_cast<size_t>(bytes / 4 + 1));
    kite_backend_bindings bindings{};
    bindings.struct_size = sizeof bindings;
    bindings.workspace_host = workspace.data();
    bindings.workspace_size = bytes;
    EXPECT_EQ(api->bind(backend, &bindings, message, sizeof message), KITE_OK) << message;
    EXPECT_EQ(api->execute(backend, kernel, message, sizeof message), KITE_OK) << message;
    api->release(backend, kernel);
  } else {
    verdict = message;
    EXPECT_NE(verdict.find("hostile"), std::string::npos) << "the message should name the node: " << verdict;
  }
  api->destroy(backend);
  return verdict;
}

kite_backend_attr abi_float(const char* name, float v) {
  kite_backend_attr a{};
  a.name = name;
  a.type = KITE_ATTR_FLOAT;
  a.f = v;
  return a;
}
kite_backend_attr abi_string(const char* name, const char* v) {
  kite_backend_attr a{};
  a.name = name;
  a.type = KITE_ATTR_STRING;
  a.s = v;
  return a;
}

TEST(HostileFusedNodes, AttentionShapesMustAgree) {
  AbiTensor q("q", {2, 5, 4}), kt("kt", {2, 4, 6}), v("v", {2, 6, 3}), out("out", {2, 5, 3});
  EXPECT_EQ(cpu_verdict("Attention", "Attention", {&q, &kt, &v}, {&out}, {abi_float("scale", 0.5f)}), "");
  AbiTensor bad_kt("kt", {2, 3, 6});
  EXPECT_NE(cpu_verdict("Attention", "Attention", {&q, &bad_kt, &v}, {&out}, {abi_float("scale", 0.5f)})
                .find("kt's rows"), std::string::npos);
  AbiTensor bad_out("out", {2, 5, 4});
  EXPECT_NE(cpu_verdict("Attention", "Attention", {&q, &kt, &v}, {&bad_out}, {abi_float("scale", 0.5f)})
                .find("output 'out'"), std::string::npos);
  AbiTensor wide_mask("mask", {3, 5, 6});
  EXPECT_NE(cpu_verdict("Attention", "Attention", {&q, &kt, &v, &wide_mask}, {&out}, {abi_float("scale", 0.5f)})
                .find("does not broadcast"), std::string::npos);
  EXPECT_NE(cpu_verdict("Attention", "Attention", {&q, &kt, &v}, {&out}, {}).find("scale"), std::string::npos);
}

TEST(HostileFusedNodes, FusedConvChecksItsOutputAndActivation) {
  AbiTensor x("x", {1, 2, 5, 5}), w("w", {3, 2, 3, 3}), y("y", {1, 3, 3, 3});
  EXPECT_EQ(cpu_verdict("FusedConv", "Conv+Relu", {&x, &w}, {&y}, {abi_string("activation", "Relu")}), "");
  AbiTensor big_y("y", {1, 3, 5, 5});  // would need pads the node does not have
  EXPECT_NE(cpu_verdict("FusedConv", "Conv+Relu", {&x, &w}, {&big_y}, {abi_string("activation", "Relu")}), "");
  EXPECT_NE(cpu_verdict("FusedConv", "Conv+Mish", {&x, &w}, {&y}, {abi_string("activation", "Mish")})
                .find("not supported"), std::string::npos);
  EXPECT_NE(cpu_verdict("FusedConv", "Conv+Sigmoid", {&x, &w}, {&y}, {abi_string("activation", "Relu")})
                .find("does not end with"), std::string::npos);
  // The scheduler test's pattern name is not one of the optimizer's.
  EXPECT_NE(cpu_verdict("FusedConv", "conv_relu", {&x, &w}, {&y}, {}), "");
  // A residual: input R of the output's shape, after X, W and B (or none).
  AbiTensor r("r", {1, 3, 3, 3}), short_r("r", {1, 3, 3, 2});
  EXPECT_EQ(cpu_verdict("FusedConv", "Conv+Add", {&x, &w, nullptr, &r}, {&y}, {}), "");
  EXPECT_EQ(cpu_verdict("FusedConv", "Conv+Add+Relu", {&x, &w, nullptr, &r}, {&y}, {abi_string("activation", "Relu")}),
            "");
  EXPECT_NE(cpu_verdict("FusedConv", "Conv+Add", {&x, &w, nullptr, &short_r}, {&y}, {}).find("residual"),
            std::string::npos);
  EXPECT_NE(cpu_verdict("FusedConv", "Conv+Add", {&x, &w, nullptr}, {&y}, {}).find("R"), std::string::npos);
  EXPECT_NE(cpu_verdict("FusedConv", "Conv+Add", {&x, &w, nullptr, &r}, {&y}, {abi_string("activation", "Relu")})
                .find("does not end with"), std::string::npos);
}

TEST(HostileFusedNodes, BiasAndNormShapesMustFit) {
  AbiTensor a("a", {4, 6}), b("b", {6, 5}), bias("bias", {5}), y("y", {4, 5});
  EXPECT_EQ(cpu_verdict("FusedMatMul", "MatMul+Add", {&a, &b, &bias}, {&y}, {}), "");
  AbiTensor long_bias("bias", {6});
  EXPECT_NE(cpu_verdict("FusedMatMul", "MatMul+Add", {&a, &b, &long_bias}, {&y}, {}).find("bias"),
            std::string::npos);
  AbiTensor x("x", {3, 8}), skip("skip", {3, 8}), gamma("gamma", {8}), beta("beta", {8}), out("out", {3, 8});
  kite_backend_attr axis{};
  axis.name = "axis";
  axis.type = KITE_ATTR_INT;
  axis.i = -1;
  EXPECT_EQ(cpu_verdict("SkipLayerNormalization", "Add+LayerNormalization", {&x, &skip, &gamma, &beta}, {&out},
                        {axis}), "");
  AbiTensor short_gamma("gamma", {4});
  EXPECT_NE(cpu_verdict("SkipLayerNormalization", "Add+LayerNormalization", {&x, &skip, &short_gamma}, {&out},
                        {axis}).find("gamma"), std::string::npos);
  AbiTensor short_skip("skip", {3, 4});
  EXPECT_NE(cpu_verdict("SkipLayerNormalization", "Add+LayerNormalization", {&x, &short_skip, &gamma}, {&out},
                        {axis}).find("skip"), std::string::npos);
  AbiTensor bad_ln_out("out", {3, 9});
  EXPECT_NE(cpu_verdict("LayerNormalization", "LayerNormalization", {&x, &gamma}, {&bad_ln_out}, {axis}), "");
}

TEST(HostileFusedNodes, ChannelShuffleShapesAndStartsMustFit) {
  AbiTensor a("a", {1, 4, 3, 3}), b("b", {1, 4, 3, 3}), lo("lo", {1, 4, 3, 3}), hi("hi", {1, 4, 3, 3});
  const int64_t starts[] = {0, 4}, late[] = {0, 5};
  auto attrs = [](int64_t group, const int64_t* s, int32_t count) {
    kite_backend_attr g{};
    g.name = "group";
    g.type = KITE_ATTR_INT;
    g.i = group;
    kite_backend_attr c{};
    c.name = "channel_starts";
    c.type = KITE_ATTR_INTS;
    c.count = count;
    c.ints = s;
    return std::vector<kite_backend_attr>{g, c};
  };
  const char* pattern = "Concat+ChannelShuffle+Slice";
  EXPECT_EQ(cpu_verdict("ChannelShuffle", pattern, {&a, &b}, {&lo, &hi}, attrs(2, starts, 2)), "");
  EXPECT_NE(cpu_verdict("ChannelShuffle", pattern, {&a, &b}, {&lo, &hi}, attrs(3, starts, 2)).find("group 3"),
            std::string::npos);
  EXPECT_NE(cpu_verdict("ChannelShuffle", pattern, {&a, &b}, {&lo, &hi}, attrs(2, late, 2)).find("output 'hi'"),
            std::string::npos);
  EXPECT_NE(cpu_verdict("ChannelShuffle", pattern, {&a, &b}, {&lo, &hi}, attrs(2, starts, 1)).find("channel_starts"),
            std::string::npos);
  AbiTensor wide("wide", {1, 4, 3, 4});
  EXPECT_NE(cpu_verdict("ChannelShuffle", pattern, {&a, &wide}, {&lo, &hi}, attrs(2, starts, 2)).find("input 'wide'"),
            std::string::npos);
  EXPECT_NE(cpu_verdict("ChannelShuffle", "ChannelShuffle+Gelu", {&a, &b}, {&lo, &hi}, attrs(2, starts, 2))
                .find("pattern"), std::string::npos);
}

TEST(HostileFusedNodes, LoaderRefusesAFusedNodeWithoutBody) {
  // A fused Attention whose kt does not fit q, and no body to fall back on.
  Builder b;
  const int q = b.input("q", {2, 5, 4});
  const int kt = b.input("kt", {2, 3, 6});
  const int v = b.input("v", {2, 6, 3});
  Model m = b.model();
  const int o = m.add_tensor(kite::test::make_tensor("out", KITE_DTYPE_FLOAT32, {2, 5, 3}, TensorKind::Output));
  Node n = kite::test::make_node("hostile", "Attention", {q, kt, v}, {o}, {float_attr("scale", 1.0f)});
  n.domain = "kite";
  n.fused_pattern = "Attention";
  m.main().nodes.push_back(n);
  m.main().outputs.push_back(o);
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(kite::writer::serialize(m, &bytes, &err)) << err;
  // The loader refuses a fused node without a body (nothing could check
  // it against the op rules); the CPU's fused kernel refuses these shapes
  // too (cpu_verdict above), naming the node.
  kite_model* model = nullptr;
  EXPECT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &model), KITE_ERROR_INVALID_MODEL);
  const std::string message = kite_last_error();
  EXPECT_NE(message.find("hostile"), std::string::npos) << message;
  EXPECT_NE(message.find("has no body"), std::string::npos) << message;
  kite_model_destroy(model);
}

}  // namespace
