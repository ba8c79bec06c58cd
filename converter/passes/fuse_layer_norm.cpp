// LayerNormalization from its decomposed form (torch exports it so below
// opset 17):
//   mean = ReduceMean(x, trailing axes)        d = Sub(x, mean)
//   var  = ReduceMean(Pow(d, 2) or Mul(d, d))  std = Sqrt(Add(var, epsilon))
//   y    = Div(d, std) [* gamma] [+ beta]
// over trailing axes (keepdims), gamma and beta constants that vary only
// along the normalized axes. Result: one fused node, op LayerNormalization
// (domain kite), inputs x, scale, [bias] (scale and bias of the normalized
// shape; scale of ones when the pattern has no gamma), attributes axis and
// epsilon, body the primitives.
#include <algorithm>
#include <cstddef>

#include "kite/ops/op_node.h"
#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

// Reduction axes of a ReduceMean (attribute before opset 18, input after),
// normalized to [0, rank) and sorted; false if unknown.
bool reduce_axes(const ir::Model& m, const ir::Node& n, size_t rank, std::vector<int64_t>* axes) {
  std::vector<int64_t> raw;
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    if (!int_values(m, n.inputs[1], &raw)) return false;
  } else {
    raw = n.attr_ints("axes", {});
  }
  if (raw.empty()) return false;  // all axes (or noop_with_empty_axes): not a LayerNorm
  axes->clear();
  for (int64_t a : raw) {
    if (a < 0) a += static_cast<int64_t>(rank);
    if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
    axes->push_back(a);
  }
  std::sort(axes->begin(), axes->end());
  return true;
}

// The normalized-shape value of gamma/beta (values that vary only along the
// trailing `norm_rank` axes of `shape`), or empty.
std::vector<float> normalized_values(const ir::Model& m, int t, const std::vector<int64_t>& shape,
                                     size_t norm_rank) {
  const std::vector<float> v = float_values(m, t);
  const std::vector<int64_t>& cshape = tensor_at(m, t).shape;
  if (v.empty() || cshape.size() > shape.size()) return {};
  const size_t offset = shape.size() - cshape.size();
  const size_t first_norm = shape.size() - norm_rank;
  int64_t count = 1;
  for (size_t k = first_norm; k < shape.size(); ++k) count *= shape[k];
  for (size_t d = 0; d < cshape.size(); ++d) {
    const size_t axis = d + offset;
    if (axis < first_norm && cshape[d] != 1) return {};
    if (axis >= first_norm && cshape[d] != 1 && cshape[d] != shape[axis]) return {};
  }
  if (static_cast<int64_t>(v.size()) == count) return v;
  // Broadcast along normalized axes where gamma has 1s. Its dims before
  // first_norm are all 1, so only the normalized axes take part.
  const auto norm_begin = static_cast<std::ptrdiff_t>(first_norm);
  const auto gamma_begin = static_cast<std::ptrdiff_t>(first_norm > offset ? first_norm - offset : 0);
  const std::vector<int64_t> norm_shape(shape.begin() + norm_begin, shape.end());
  const std::vector<int64_t> norm_cshape(cshape.begin() + gamma_begin, cshape.end());
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t src = kite::ops::broadcast_index(norm_cshape, norm_shape, i);
    out[static_cast<size_t>(i)] = v[static_cast<size_t>(src)];
  }
  return out;
}

}  // namespace

