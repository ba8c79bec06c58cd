// Building fused nodes: replacing a matched pattern by one fused node that
// carries its body, recognising the activation that ends a pattern, and the
// loop every fusion pass runs.
#include "passes/fusion.h"

#include <cmath>

#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"

namespace kite::passes {

bool apply_fusion(PassContext& ctx, const FusionSpec& spec, std::string* why) {
  ir::Model& model = *ctx.model;
  std::vector<ir::Node>& nodes = model.main().nodes;
  const UseMap uses(model);
  std::set<int> members(spec.nodes.begin(), spec.nodes.end());
  if (members.empty()) {
    *why = "no nodes";
    return false;
  }
  for (int i : members) {
    if (i < 0 || static_cast<size_t>(i) >= nodes.size()) {
      *why = "node index out of range";
      return false;
    }
    if (nodes[static_cast<size_t>(i)].has_subgraph()) {
      *why = "a node with subgraphs cannot be fused";
      return false;
    }
  }
  const std::set<int> outputs(spec.outputs.begin(), spec.outputs.end());
  std::set<int> produced;
  for (int i : members) {
    for (int t : nodes[static_cast<size_t>(i)].outputs) {
      if (t < 0) continue;
      produced.insert(t);
      if (outputs.count(t)) continue;
      // An intermediate: nothing outside the pattern may see it.
      if (uses.escapes(t)) {
        *why = "intermediate '" + tensor_at(model, t).name + "' is a graph output or read by a branch";
        return false;
      }
      for (int r : uses.readers(t)) {
        if (!members.count(r)) {
          *why = "intermediate '" + tensor_at(model, t).name + "' has another consumer ('" +
                 nodes[static_cast<size_t>(r)].name + "')";
          return false;
        }
      }
    }
  }
  for (int t : spec.outputs) {
    if (!produced.count(t)) {
      *why = "output '" + (t >= 0 ? tensor_at(model, t).name : std::string("?")) +
             "' is not produced by the pattern";
      return false;
    }
  }
  const std::set<int> inputs(spec.inputs.begin(), spec.inputs.end());
  for (int i : members) {
    const ir::Node& n = nodes[static_cast<size_t>(i)];
    for (int t : n.inputs) {
      if (t < 0 || produced.count(t) || inputs.count(t) || is_constant(model, t)) continue;
      *why = "the pattern reads '" + tensor_at(model, t).name + "', which is not a fused input";
      return false;
    }
  }
  // A cycle would arise if an external input depended on a pattern output.
  std::vector<int> stack;
  std::set<int> seen;
  for (int t : spec.inputs) {
    if (t >= 0) stack.push_back(t);
  }
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    const int p = uses.producer(t);
    if (p < 0 || !seen.insert(p).second) continue;
    if (members.count(p)) {
      // Reading a pattern node's output directly is only fine for the
      // pattern's own nodes; an external input cannot come from inside.
      *why = "fusing would create a cycle through '" + tensor_at(model, t).name + "'";
      return false;
    }
    for (int u : nodes[static_cast<size_t>(p)].inputs) {
      if (u >= 0) stack.push_back(u);
    }
  }

  ir::Node fused;
  fused.op = spec.op;
  fused.domain = "kite";
  fused.fused_pattern = spec.pattern;
  fused.inputs = spec.inputs;
  fused.outputs = spec.outputs;
  fused.attrs = spec.attrs;
  // "first+last" (or "first+...+last"): readable, unique like the names.
  const std::string& first_name = nodes[static_cast<size_t>(*members.begin())].name;
  const std::string& last_name = nodes[static_cast<size_t>(*members.rbegin())].name;
  fused.name = members.size() == 1 ? first_name
               : first_name + (members.size() > 2 ? "+...+" : "+") + last_name;
  for (int i : members) {
    ir::Node& n = nodes[static_cast<size_t>(i)];
    if (!n.body.empty()) {
      for (ir::Node& b : n.body) fused.body.push_back(std::move(b));
    } else {
      fused.body.push_back(n);
    }
  }
  for (int t : produced) {
    if (!outputs.count(t)) model.tensors[static_cast<size_t>(t)].kind = ir::TensorKind::Scratch;
  }
  const int last = *members.rbegin();
  std::vector<bool> dead(nodes.size(), false);
  for (int i : members) dead[static_cast<size_t>(i)] = i != last;
  nodes[static_cast<size_t>(last)] = std::move(fused);
  erase_nodes(&model, dead);
  std::string cycle;
  if (!stable_topo_sort(&model, &cycle)) {
    return ctx.fail("internal error: fusing " + spec.pattern + " made the graph cyclic: " + cycle);
  }
  return true;
}

bool fuse_until_stable(PassContext& ctx, PassResult* result, const FusionMatcher& match) {
  ir::Model& m = *ctx.model;
  return rewrite_until_stable(ctx, result, [&](size_t i, const UseMap& uses) {
    const size_t tensors_before = m.tensors.size();
    FusionSpec spec;
    std::string why;
    if (!match(i, uses, &spec)) {
      m.tensors.resize(tensors_before);
      return false;
    }
    if (!apply_fusion(ctx, spec, &why)) {
      m.tensors.resize(tensors_before);
      if (ctx.error.empty()) result->count("rejected");
      return false;
    }
    result->count(spec.counter.empty() ? spec.pattern : spec.counter);
    return true;
  });
}

// ---- activations -----------------------------------------------------------

