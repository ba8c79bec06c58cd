// Scaled dot-product attention:
//   out = MatMul(Softmax(MatMul(q', kt) [* or / c] [+ mask], last axis), v)
// where q' is q or q scaled by a scalar constant (q * c or q / c; torch's
// MultiheadAttention scales q before the product). q is [..., S, D], kt is
// [..., D, T] (the key already transposed), v is [..., T, Dv], with the same
// leading dims; the mask (any tensor, e.g. an additive causal mask) must
// broadcast to the scores [..., S, T] without widening them. Result: op
// Attention (domain kite), inputs q, kt, v [, mask], attribute scale (the
// product of the scalars, 1 when there is none), body the primitives.
//
// Hugging Face's guard for fully masked rows, Where(IsNaN(p), 0, p) between
// the Softmax and the second MatMul, is taken into the fused node: attribute
// nan_to_zero = 1 (the kernel sets a NaN probability to 0, as the guard
// does), the IsNaN and Where in the body. It cannot be folded away: a row
// whose mask is -inf throughout (or a NaN in q or k) makes p NaN, and the
// guard turns that row's output into zeros instead of NaN.
#include <algorithm>

#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

// A Mul/Div of t by a scalar constant: the factor (1/c for a Div).
bool scalar_factor(const ir::Model& m, const ir::Node& n, int t, double* factor) {
  if (n.inputs.size() != 2) return false;
  float c = 0.0f;
  if (is_op(n, "Mul")) {
    const int other = n.inputs[0] == t ? n.inputs[1] : (n.inputs[1] == t ? n.inputs[0] : -1);
    if (other < 0 || !scalar_float(m, other, &c)) return false;
    *factor = c;
    return true;
  }
  if (is_op(n, "Div") && n.inputs[0] == t && scalar_float(m, n.inputs[1], &c) && c != 0.0f) {
    *factor = 1.0 / static_cast<double>(c);
    return true;
  }
  return false;
}

// p read only by IsNaN(p) and Where(IsNaN(p), 0, p): the Where's index in
// *where and the IsNaN's in *isnan.
bool nan_guard(const ir::Model& m, const UseMap& uses, int p, int* isnan, int* where) {
  const std::vector<ir::Node>& nodes = m.main().nodes;
  const std::vector<int>& readers = uses.readers(p);
  if (readers.size() != 2 || uses.escapes(p)) return false;
  for (int k = 0; k < 2; ++k) {
    const int a = readers[static_cast<size_t>(k)], b = readers[static_cast<size_t>(1 - k)];
    const ir::Node& in = nodes[static_cast<size_t>(a)];
    const ir::Node& wn = nodes[static_cast<size_t>(b)];
    if (!is_op(in, "IsNaN") || in.inputs.size() != 1 || in.outputs.size() != 1 || !is_op(wn, "Where") ||
        wn.inputs.size() != 3 || wn.outputs.size() != 1) {
      continue;
    }
    float zero = 1.0f;
    if (wn.inputs[0] != in.outputs[0] || wn.inputs[2] != p || uses.sole_reader(in.outputs[0]) != b ||
        !scalar_float(m, wn.inputs[1], &zero) || zero != 0.0f ||
        tensor_at(m, wn.outputs[0]).shape != tensor_at(m, p).shape) {
      continue;
    }
    *isnan = a;
    *where = b;
    return true;
  }
  return false;
}

}  // namespace

