// Memory budget by recomputation: when the arena is larger than a budget,
// tensors produced by cheap nodes (elementwise, activations, reshapes) that
// stay live across a long gap between their uses are computed again right
// before their late uses, so their bytes are free in between.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "memory/planner.h"

namespace kite::memory {

struct Recomputation {
  std::string node;        // the node computed again
  std::string tensor;      // the tensor it recomputes
  int late_uses = 0;       // consumers now reading the recomputed copy
  uint64_t elements = 0;   // extra elements computed per run
  uint64_t arena_before = 0;
  uint64_t arena_after = 0;
};

struct BudgetReport {
  uint64_t budget = 0;
  uint64_t arena_before = 0;
  uint64_t arena_after = 0;
  bool met = false;
  std::vector<Recomputation> recomputed;
};

// Rewrites the main graph (clones of cheap producers before late consumers)
// and replans, keeping only changes that shrink the arena. The model is
// planned on return, whether or not the budget was met.
bool apply_memory_budget(ir::Model* model, uint64_t budget, const PlanOptions& options,
                         BudgetReport* report, std::string* err);

}  // namespace kite::memory
