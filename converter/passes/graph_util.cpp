#include "passes/graph_util.h"

#include <cmath>
#include <cstring>
#include <queue>
#include <unordered_set>

namespace kite::passes {

namespace {

const std::vector<int> kNoReaders;

void replace_in_node(ir::Node* n, int from, int to) {
  for (int& t : n->inputs) {
    if (t == from) t = to;
  }
  for (ir::Node& b : n->body) replace_in_node(&b, from, to);
}

}  // namespace

void collect_graph_reads(const ir::Model& model, int g, std::vector<int>* out) {
  if (g < 0 || static_cast<size_t>(g) >= model.graphs.size()) return;
  const ir::Graph& graph = model.graphs[static_cast<size_t>(g)];
  for (const ir::Node& n : graph.nodes) {
    for (int t : n.inputs) {
      if (t >= 0) out->push_back(t);
    }
    for (const ir::Node& b : n.body) {
      for (int t : b.inputs) {
        if (t >= 0) out->push_back(t);
      }
    }
    for (const ir::Attr& a : n.attrs) {
      if (a.type == KITE_ATTR_GRAPH) collect_graph_reads(model, static_cast<int>(a.i), out);
    }
  }
  for (int t : graph.outputs) out->push_back(t);
}

bool is_nondeterministic(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Multinomial" || op == "Bernoulli";
}

UseMap::UseMap(const ir::Model& model) {
  const size_t n = model.tensors.size();
  producer_.assign(n, -1);
  readers_.assign(n, {});
  escapes_.assign(n, false);
  const ir::Graph& main = model.main();
  for (size_t i = 0; i < main.nodes.size(); ++i) {
    const ir::Node& node = main.nodes[i];
    for (int t : node.outputs) {
      if (valid(t)) producer_[static_cast<size_t>(t)] = static_cast<int>(i);
    }
    for (int t : node.inputs) {
      if (valid(t)) readers_[static_cast<size_t>(t)].push_back(static_cast<int>(i));
    }
    for (const ir::Attr& a : node.attrs) {
      if (a.type != KITE_ATTR_GRAPH) continue;
      std::vector<int> reads;
      collect_graph_reads(model, static_cast<int>(a.i), &reads);
      for (int t : reads) {
        if (valid(t)) escapes_[static_cast<size_t>(t)] = true;
      }
    }
  }
  for (const ir::Graph& g : model.graphs) {
    for (int t : g.outputs) {
      if (valid(t)) escapes_[static_cast<size_t>(t)] = true;
    }
  }
}

const std::vector<int>& UseMap::readers(int t) const {
  return valid(t) ? readers_[static_cast<size_t>(t)] : kNoReaders;
}

bool UseMap::only_read_by(int t, const std::set<int>& nodes) const {
  if (!valid(t) || escapes(t)) return false;
  const std::vector<int>& r = readers_[static_cast<size_t>(t)];
  if (r.empty()) return false;
  for (int n : r) {
    if (!nodes.count(n)) return false;
  }
  return true;
}

int UseMap::sole_reader(int t) const {
  if (!valid(t) || escapes(t)) return -1;
  const std::vector<int>& r = readers_[static_cast<size_t>(t)];
  return r.size() == 1 ? r[0] : -1;
}

// ---- tensors and constants -------------------------------------------------

const ir::Tensor& tensor_at(const ir::Model& model, int t) {
  return model.tensors.at(static_cast<size_t>(t));
}

bool is_constant(const ir::Model& model, int t) {
  return t >= 0 && static_cast<size_t>(t) < model.tensors.size() &&
         model.tensors[static_cast<size_t>(t)].is_constant();
}

bool is_float32(const ir::Model& model, int t) {
  return t >= 0 && static_cast<size_t>(t) < model.tensors.size() &&
         model.tensors[static_cast<size_t>(t)].dtype == KITE_DTYPE_FLOAT32;
}

int64_t numel_of(const ir::Model& model, int t) {
  int64_t n = 0;
  if (!kite::ops::checked_numel(tensor_at(model, t).shape, &n)) return -1;
  return n;
}

std::vector<float> float_values(const ir::Model& model, int t) {
  std::vector<float> out;
  if (!is_constant(model, t) || !is_float32(model, t)) return out;
  const ir::Tensor& c = tensor_at(model, t);
  if (c.data.size() != c.byte_size()) return out;
  out.resize(c.data.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), c.data.data(), out.size() * sizeof(float));
  return out;
}

bool scalar_float(const ir::Model& model, int t, float* value) {
  const std::vector<float> v = float_values(model, t);
  if (v.size() != 1) return false;
  *value = v[0];
  return true;
}

