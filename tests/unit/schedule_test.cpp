// The schedule builder (sdk/src/schedule.h) on its own: each of its rules
// with a fake oracle standing in for the backends' supports answers, on
// small graphs built for the purpose. No backend, no memory.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model.h"
#include "schedule.h"
#include "test_models.h"

namespace {

using kite::rt::BackendTraits;
using kite::rt::Boundary;
using kite::rt::Model;
using kite::rt::NodeRec;
using kite::rt::Schedule;
using kite::rt::ScheduleBuilder;
using kite::rt::Step;
using kite::rt::StepKind;

// Each backend declines the ops (or fused patterns, "fused") listed for it.
class FakeOracle : public kite::rt::PlacementOracle {
 public:
  explicit FakeOracle(std::vector<std::set<std::string>> declined) : declined_(std::move(declined)) {}
  bool supports(const NodeRec& node, int backend, std::string* reason) override {
    const std::set<std::string>& d = declined_[static_cast<size_t>(backend)];
    if (d.count(node.op) || (!node.fused_pattern.empty() && d.count("fused"))) {
      if (reason) *reason = "declines " + node.op;
      return false;
    }
    return true;
  }

 private:
  std::vector<std::set<std::string>> declined_;
};

// A chain of single-input float ops on x: 1x8, each node reading the
// previous value (and x again for binary ops), the last value the output.
kite::ir::Model chain(const std::vector<std::string>& ops) {
  using kite::ir::TensorKind;
  kite::ir::Model m;
  m.source_opset = 13;
  m.producer = "kite-test";
  const int x = m.add_tensor(kite::test::make_tensor("x", KITE_DTYPE_FLOAT32, {1, 8}, TensorKind::Input));
  kite::ir::Graph g;
  g.name = "main";
  g.inputs = {x};
  int prev = x;
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool last = i + 1 == ops.size();
    const int out = m.add_tensor(kite::test::make_tensor("t" + std::to_string(i), KITE_DTYPE_FLOAT32, {1, 8},
                                                         last ? TensorKind::Output : TensorKind::Activation));
    kite::ir::Node n;
    n.name = "n" + std::to_string(i);
    n.op = ops[i];
    n.inputs = {prev};
    if (ops[i] == "Add" || ops[i] == "Mul") n.inputs.push_back(x);
    n.outputs = {out};
    g.nodes.push_back(n);
    prev = out;
  }
  g.outputs = {prev};
  m.graphs.push_back(g);
  std::string err;
  kite::memory::plan_memory(&m, 256, &err);
  return m;
}

std::shared_ptr<Model> load(const kite::ir::Model& ir) {
  const auto bytes = kite::test::serialize_or_die(ir);
  std::shared_ptr<Model> m;
  const kite::rt::Status s = Model::load_memory(bytes.data(), bytes.size(), &m);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return m;
}

BackendTraits device(const std::string& name, bool unified = false) {
  BackendTraits t;
  t.name = name;
  t.device = true;
  t.shares_host = unified;
  return t;
}

BackendTraits host(const std::string& name) {
  BackendTraits t;
  t.name = name;
  return t;
}

struct Built {
  std::shared_ptr<Model> model;
  std::unique_ptr<FakeOracle> oracle;
  std::unique_ptr<ScheduleBuilder> builder;
  Schedule schedule;
  kite::rt::Status status;
};

// Places, applies rule 2 (unless strict), plans the steps.
std::unique_ptr<Built> build(const kite::ir::Model& ir, std::vector<BackendTraits> backends,
                             std::vector<std::set<std::string>> declined, bool ping_pong = true,
                             Boundary boundary = {}) {
  auto b = std::make_unique<Built>();
  b->model = load(ir);
  b->oracle = std::make_unique<FakeOracle>(std::move(declined));
  b->builder = std::make_unique<ScheduleBuilder>(*b->model, std::move(backends), std::vector<std::string>{},
                                                 b->oracle.get());
  b->status = b->builder->place(&b->schedule);
  if (!b->status.is_ok()) return b;
  if (ping_pong) b->builder->avoid_ping_pong(&b->schedule);
  b->status = b->builder->plan_steps(boundary, &b->schedule);
  return b;
}

