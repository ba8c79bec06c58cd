// Mul, Div, Add and Sub by a constant folded into the weights and bias of
// the Conv, ConvTranspose, Gemm or MatMul (+ bias Add) before them.
//
// Where exact: the constant must vary only along the output-channel axis
// (axis 1 for Conv/ConvTranspose/Gemm, the last axis for MatMul) and must not
// widen the result, so that y = conv(x, W) * s + h per channel equals
// conv(x, W * s) + (bias * s + h) in exact arithmetic. Values are combined
// in double and rounded once to float32. Everything must be float32 (the
// dtype rule); a Div needs a finite non-zero divisor. The producer's result
// must have no other reader.
#include <cmath>

#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"
#include "passes/rescale_weights.h"

namespace kite::passes {

namespace {

// The constant as one value per channel of axis `axis` of an output of shape
// `out`: a scalar or a shape that is 1 everywhere else, aligned right, and
// not larger in rank than the output. Empty if it does not fit.
std::vector<double> channel_values(const ir::Model& m, int t, const std::vector<int64_t>& out,
                                   size_t axis) {
  const std::vector<float> v = float_values(m, t);
  const std::vector<int64_t>& shape = tensor_at(m, t).shape;
  if (v.empty() || shape.size() > out.size() || axis >= out.size()) return {};
  const size_t offset = out.size() - shape.size();
  bool varies = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (d + offset != axis || shape[d] != out[axis]) return {};
    varies = true;
  }
  std::vector<double> values(static_cast<size_t>(out[axis]));
  for (int64_t c = 0; c < out[axis]; ++c) {
    const float x = varies ? v[static_cast<size_t>(c)] : v[0];
    if (!std::isfinite(x)) return {};
    values[static_cast<size_t>(c)] = x;
  }
  return values;
}

// Operation `op` with constant values c turned into per-channel scale/shift.
bool to_scale_shift(const std::string& op, std::vector<double> c, std::vector<double>* scale,
                    std::vector<double>* shift) {
  if (op == "Mul") {
    *scale = std::move(c);
  } else if (op == "Div") {
    for (double& x : c) {
      if (x == 0.0) return false;
      x = 1.0 / x;
    }
    *scale = std::move(c);
  } else if (op == "Add") {
    *shift = std::move(c);
  } else {  // Sub
    for (double& x : c) x = -x;
    *shift = std::move(c);
  }
  return true;
}

// New constant: W (rank 2, [K, N]) with column n scaled by scale[n].
int scaled_columns(PassContext& ctx, int w, const std::vector<double>& scale, const std::string& base) {
  ir::Model& m = *ctx.model;
  std::vector<float> v = float_values(m, w);
  const std::vector<int64_t> shape = tensor_at(m, w).shape;
  const int64_t n = shape[1];
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(v[i] * scale[i % static_cast<size_t>(n)]);
  return add_float_constant(&m, base + "/folded_weight", shape, v);
}


// The single axis (of an output of rank `rank`) along which constant t
// varies; -1 for a scalar-like constant; -2 if it varies along several or
// has a larger rank.
int varying_axis(const ir::Model& m, int t, size_t rank) {
  const std::vector<int64_t>& shape = tensor_at(m, t).shape;
  if (shape.size() > rank) return -2;
  int axis = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (axis >= 0) return -2;
    axis = static_cast<int>(d + rank - shape.size());
  }
  return axis;
}

// True if a per-channel op on axis `axis` of z folds into z's producer.
bool folds_into_producer(const ir::Model& m, const UseMap& uses, int z, int axis) {
  const int p = uses.producer(z);
  if (p < 0 || uses.sole_reader(z) < 0) return false;
  const ir::Node& n = m.main().nodes[static_cast<size_t>(p)];
  const int rank = static_cast<int>(tensor_at(m, z).shape.size());
  if (is_op(n, "Conv") || is_op(n, "ConvTranspose") || is_op(n, "Gemm")) return axis == 1 || axis == -1;
  if (!(is_op(n, "MatMul") || is_op(n, "Add")) || (axis != rank - 1 && axis != -1)) return false;
  const int w = is_op(n, "MatMul") ? (n.inputs.size() == 2 ? n.inputs[1] : -1) : -1;
  if (w >= 0) return is_constant(m, w) && tensor_at(m, w).shape.size() == 2;
  // Add(MatMul(x, W), b): the bias chain fold_scale_into_weights handles.
  if (n.inputs.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    const int mm = n.inputs[static_cast<size_t>(k)];
    const int q = uses.producer(mm);
    if (q < 0 || !is_constant(m, n.inputs[static_cast<size_t>(1 - k)])) continue;
    const ir::Node& qn = m.main().nodes[static_cast<size_t>(q)];
    if (is_op(qn, "MatMul") && qn.inputs.size() == 2 && is_constant(m, qn.inputs[1]) &&
        tensor_at(m, qn.inputs[1]).shape.size() == 2) {
      return true;
    }
  }
  return false;
}

