// What the memory planner and the memory budget report (part of
// kite::converter::ConvertReport). Plain data, so the public headers need
// none of the planner's private ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kite::memory {

struct PlanStats {
  int inplace_nodes = 0;       // elementwise nodes writing over a dying input
  int view_nodes = 0;          // reshape-like nodes sharing their input's bytes
  int concat_nodes = 0;        // Concats whose inputs were written into the output
  uint64_t arena_without_aliasing = 0;
  uint64_t lower_bound_without_aliasing = 0;
};

struct Recomputation {
  std::string node;        // the node computed again (the chain's last)
  std::string tensor;      // the tensor it recomputes
  int late_uses = 0;       // consumers now reading the recomputed copy
  int nodes = 1;           // nodes in the recomputed chain
  uint64_t elements = 0;   // extra elements computed per run (all chain outputs)
  uint64_t flops = 0;      // extra FLOPs per run
  uint64_t arena_before = 0;
  uint64_t arena_after = 0;
};

// A chain of spatial layers rewritten to run in row bands (patches): each
// band computes its rows of the chain's output from a slice of the chain's
// inputs (with the halo the layers' receptive fields need), so only one
// band's intermediates are live at once.
struct Patch {
  std::string first_node;   // first and last node of the chain (original names)
  std::string last_node;
  std::string output;       // the chain's output tensor
  int nodes = 0;            // nodes in the chain
  int tiles = 0;            // row bands
  uint64_t flops_added = 0; // halo recomputation, per run
  uint64_t arena_before = 0;
  uint64_t arena_after = 0;
};

struct BudgetReport {
  uint64_t budget = 0;       // bytes (from the ratio when ratio > 0)
  double ratio = 0;          // --memory-budget 0.6x: budget = ratio * lower_bound
  uint64_t lower_bound = 0;  // no-recompute lower bound of the unbudgeted plan
  uint64_t arena_before = 0;
  uint64_t arena_after = 0;
  uint64_t flops_before = 0;  // whole model, per run (multiply-add = 2)
  uint64_t flops_added = 0;   // by recomputation and patch halos
  bool met = false;
  std::vector<Recomputation> recomputed;
  std::vector<Patch> patches;
};

}  // namespace kite::memory