bool int_values(const ir::Model& model, int t, std::vector<int64_t>* values) {
  if (!is_constant(model, t)) return false;
  const ir::Tensor& c = tensor_at(model, t);
  if (c.data.size() != c.byte_size()) return false;
  values->clear();
  if (c.dtype == KITE_DTYPE_INT64) {
    values->resize(c.data.size() / 8);
    if (!values->empty()) std::memcpy(values->data(), c.data.data(), c.data.size());
    return true;
  }
  if (c.dtype == KITE_DTYPE_INT32) {
    std::vector<int32_t> v(c.data.size() / 4);
    if (!v.empty()) std::memcpy(v.data(), c.data.data(), c.data.size());
    values->assign(v.begin(), v.end());
    return true;
  }
  return false;
}

bool near(float a, double b, double tol) {
  return std::fabs(static_cast<double>(a) - b) <= tol * std::fabs(b);
}

std::string unique_tensor_name(const ir::Model& model, const std::string& base) {
  std::unordered_set<std::string> names;
  names.reserve(model.tensors.size());
  for (const ir::Tensor& t : model.tensors) names.insert(t.name);
  if (!names.count(base)) return base;
  for (int k = 1;; ++k) {
    const std::string candidate = base + "_" + std::to_string(k);
    if (!names.count(candidate)) return candidate;
  }
}

int add_float_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<float>& values) {
  ir::Tensor t;
  t.name = unique_tensor_name(*model, base);
  t.dtype = KITE_DTYPE_FLOAT32;
  t.shape = shape;
  t.shape_known = true;
  t.kind = ir::TensorKind::Constant;
  t.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return model->add_tensor(std::move(t));
}

int add_int64_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& values) {
  ir::Tensor t;
  t.name = unique_tensor_name(*model, base);
  t.dtype = KITE_DTYPE_INT64;
  t.shape = shape;
  t.shape_known = true;
  t.kind = ir::TensorKind::Constant;
  t.data.resize(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return model->add_tensor(std::move(t));
}

int add_activation_like(ir::Model* model, const std::string& base, int like) {
  ir::Tensor t;
  t.name = unique_tensor_name(*model, base);
  t.dtype = tensor_at(*model, like).dtype;
  t.shape = tensor_at(*model, like).shape;
  t.shape_known = true;
  t.kind = ir::TensorKind::Activation;
  return model->add_tensor(std::move(t));
}

// ---- rewiring --------------------------------------------------------------

void replace_reads(ir::Model* model, int from, int to) {
  for (ir::Graph& g : model->graphs) {
    for (ir::Node& n : g.nodes) replace_in_node(&n, from, to);
  }
}

void erase_nodes(ir::Model* model, const std::vector<bool>& dead) {
  std::vector<ir::Node>& nodes = model->main().nodes;
  std::vector<ir::Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i >= dead.size() || !dead[i]) kept.push_back(std::move(nodes[i]));
  }
  nodes = std::move(kept);
}

bool stable_topo_sort(ir::Model* model) {
  std::vector<ir::Node>& nodes = model->main().nodes;
  const size_t n = nodes.size();
  std::vector<int> producer(model->tensors.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int t : nodes[i].outputs) {
      if (t >= 0 && static_cast<size_t>(t) < producer.size()) producer[static_cast<size_t>(t)] = static_cast<int>(i);
    }
  }
  std::vector<std::vector<int>> dependents(n);
  std::vector<int> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> reads;
    for (int t : nodes[i].inputs) {
      if (t >= 0) reads.push_back(t);
    }
    for (const ir::Attr& a : nodes[i].attrs) {
      if (a.type == KITE_ATTR_GRAPH) collect_graph_reads(*model, static_cast<int>(a.i), &reads);
    }
    std::set<int> deps;
    for (int t : reads) {
      if (static_cast<size_t>(t) >= producer.size()) continue;
      const int p = producer[static_cast<size_t>(t)];
      if (p >= 0 && p != static_cast<int>(i)) deps.insert(p);
    }
    pending[i] = static_cast<int>(deps.size());
    for (int p : deps) dependents[static_cast<size_t>(p)].push_back(static_cast<int>(i));
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int d : dependents[static_cast<size_t>(i)]) {
      if (--pending[static_cast<size_t>(d)] == 0) ready.push(d);
    }
  }
  if (order.size() != n) return false;
  std::vector<ir::Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(nodes[static_cast<size_t>(i)]));
  nodes = std::move(sorted);
  return true;
}

ir::Attr int_attr(const std::string& name, int64_t v) {
  ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_INT;
  a.i = v;
  return a;
}

ir::Attr float_attr(const std::string& name, float v) {
  ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_FLOAT;
  a.f = v;
  return a;
}

