// MatMul + bias Add (+ activation) and Gemm + activation.
//  - MatMul(a, b) + bias, with bias a float32 constant that varies only along
//    the last axis and does not widen the product, optionally followed by an
//    activation (see match_activation): op FusedMatMul (domain kite), inputs
//    a, b, bias ([N]), attribute activation (+ activation_alpha/_beta).
//  - Gemm followed by an activation: op FusedGemm, Gemm's inputs and
//    attributes plus the activation's.
// Pattern names: "MatMul+Add", "MatMul+Add+<activation>", "Gemm+<activation>".
#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

// Bias values along the last axis of `out`, or empty.
std::vector<float> last_axis_bias(const ir::Model& m, int t, const std::vector<int64_t>& out) {
  const std::vector<float> v = float_values(m, t);
  const std::vector<int64_t>& shape = tensor_at(m, t).shape;
  if (v.empty() || out.empty() || shape.size() > out.size()) return {};
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    if (shape[d] != 1) return {};
  }
  const int64_t n = out.back();
  if (v.size() == static_cast<size_t>(n)) return v;
  if (v.size() == 1) return std::vector<float>(static_cast<size_t>(n), v[0]);
  return {};
}

}  // namespace

bool fuse_matmul_bias(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& n = nodes[i];
    if (is_op(n, "MatMul") && n.inputs.size() == 2 && n.outputs.size() == 1) {
      const int mm = n.outputs[0];
      if (!is_float32(m, mm)) return false;
      const int add = uses.sole_reader(mm);
      if (add < 0 || !is_op(nodes[static_cast<size_t>(add)], "Add")) return false;
      const ir::Node& an = nodes[static_cast<size_t>(add)];
      if (an.inputs.size() != 2 || an.outputs.size() != 1) return false;
      const int bias = other_operand(an, mm);
      const std::vector<int64_t>& out = tensor_at(m, mm).shape;
      if (!is_constant(m, bias) || tensor_at(m, an.outputs[0]).shape != out) return false;
      std::vector<float> b = last_axis_bias(m, bias, out);
      if (b.empty()) return false;
      int bias_t = bias;
      if (tensor_at(m, bias).shape != std::vector<int64_t>{out.back()}) {
        bias_t = add_float_constant(&m, n.name + "/bias", {out.back()}, b);
      }
      spec->op = "FusedMatMul";
      spec->pattern = "MatMul+Add";
      spec->nodes = {static_cast<int>(i), add};
      spec->inputs = {n.inputs[0], n.inputs[1], bias_t};
      spec->outputs = {an.outputs[0]};
      Activation act;
      if (match_activation(m, uses, an.outputs[0], &act)) {
        spec->pattern += "+" + act.kind;
        spec->nodes.insert(spec->nodes.end(), act.nodes.begin(), act.nodes.end());
        spec->outputs = {act.output};
        add_activation_attrs(act, &spec->attrs);
      }
    } else if (is_op(n, "Gemm") && n.outputs.size() == 1) {
      Activation act;
      if (!is_float32(m, n.outputs[0]) || !match_activation(m, uses, n.outputs[0], &act)) return false;
      *spec = node_with_activation(m, i, act, "FusedGemm");
    } else {
      return false;
    }
    return true;
  });
}

}  // namespace kite::passes
