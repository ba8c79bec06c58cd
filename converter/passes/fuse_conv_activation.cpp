// Conv (+ bias, already folded into its B input by fold_scale_into_weights
// and fold_batch_norm) + activation: Relu, Clip (Relu6), Sigmoid, SiLU
// (x * Sigmoid(x)), HardSwish (op or x * HardSigmoid(x)), HardSigmoid,
// LeakyRelu, Tanh, GELU (see match_activation). Result: op FusedConv (domain
// kite), Conv's inputs and attributes plus activation (+ activation_alpha /
// activation_beta), pattern "Conv+<activation>".
#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/pass.h"

namespace kite::passes {

bool fuse_conv_activation(PassContext& ctx, PassResult* result) {
  const ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const ir::Node& n = m.main().nodes[i];
    if (!is_op(n, "Conv") || n.outputs.size() != 1 || !is_float32(m, n.outputs[0])) return false;
    Activation act;
    if (!match_activation(m, uses, n.outputs[0], &act)) return false;
    *spec = node_with_activation(m, i, act, "FusedConv");
    return true;
  });
}

}  // namespace kite::passes