std::vector<std::string> placement(const Schedule& s) {
  std::vector<std::string> out;
  for (const auto& p : s.placements) out.push_back(p.backend);
  return out;
}

// The main graph's steps as text: "S0" segment on backend 0, "U0:t1" upload
// of t1 to backend 0, "D0:t1" download, "Y0" sync (final: "Y0!"), "If",
// "I0:x" / "O0:t2" application buffers in / out.
std::vector<std::string> steps(const Built& b, int graph = 0) {
  std::vector<std::string> out;
  const auto name = [&](int t) { return b.model->tensors[static_cast<size_t>(t)].name; };
  for (const Step& s : b.schedule.steps[static_cast<size_t>(graph)]) {
    const std::string be = std::to_string(s.backend);
    switch (s.kind) {
      case StepKind::Segment: out.push_back("S" + be); break;
      case StepKind::Upload: out.push_back("U" + be + ":" + name(s.tensor)); break;
      case StepKind::Download: out.push_back("D" + be + ":" + name(s.tensor)); break;
      case StepKind::Sync: out.push_back("Y" + be + (s.final_sync ? "!" : "")); break;
      case StepKind::If: out.push_back("If"); break;
      case StepKind::BufferIn: out.push_back("I" + be + ":" + name(s.tensor)); break;
      case StepKind::BufferOut: out.push_back("O" + be + ":" + name(s.tensor)); break;
    }
  }
  return out;
}

using Strings = std::vector<std::string>;

// ---- rule 1: placement ----------------------------------------------------------

TEST(ScheduleRule1Placement, FirstBackendThatSupportsANode) {
  auto b = build(chain({"Relu", "Neg", "Relu"}), {device("gpu"), host("cpu")}, {{"Neg"}, {}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"gpu", "cpu", "gpu"}));
  EXPECT_NE(b->schedule.placements[1].reason.find("gpu: declines Neg"), std::string::npos)
      << b->schedule.placements[1].reason;
  ASSERT_EQ(b->schedule.fallbacks.size(), 1u);
  EXPECT_NE(b->schedule.fallbacks[0].find("Neg 'n1' -> cpu"), std::string::npos);
}

TEST(ScheduleRule1Placement, FusedNodeDeclinedRunsItsBodyOnTheSameBackend) {
  auto b = build(kite::test::conv_relu_add_model(true), {device("gpu"), host("cpu")}, {{"fused"}, {}});
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"gpu", "gpu"}));
  EXPECT_TRUE(b->schedule.placements[0].decomposed);
  // Conv and Relu of the body, then the Add: three kernels, one segment.
  EXPECT_EQ(b->schedule.kernels.size(), 3u);
  EXPECT_EQ(b->schedule.segments.size(), 1u);
}

TEST(ScheduleRule1Placement, BodyNodesArePlacedOneByOneWhenNoBackendRunsThemAll) {
  // gpu lacks the fused kernel and Relu; cpu lacks the fused kernel and Conv.
  auto b = build(kite::test::conv_relu_add_model(true), {device("gpu"), host("cpu")},
                 {{"fused", "Relu"}, {"fused", "Conv"}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"mixed", "gpu"}));
  EXPECT_EQ(b->schedule.kernels[0].backend, 0);
  EXPECT_EQ(b->schedule.kernels[1].backend, 1);
}

TEST(ScheduleRule1Placement, NodeNoBackendRunsIsAnErrorNamingIt) {
  auto b = build(chain({"Relu", "Neg"}), {device("gpu"), host("cpu")}, {{"Neg"}, {"Neg"}});
  EXPECT_EQ(b->status.code(), KITE_ERROR_UNSUPPORTED);
  EXPECT_NE(b->status.message().find("Neg 'n1' is not supported by any backend"), std::string::npos)
      << b->status.message();
}

// ---- rule 2: no ping-pong ---------------------------------------------------------

