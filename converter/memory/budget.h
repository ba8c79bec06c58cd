// Memory budget by patches and recomputation. Patches: a chain of
// convolutions, pools and elementwise layers runs in row bands of its output
// (each band from a slice of the chain's inputs with the halo its windows
// need, padding only at the image's borders), then a Concat on H; only one
// band's intermediates are live at once. Recomputation: when the arena is larger than a budget,
// tensors produced by cheap nodes (elementwise, activations, reshapes) that
// stay live across a long gap between their uses are computed again right
// before their late uses, so their bytes are free in between.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/converter/memory_stats.h"
#include "memory/planner.h"

namespace kite::memory {

// Rewrites the main graph (chains of spatial layers into row-band patches,
// clones of cheap producers before late consumers) and replans, keeping only
// changes that shrink the arena. budget in bytes, or (budget 0) ratio times
// the unbudgeted plan's lower bound. The model is planned on return, whether
// or not the budget was met.
bool apply_memory_budget(ir::Model* model, uint64_t budget, double ratio, const PlanOptions& options,
                         BudgetReport* report, std::string* err);

// Rewrites main-graph nodes first..last (inclusive) into `tiles` row bands
// (what the budget does to the region it picks; tests drive it directly).
// False, with err, when they do not form a closed chain of layers that can
// run in bands; the model is then unchanged. rec may be null.
bool patch_nodes(ir::Model* model, size_t first, size_t last, int tiles, Patch* rec,
                 std::string* err);

}  // namespace kite::memory
