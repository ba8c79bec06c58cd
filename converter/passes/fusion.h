// Building fused nodes: the loop every fusion pass runs, replacing a matched
// pattern by one fused node that carries its body, and recognising the
// activation that ends a pattern.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "passes/graph_query.h"
#include "passes/pass.h"

namespace kite::passes {

struct FusionSpec {
  std::string pattern;       // "Conv+Relu": the fused_pattern, also the report's key
  std::string op;            // "FusedConv": the fused op (domain "kite")
  std::vector<int> nodes;    // main-graph node indices replaced
  std::vector<int> inputs;   // the fused node's inputs (-1: absent optional)
  std::vector<int> outputs;  // the fused node's outputs
  std::vector<ir::Attr> attrs;
  std::string counter;       // the pass counter a success adds to (empty: pattern)
};

// Replaces spec.nodes by one fused node (domain "kite") whose body is those
// nodes in graph order (bodies of fused nodes among them are inlined: bodies
// do not nest). Refuses (false, *why set, graph untouched) when a tensor the
// nodes produce other than spec.outputs is read elsewhere or is a graph
// output, when an output is not produced by the nodes, when the body reads a
// non-constant tensor that is neither a fused input nor produced inside, or
// when fusing would create a cycle. On success the intermediates become
// Scratch tensors and the graph is re-sorted.
bool apply_fusion(PassContext& ctx, const FusionSpec& spec, std::string* why);

// Looks at main-graph node `node` (uses: the graph's current readers and
// writers) and fills *spec when a pattern the pass fuses starts or ends
// there. It may add constants the spec uses; they are dropped again when it
// returns false or the fusion is refused.
using FusionMatcher = std::function<bool(size_t node, const UseMap& uses, FusionSpec* spec)>;

// The loop of a fusion pass: offers each main-graph node in order to match;
// a spec it returns is applied (counted under spec.pattern) and the sweep
// starts over on the changed graph; a spec apply_fusion refuses is counted
// as "rejected" and the sweep goes on. Ends when a sweep fuses nothing.
// False only on an internal error (ctx.error).
bool fuse_until_stable(PassContext& ctx, PassResult* result, const FusionMatcher& match);

// An activation applied to tensor t: the node(s) computing it, found from t's
// reader. Kinds: Relu, Clip (alpha=min, beta=max), Sigmoid, SiLU (x*Sigmoid(x)),
// HardSigmoid (alpha, beta), HardSwish (x*HardSigmoid(x) with alpha 1/6,
// beta 1/2, or the HardSwish op), LeakyRelu (alpha), Tanh, Gelu (erf) and
// GeluTanh (primitive Gelu, or a fused Gelu node).
struct Activation {
  std::string kind;
  float alpha = 0.0f;
  float beta = 0.0f;
  std::vector<int> nodes;  // main-graph nodes of the activation
  int output = -1;         // its result
};
// Finds the activation reading t (t must have no other reader). False if none.
bool match_activation(const ir::Model& model, const UseMap& uses, int t, Activation* out);
// The attributes a fused kernel reads for an activation.
void add_activation_attrs(const Activation& act, std::vector<ir::Attr>* attrs);
// Main-graph node `node` (one output) followed by the activation `act`, as
// op `fused_op` (domain kite): the node's inputs and attributes plus the
// activation's, pattern "<node's op>+<activation>".
FusionSpec node_with_activation(const ir::Model& model, size_t node, const Activation& act,
                                const std::string& fused_op);

}  // namespace kite::passes
