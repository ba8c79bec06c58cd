// GELU from its primitives, as exporters write it:
//   erf form   0.5 * x * (1 + Erf(x / sqrt(2)))            (or x * 0.7071...)
//   tanh form  0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// with x^3 as Pow(x, 3) or x * (x * x), and the three products in any of the
// orders torch, TensorFlow and hand-written models use: (x * a) * 0.5,
// x * (a * 0.5), (x * 0.5) * a. Constants match within a relative 1e-4.
// Result: one fused node, op Gelu (domain kite), attribute approximate
// "none" or "tanh", input x, body the primitives.
#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

// For a binary node reading tensor t and a scalar constant: the constant.
bool other_is_scalar(const ir::Model& m, const ir::Node& n, int t, float* value) {
  if (n.inputs.size() != 2) return false;
  if (n.inputs[0] == t) return scalar_float(m, n.inputs[1], value);
  if (n.inputs[1] == t) return scalar_float(m, n.inputs[0], value);
  return false;
}

// The other operand of a two-input node that reads t.
int other_input(const ir::Node& n, int t) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == t) return n.inputs[1];
  if (n.inputs[1] == t) return n.inputs[0];
  return -1;
}

const ir::Node* node_at(const ir::Model& m, int index) {
  return index < 0 ? nullptr : &m.main().nodes[static_cast<size_t>(index)];
}

// a = 1 + f(x): the products that make 0.5 * x * a. Adds their nodes to
// *nodes and returns the result tensor, or -1.
int match_half_x_times(const ir::Model& m, const UseMap& uses, int a, int x, std::vector<int>* nodes) {
  const int m1 = uses.sole_reader(a);
  const ir::Node* n1 = node_at(m, m1);
  if (!n1 || !is_op(*n1, "Mul") || n1->outputs.size() != 1) return -1;
  const int other = other_input(*n1, a);
  float half = 0.0f;
  if (other == x) {
    // (x * a) * 0.5
    const int m2 = uses.sole_reader(n1->outputs[0]);
    const ir::Node* n2 = node_at(m, m2);
    if (!n2 || !is_op(*n2, "Mul") || !other_is_scalar(m, *n2, n1->outputs[0], &half) || half != 0.5f) return -1;
    nodes->insert(nodes->end(), {m1, m2});
    return n2->outputs[0];
  }
  if (other_is_scalar(m, *n1, a, &half)) {
    // x * (a * 0.5)
    if (half != 0.5f) return -1;
    const int m2 = uses.sole_reader(n1->outputs[0]);
    const ir::Node* n2 = node_at(m, m2);
    if (!n2 || !is_op(*n2, "Mul") || other_input(*n2, n1->outputs[0]) != x) return -1;
    nodes->insert(nodes->end(), {m1, m2});
    return n2->outputs[0];
  }
  // (x * 0.5) * a
  const int h = uses.producer(other);
  const ir::Node* hn = node_at(m, h);
  if (!hn || !is_op(*hn, "Mul") || uses.sole_reader(other) != m1 ||
      !other_is_scalar(m, *hn, x, &half) || half != 0.5f) {
    return -1;
  }
  nodes->insert(nodes->end(), {h, m1});
  return n1->outputs[0];
}

// f's output t -> a = t + 1.
int match_plus_one(const ir::Model& m, const UseMap& uses, int t, std::vector<int>* nodes) {
  const int r = uses.sole_reader(t);
  const ir::Node* n = node_at(m, r);
  float one = 0.0f;
  if (!n || !is_op(*n, "Add") || !other_is_scalar(m, *n, t, &one) || one != 1.0f) return -1;
  nodes->push_back(r);
  return n->outputs[0];
}

// x / sqrt(2) or x * (1 / sqrt(2)) producing d; returns x or -1.
int match_erf_argument(const ir::Model& m, const UseMap& uses, int d, std::vector<int>* nodes) {
  const int p = uses.producer(d);
  const ir::Node* n = node_at(m, p);
  if (!n || n->inputs.size() != 2) return -1;
  float c = 0.0f;
  if (is_op(*n, "Div") && scalar_float(m, n->inputs[1], &c) && near(c, kSqrt2)) {
    nodes->push_back(p);
    return n->inputs[0];
  }
  if (is_op(*n, "Mul")) {
    for (int k = 0; k < 2; ++k) {
      if (scalar_float(m, n->inputs[static_cast<size_t>(1 - k)], &c) && near(c, 1.0 / kSqrt2)) {
        nodes->push_back(p);
        return n->inputs[static_cast<size_t>(k)];
      }
    }
  }
  return -1;
}

