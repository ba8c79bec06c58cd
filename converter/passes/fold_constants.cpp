// Constant folding: a node whose inputs are all constants is computed now,
// with Kite's own CPU kernels (const_eval), and replaced by its results.
// Shape and Size need only their input's (static) shape, so the shape
// subgraphs exporters emit (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, ConstantOfShape/Equal/Where) fold away completely.
//
// Dtype rule: the kernels compute in the node's own dtypes, so a node whose
// value inputs share one dtype folds to exactly what the runtime would
// compute. A node that moves values between dtypes (Cast, CastLike, Pow with
// an exponent of another dtype) folds only if no value changes on the way:
// every Cast result converts back to its source value, every exponent is
// exactly representable in the base's dtype.
//
// No bloat: a node whose results are much larger than its constant inputs
// (an Expand or Tile broadcast, a big ConstantOfShape) is folded only if
// every consumer of those results folds too, so the large value never
// reaches the file.
#include <cmath>
#include <cstring>

#include "passes/graph_util.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

constexpr uint64_t kMaxFoldBytes = 256ull << 20;  // never materialize more in one node
constexpr uint64_t kBloatRatio = 2;               // results may be this much larger ...
constexpr uint64_t kBloatSlack = 4096;            // ... plus this, before they count as bloat

// Element i of a constant's bytes as a double (false for an unknown dtype).
bool element_as_double(kite_dtype dtype, const uint8_t* data, size_t i, double* out) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32: {
      float v;
      std::memcpy(&v, data + i * 4, 4);
      *out = v;
      return true;
    }
    case KITE_DTYPE_INT64: {
      int64_t v;
      std::memcpy(&v, data + i * 8, 8);
      *out = static_cast<double>(v);
      // Beyond 2^53 a double does not hold every int64; be conservative.
      return std::fabs(*out) < 9007199254740992.0;
    }
    case KITE_DTYPE_INT32: {
      int32_t v;
      std::memcpy(&v, data + i * 4, 4);
      *out = v;
      return true;
    }
    case KITE_DTYPE_INT8:
      *out = static_cast<int8_t>(data[i]);
      return true;
    case KITE_DTYPE_UINT8:
      *out = data[i];
      return true;
    case KITE_DTYPE_BOOL:
      *out = data[i] != 0 ? 1.0 : 0.0;
      return true;
    default:
      return false;  // float16 and anything else: no exactness proof here
  }
}

// Every element of b equals the same element of a (same element count).
bool same_values(kite_dtype da, const std::vector<uint8_t>& a, kite_dtype db,
                 const std::vector<uint8_t>& b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double x = 0, y = 0;
    if (!element_as_double(da, a.data(), static_cast<size_t>(i), &x) ||
        !element_as_double(db, b.data(), static_cast<size_t>(i), &y)) {
      return false;
    }
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x != y) return false;
  }
  return true;
}

// The dtype rule, checked on the computed results. "" when the fold is
// allowed, else why not.
std::string dtype_rule(const ir::Model& m, const ir::Node& node,
                       const std::vector<std::vector<uint8_t>>& values) {
  if ((node.op == "Cast" || node.op == "CastLike") && !node.inputs.empty() && node.inputs[0] >= 0) {
    const ir::Tensor& in = tensor_at(m, node.inputs[0]);
    const ir::Tensor& out = tensor_at(m, node.outputs[0]);
    if (in.dtype == out.dtype) return "";
    const int64_t n = numel_of(m, node.inputs[0]);
    if (n < 0 || !same_values(in.dtype, in.data, out.dtype, values[0], n)) {
      return "Cast changes a value";
    }
    return "";
  }
  if (node.op == "Pow" && node.inputs.size() == 2 && node.inputs[0] >= 0 && node.inputs[1] >= 0) {
    const ir::Tensor& base = tensor_at(m, node.inputs[0]);
    const ir::Tensor& exponent = tensor_at(m, node.inputs[1]);
    if (base.dtype == exponent.dtype) return "";
    const int64_t n = numel_of(m, node.inputs[1]);
    for (int64_t i = 0; i < n; ++i) {
      double e = 0;
      if (!element_as_double(exponent.dtype, exponent.data.data(), static_cast<size_t>(i), &e)) {
        return "exponent dtype has no exactness check";
      }
      const bool exact = base.dtype == KITE_DTYPE_FLOAT32
                             ? static_cast<double>(static_cast<float>(e)) == e
                             : std::floor(e) == e;  // an integer base takes whole exponents
      if (!exact) return "exponent is not exactly representable in the base's dtype";
    }
  }
  return "";
}

}  // namespace

