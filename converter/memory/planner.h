// Static memory planning: every non-constant tensor gets an offset in one
// arena. ArenaPlanner is the piece a test drives by hand (buffers with size,
// first use and last use); plan_memory derives those lifetimes from a Model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/converter/memory_stats.h"

namespace kite::memory {

struct Buffer {
  uint64_t size = 0;
  int first = 0;  // first step the buffer is live (inclusive)
  int last = 0;   // last step (inclusive)
};

struct Placement {
  std::vector<uint64_t> offsets;  // per buffer
  uint64_t arena_size = 0;
  std::string strategy;
};

class ArenaPlanner {
 public:
  explicit ArenaPlanner(uint64_t alignment) : alignment_(alignment) {}
  int add_buffer(uint64_t size, int first, int last);
  const std::vector<Buffer>& buffers() const { return buffers_; }

  Placement naive() const;            // every buffer its own range
  Placement greedy_by_size() const;   // largest first, best-fit gap (Pisarchyk & Lee 2020)
  Placement greedy_by_lifetime() const;  // longest-lived first, best-fit gap
  // Pisarchyk & Lee's greedy by breadth: steps in order of decreasing live
  // bytes, each step's unplaced buffers largest first.
  Placement greedy_by_breadth() const;
  Placement greedy_by_first_use() const;  // in order of first use (linear scan)
  Placement greedy_by_size_perturbed(uint32_t seed) const;
  Placement best() const;             // smallest of the strategies

  // Peak over steps of the sum of live buffer sizes (unaligned).
  uint64_t lower_bound() const;
  uint64_t naive_size() const;  // sum of sizes (unaligned)

  // Empty string when no two buffers live at the same step share bytes and
  // every buffer lies inside the arena; otherwise what is wrong.
  std::string check(const Placement& p) const;

 private:
  Placement greedy(const std::vector<int>& order, const char* name) const;
  uint64_t alignment_;
  std::vector<Buffer> buffers_;
};

// Ops whose output may share its input's bytes. Backends rely on this list:
// a kernel of an in-place op must work when its output aliases the named
// input (each element read before it is written), and a view op's kernel is a
// no-op when input and output pointers are equal.
bool is_view_op(const std::string& op);
bool is_inplace_op(const std::string& op, int input_index);

struct PlanOptions {
  uint64_t alignment = 256;
  bool allow_aliasing = true;  // in-place ops and views
};

// Computes lifetimes over the main graph's node order (subgraph tensors live
// during their If node, fused bodies' scratch during their fused node), joins
// aliases, and fills model->plan with the best strategy.
bool plan_memory(ir::Model* model, const PlanOptions& options, PlanStats* stats, std::string* err);
bool plan_memory(ir::Model* model, uint64_t alignment, std::string* err);

// Peak live bytes (buffers after aliasing, unaligned) during each main-graph
// node: where the memory budget looks for work.
std::vector<uint64_t> live_bytes_per_node(const ir::Model& model, bool allow_aliasing);

// Proves model->plan: every non-constant tensor inside the arena and aligned,
// and no two tensors live at the same time share bytes unless they are the
// same alias (a view or an in-place output of the other, at the same offset).
// Returns "" when the plan is sound, else what is wrong, naming the tensors.
std::string check_plan(const ir::Model& model);

}  // namespace kite::memory