bool fuse_layer_norm(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& r1 = nodes[i];
    if (!is_op(r1, "ReduceMean") || r1.inputs.empty() || r1.outputs.size() != 1) return false;
    const int x = r1.inputs[0];
    if (!is_float32(m, x) || is_constant(m, x)) return false;
    const std::vector<int64_t>& shape = tensor_at(m, x).shape;
    std::vector<int64_t> axes;
    if (r1.attr_int("keepdims", 1) != 1 || !reduce_axes(m, r1, shape.size(), &axes)) return false;
    const size_t norm_rank = axes.size();
    bool trailing = true;
    for (size_t k = 0; k < norm_rank; ++k) {
      trailing = trailing && axes[k] == static_cast<int64_t>(shape.size() - norm_rank + k);
    }
    if (!trailing) return false;
    // Sub(x, mean)
    const int mean = r1.outputs[0];
    const int sub = uses.sole_reader(mean);
    if (sub < 0 || !is_op(nodes[static_cast<size_t>(sub)], "Sub")) return false;
    const ir::Node& sn = nodes[static_cast<size_t>(sub)];
    if (sn.inputs.size() != 2 || sn.inputs[0] != x || sn.inputs[1] != mean) return false;
    const int d = sn.outputs[0];
    // d's readers: the square and the final Div.
    const std::vector<int>& d_readers = uses.readers(d);
    int square = -1, div = -1;
    for (int r : d_readers) {
      const ir::Node& rn = nodes[static_cast<size_t>(r)];
      float e = 0.0f;
      if (is_op(rn, "Pow") && rn.inputs.size() == 2 && rn.inputs[0] == d &&
          scalar_float(m, rn.inputs[1], &e) && e == 2.0f) {
        square = r;
      } else if (is_op(rn, "Mul") && rn.inputs.size() == 2 && rn.inputs[0] == d && rn.inputs[1] == d) {
        square = r;
      } else if (is_op(rn, "Div") && rn.inputs.size() == 2 && rn.inputs[0] == d) {
        div = r;
      }
    }
    if (square < 0 || div < 0) return false;
    const int sq_out = nodes[static_cast<size_t>(square)].outputs[0];
    const int r2 = uses.sole_reader(sq_out);
    if (r2 < 0 || !is_op(nodes[static_cast<size_t>(r2)], "ReduceMean")) return false;
    std::vector<int64_t> axes2;
    const ir::Node& r2n = nodes[static_cast<size_t>(r2)];
    if (r2n.attr_int("keepdims", 1) != 1 || !reduce_axes(m, r2n, shape.size(), &axes2) || axes2 != axes) return false;
    const int var = r2n.outputs[0];
    const int add = uses.sole_reader(var);
    if (add < 0 || !is_op(nodes[static_cast<size_t>(add)], "Add")) return false;
    const ir::Node& an = nodes[static_cast<size_t>(add)];
    float epsilon = 0.0f;
    const int eps_t = an.inputs.size() == 2 ? (an.inputs[0] == var ? an.inputs[1] : an.inputs[0]) : -1;
    if (eps_t < 0 || !scalar_float(m, eps_t, &epsilon) || !(epsilon >= 0.0f)) return false;
    const int sqrt_n = uses.sole_reader(an.outputs[0]);
    if (sqrt_n < 0 || !is_op(nodes[static_cast<size_t>(sqrt_n)], "Sqrt")) return false;
    const int std_t = nodes[static_cast<size_t>(sqrt_n)].outputs[0];
    if (uses.sole_reader(std_t) != div || nodes[static_cast<size_t>(div)].inputs[1] != std_t) return false;
    std::vector<int> members = {static_cast<int>(i), sub, square, r2, add, sqrt_n, div};
    int y = nodes[static_cast<size_t>(div)].outputs[0];
    // Optional affine part: y * gamma, then + beta, each a constant that
    // varies only along the normalized axes. A step that matches moves y on.
    auto affine_step = [&](const char* op, std::vector<float>* values) {
      const int r = uses.sole_reader(y);
      if (r < 0 || !is_op(nodes[static_cast<size_t>(r)], op)) return false;
      const ir::Node& rn = nodes[static_cast<size_t>(r)];
      const int c = other_operand(rn, y);
      if (c < 0 || !is_constant(m, c) || tensor_at(m, rn.outputs[0]).shape != shape) return false;
      *values = normalized_values(m, c, shape, norm_rank);
      if (values->empty()) return false;
      members.push_back(r);
      y = rn.outputs[0];
      return true;
    };
    std::vector<float> gamma, beta;
    if (affine_step("Mul", &gamma)) affine_step("Add", &beta);
    if (tensor_at(m, y).shape != shape) return false;
    const std::vector<int64_t> norm_shape(shape.end() - static_cast<std::ptrdiff_t>(norm_rank), shape.end());
    int64_t count = 1;
    for (int64_t dim : norm_shape) count *= dim;
    if (gamma.empty()) gamma.assign(static_cast<size_t>(count), 1.0f);
    const std::string base = r1.name;
    spec->pattern = "LayerNormalization";
    spec->op = "LayerNormalization";
    spec->nodes = members;
    spec->outputs = {y};
    spec->attrs = {int_attr("axis", static_cast<int64_t>(shape.size() - norm_rank)),
                   float_attr("epsilon", epsilon)};
    const int scale_t = add_float_constant(&m, base + "/ln_scale", norm_shape, gamma);
    const int bias_t = beta.empty() ? -1 : add_float_constant(&m, base + "/ln_bias", norm_shape, beta);
    spec->inputs = {x, scale_t};
    if (bias_t >= 0) spec->inputs.push_back(bias_t);
    spec->counter = beta.empty() ? "without_bias" : "with_bias";
    return true;
  });
}

}  // namespace kite::passes