TEST(ScheduleRule2PingPong, CheapNodeStaysWithItsNeighbours) {
  // Preference gpu,cpu; the gpu declines Tanh, so n0 and n2 run on the cpu
  // and the cheap Neg between them would cost an upload and a download.
  auto b = build(chain({"Tanh", "Neg", "Tanh"}), {device("gpu"), host("cpu")}, {{"Tanh"}, {}});
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"cpu", "cpu", "cpu"}));
  EXPECT_NE(b->schedule.placements[1].reason.find("kept with its neighbours on cpu (on gpu it would cost 2 "
                                                  "copies per run, there 0)"),
            std::string::npos)
      << b->schedule.placements[1].reason;
  EXPECT_EQ(b->schedule.segments.size(), 1u);
  EXPECT_EQ(b->schedule.main_transfers, 0);
  // Without the rule (strict mode) it would ping-pong.
  auto strict = build(chain({"Tanh", "Neg", "Tanh"}), {device("gpu"), host("cpu")}, {{"Tanh"}, {}}, false);
  EXPECT_EQ(placement(strict->schedule), (Strings{"cpu", "gpu", "cpu"}));
  EXPECT_EQ(strict->schedule.main_transfers, 2);
}

TEST(ScheduleRule2PingPong, HeavyNodeKeepsItsPreferredDevice) {
  // Softmax is not cheap: it is worth its two copies, and stays on the gpu.
  auto b = build(chain({"Tanh", "Softmax", "Tanh"}), {device("gpu"), host("cpu")}, {{"Tanh"}, {}});
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"cpu", "gpu", "cpu"}));
  EXPECT_EQ(b->schedule.main_transfers, 2);
}

TEST(ScheduleRule2PingPong, DeclinedCheapNodeBetweenTwoSegmentsIsReported) {
  auto b = build(chain({"Relu", "Neg", "Relu"}), {device("gpu"), host("cpu")}, {{"Neg"}, {}});
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"gpu", "cpu", "gpu"}));
  ASSERT_EQ(b->schedule.notes.size(), 1u);
  EXPECT_NE(b->schedule.notes[0].find("Neg 'n1', declined by gpu (declines Neg), splits its work into two "
                                      "segments: 2 copies per run"),
            std::string::npos)
      << b->schedule.notes[0];
}

TEST(ScheduleRule2PingPong, UnifiedDeviceHasNoCopiesToSave) {
  auto b = build(chain({"Tanh", "Neg", "Tanh"}), {device("gpu", true), host("cpu")}, {{"Tanh"}, {}});
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(placement(b->schedule), (Strings{"cpu", "gpu", "cpu"}));
  EXPECT_EQ(b->schedule.main_transfers, 0);
}

// ---- rule 3: segments -----------------------------------------------------------------

TEST(ScheduleRule3Segments, ConsecutiveKernelsOfOneBackendAreOneSegment) {
  auto b = build(chain({"Relu", "Neg", "Relu", "Tanh", "Sigmoid"}), {device("gpu"), host("cpu")},
                 {{"Tanh", "Sigmoid"}, {}});
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  ASSERT_EQ(b->schedule.segments.size(), 2u);
  EXPECT_EQ(b->schedule.segments[0].backend, 0);
  EXPECT_EQ(b->schedule.segments[0].count, 3);
  EXPECT_EQ(b->schedule.segments[1].backend, 1);
  EXPECT_EQ(b->schedule.segments[1].count, 2);
}

// ---- rule 4: data movement at segment edges -----------------------------------------

