// Einsum as a batched matrix product: Transpose + Reshape + MatMul.
//
// Matches a float32 Einsum of two operands with static shapes whose every
// label is either
//   batch       in both operands and the output,
//   contracted  in both operands, not in the output (k),
//   free        in one operand and the output (m for the first, n for the second),
// with no label twice within one operand and no size-1 dim broadcasting
// against a larger one (the ellipsis's dims are labels like any other). It
// becomes
//   A -> Transpose to [batch..., m..., k...] -> Reshape to [batch..., M, K]
//   B -> Transpose to [batch..., k..., n...] -> Reshape to [batch..., K, N]
//   MatMul -> Reshape to [batch..., m..., n...] -> Transpose to the output order
// with each Transpose or Reshape left out when it would not move or reshape
// anything (the batch dims stay separate: MatMul takes any number). Batch, m
// and n keep the output's order and k the first operand's, so the common
// forms ("bhqd,bhkd->bhqk": one Transpose of B; "bhqk,bhkd->bhqd", "ij,jk":
// none) need few moves; merge_transpose_reshape and fold_constants then
// merge or fold what is left.
//
// Left alone (the CPU kernel runs them): one operand or more than two, a
// label repeated in one operand (a diagonal), a label summed out of one
// operand only, broadcasting, integer dtypes (MatMul is float32), unknown or
// zero-sized dims. The result equals the Einsum's up to the order of the
// float sums (the kernel sums each output in double, MatMul in float over K).
#include <algorithm>

#include "kite/kite.h"
#include "kite/ops/einsum.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

using Dims = std::vector<int64_t>;

// The rewrite of one Einsum, decided before the graph changes.
struct Lowering {
  Dims perm_a, perm_b;    // Transposes of the operands (identity: none)
  Dims moved_a, moved_b;  // their results' shapes
  Dims mat_a, mat_b;      // MatMul's operand shapes: [batch..., M, K], [batch..., K, N]
  Dims product;           // MatMul's result: [batch..., M, N]
  Dims split;             // [batch..., m..., n...]
  Dims perm_out;          // split -> the Einsum's output order
};

bool is_identity(const Dims& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

Dims permuted(const Dims& shape, const Dims& perm) {
  Dims out;
  for (int64_t p : perm) out.push_back(shape[static_cast<size_t>(p)]);
  return out;
}

// Where label l stands in labels (-1: absent).
int64_t position(const std::vector<int>& labels, int l) {
  const auto it = std::find(labels.begin(), labels.end(), l);
  return it == labels.end() ? -1 : static_cast<int64_t>(it - labels.begin());
}

bool plan_lowering(const ir::Model& m, const ir::Node& n, Lowering* low) {
  if (!is_op(n, "Einsum") || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  std::vector<Dims> shapes;
  for (int t : {n.inputs[0], n.inputs[1], n.outputs[0]}) {
    if (t < 0 || !is_float32(m, t) || !tensor_at(m, t).shape_known) return false;
    for (int64_t d : tensor_at(m, t).shape) {
      if (d <= 0) return false;
    }
    shapes.push_back(tensor_at(m, t).shape);
  }
  kite::ops::EinsumPlan plan;
  std::string why;
  if (!kite::ops::resolve_einsum(n.attr_string("equation", ""), {shapes[0], shapes[1]}, &plan, &why) ||
      plan.output_shape != shapes[2]) {
    return false;
  }
  const std::vector<int>& la = plan.operand_labels[0];
  const std::vector<int>& lb = plan.operand_labels[1];
  const std::vector<int>& lo = plan.output_labels;
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<int>& labels = plan.operand_labels[i];
    for (size_t d = 0; d < labels.size(); ++d) {
      const size_t l = static_cast<size_t>(labels[d]);
      if (shapes[i][d] != plan.label_dims[l]) return false;                  // broadcasts
      if (position(labels, labels[d]) != static_cast<int64_t>(d)) return false;  // diagonal
    }
  }
  // Batch, m and n in the output's order, k in the first operand's.
  std::vector<int> batch, free_a, free_b, contracted;
  for (int l : lo) {
    const bool in_a = position(la, l) >= 0, in_b = position(lb, l) >= 0;
    (in_a && in_b ? batch : in_a ? free_a : free_b).push_back(l);
  }
  for (int l : la) {
    if (position(lo, l) >= 0) continue;
    if (position(lb, l) < 0) return false;  // summed out of one operand only
    contracted.push_back(l);
  }
  for (int l : lb) {
    if (position(lo, l) < 0 && position(la, l) < 0) return false;
  }
  if (batch.size() + 2 > KITE_MAX_RANK) return false;

  auto size_of = [&](const std::vector<int>& labels) {
    int64_t s = 1;
    for (int l : labels) s *= plan.label_dims[static_cast<size_t>(l)];
    return s;
  };
  auto dims_of = [&](const std::vector<int>& labels) {
    Dims d;
    for (int l : labels) d.push_back(plan.label_dims[static_cast<size_t>(l)]);
    return d;
  };
  auto perm_of = [&](const std::vector<int>& labels, std::initializer_list<const std::vector<int>*> groups) {
    Dims perm;
    for (const std::vector<int>* g : groups) {
      for (int l : *g) perm.push_back(position(labels, l));
    }
    return perm;
  };
  low->perm_a = perm_of(la, {&batch, &free_a, &contracted});
  low->perm_b = perm_of(lb, {&batch, &contracted, &free_b});
  low->moved_a = permuted(shapes[0], low->perm_a);
  low->moved_b = permuted(shapes[1], low->perm_b);
  const Dims batch_dims = dims_of(batch);
  const int64_t big_m = size_of(free_a), big_n = size_of(free_b), big_k = size_of(contracted);
  low->mat_a = batch_dims;
  low->mat_a.insert(low->mat_a.end(), {big_m, big_k});
  low->mat_b = batch_dims;
  low->mat_b.insert(low->mat_b.end(), {big_k, big_n});
  low->product = batch_dims;
  low->product.insert(low->product.end(), {big_m, big_n});
  std::vector<int> split_labels = batch;
  split_labels.insert(split_labels.end(), free_a.begin(), free_a.end());
  split_labels.insert(split_labels.end(), free_b.begin(), free_b.end());
  low->split = dims_of(split_labels);
  low->perm_out = perm_of(split_labels, {&lo});
  return true;
}

}  // namespace