bool fold_constants(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  std::vector<ir::Node>& nodes = m.main().nodes;
  std::vector<bool> graph_output(m.tensors.size(), false);
  for (const ir::Graph& g : m.graphs) {
    for (int t : g.outputs) {
      if (t >= 0) graph_output[static_cast<size_t>(t)] = true;
    }
  }
  struct Fold {
    size_t node;
    uint64_t in_bytes;
    uint64_t out_bytes;
  };
  std::vector<Fold> folds;
  std::vector<bool> folded(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    if (n.outputs.empty() || !n.fused_pattern.empty() || has_graph_attr(n) ||
        is_nondeterministic(n.op) || !n.domain.empty()) {
      continue;
    }
    bool outputs_ok = true;
    for (int t : n.outputs) {
      if (t < 0 || graph_output[static_cast<size_t>(t)] || !tensor_at(m, t).shape_known) outputs_ok = false;
    }
    if (!outputs_ok) continue;
    uint64_t out_bytes = 0;
    for (int t : n.outputs) out_bytes += tensor_at(m, t).byte_size();

    std::vector<std::vector<uint8_t>> values;
    uint64_t in_bytes = 0;
    if ((n.op == "Shape" || n.op == "Size") && n.outputs.size() == 1 && !n.inputs.empty() &&
        n.inputs[0] >= 0 && tensor_at(m, n.inputs[0]).shape_known &&
        !is_constant(m, n.inputs[0])) {
      // The value is the (static) shape: no kernel needed.
      const std::vector<int64_t>& dims = tensor_at(m, n.inputs[0]).shape;
      std::vector<int64_t> v;
      if (n.op == "Size") {
        int64_t count = 0;
        if (!kite::ops::checked_numel(dims, &count)) continue;
        v.push_back(count);
      } else {
        const int64_t rank = static_cast<int64_t>(dims.size());
        auto clamp = [rank](int64_t x) {
          if (x < 0) x += rank;
          return x < 0 ? 0 : (x > rank ? rank : x);
        };
        const int64_t start = clamp(attr_int(n, "start", 0));
        const int64_t end = clamp(attr_int(n, "end", rank));
        for (int64_t k = start; k < end; ++k) v.push_back(dims[static_cast<size_t>(k)]);
      }
      const ir::Tensor& out = tensor_at(m, n.outputs[0]);
      if (out.dtype != KITE_DTYPE_INT64 || v.size() * 8 != out.byte_size()) continue;
      values.emplace_back(v.size() * 8);
      if (!v.empty()) std::memcpy(values[0].data(), v.data(), values[0].size());
    } else {
      bool all_constant = false;
      for (int t : n.inputs) {
        if (t < 0) continue;
        if (!is_constant(m, t)) {
          all_constant = false;
          break;
        }
        all_constant = true;
        in_bytes += tensor_at(m, t).byte_size();
      }
      if (!all_constant) continue;
      if (out_bytes > kMaxFoldBytes) {
        result->count("skipped_too_large");
        continue;
      }
      std::string why;
      if (!ctx.evaluator->supports(m, n, &why)) {
        result->count("skipped_no_cpu_kernel");
        continue;
      }
      if (!ctx.evaluator->evaluate(m, n, &values, &why)) {
        // The runtime would hit the same problem; leave it to report there.
        result->count("skipped_eval_failed");
        continue;
      }
      const std::string rule = dtype_rule(m, n, values);
      if (!rule.empty()) {
        result->count("skipped_dtype_rule");
        continue;
      }
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ir::Tensor& t = m.tensors[static_cast<size_t>(n.outputs[k])];
      t.kind = ir::TensorKind::Constant;
      t.data = std::move(values[k]);
    }
    folded[i] = true;
    folds.push_back(Fold{i, in_bytes, out_bytes});
  }
  if (folds.empty()) return true;

  // Undo bloating folds whose results a node that stays would still read,
  // last first so that an undone consumer undoes its producer in turn.
  const UseMap uses(m);
  for (auto it = folds.rbegin(); it != folds.rend(); ++it) {
    if (it->out_bytes <= kBloatRatio * it->in_bytes + kBloatSlack) continue;
    const ir::Node& n = nodes[it->node];
    bool read_by_kept_node = false;
    for (int t : n.outputs) {
      if (uses.escapes(t)) read_by_kept_node = true;
      for (int r : uses.readers(t)) {
        if (!folded[static_cast<size_t>(r)]) read_by_kept_node = true;
      }
    }
    if (!read_by_kept_node) continue;
    for (int t : n.outputs) {
      ir::Tensor& tensor = m.tensors[static_cast<size_t>(t)];
      tensor.kind = ir::TensorKind::Activation;
      tensor.data.clear();
      tensor.data.shrink_to_fit();
    }
    folded[it->node] = false;
    result->count("skipped_bloat");
  }

  int64_t count = 0;
  for (const Fold& f : folds) count += folded[f.node] ? 1 : 0;
  if (count == 0) return true;
  erase_nodes(&m, folded);
  result->count("folded", count);
  result->changed = true;
  return true;
}

}  // namespace kite::passes