TEST(ScheduleRule4Copies, ValuesFromElsewhereArriveBeforeTheSegment) {
  // n0 Relu(x) gpu, n1 Mul(t0, x) gpu: x is read by the first kernel; the
  // cpu's Tanh in the middle is not cheap-movable (declined).
  auto b = build(chain({"Relu", "Tanh", "Add", "Neg"}), {device("gpu"), host("cpu")}, {{"Tanh"}, {}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  // x up, segment; t0 down for the cpu, cpu segment; t1 up and the Add
  // (which reads x, already on the gpu) and Neg; the output down.
  EXPECT_EQ(steps(*b), (Strings{"U0:x", "S0", "D0:t0", "S1", "U0:t1", "S0", "D0:t3"}));
  EXPECT_EQ(b->schedule.main_transfers, 4);
}

TEST(ScheduleRule4Copies, DeviceToDeviceGoesThroughTheHost) {
  auto b = build(chain({"Relu", "Neg"}), {device("a"), device("b"), host("cpu")}, {{"Neg"}, {}, {}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(steps(*b), (Strings{"U0:x", "S0", "D0:t0", "U1:t0", "S1", "D1:t1"}));
}

TEST(ScheduleRule4Copies, BoundBuffersReplaceTheCopiesAtTheEdges) {
  Boundary boundary;
  boundary.inputs = {0};
  boundary.outputs = {0};
  auto b = build(chain({"Relu", "Neg"}), {device("gpu"), host("cpu")}, {{}, {}}, true, boundary);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  // In from the application buffer, one segment, out to it, then the wait.
  EXPECT_EQ(steps(*b), (Strings{"I0:x", "S0", "O0:t1", "Y0!"}));
  EXPECT_EQ(b->schedule.main_transfers, 0);
}

// ---- rule 5: waits --------------------------------------------------------------------

TEST(ScheduleRule5Waits, UnifiedDeviceIsWaitedForBeforeTheHostTouchesMemory) {
  auto b = build(chain({"Relu", "Tanh", "Neg"}), {device("gpu", true), host("cpu")}, {{"Tanh"}, {}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(steps(*b), (Strings{"S0", "Y0", "S1", "S0", "Y0!"}));
  EXPECT_EQ(b->schedule.main_transfers, 0);
}

TEST(ScheduleRule5Waits, DownloadWaitsForItsOwnDevice) {
  auto b = build(chain({"Relu", "Tanh"}), {device("gpu"), host("cpu")}, {{"Tanh"}, {}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  // No separate wait: the download returns after the queued work.
  EXPECT_EQ(steps(*b), (Strings{"U0:x", "S0", "D0:t0", "S1"}));
}

TEST(ScheduleRule5Waits, PendingUploadIsWaitedForBeforeTheHostWrites) {
  // gpu: n0 Relu(x) -> t0 (an output, kept on the gpu until the end);
  // the cpu's Tanh reads x too. The gpu's upload of x reads host memory
  // until it is done, so the host waits before running its segment.
  kite::ir::Model m = chain({"Relu", "Tanh"});
  m.main().nodes[1].inputs = {m.main().inputs[0]};  // Tanh(x)
  m.tensors[static_cast<size_t>(m.main().nodes[0].outputs[0])].kind = kite::ir::TensorKind::Output;
  m.main().outputs = {m.main().nodes[0].outputs[0], m.main().nodes[1].outputs[0]};
  std::string err;
  ASSERT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  auto b = build(m, {device("gpu"), host("cpu")}, {{"Tanh"}, {}}, false);
  ASSERT_TRUE(b->status.is_ok()) << b->status.message();
  EXPECT_EQ(steps(*b), (Strings{"U0:x", "S0", "Y0", "S1", "D0:t0"}));
}

// ---- test-only mutations ----------------------------------------------------------

TEST(ScheduleMutations, SkipTransferAndSkipSync) {
  auto b = build(chain({"Relu", "Tanh", "Neg"}), {device("gpu", true), host("cpu")}, {{"Tanh"}, {}}, false);
  ScheduleBuilder::apply_test_mutation("skip_sync", &b->schedule);
  EXPECT_EQ(steps(*b), (Strings{"S0", "S1", "S0"}));
  auto c = build(chain({"Relu", "Neg"}), {device("gpu"), host("cpu")}, {{}, {}});
  ScheduleBuilder::apply_test_mutation("skip_transfer", &c->schedule);
  EXPECT_EQ(steps(*c), (Strings{"S0", "D0:t1"}));
}

}  // namespace
