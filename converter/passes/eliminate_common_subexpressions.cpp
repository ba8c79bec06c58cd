// Common-subexpression elimination: two nodes with the same op, domain and
// attributes on the same inputs compute the same values, so the later one's
// readers read the earlier one's outputs. Identical constants (same dtype,
// shape and bytes) are merged first, so nodes that read equal but separate
// constants (exporters repeat axes and shape constants) match too.
// Not merged: random ops, nodes with subgraphs, fused nodes, and nodes whose
// outputs are graph outputs (the output must keep its own tensor).
#include <functional>
#include <map>
#include <string>

#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

// Op, domain, output count and inputs; attributes are compared separately.
std::string node_key(const ir::Node& n) {
  std::string key = n.domain + "\x1f" + n.op + "\x1f" + std::to_string(n.outputs.size()) + "\x1f";
  for (int t : n.inputs) key += std::to_string(t) + ",";
  return key;
}

}  // namespace

bool eliminate_common_subexpressions(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  std::vector<bool> graph_output(m.tensors.size(), false);
  for (const ir::Graph& g : m.graphs) {
    for (int t : g.outputs) graph_output[static_cast<size_t>(t)] = true;
  }

  // 1. Equal constants. Only constants some node reads are considered, and
  // graph outputs keep their tensor.
  std::vector<bool> read(m.tensors.size(), false);
  std::function<void(const ir::Node&)> mark = [&](const ir::Node& n) {
    for (int t : n.inputs) {
      if (t >= 0) read[static_cast<size_t>(t)] = true;
    }
    for (const ir::Node& b : n.body) mark(b);
  };
  for (const ir::Graph& g : m.graphs) {
    for (const ir::Node& n : g.nodes) mark(n);
  }
  // Bucketed by dtype, shape and a hash of the bytes; equal bytes confirm.
  std::map<std::string, std::vector<int>> buckets;
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    const ir::Tensor& c = m.tensors[t];
    if (!c.is_constant() || !read[t] || graph_output[t]) continue;
    uint64_t hash = 1469598103934665603ull;  // FNV-1a
    for (uint8_t byte : c.data) hash = (hash ^ byte) * 1099511628211ull;
    const std::string key = std::to_string(c.dtype) + "|" + kite::ops::shape_string(c.shape) + "|" +
                            std::to_string(hash);
    std::vector<int>& bucket = buckets[key];
    int same = -1;
    for (int other : bucket) {
      if (m.tensors[static_cast<size_t>(other)].data == c.data) {
        same = other;
        break;
      }
    }
    if (same < 0) {
      bucket.push_back(static_cast<int>(t));
      continue;
    }
    replace_reads(&m, static_cast<int>(t), same);
    result->count("constants_merged");
    result->changed = true;
  }

  // 2. Equal nodes, in order: a merge rewrites later inputs, so chains of
  // duplicates collapse in one sweep.
  std::vector<ir::Node>& nodes = m.main().nodes;
  std::map<std::string, std::vector<size_t>> seen;
  std::vector<bool> dead(nodes.size(), false);
  int64_t merged = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    if (n.outputs.empty() || !n.fused_pattern.empty() || n.has_subgraph() ||
        kite::ops::is_nondeterministic_op(n.op)) {
      continue;
    }
    bool outputs_ok = true;
    for (int t : n.outputs) {
      if (t < 0 || graph_output[static_cast<size_t>(t)]) outputs_ok = false;
    }
    const std::string key = node_key(n);
    std::vector<size_t>& candidates = seen[key];
    size_t match = SIZE_MAX;
    for (size_t c : candidates) {
      if (same_attrs(nodes[c].attrs, n.attrs)) {
        match = c;
        break;
      }
    }
    if (match == SIZE_MAX || !outputs_ok) {
      if (match == SIZE_MAX) candidates.push_back(i);
      continue;
    }
    const ir::Node& keep = nodes[match];
    bool compatible = true;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (keep.outputs[k] < 0) compatible = false;
    }
    if (!compatible) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k) replace_reads(&m, n.outputs[k], keep.outputs[k]);
    dead[i] = true;
    ++merged;
  }
  if (merged > 0) {
    erase_nodes(&m, dead);
    result->count("nodes_merged", merged);
    result->changed = true;
  }
  return true;
}

}  // namespace kite::passes
