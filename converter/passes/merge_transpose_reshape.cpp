// Consecutive data-movement nodes merged:
//  - Transpose(Transpose(x, p1), p2) -> Transpose(x, p) with p[i] = p1[p2[i]],
//    or nothing when p is the identity; an identity Transpose is removed.
//  - A chain of Reshape / Flatten / Squeeze / Unsqueeze -> one Reshape to the
//    final (static) shape; one that does not change the shape is removed.
// The inner node's result must have no other reader.
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

bool is_reshape_like(const ir::Node& n) {
  return is_op(n, "Reshape") || is_op(n, "Flatten") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze");
}

std::vector<int64_t> transpose_perm(const ir::Model& m, const ir::Node& n) {
  const size_t rank = tensor_at(m, n.inputs[0]).shape.size();
  std::vector<int64_t> perm = n.attr_ints("perm", {});
  if (perm.empty()) {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  return perm;
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool valid_perm(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= rank || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
  }
  return true;
}

}  // namespace

bool merge_transpose_reshape(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  return rewrite_until_stable(ctx, result, [&](size_t i, const UseMap& uses) {
    std::vector<ir::Node>& nodes = m.main().nodes;
    ir::Node& n = nodes[i];
    if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
    const int x = n.inputs[0];
    const int y = n.outputs[0];
    if (is_constant(m, x)) return false;  // fold_constants' job
    std::vector<bool> dead(nodes.size(), false);
    bool acted = false;

    if (is_op(n, "Transpose")) {
      std::vector<int64_t> perm = transpose_perm(m, n);
      const size_t rank = tensor_at(m, x).shape.size();
      if (!valid_perm(perm, rank)) return false;
      const int p = uses.producer(x);
      if (p >= 0 && is_op(nodes[static_cast<size_t>(p)], "Transpose") &&
          uses.sole_reader(x) == static_cast<int>(i)) {
        const ir::Node& inner = nodes[static_cast<size_t>(p)];
        const std::vector<int64_t> p1 = transpose_perm(m, inner);
        if (!valid_perm(p1, rank)) return false;
        std::vector<int64_t> merged(rank);
        for (size_t k = 0; k < rank; ++k) merged[k] = p1[static_cast<size_t>(perm[k])];
        n.inputs[0] = inner.inputs[0];
        n.attrs = {ints_attr("perm", merged)};
        dead[static_cast<size_t>(p)] = true;
        perm = merged;
        acted = true;
        result->count("transposes_merged");
      }
      if (is_identity_perm(perm) && !uses.escapes(y)) {
        replace_reads(&m, y, n.inputs[0]);
        dead[i] = true;
        acted = true;
        result->count("identity_transposes");
      }
    } else if (is_reshape_like(n)) {
      const std::vector<int64_t>& out_shape = tensor_at(m, y).shape;
      bool zero_dim = false;
      for (int64_t d : out_shape) zero_dim = zero_dim || d == 0;
      if (zero_dim) return false;
      const int p = uses.producer(x);
      int source = x;
      if (p >= 0 && is_reshape_like(nodes[static_cast<size_t>(p)]) &&
          uses.sole_reader(x) == static_cast<int>(i) && nodes[static_cast<size_t>(p)].inputs[0] >= 0) {
        source = nodes[static_cast<size_t>(p)].inputs[0];
        dead[static_cast<size_t>(p)] = true;
        result->count("reshapes_merged");
      }
      if (tensor_at(m, source).shape == out_shape && !uses.escapes(y)) {
        replace_reads(&m, y, source);
        dead[i] = true;
        acted = true;
        result->count("noop_reshapes");
      } else if (source != x) {
        acted = true;
        const int shape = add_int64_constant(&m, n.name + "/shape",
                                             {static_cast<int64_t>(out_shape.size())}, out_shape);
        ir::Node& r = m.main().nodes[i];
        r.op = "Reshape";
        r.inputs = {source, shape};
        r.attrs.clear();
      } else {
        return false;
      }
    } else {
      return false;
    }
    if (!acted) return false;
    erase_nodes(&m, dead);
    return true;
  });
}

}  // namespace kite::passes
