// Add + LayerNormalization (skip-LayerNorm): y = LayerNorm(a + b) over the
// trailing axes, where a and b have the same shape (a residual connection).
// The LayerNormalization may be the ONNX op or one fuse_layer_norm built.
// When the sum is read elsewhere too (pre-norm transformers carry it to the
// next residual), it becomes the fused node's second output instead of a
// scratch tensor. Result: op SkipLayerNormalization (domain kite), inputs
// a, b, scale, [bias], attributes axis and epsilon, outputs y [, a + b].
#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

bool fuse_skip_layer_norm(PassContext& ctx, PassResult* result) {
  const ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& ln = nodes[i];
    const bool primitive = is_op(ln, "LayerNormalization");
    const bool fused = ln.domain == "kite" && ln.op == "LayerNormalization" &&
                       ln.fused_pattern == "LayerNormalization";
    if ((!primitive && !fused) || ln.inputs.size() < 2 || ln.outputs.empty()) return false;
    if (uses.reads_extra_outputs(ln)) return false;
    const int s = ln.inputs[0];
    const int p = uses.producer(s);
    if (p < 0 || !is_op(nodes[static_cast<size_t>(p)], "Add")) return false;
    const ir::Node& add = nodes[static_cast<size_t>(p)];
    if (add.inputs.size() != 2 || add.outputs.size() != 1) return false;
    const int a = add.inputs[0], b = add.inputs[1];
    const std::vector<int64_t>& shape = tensor_at(m, s).shape;
    if (!is_float32(m, a) || !is_float32(m, b) || tensor_at(m, a).shape != shape ||
        tensor_at(m, b).shape != shape || (is_constant(m, a) && is_constant(m, b))) {
      return false;
    }
    const int64_t rank = static_cast<int64_t>(shape.size());
    int64_t axis = ln.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    // Only the LayerNormalization may read the sum, unless it becomes an output.
    bool sum_elsewhere = uses.escapes(s);
    for (int r : uses.readers(s)) sum_elsewhere = sum_elsewhere || r != static_cast<int>(i);
    spec->pattern = "Add+LayerNormalization";
    spec->op = "SkipLayerNormalization";
    spec->nodes = {p, static_cast<int>(i)};
    spec->inputs = {a, b, ln.inputs[1], ln.inputs.size() > 2 ? ln.inputs[2] : -1};
    if (spec->inputs.back() < 0) spec->inputs.pop_back();
    spec->outputs = {ln.outputs[0]};
    if (sum_elsewhere) spec->outputs.push_back(s);
    spec->attrs = {int_attr("axis", axis), float_attr("epsilon", ln.attr_float("epsilon", 1e-5f))};
    spec->counter = sum_elsewhere ? "with_sum_output" : "sum_scratch";
    return true;
  });
}

}  // namespace kite::passes