namespace {

// x * f(x) where f is the single-input node `inner` reading x: the Mul that
// reads both x and f's output, when x has exactly these two readers.
int match_gated(const ir::Model& model, const UseMap& uses, int x, const char* gate_op, int* gate) {
  const std::vector<int>& readers = uses.readers(x);
  if (uses.escapes(x) || readers.size() != 2) return -1;
  const std::vector<ir::Node>& nodes = model.main().nodes;
  for (int k = 0; k < 2; ++k) {
    const int g = readers[static_cast<size_t>(k)];
    const int m = readers[static_cast<size_t>(1 - k)];
    const ir::Node& gn = nodes[static_cast<size_t>(g)];
    const ir::Node& mn = nodes[static_cast<size_t>(m)];
    if (!is_op(gn, gate_op) || gn.outputs.size() != 1 || !is_op(mn, "Mul")) continue;
    if (uses.sole_reader(gn.outputs[0]) != m) continue;
    if (mn.inputs.size() != 2) continue;
    const bool pair = (mn.inputs[0] == x && mn.inputs[1] == gn.outputs[0]) ||
                      (mn.inputs[1] == x && mn.inputs[0] == gn.outputs[0]);
    if (!pair) continue;
    *gate = g;
    return m;
  }
  return -1;
}

}  // namespace

bool match_activation(const ir::Model& model, const UseMap& uses, int t, Activation* out) {
  const std::vector<ir::Node>& nodes = model.main().nodes;
  if (!is_float32(model, t)) return false;
  // Gated forms first: t has two readers.
  int gate = -1;
  int mul = match_gated(model, uses, t, "Sigmoid", &gate);
  if (mul >= 0) {
    *out = Activation{"SiLU", 0.0f, 0.0f, {gate, mul}, nodes[static_cast<size_t>(mul)].outputs[0]};
    return true;
  }
  mul = match_gated(model, uses, t, "HardSigmoid", &gate);
  if (mul >= 0) {
    const ir::Node& g = nodes[static_cast<size_t>(gate)];
    const float alpha = g.attr_float("alpha", 0.2f);
    const float beta = g.attr_float("beta", 0.5f);
    if (near(alpha, 1.0 / 6.0, 1e-6) && beta == 0.5f) {
      *out = Activation{"HardSwish", alpha, beta, {gate, mul}, nodes[static_cast<size_t>(mul)].outputs[0]};
      return true;
    }
    return false;
  }
  const int r = uses.sole_reader(t);
  if (r < 0) return false;
  const ir::Node& n = nodes[static_cast<size_t>(r)];
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] != t) return false;
  Activation a;
  a.nodes = {r};
  a.output = n.outputs[0];
  if (!n.fused_pattern.empty()) {
    // A GELU the fuse_gelu pass already recognised.
    if (n.op != "Gelu" || n.domain != "kite") return false;
    a.kind = n.attr_string("approximate", "none") == "tanh" ? "GeluTanh" : "Gelu";
  } else if (!n.domain.empty()) {
    return false;
  } else if (n.op == "Relu" || n.op == "Sigmoid" || n.op == "Tanh") {
    a.kind = n.op;
  } else if (n.op == "LeakyRelu") {
    a.kind = n.op;
    a.alpha = n.attr_float("alpha", 0.01f);
  } else if (n.op == "HardSigmoid") {
    a.kind = n.op;
    a.alpha = n.attr_float("alpha", 0.2f);
    a.beta = n.attr_float("beta", 0.5f);
  } else if (n.op == "HardSwish") {
    a.kind = n.op;
    a.alpha = 1.0f / 6.0f;
    a.beta = 0.5f;
  } else if (n.op == "Gelu") {
    a.kind = n.attr_string("approximate", "none") == "tanh" ? "GeluTanh" : "Gelu";
  } else if (n.op == "Clip") {
    // Bounds must be known now: from constants (opset 11+) or attributes.
    float lo = -INFINITY, hi = INFINITY;
    if (n.inputs.size() > 1 && n.inputs[1] >= 0 && !scalar_float(model, n.inputs[1], &lo)) return false;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !scalar_float(model, n.inputs[2], &hi)) return false;
    if (n.inputs.size() <= 1) {
      lo = n.attr_float("min", lo);
      hi = n.attr_float("max", hi);
    }
    a.kind = "Clip";
    a.alpha = lo;
    a.beta = hi;
  } else {
    return false;
  }
  *out = a;
  return true;
}

void add_activation_attrs(const Activation& act, std::vector<ir::Attr>* attrs) {
  attrs->push_back(string_attr("activation", act.kind));
  if (act.kind == "Clip" || act.kind == "LeakyRelu" || act.kind == "HardSigmoid" ||
      act.kind == "HardSwish") {
    attrs->push_back(float_attr("activation_alpha", act.alpha));
  }
  if (act.kind == "Clip" || act.kind == "HardSigmoid" || act.kind == "HardSwish") {
    attrs->push_back(float_attr("activation_beta", act.beta));
  }
}

FusionSpec node_with_activation(const ir::Model& model, size_t node, const Activation& act,
                                const std::string& fused_op) {
  const ir::Node& n = model.main().nodes[node];
  FusionSpec spec;
  spec.op = fused_op;
  spec.pattern = n.op + "+" + act.kind;
  spec.nodes = {static_cast<int>(node)};
  spec.nodes.insert(spec.nodes.end(), act.nodes.begin(), act.nodes.end());
  spec.inputs = n.inputs;
  spec.outputs = {act.output};
  spec.attrs = n.attrs;
  add_activation_attrs(act, &spec.attrs);
  return spec;
}

}  // namespace kite::passes