ir::Attr string_attr(const std::string& name, const std::string& v) {
  ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_STRING;
  a.s = v;
  return a;
}

ir::Attr ints_attr(const std::string& name, const std::vector<int64_t>& v) {
  ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_INTS;
  a.ints = v;
  return a;
}

int64_t attr_int(const ir::Node& node, const std::string& name, int64_t fallback) {
  const ir::Attr* a = node.find_attr(name);
  return a && a->type == KITE_ATTR_INT ? a->i : fallback;
}

float attr_float(const ir::Node& node, const std::string& name, float fallback) {
  const ir::Attr* a = node.find_attr(name);
  return a && a->type == KITE_ATTR_FLOAT ? a->f : fallback;
}

std::string attr_string(const ir::Node& node, const std::string& name, const std::string& fallback) {
  const ir::Attr* a = node.find_attr(name);
  return a && a->type == KITE_ATTR_STRING ? a->s : fallback;
}

std::vector<int64_t> attr_ints(const ir::Node& node, const std::string& name,
                               const std::vector<int64_t>& fallback) {
  const ir::Attr* a = node.find_attr(name);
  return a && a->type == KITE_ATTR_INTS ? a->ints : fallback;
}

bool has_graph_attr(const ir::Node& node) {
  for (const ir::Attr& a : node.attrs) {
    if (a.type == KITE_ATTR_GRAPH) return true;
  }
  return false;
}

namespace {

bool same_attr(const ir::Attr& a, const ir::Attr& b) {
  if (a.name != b.name || a.type != b.type) return false;
  switch (a.type) {
    case KITE_ATTR_INT:
    case KITE_ATTR_GRAPH:
      return a.i == b.i;
    case KITE_ATTR_FLOAT:
      return std::memcmp(&a.f, &b.f, sizeof a.f) == 0;
    case KITE_ATTR_STRING:
      return a.s == b.s;
    case KITE_ATTR_INTS:
      return a.ints == b.ints;
    case KITE_ATTR_FLOATS:
      return a.floats.size() == b.floats.size() &&
             (a.floats.empty() ||
              std::memcmp(a.floats.data(), b.floats.data(), a.floats.size() * sizeof(float)) == 0);
    case KITE_ATTR_STRINGS:
      return a.strings == b.strings;
    default:
      return true;
  }
}

}  // namespace

bool same_attrs(const std::vector<ir::Attr>& a, const std::vector<ir::Attr>& b) {
  if (a.size() != b.size()) return false;
  for (const ir::Attr& x : a) {
    bool found = false;
    for (const ir::Attr& y : b) {
      if (x.name == y.name) {
        if (!same_attr(x, y)) return false;
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

bool is_op(const ir::Node& node, const char* op) {
  return node.domain.empty() && node.fused_pattern.empty() && node.op == op;
}

// ---- fusion ----------------------------------------------------------------

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
    if (has_graph_attr(nodes[static_cast<size_t>(i)])) {
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
  if (!stable_topo_sort(&model)) return ctx.fail("internal error: fusing " + spec.pattern +
                                                 " made the graph cyclic");
  return true;
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
    const float alpha = attr_float(g, "alpha", 0.2f);
    const float beta = attr_float(g, "beta", 0.5f);
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
    a.kind = attr_string(n, "approximate", "none") == "tanh" ? "GeluTanh" : "Gelu";
  } else if (!n.domain.empty()) {
    return false;
  } else if (n.op == "Relu" || n.op == "Sigmoid" || n.op == "Tanh") {
    a.kind = n.op;
  } else if (n.op == "LeakyRelu") {
    a.kind = n.op;
    a.alpha = attr_float(n, "alpha", 0.01f);
  } else if (n.op == "HardSigmoid") {
    a.kind = n.op;
    a.alpha = attr_float(n, "alpha", 0.2f);
    a.beta = attr_float(n, "beta", 0.5f);
  } else if (n.op == "HardSwish") {
    a.kind = n.op;
    a.alpha = 1.0f / 6.0f;
    a.beta = 0.5f;
  } else if (n.op == "Gelu") {
    a.kind = attr_string(n, "approximate", "none") == "tanh" ? "GeluTanh" : "Gelu";
  } else if (n.op == "Clip") {
    // Bounds must be known now: from constants (opset 11+) or attributes.
    float lo = -INFINITY, hi = INFINITY;
    if (n.inputs.size() > 1 && n.inputs[1] >= 0 && !scalar_float(model, n.inputs[1], &lo)) return false;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !scalar_float(model, n.inputs[2], &hi)) return false;
    if (n.inputs.size() <= 1) {
      lo = attr_float(n, "min", lo);
      hi = attr_float(n, "max", hi);
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

}  // namespace kite::passes
