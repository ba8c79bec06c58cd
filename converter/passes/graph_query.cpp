// Read-only questions about a model the passes ask: who reads and writes a
// tensor, what a constant holds, how two nodes compare.
#include "passes/graph_query.h"

#include <cmath>
#include <cstring>

namespace kite::passes {

namespace {

const std::vector<int> kNoReaders;

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

void collect_node_reads(const ir::Model& model, const ir::Node& node, std::vector<int>* out) {
  for (int t : node.inputs) {
    if (t >= 0) out->push_back(t);
  }
  for (const ir::Attr& a : node.attrs) {
    if (a.type == KITE_ATTR_GRAPH) collect_graph_reads(model, static_cast<int>(a.i), out);
  }
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

bool UseMap::reads_extra_outputs(const ir::Node& node) const {
  for (size_t k = 1; k < node.outputs.size(); ++k) {
    const int t = node.outputs[k];
    if (t >= 0 && (escapes(t) || !readers(t).empty())) return true;
  }
  return false;
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

// ---- nodes -----------------------------------------------------------------

int other_operand(const ir::Node& node, int t) {
  if (node.inputs.size() != 2) return -1;
  return node.inputs[0] == t ? node.inputs[1] : node.inputs[0];
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

}  // namespace kite::passes
