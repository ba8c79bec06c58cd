// Static memory planning: every non-constant tensor gets an offset in one
// arena. ArenaPlanner is the piece a test drives by hand (buffers with size,
// first use and last use); plan_memory derives those lifetimes from a Model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

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

// Computes lifetimes over the main graph's node order (subgraph tensors live
// during their If node, fused bodies' scratch during their fused node) and
// fills model->plan with the best strategy.
bool plan_memory(ir::Model* model, uint64_t alignment, std::string* err);

}  // namespace kite::memory
