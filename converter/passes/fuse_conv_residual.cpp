// Conv + a residual Add (+ activation): y = act(Conv(x) + r), where r has
// the Conv output's shape (a skip connection: MobileNetV2's and
// EfficientNet's projections, ResNet's second convolution, whose Relu comes
// after the Add). The CPU kernel adds r to each block of the output while
// the block is in cache instead of in a pass over both tensors afterwards.
// Result: op FusedConv (domain kite), inputs X, W, B (absent: -1), R; Conv's
// attributes, plus activation (+ activation_alpha / activation_beta) when
// one follows; pattern "Conv+Add" or "Conv+Add+<activation>".
#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/pass.h"

namespace kite::passes {

bool fuse_conv_residual(PassContext& ctx, PassResult* result) {
  const ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& add = nodes[i];
    if (!is_op(add, "Add") || add.inputs.size() != 2 || add.outputs.size() != 1) return false;
    const int s = add.outputs[0];
    if (!is_float32(m, s)) return false;
    // The operand a Conv computes, read only by this Add; of two, the later
    // Conv, so that the other operand is ready before the fused node runs.
    int conv = -1, r = -1;
    for (int k = 0; k < 2; ++k) {
      const int t = add.inputs[static_cast<size_t>(k)];
      const int p = uses.producer(t);
      if (p < 0 || !is_op(nodes[static_cast<size_t>(p)], "Conv") || uses.sole_reader(t) != static_cast<int>(i) ||
          nodes[static_cast<size_t>(p)].outputs.size() != 1 || p < conv) {
        continue;
      }
      conv = p;
      r = add.inputs[static_cast<size_t>(1 - k)];
    }
    if (conv < 0 || r < 0) return false;
    const std::vector<int64_t>& shape = tensor_at(m, s).shape;
    if (!is_float32(m, r) || tensor_at(m, r).shape != shape || is_constant(m, r) ||
        tensor_at(m, nodes[static_cast<size_t>(conv)].outputs[0]).shape != shape) {
      return false;
    }
    const ir::Node& c = nodes[static_cast<size_t>(conv)];
    spec->op = "FusedConv";
    spec->nodes = {conv, static_cast<int>(i)};
    spec->inputs = c.inputs;
    while (spec->inputs.size() < 3) spec->inputs.push_back(-1);
    spec->inputs.push_back(r);
    spec->attrs = c.attrs;
    Activation act;
    if (match_activation(m, uses, s, &act)) {
      spec->pattern = "Conv+Add+" + act.kind;
      spec->nodes.insert(spec->nodes.end(), act.nodes.begin(), act.nodes.end());
      spec->outputs = {act.output};
      add_activation_attrs(act, &spec->attrs);
    } else {
      spec->pattern = "Conv+Add";
      spec->outputs = {s};
    }
    return true;
  });
}

}  // namespace kite::passes