// cube = x^3 as Pow(x, 3) or x * (x * x) / (x * x) * x; returns x or -1.
int match_cube(const ir::Model& m, const UseMap& uses, int cube, std::vector<int>* nodes) {
  const int p = uses.producer(cube);
  const ir::Node* n = node_at(m, p);
  if (!n || n->inputs.size() != 2) return -1;
  float e = 0.0f;
  if (is_op(*n, "Pow") && scalar_float(m, n->inputs[1], &e) && e == 3.0f) {
    nodes->push_back(p);
    return n->inputs[0];
  }
  if (!is_op(*n, "Mul")) return -1;
  for (int k = 0; k < 2; ++k) {
    const int x = n->inputs[static_cast<size_t>(k)];
    const int sq = n->inputs[static_cast<size_t>(1 - k)];
    const int q = uses.producer(sq);
    const ir::Node* qn = node_at(m, q);
    if (qn && is_op(*qn, "Mul") && qn->inputs.size() == 2 && qn->inputs[0] == x &&
        qn->inputs[1] == x && uses.sole_reader(sq) == p) {
      nodes->insert(nodes->end(), {q, p});
      return x;
    }
  }
  return -1;
}

// s = sqrt(2/pi) * (x + 0.044715 * x^3); returns x or -1.
int match_tanh_argument(const ir::Model& m, const UseMap& uses, int s, std::vector<int>* nodes) {
  const int sp = uses.producer(s);
  const ir::Node* sn = node_at(m, sp);
  if (!sn || !is_op(*sn, "Mul") || sn->inputs.size() != 2) return -1;
  for (int k = 0; k < 2; ++k) {
    float c = 0.0f;
    if (!scalar_float(m, sn->inputs[static_cast<size_t>(1 - k)], &c) || !near(c, kSqrt2OverPi)) continue;
    const int inner = sn->inputs[static_cast<size_t>(k)];
    const int ip = uses.producer(inner);
    const ir::Node* in = node_at(m, ip);
    if (!in || !is_op(*in, "Add") || in->inputs.size() != 2 || uses.sole_reader(inner) != sp) return -1;
    for (int j = 0; j < 2; ++j) {
      const int x = in->inputs[static_cast<size_t>(j)];
      const int scaled = in->inputs[static_cast<size_t>(1 - j)];
      const int kp = uses.producer(scaled);
      const ir::Node* kn = node_at(m, kp);
      if (!kn || !is_op(*kn, "Mul") || kn->inputs.size() != 2 || uses.sole_reader(scaled) != ip) continue;
      for (int q = 0; q < 2; ++q) {
        float c2 = 0.0f;
        if (!scalar_float(m, kn->inputs[static_cast<size_t>(1 - q)], &c2) || !near(c2, 0.044715)) continue;
        const int cube = kn->inputs[static_cast<size_t>(q)];
        if (uses.sole_reader(cube) != kp) continue;
        std::vector<int> cube_nodes;
        if (match_cube(m, uses, cube, &cube_nodes) != x) continue;
        nodes->insert(nodes->end(), cube_nodes.begin(), cube_nodes.end());
        nodes->insert(nodes->end(), {kp, ip, sp});
        return x;
      }
    }
    return -1;
  }
  return -1;
}

}  // namespace

bool fuse_gelu(PassContext& ctx, PassResult* result) {
  const ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const ir::Node& n = m.main().nodes[i];
    const bool erf = is_op(n, "Erf");
    if ((!erf && !is_op(n, "Tanh")) || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
    if (!is_float32(m, n.inputs[0]) || uses.sole_reader(n.inputs[0]) != static_cast<int>(i)) return false;
    std::vector<int> members;
    const int x = erf ? match_erf_argument(m, uses, n.inputs[0], &members)
                      : match_tanh_argument(m, uses, n.inputs[0], &members);
    if (x < 0 || is_constant(m, x)) return false;
    members.push_back(static_cast<int>(i));
    const int a = match_plus_one(m, uses, n.outputs[0], &members);
    if (a < 0) return false;
    const int y = match_half_x_times(m, uses, a, x, &members);
    if (y < 0 || tensor_at(m, y).shape != tensor_at(m, x).shape) return false;
    spec->pattern = erf ? "Gelu" : "Gelu(tanh)";
    spec->op = "Gelu";
    spec->nodes = members;
    spec->inputs = {x};
    spec->outputs = {y};
    spec->attrs = {string_attr("approximate", erf ? "none" : "tanh")};
    return true;
  });
}

}  // namespace kite::passes
