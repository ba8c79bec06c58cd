#include "src/fold_policy.h"

#include <cmath>
#include <cstring>

#include "kite/ops/op_node.h"

namespace kite::converter {

namespace {

const ir::Tensor& tensor_at(const ir::Model& model, int t) {
  return model.tensors.at(static_cast<size_t>(t));
}

// Element i of a constant's bytes as a double (false when no double holds
// every value of the dtype exactly, or for a dtype without a check here).
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

// Every element of b equals the same element of a (n elements each).
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

// The dtype rule on computed values: "" when the fold is allowed, else why
// not.
std::string dtype_rule(const ir::Model& m, const ir::Node& node,
                       const std::vector<std::vector<uint8_t>>& values) {
  if ((node.op == "Cast" || node.op == "CastLike") && !node.inputs.empty() && node.inputs[0] >= 0) {
    const ir::Tensor& in = tensor_at(m, node.inputs[0]);
    const ir::Tensor& out = tensor_at(m, node.outputs[0]);
    if (in.dtype == out.dtype) return "";
    int64_t n = 0;
    if (!kite::ops::checked_numel(in.shape, &n) ||
        !same_values(in.dtype, in.data, out.dtype, values[0], n)) {
      return "the cast from " + std::string(kite::ops::dtype_name(in.dtype)) + " to " +
             kite::ops::dtype_name(out.dtype) + " changes a value (or Kite cannot prove it does not)";
    }
    return "";
  }
  if (node.op == "Pow" && node.inputs.size() == 2 && node.inputs[0] >= 0 && node.inputs[1] >= 0) {
    const ir::Tensor& base = tensor_at(m, node.inputs[0]);
    const ir::Tensor& exponent = tensor_at(m, node.inputs[1]);
    if (base.dtype == exponent.dtype) return "";
    int64_t n = 0;
    if (!kite::ops::checked_numel(exponent.shape, &n)) return "the exponent has no valid shape";
    for (int64_t i = 0; i < n; ++i) {
      double e = 0;
      if (!element_as_double(exponent.dtype, exponent.data.data(), static_cast<size_t>(i), &e)) {
        return "the exponent's dtype has no exactness check";
      }
      const bool exact = base.dtype == KITE_DTYPE_FLOAT32
                             ? static_cast<double>(static_cast<float>(e)) == e
                             : std::floor(e) == e;  // an integer base takes whole exponents
      if (!exact) return "the exponent is not exactly representable in the base's dtype";
    }
  }
  return "";
}

// Shape and Size: the value from the input's static shape.
bool shape_query_value(const ir::Model& model, const ir::Node& node,
                       std::vector<uint8_t>* bytes, std::string* err) {
  const ir::Tensor& input = tensor_at(model, node.inputs[0]);
  const std::vector<int64_t>& dims = input.shape;
  std::vector<int64_t> value;
  if (node.op == "Size") {
    int64_t numel = 0;
    if (!kite::ops::checked_numel(dims, &numel)) {
      *err = node.label() + ": input '" + input.name + "' has too many elements";
      return false;
    }
    value.push_back(numel);
  } else {
    const int64_t rank = static_cast<int64_t>(dims.size());
    auto clamp = [rank](int64_t v) {
      if (v < 0) v += rank;
      return v < 0 ? 0 : (v > rank ? rank : v);
    };
    const int64_t start = clamp(node.attr_int("start", 0));
    const int64_t end = clamp(node.attr_int("end", rank));
    for (int64_t i = start; i < end; ++i) value.push_back(dims[static_cast<size_t>(i)]);
  }
  const ir::Tensor& out = tensor_at(model, node.outputs.at(0));
  if (out.dtype != KITE_DTYPE_INT64 ||
      static_cast<uint64_t>(value.size() * sizeof(int64_t)) != out.byte_size()) {
    *err = node.label() + ": internal error: folded value disagrees with the inferred " +
           kite::ops::dtype_name(out.dtype) + " " + kite::ops::shape_string(out.shape);
    return false;
  }
  bytes->resize(value.size() * sizeof(int64_t));
  if (!value.empty()) std::memcpy(bytes->data(), value.data(), bytes->size());
  return true;
}

}  // namespace

bool is_shape_query(const ir::Node& node) {
  return (node.op == "Shape" || node.op == "Size") && node.domain.empty() &&
         node.fused_pattern.empty();
}

FoldPolicy::FoldPolicy(const ir::Model& model, CpuEvaluator* evaluator) : evaluator_(evaluator) {
  for (const ir::Graph& g : model.graphs) graph_outputs_.insert(g.outputs.begin(), g.outputs.end());
  if (!model.graphs.empty()) {
    main_outputs_.insert(model.graphs[0].outputs.begin(), model.graphs[0].outputs.end());
  }
}

bool FoldPolicy::can_reference_fold(const ir::Model& model, const ir::Node& node,
                                    std::string* why) const {
  if (!node.domain.empty() || !node.fused_pattern.empty() || node.has_subgraph() ||
      !has_reference_evaluator(node.op)) {
    *why = "the reference evaluator does not compute it";
    return false;
  }
  if (node.outputs.empty()) {
    *why = "it has no outputs";
    return false;
  }
  for (int t : node.outputs) {
    if (t < 0 || static_cast<size_t>(t) >= model.tensors.size()) {
      *why = "it has an unused or invalid output";
      return false;
    }
    if (graph_outputs_.count(t)) {
      *why = "it writes graph output '" + tensor_at(model, t).name + "'";
      return false;
    }
  }
  bool any_input = false;
  for (int t : node.inputs) {
    if (t < 0) continue;
    if (static_cast<size_t>(t) >= model.tensors.size()) {
      *why = "an input index is invalid";
      return false;
    }
    any_input = true;
    const ir::Tensor& in = tensor_at(model, t);
    if (!in.is_constant()) {
      *why = "input '" + in.name + "' is computed at run time";
      return false;
    }
  }
  if (!any_input) {
    *why = "it has no inputs";
    return false;
  }
  return true;
}

bool FoldPolicy::reference_fold(const ir::Model& model, const ir::Node& node,
                                std::vector<RefValue>* values, std::string* err) const {
  std::string why;
  if (!reference_evaluate(model, node, values, &why)) {
    *err = "cannot evaluate constant node " + node.label() + ": " + why;
    return false;
  }
  uint64_t bytes = 0;
  for (const RefValue& v : *values) bytes += v.data.size();
  if (bytes > kMaxFoldBytes) {
    *err = node.label() + ": its results are " + std::to_string(bytes) + " bytes, more than the " +
           std::to_string(kMaxFoldBytes) + " folded per node, and no backend runs it";
    return false;
  }
  return true;
}

FoldDecision FoldPolicy::decide(const ir::Model& model, const ir::Node& node) const {
  FoldDecision d;
  // Rule 1.
  if (node.outputs.empty() || !node.fused_pattern.empty() || !node.domain.empty() ||
      node.has_subgraph() || kite::ops::is_nondeterministic_op(node.op)) {
    return d;
  }
  const bool shape_query = is_shape_query(node);
  for (int t : node.outputs) {
    if (t < 0 || static_cast<size_t>(t) >= model.tensors.size() ||
        !tensor_at(model, t).shape_known) {
      return d;
    }
    if (graph_outputs_.count(t) && !(shape_query && main_outputs_.count(t))) return d;
    d.output_bytes += tensor_at(model, t).byte_size();
  }
  bool any_input = false;
  d.constant_inputs = true;
  for (int t : node.inputs) {
    if (t < 0) continue;
    if (static_cast<size_t>(t) >= model.tensors.size()) return FoldDecision();
    any_input = true;
    const ir::Tensor& in = tensor_at(model, t);
    if (in.is_constant()) {
      d.input_bytes += in.byte_size();
    } else {
      d.constant_inputs = false;
    }
  }
  if (!any_input) return FoldDecision();
  // Rule 2.
  if (shape_query && node.outputs.size() == 1 && !node.inputs.empty() && node.inputs[0] >= 0 &&
      tensor_at(model, node.inputs[0]).shape_known) {
    d.verdict = FoldVerdict::kFold;
    return d;
  }
  // Rule 3.
  if (!d.constant_inputs) return d;
  d.verdict = FoldVerdict::kRefused;
  if (d.output_bytes > kMaxFoldBytes) {
    d.reason = "its results are " + std::to_string(d.output_bytes) + " bytes, more than the " +
               std::to_string(kMaxFoldBytes) + " folded per node";
    d.counter = "skipped_too_large";
    return d;
  }
  std::string why;
  if (!evaluator_->supports(model, node, &why) && !has_reference_evaluator(node.op)) {
    d.reason = "the CPU backend does not run " + node.label() +
               (why.empty() ? std::string() : ": " + why);
    d.counter = "skipped_no_cpu_kernel";
    return d;
  }
  if (d.output_bytes > kBloatRatio * d.input_bytes + kBloatSlack) {
    d.verdict = FoldVerdict::kFoldIfReadersFold;
    d.reason = "its results (" + std::to_string(d.output_bytes) + " bytes) are more than " +
               std::to_string(kBloatRatio) + "x its constant inputs (" +
               std::to_string(d.input_bytes) + " bytes) + " + std::to_string(kBloatSlack) +
               ", so it folds only when every reader folds too (fold_constants decides that)";
    return d;
  }
  d.verdict = FoldVerdict::kFold;
  return d;
}

bool FoldPolicy::compute(const ir::Model& model, const ir::Node& node,
                         std::vector<std::vector<uint8_t>>* values, std::string* refusal,
                         std::string* err) const {
  values->clear();
  refusal->clear();
  if (is_shape_query(node) && node.outputs.size() == 1 && !node.inputs.empty() &&
      node.inputs[0] >= 0 && tensor_at(model, node.inputs[0]).shape_known) {
    values->emplace_back();
    return shape_query_value(model, node, &values->back(), err);
  }
  std::string why;
  if (!evaluator_->supports(model, node, &why) && has_reference_evaluator(node.op)) {
    // The CPU backend does not run it (in this mode or dtype): the reference
    // evaluator computes it, and must agree with the op rules' types.
    std::vector<RefValue> ref;
    if (!reference_evaluate(model, node, &ref, &why)) {
      *err = "cannot evaluate constant node " + node.label() + ": " + why;
      return false;
    }
    for (size_t k = 0; k < ref.size(); ++k) {
      const ir::Tensor& out = tensor_at(model, node.outputs.at(k));
      if (ref[k].dtype != out.dtype || ref[k].shape != out.shape) {
        *err = node.label() + ": internal error: the reference evaluator gives " +
               kite::ops::dtype_name(ref[k].dtype) + " " + kite::ops::shape_string(ref[k].shape) +
               " for output '" + out.name + "', the op rules " + kite::ops::dtype_name(out.dtype) +
               " " + kite::ops::shape_string(out.shape);
        return false;
      }
      values->push_back(std::move(ref[k].data));
    }
    *refusal = dtype_rule(model, node, *values);
    if (!refusal->empty()) values->clear();
    return true;
  }
  if (!evaluator_->evaluate(model, node, values, &why)) {
    values->clear();
    *err = "cannot evaluate constant node " + node.label() + ": " + why;
    return false;
  }
  *refusal = dtype_rule(model, node, *values);
  if (!refusal->empty()) values->clear();
  return true;
}

}  // namespace kite::converter