bool lower_einsum(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  return rewrite_until_stable(ctx, result, [&](size_t i, const UseMap&) {
    Lowering low;
    if (!plan_lowering(m, m.main().nodes[i], &low)) return false;
    const ir::Node einsum = m.main().nodes[i];
    const kite_dtype dtype = tensor_at(m, einsum.outputs[0]).dtype;
    std::vector<ir::Node> seq;
    // Appends op(x, extra...) writing a new tensor of `shape` (or `out`).
    auto emit = [&](const std::string& op, const std::string& suffix, std::vector<int> inputs,
                    std::vector<ir::Attr> attrs, const Dims& shape, int out = -1) {
      ir::Node node;
      node.name = einsum.name + "/" + suffix;
      node.op = op;
      node.inputs = std::move(inputs);
      node.attrs = std::move(attrs);
      node.outputs = {out >= 0 ? out : add_activation(&m, node.name, dtype, shape)};
      seq.push_back(std::move(node));
      return seq.back().outputs[0];
    };
    auto transpose = [&](int x, const Dims& perm, const Dims& shape, const std::string& suffix, int out = -1) {
      return is_identity(perm) ? x : emit("Transpose", suffix, {x}, {ints_attr("perm", perm)}, shape, out);
    };
    auto reshape = [&](int x, const Dims& from, const Dims& to, const std::string& suffix, int out = -1) {
      if (from == to) return x;
      const int shape = add_int64_constant(&m, einsum.name + "/" + suffix + "_shape",
                                           {static_cast<int64_t>(to.size())}, to);
      return emit("Reshape", suffix, {x, shape}, {}, to, out);
    };
    const int y = einsum.outputs[0];
    const bool move_out = !is_identity(low.perm_out);
    const bool split_out = low.product != low.split;
    int a = transpose(einsum.inputs[0], low.perm_a, low.moved_a, "transpose_a");
    a = reshape(a, low.moved_a, low.mat_a, "reshape_a");
    int b = transpose(einsum.inputs[1], low.perm_b, low.moved_b, "transpose_b");
    b = reshape(b, low.moved_b, low.mat_b, "reshape_b");
    int p = emit("MatMul", "matmul", {a, b}, {}, low.product, move_out || split_out ? -1 : y);
    p = reshape(p, low.product, low.split, "reshape_out", move_out ? -1 : y);
    transpose(p, low.perm_out, tensor_at(m, y).shape, "transpose_out", y);

    std::vector<ir::Node>& nodes = m.main().nodes;
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(i), seq.begin(), seq.end());
    result->count("lowered");
    return true;
  });
}

}  // namespace kite::passes