// Rewrites y = op(Transpose(z), c) (node i, Transpose t) into
// y = Transpose(op(z, c')).
bool swap_through_transpose(PassContext& ctx, const UseMap& uses, int i, int t, int x, int c) {
  ir::Model& m = *ctx.model;
  const std::vector<ir::Node>& nodes = m.main().nodes;
  const ir::Node& tn = nodes[static_cast<size_t>(t)];
  const int z = tn.inputs[0];
  const std::vector<int64_t>& zshape = tensor_at(m, z).shape;
  const size_t rank = zshape.size();
  std::vector<int64_t> perm = tn.attr_ints("perm", {});
  if (perm.empty()) {
    for (size_t k = 0; k < rank; ++k) perm.push_back(static_cast<int64_t>(rank - 1 - k));
  }
  if (perm.size() != rank || uses.sole_reader(x) != i) return false;
  const int axis = varying_axis(m, c, rank);
  if (axis == -2) return false;
  const int z_axis = axis < 0 ? -1 : static_cast<int>(perm[static_cast<size_t>(axis)]);
  if (z_axis >= static_cast<int>(rank) || !folds_into_producer(m, uses, z, z_axis)) return false;
  // c' : the values of c along axis z_axis of z.
  std::vector<int64_t> cshape(rank, 1);
  if (z_axis >= 0) cshape[static_cast<size_t>(z_axis)] = zshape[static_cast<size_t>(z_axis)];
  const std::vector<float> values = float_values(m, c);
  const int c2 = add_float_constant(&m, tensor_at(m, c).name + "/transposed", cshape, values);
  const int t2 = add_activation_like(&m, tensor_at(m, x).name + "/before_transpose", z);
  std::vector<ir::Node>& all = m.main().nodes;
  ir::Node& op_node = all[static_cast<size_t>(i)];
  ir::Node& transpose = all[static_cast<size_t>(t)];
  const int y = op_node.outputs[0];
  const bool c_first = op_node.inputs[0] == c;
  op_node.inputs = c_first ? std::vector<int>{c2, z} : std::vector<int>{z, c2};
  op_node.outputs = {t2};
  transpose.inputs = {t2};
  transpose.outputs = {y};
  std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(t)]);  // the op now runs first
  std::string cycle;
  if (!stable_topo_sort(&m, &cycle)) {
    return ctx.fail("internal error: moving a node before a Transpose made the graph cyclic: " + cycle);
  }
  return true;
}

}  // namespace