bool fuse_attention(PassContext& ctx, PassResult* result) {
  const ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& sm = nodes[i];
    if (!is_op(sm, "Softmax") || sm.inputs.size() != 1 || sm.outputs.size() != 1) return false;
    const int scores = sm.inputs[0];
    if (!is_float32(m, scores)) return false;
    const std::vector<int64_t>& sshape = tensor_at(m, scores).shape;
    const int64_t rank = static_cast<int64_t>(sshape.size());
    int64_t axis = sm.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    if (rank < 2 || axis != rank - 1) return false;
    // Softmax -> MatMul(probabilities, v)
    int probs = sm.outputs[0];
    std::vector<int> members = {static_cast<int>(i)};
    int guard_isnan = -1, guard_where = -1;
    if (nan_guard(m, uses, probs, &guard_isnan, &guard_where)) {
      members.push_back(guard_isnan);
      members.push_back(guard_where);
      probs = nodes[static_cast<size_t>(guard_where)].outputs[0];
    }
    const int mm2 = uses.sole_reader(probs);
    if (mm2 < 0 || !is_op(nodes[static_cast<size_t>(mm2)], "MatMul")) return false;
    const ir::Node& mm2n = nodes[static_cast<size_t>(mm2)];
    if (mm2n.inputs.size() != 2 || mm2n.inputs[0] != probs) return false;
    const int v = mm2n.inputs[1];
    const int out = mm2n.outputs[0];
    members.push_back(mm2);
    // Back from the scores: [+ mask] [* c] MatMul(q', kt).
    int t = scores;
    int consumer = static_cast<int>(i);  // the member reading t
    int mask = -1;
    double scale = 1.0;
    int p = uses.producer(t);
    if (p >= 0 && is_op(nodes[static_cast<size_t>(p)], "Add") && uses.sole_reader(t) == static_cast<int>(i)) {
      const ir::Node& an = nodes[static_cast<size_t>(p)];
      if (an.inputs.size() == 2) {
        for (int k = 0; k < 2 && mask < 0; ++k) {
          const int base = an.inputs[static_cast<size_t>(k)];
          const int other = an.inputs[static_cast<size_t>(1 - k)];
          const int bp = uses.producer(base);
          if (bp < 0 || tensor_at(m, base).shape != sshape) continue;
          const ir::Node& bn = nodes[static_cast<size_t>(bp)];
          double f = 0.0;
          if (is_op(bn, "MatMul") || scalar_factor(m, bn, bn.inputs.empty() ? -1 : bn.inputs[0], &f) ||
              (bn.inputs.size() == 2 && scalar_factor(m, bn, bn.inputs[1], &f))) {
            mask = other;
            members.push_back(p);
            consumer = p;
            t = base;
          }
        }
      }
    }
    p = uses.producer(t);
    if (p < 0 || uses.sole_reader(t) != consumer) return false;
    {
      const ir::Node& sn = nodes[static_cast<size_t>(p)];
      double f = 0.0;
      for (int k = 0; k < 2 && !is_op(sn, "MatMul"); ++k) {
        if (static_cast<size_t>(k) < sn.inputs.size() && scalar_factor(m, sn, sn.inputs[static_cast<size_t>(k)], &f) &&
            !is_constant(m, sn.inputs[static_cast<size_t>(k)])) {
          scale *= f;
          members.push_back(p);
          consumer = p;
          t = sn.inputs[static_cast<size_t>(k)];
          p = uses.producer(t);
          if (p < 0 || uses.sole_reader(t) != consumer) p = -1;
          break;
        }
      }
    }
    if (p < 0 || !is_op(nodes[static_cast<size_t>(p)], "MatMul")) return false;
    const ir::Node& mm1 = nodes[static_cast<size_t>(p)];
    if (mm1.inputs.size() != 2) return false;
    members.push_back(p);
    int q = mm1.inputs[0];
    const int kt = mm1.inputs[1];
    // q' = q * c or q / c, read only by this product.
    const int qp = uses.producer(q);
    if (qp >= 0 && uses.sole_reader(q) == p) {
      const ir::Node& qn = nodes[static_cast<size_t>(qp)];
      double f = 0.0;
      if (!qn.inputs.empty() && !is_constant(m, qn.inputs[0]) && scalar_factor(m, qn, qn.inputs[0], &f)) {
        scale *= f;
        members.push_back(qp);
        q = qn.inputs[0];
      } else if (qn.inputs.size() == 2 && is_op(qn, "Mul") && !is_constant(m, qn.inputs[1]) &&
                 scalar_factor(m, qn, qn.inputs[1], &f)) {
        scale *= f;
        members.push_back(qp);
        q = qn.inputs[1];
      }
    }
    // Shapes: q [..., S, D], kt [..., D, T], v [..., T, Dv], same leading dims.
    const std::vector<int64_t>& qs = tensor_at(m, q).shape;
    const std::vector<int64_t>& ks = tensor_at(m, kt).shape;
    const std::vector<int64_t>& vs = tensor_at(m, v).shape;
    if (!is_float32(m, q) || !is_float32(m, kt) || !is_float32(m, v)) return false;
    if (qs.size() != sshape.size() || ks.size() != qs.size() || vs.size() != qs.size()) return false;
    const size_t r = qs.size();
    if (!std::equal(qs.begin(), qs.end() - 2, ks.begin()) || !std::equal(qs.begin(), qs.end() - 2, vs.begin())) return false;
    if (qs[r - 1] != ks[r - 2] || ks[r - 1] != vs[r - 2] || sshape[r - 2] != qs[r - 2] || sshape[r - 1] != ks[r - 1]) return false;
    if (mask >= 0) {
      std::vector<int64_t> b;
      if (!kite::ops::broadcast_shapes(sshape, tensor_at(m, mask).shape, &b) || b != sshape) return false;
      if (tensor_at(m, mask).dtype != KITE_DTYPE_FLOAT32) return false;
    }
    spec->pattern = "Attention";
    spec->op = "Attention";
    spec->nodes = members;
    spec->inputs = {q, kt, v};
    if (mask >= 0) spec->inputs.push_back(mask);
    spec->outputs = {out};
    spec->attrs = {float_attr("scale", static_cast<float>(scale))};
    if (guard_where >= 0) spec->attrs.push_back(int_attr("nan_to_zero", 1));
    spec->counter = mask >= 0 ? "with_mask" : "without_mask";
    return true;
  });
}

}  // namespace kite::passes
