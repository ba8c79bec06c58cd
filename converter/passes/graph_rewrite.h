// Changes to a model the passes share: new constants and tensors, new
// attributes, rewiring readers, removing nodes, restoring topological order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/ops/attr.h"
#include "passes/graph_query.h"
#include "passes/pass.h"

namespace kite::passes {

// ---- new tensors -------------------------------------------------------------
// Each gets a name no tensor has yet (ir::Model::unused_tensor_name(base)).

int add_float_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<float>& values);
int add_int64_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& values);
// A new activation tensor of this dtype and (known) shape.
int add_activation(ir::Model* model, const std::string& base, kite_dtype dtype,
                   const std::vector<int64_t>& shape);
// A new activation tensor with the dtype and shape of `like`.
int add_activation_like(ir::Model* model, const std::string& base, int like);

// ---- new attributes (one home: kite/ops/attr.h) ------------------------------

using kite::ops::float_attr;
using kite::ops::int_attr;
using kite::ops::ints_attr;
using kite::ops::set_attr;
using kite::ops::string_attr;

// ---- rewiring --------------------------------------------------------------

// Every node input (all graphs, fused bodies included) reading `from` reads
// `to` instead. Graph outputs are not touched.
void replace_reads(ir::Model* model, int from, int to);
// Removes the main-graph nodes whose flag is set.
void erase_nodes(ir::Model* model, const std::vector<bool>& dead);
// Reorders the main graph topologically, keeping the current order wherever
// the dependencies allow (src/topo_sort.h; a node depends on what its
// subgraphs read too). False with *err naming a cycle (nothing changed).
bool stable_topo_sort(ir::Model* model, std::string* err);

// ---- the rewrite loop --------------------------------------------------------

// Rewrites at main-graph node `node` if it can (uses: the graph's readers
// and writers before this call); true when it changed the graph. On an
// internal error it sets ctx.error (the return value is then ignored).
using LocalRewrite = std::function<bool(size_t node, const UseMap& uses)>;

// The loop of a pass that rewrites one place at a time: offers each
// main-graph node in order to rewrite; after a change the sweep starts over
// with a fresh UseMap (the old one is stale). Ends when a whole sweep
// changes nothing (result->changed says whether any did), or false when
// rewrite set ctx.error.
bool rewrite_until_stable(PassContext& ctx, PassResult* result, const LocalRewrite& rewrite);

}  // namespace kite::passes
