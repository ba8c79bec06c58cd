// Entry points of the op rules: infer_types, check_declared_outputs and the
// table of known ops. The rules themselves live in infer_<family>.cpp.
#include <algorithm>
#include <map>

#include "infer_util.h"

namespace kite::ops {
namespace {

using detail::Ctx;
using detail::OpRule;

const std::map<std::string, detail::InferFn>& rule_table() {
  static const std::map<std::string, detail::InferFn> table = [] {
    std::map<std::string, detail::InferFn> t;
    for (const auto* family : {&detail::nn_rules(), &detail::elementwise_rules(),
                               &detail::shape_rules(), &detail::reduce_rules(),
                               &detail::indexing_rules(), &detail::recurrent_rules()}) {
      for (const OpRule& r : *family) t.emplace(r.op, r.infer);
    }
    return t;
  }();
  return table;
}

bool known_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// What every op needs of its inputs before its own rules run: a defined
// dtype, a rank Kite supports, non-negative dims, a byte size that fits.
bool check_inputs(Ctx& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has(i)) continue;
    const TensorType& t = c.in(i);
    const std::string label = c.input_label(i, "?");
    if (dtype_size(t.dtype) == 0) {
      return c.fail(label + " has invalid dtype " + std::to_string(static_cast<int>(t.dtype)));
    }
    if (t.rank() > KITE_MAX_RANK) {
      return c.fail(label + " has " + std::to_string(t.rank()) + " dims, more than " +
                    std::to_string(KITE_MAX_RANK));
    }
    for (int k = 0; k < t.rank(); ++k) {
      if (t.shape[k] < 0) {
        return c.fail(label + " has shape " + shape_string(t.shape) + ": dim " +
                      std::to_string(k) + " is negative");
      }
    }
    uint64_t bytes = 0;
    if (!checked_byte_size(t.dtype, t.shape, &bytes)) {
      return c.overflow(label + " of shape " + shape_string(t.shape) + " has a byte size that");
    }
  }
  return true;
}

// Runs the rules into c. False: c.err (and c.value_unknown) tell why.
bool run_rules(Ctx& c) {
  const OpNode& node = c.node;
  if (!known_domain(node.domain)) {
    return c.fail("domain '" + node.domain + "' is not supported (only ai.onnx)");
  }
  auto it = rule_table().find(node.op);
  if (it == rule_table().end()) return c.fail("op '" + node.op + "' is not supported");
  if (node.num_outputs < 0) return c.fail("has a negative number of outputs");
  if (!check_inputs(c)) return false;
  return it->second(c);
}

std::string declared_problem(const TensorType& d, const std::string& label) {
  if (dtype_size(d.dtype) == 0) {
    return label + " has invalid dtype " + std::to_string(static_cast<int>(d.dtype));
  }
  if (d.rank() > KITE_MAX_RANK) {
    return label + " has " + std::to_string(d.rank()) + " dims, more than " +
           std::to_string(KITE_MAX_RANK);
  }
  uint64_t bytes = 0;
  if (!checked_byte_size(d.dtype, d.shape, &bytes)) {
    return label + " has invalid shape " + shape_string(d.shape) +
           " (negative dim or byte size overflowing int64)";
  }
  return "";
}

}  // namespace

bool infer_types(const OpNode& node, std::vector<TensorType>* outputs, std::string* err) {
  Ctx c(node);
  if (!run_rules(c)) {
    if (err) *err = c.err;
    return false;
  }
  for (size_t k = 0; k < c.out.size(); ++k) {
    if (!node.uses_output(static_cast<int>(k))) {
      c.out[k] = TensorType();
      c.out[k].present = false;
      continue;
    }
    if (c.out[k].dtype == KITE_DTYPE_UNDEFINED) {
      // A rule that forgot an output is a bug here, not in the model.
      if (err) *err = node.label() + ": internal error: output " + std::to_string(k) + " not inferred";
      return false;
    }
  }
  if (outputs) *outputs = std::move(c.out);
  return true;
}

bool check_declared_outputs(const OpNode& node, const std::vector<TensorType>& declared,
                            std::string* err) {
  auto failed = [&](const std::string& what) {
    if (err) *err = node.label() + ": " + what;
    return false;
  };
  if (node.num_outputs < 0 || declared.size() != static_cast<size_t>(node.num_outputs)) {
    return failed("declares " + std::to_string(declared.size()) + " outputs, node has " +
                  std::to_string(node.num_outputs));
  }
  for (size_t k = 0; k < declared.size(); ++k) {
    if (!declared[k].present) continue;
    std::string why = declared_problem(declared[k], detail::out_label(declared, k));
    if (!why.empty()) return failed(why);
  }

  Ctx c(node);
  const bool inferred = run_rules(c);
  if (!inferred && !c.value_unknown) {
    if (err) *err = c.err;
    return false;
  }
  for (size_t k = 0; k < declared.size(); ++k) {
    const TensorType& d = declared[k];
    const TensorType& e = c.out[k];
    if (!d.present) continue;
    const std::string label = detail::out_label(declared, k);
    if (e.dtype != KITE_DTYPE_UNDEFINED && d.dtype != e.dtype) {
      return failed(label + " has dtype " + dtype_name(d.dtype) + ", expected " +
                    dtype_name(e.dtype));
    }
    if (inferred && d.shape != e.shape) {
      return failed(label + " has shape " + shape_string(d.shape) + ", expected " +
                    shape_string(e.shape));
    }
  }
  if (!inferred) {
    // Inference stopped only because an input value (e.g. Reshape's shape)
    // is not a constant. The declared shapes cannot be derived, so check what
    // can be: dtypes above, and the op's own consistency rules here. Kernels
    // of such nodes read the value at run time and must bounds-check it.
    if (c.consistency) {
      std::string why = c.consistency(declared);
      if (!why.empty()) return failed(why);
    }
  }
  return true;
}

bool is_known_op(const std::string& op) { return rule_table().count(op) != 0; }

std::vector<std::string> known_ops() {
  std::vector<std::string> ops;
  for (const auto& entry : rule_table()) ops.push_back(entry.first);
  return ops;  // std::map keeps them sorted
}

bool window_geometry(const OpNode& node, WindowGeometry* out, std::string* err) {
  Ctx c(node);
  if (!known_domain(node.domain) || (node.op != "Conv" && node.op != "ConvTranspose" &&
                                     node.op != "MaxPool" && node.op != "AveragePool")) {
    if (err) *err = node.label() + ": not a sliding-window op";
    return false;
  }
  WindowGeometry g;
  if (!check_inputs(c) || !detail::window_rules(c, &g)) {
    if (err) *err = c.err;
    return false;
  }
  *out = std::move(g);
  return true;
}

}  // namespace kite::ops
