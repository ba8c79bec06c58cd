// Conv (+ bias, already folded into its B input by fold_scale_into_weights
// and fold_batch_norm) + activation: Relu, Clip (Relu6), Sigmoid, SiLU
// (x * Sigmoid(x)), HardSwish (op or x * HardSigmoid(x)), HardSigmoid,
// LeakyRelu, Tanh, GELU (see match_activation). Result: op FusedConv (domain
// kite), Conv's inputs and attributes plus activation (+ activation_alpha /
// activation_beta), pattern "Conv+<activation>".
#include "passes/graph_util.h"
#include "passes/pass.h"

namespace kite::passes {

bool fuse_conv_activation(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  bool again = true;
  while (again) {
    again = false;
    const UseMap uses(m);
    const std::vector<ir::Node>& nodes = m.main().nodes;
    for (size_t i = 0; i < nodes.size() && !again; ++i) {
      const ir::Node& n = nodes[i];
      if (!is_op(n, "Conv") || n.outputs.size() != 1 || !is_float32(m, n.outputs[0])) continue;
      Activation act;
      if (!match_activation(m, uses, n.outputs[0], &act)) continue;
      FusionSpec spec;
      spec.op = "FusedConv";
      spec.pattern = "Conv+" + act.kind;
      spec.nodes = {static_cast<int>(i)};
      spec.nodes.insert(spec.nodes.end(), act.nodes.begin(), act.nodes.end());
      spec.inputs = n.inputs;
      spec.outputs = {act.output};
      spec.attrs = n.attrs;
      add_activation_attrs(act, &spec.attrs);
      std::string why;
      if (!apply_fusion(ctx, spec, &why)) {
        if (!ctx.error.empty()) return false;
        result->count("rejected");
        continue;
      }
      result->count(spec.pattern);
      result->changed = true;
      again = true;
    }
  }
  return true;
}

}  // namespace kite::passes