bool fold_scale_into_weights(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  return rewrite_until_stable(ctx, result, [&](size_t i, const UseMap& uses) {
    std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& n = nodes[i];
    const bool commutative = is_op(n, "Mul") || is_op(n, "Add");
    if (!commutative && !is_op(n, "Div") && !is_op(n, "Sub")) return false;
    if (n.inputs.size() != 2 || n.outputs.size() != 1) return false;
    int x = n.inputs[0], c = n.inputs[1];
    if (commutative && is_constant(m, x) && !is_constant(m, c)) std::swap(x, c);
    if (is_constant(m, x) || !is_constant(m, c) || !is_float32(m, c) || !is_float32(m, x)) return false;
    const std::vector<int64_t>& out = tensor_at(m, x).shape;
    if (tensor_at(m, n.outputs[0]).shape != out || out.size() < 2) return false;
    const int p = uses.producer(x);
    if (p < 0 || uses.sole_reader(x) != static_cast<int>(i)) return false;
    const ir::Node& prod = nodes[static_cast<size_t>(p)];
    const std::string op = n.op;
    const int y = n.outputs[0];
    std::vector<double> scale, shift;
    std::string why;

    if (is_op(prod, "Conv") || is_op(prod, "ConvTranspose") || is_op(prod, "Gemm")) {
      std::vector<double> values = channel_values(m, c, out, 1);
      if (values.empty() || !to_scale_shift(op, values, &scale, &shift)) return false;
      const std::string producer_op = prod.op;
      if (!rescale_output_channels(ctx, p, scale, shift, &why)) return false;
      m.main().nodes[static_cast<size_t>(p)].outputs[0] = y;
      result->count(op + "_into_" + producer_op);
    } else if (is_op(prod, "MatMul") &&
               (op == "Mul" || op == "Div") && prod.inputs.size() == 2 &&
               is_constant(m, prod.inputs[1]) && is_float32(m, prod.inputs[1]) &&
               tensor_at(m, prod.inputs[1]).shape.size() == 2) {
      // MatMul(x, W) * s: scale W's columns.
      std::vector<double> values = channel_values(m, c, out, out.size() - 1);
      if (values.empty() || !to_scale_shift(op, values, &scale, &shift)) return false;
      const int w = scaled_columns(ctx, prod.inputs[1], scale, prod.name);
      ir::Node& mm = m.main().nodes[static_cast<size_t>(p)];
      mm.inputs[1] = w;
      mm.outputs[0] = y;
      result->count(op + "_into_MatMul");
    } else if (is_op(prod, "Add") && prod.inputs.size() == 2) {
      // (MatMul(x, W) + b) op c, with W a 2-D constant and b per column:
      // fold into W (for a scale) and b.
      int mm_out = prod.inputs[0], b = prod.inputs[1];
      if (is_constant(m, mm_out)) std::swap(mm_out, b);
      if (!is_constant(m, b) || !is_float32(m, b)) return false;
      const int q = uses.producer(mm_out);
      if (q < 0 || uses.sole_reader(mm_out) != p) return false;
      const ir::Node& mm = nodes[static_cast<size_t>(q)];
      if (!is_op(mm, "MatMul") || mm.inputs.size() != 2 || !is_constant(m, mm.inputs[1]) ||
          !is_float32(m, mm.inputs[1]) || tensor_at(m, mm.inputs[1]).shape.size() != 2 ||
          tensor_at(m, mm_out).shape != out) {
        return false;
      }
      const size_t axis = out.size() - 1;
      std::vector<double> values = channel_values(m, c, out, axis);
      std::vector<double> bias = channel_values(m, b, out, axis);
      if (values.empty() || bias.empty() || !to_scale_shift(op, values, &scale, &shift)) return false;
      for (size_t k = 0; k < bias.size(); ++k) {
        bias[k] = bias[k] * (scale.empty() ? 1.0 : scale[k]) + (shift.empty() ? 0.0 : shift[k]);
      }
      std::vector<float> new_bias(bias.begin(), bias.end());
      const int nb = add_float_constant(&m, prod.name + "/folded_bias", {out[axis]}, new_bias);
      int w = -1;
      if (!scale.empty()) w = scaled_columns(ctx, mm.inputs[1], scale, mm.name);
      std::vector<ir::Node>& all = m.main().nodes;
      if (w >= 0) all[static_cast<size_t>(q)].inputs[1] = w;
      ir::Node& add = all[static_cast<size_t>(p)];
      add.inputs = {mm_out, nb};
      add.outputs[0] = y;
      result->count(op + "_into_MatMul_bias");
    } else if (is_op(prod, "Transpose") && prod.inputs.size() == 1 && prod.inputs[0] >= 0) {
      // op(Transpose(z), c) = Transpose(op(z, c')) with c' the constant
      // along the transposed axis; worth it only when op then folds into
      // z's producer (a layer scale after a permute, as in ConvNeXt).
      if (!swap_through_transpose(ctx, uses, static_cast<int>(i), p, x, c)) return false;
      result->count(op + "_moved_before_Transpose");
      return true;
    } else {
      return false;
    }
    std::vector<bool> dead(m.main().nodes.size(), false);
    dead[i] = true;
    erase_nodes(&m, dead);
    return true;
  });
}

}  // namespace kite::passes
