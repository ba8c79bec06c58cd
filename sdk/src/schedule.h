// The schedule builder: decides, without touching any backend's memory,
// where every node runs (placement, decomposition of fused nodes, fallback),
// how consecutive kernels of one backend group into segments, and which
// copies and waits a run needs between them. Pure: it sees the backends only
// through a PlacementOracle (their supports answers) and BackendTraits, so
// each of its rules has a unit test of its own (tests/unit/schedule_test.cpp).
// The session (session.cpp) turns the result into prepared kernels and runs
// it.
//
// The rules, in order (docs/BACKENDS.md, "Scheduling"):
//  1. Placement. A node goes to the first backend in preference order that
//     supports it. A fused node that backend declines runs as its body on
//     the first backend that runs the whole body; when none does, each body
//     node is placed on its own. If runs in the session.
//  2. No ping-pong. A cheap node (elementwise, data movement) whose preferred
//     backend differs from the backend of the kernels on both sides of it
//     would cost copies in and out: when the neighbours' backend runs it too
//     and that costs fewer copies, it stays with its neighbours (placement
//     reason says why). A cheap node the neighbours' device declines,
//     between two segments of that device, is reported (notes): it costs
//     two copies per run.
//  3. Segments. Consecutive kernels of one graph on one backend form a
//     segment; an If ends one.
//  4. Data movement. Every tensor's current value has a set of places (the
//     host, or a device's own arena; a unified device shares the host's).
//     Before a segment, every value it reads from elsewhere is brought to
//     its device (a download from the device holding it, then an upload):
//     copies happen only at segment edges. Graph outputs end on the host
//     (or in an application buffer bound to them).
//  5. Waits. Device work is asynchronous. Before any step that touches host
//     memory (a host segment, an If, an upload or download, a segment of a
//     unified device), every other device whose queued work touches host
//     memory (a unified device's kernels, an upload not yet done) is
//     synchronized; a download waits for its own device. Every graph ends
//     with a synchronize of each device that has work queued.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model.h"
#include "status.h"

namespace kite::rt {

// What the builder knows about one backend of the session.
struct BackendTraits {
  std::string name;
  bool device = false;       // device memory: its own arena, unless shares_host
  bool shares_host = false;  // unified: its mapped arena is the host arena
};

// Asks a backend whether it runs a node (supports / supports2).
class PlacementOracle {
 public:
  virtual ~PlacementOracle() = default;
  virtual bool supports(const NodeRec& node, int backend, std::string* reason) = 0;
};

struct PlacementRec {
  std::string node_name;
  std::string op;
  std::string backend;
  bool fused = false;
  bool decomposed = false;
  std::string reason;
};

// One kernel to prepare: a primitive node, a fused node run as one kernel,
// or one node of a decomposed fused node's body.
struct KernelRec {
  const NodeRec* node = nullptr;
  int backend = -1;
  int graph = 0;
  int placement = -1;  // index into Schedule::placements (main graph), else -1
};

struct SegmentRec {
  int backend = -1;
  int graph = 0;
  int first = 0;  // kernels [first, first + count) of Schedule::kernels
  int count = 0;
};

enum class StepKind {
  Segment,    // run segment `segment`
  Upload,     // host -> device `backend`, tensor `tensor`
  Download,   // device `backend` -> host, tensor `tensor`
  Sync,       // wait for device `backend`
  If,         // read the condition, run one branch graph, copy its outputs
  BufferIn,   // application buffer bound to input `tensor` -> arena of `backend`
  BufferOut,  // arena of `backend` -> application buffer bound to output `tensor`
};

struct Step {
  StepKind kind = StepKind::Segment;
  int segment = -1;
  int backend = -1;
  int tensor = -1;
  const NodeRec* if_node = nullptr;
  int placement = -1;  // If: its placement (main graph), for profiling
  int then_graph = -1;
  int else_graph = -1;
  bool final_sync = false;  // a Sync of the graph's end (run_async leaves these)
};

// Where the main graph's inputs start and its outputs must end: -1 the
// host, else the backend whose arena an application buffer is copied
// into / out of (BufferIn / BufferOut).
struct Boundary {
  std::vector<int> inputs;   // per main-graph input
  std::vector<int> outputs;  // per main-graph output
};

struct Schedule {
  std::vector<KernelRec> kernels;
  std::vector<SegmentRec> segments;
  std::vector<std::vector<Step>> steps;   // per graph
  std::vector<PlacementRec> placements;   // per main-graph node
  std::vector<std::string> fallbacks;     // nodes not placed first (strict mode)
  std::vector<std::string> notes;         // rule 2's reports
  int main_transfers = 0;                 // uploads + downloads of the main graph
};

class ScheduleBuilder {
 public:
  ScheduleBuilder(const Model& model, std::vector<BackendTraits> backends,
                  std::vector<std::string> unavailable, PlacementOracle* oracle)
      : model_(model), backends_(std::move(backends)), unavailable_(std::move(unavailable)),
        oracle_(oracle) {}

  // Rules 1-3: placement and segments. Fills kernels, placements,
  // fallbacks, notes and segments of *out.
  Status place(Schedule* out);
  // Rule 4-5: the steps of every graph, given the traits (shares_host known
  // by now) and where main-graph inputs start and outputs end. May be
  // called again (application buffers bound or unbound).
  Status plan_steps(const Boundary& boundary, Schedule* out) const;
  // Updates a backend's traits (shares_host is known only once its arena
  // is mapped) before rule 2 and plan_steps.
  void set_traits(int backend, const BackendTraits& traits) {
    backends_[static_cast<size_t>(backend)] = traits;
  }
  // Rule 2 (after set_traits): moves cheap islands back to their
  // neighbours' backend where that saves copies, then regroups segments.
  void avoid_ping_pong(Schedule* out);

  // Test-only switch (KITE_TEST_MUTATION, for mutation tests): "skip_transfer"
  // drops the first upload of the main graph, "skip_sync" every Sync.
  static void apply_test_mutation(const std::string& mutation, Schedule* out);

 private:
  int space_of(int backend) const;
  Status place_node(const NodeRec& node, int graph, bool record, int parent_placement,
                    Schedule* out);
  void build_segments(Schedule* out) const;
  Status plan_graph(int graph, const Boundary* boundary, Schedule* out,
                    std::vector<Step>* steps, int* transfers) const;

  const Model& model_;
  std::vector<BackendTraits> backends_;
  std::vector<std::string> unavailable_;
  PlacementOracle* oracle_;
  // Per graph, in order: kernel indices, or -1 - i for the i-th node of the
  // graph that is an If.
  std::vector<std::vector<int>> items_;
};

// Is `op` cheap enough that copying its input and output costs more than
// running it anywhere (elementwise and data movement ops)?
bool is_cheap_op(const NodeRec& node);

}  // namespace kite::rt
