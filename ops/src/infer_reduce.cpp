// Rules of the reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,SumSquare,
// LogSumExp}, ArgMax, ArgMin.
#include <algorithm>

#include "infer_util.h"

namespace kite::ops::detail {
namespace {

// Axes come from input 1 (ReduceSum from opset 13, the others from 18) or
// from the 'axes' attribute (before that).
bool infer_reduce(Ctx& c) {
  const std::string& op = c.node.op;
  const uint32_t dtypes = op == "ReduceMax" || op == "ReduceMin" ? kNumeric | kBool : kNumeric;
  bool keepdims = true, noop_with_empty_axes = false;
  if (!c.arity(1, 2, 1, 1) || !c.dtype_in(0, "data", dtypes) ||
      !c.attr_bool("keepdims", true, &keepdims) ||
      !c.attr_bool("noop_with_empty_axes", false, &noop_with_empty_axes)) {
    return false;
  }
  const int r = c.rank(0);
  const std::vector<int64_t> in = c.shape(0);
  std::vector<int64_t> axes;
  bool attr_present = false;
  if (!c.attr_ints("axes", &axes, &attr_present)) return false;
  if (c.has(1)) {
    if (attr_present) return c.fail("axes given both as attribute and as input");
    if (!c.dtype_in(1, "axes", kI64) || !c.rank_is(1, "axes", 1)) return false;
    c.set_dtype(0, c.in(0).dtype);
    // Unknown axes: with keepdims every dim is kept or becomes 1; without,
    // the rank can only shrink.
    c.consistency = [in, keepdims](const std::vector<TensorType>& declared) {
      if (declared.empty() || !declared[0].present) return std::string();
      const auto& d = declared[0].shape;
      const std::string bad = out_label(declared, 0) + " has shape " + shape_string(d) +
                              ", not a reduction of " + shape_string(in);
      if (!keepdims) return d.size() <= in.size() ? std::string() : bad;
      if (d.size() != in.size()) return bad;
      for (size_t k = 0; k < in.size(); ++k) {
        if (d[k] != in[k] && d[k] != 1) return bad;
      }
      return std::string();
    };
    if (!c.read_ints(1, "axes", kI64, true, static_cast<size_t>(r), &axes)) return false;
  }
  bool reduced[KITE_MAX_RANK] = {};
  bool identity = false;
  RuleError e;
  if (!c.resolved(resolve_reduce_axes(op.c_str(), axes.data(), static_cast<int64_t>(axes.size()), r,
                                      noop_with_empty_axes, reduced, &identity, &e),
                  e)) {
    return false;
  }
  if (identity) return c.same_as_input(0, 0);
  std::vector<int64_t> shape;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!reduced[k]) {
      shape.push_back(in[k]);
    } else if (keepdims) {
      shape.push_back(1);
    }
  }
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_arg(Ctx& c) {
  bool keepdims = true, select_last_index = false;
  int64_t axis = 0;
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "data", kNumeric) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK) || !c.attr_bool("keepdims", true, &keepdims) ||
      !c.attr_bool("select_last_index", false, &select_last_index) ||
      !c.attr_int("axis", 0, &axis) || !c.axis("attribute 'axis'", axis, c.rank(0), &axis)) {
    return false;
  }
  std::vector<int64_t> shape = c.shape(0);
  if (shape[axis] == 0) {
    return c.fail(c.input_label(0, "data") + " has shape " + shape_string(shape) + ": axis " +
                  std::to_string(axis) + " is empty, it has no " +
                  (c.node.op == "ArgMax" ? "maximum" : "minimum"));
  }
  if (keepdims) {
    shape[axis] = 1;
  } else {
    shape.erase(shape.begin() + axis);
  }
  return c.set(0, KITE_DTYPE_INT64, shape);
}

}  // namespace

const std::vector<OpRule>& reduce_rules() {
  static const std::vector<OpRule> rules = {
      {"ReduceSum", infer_reduce},       {"ReduceMean", infer_reduce},
      {"ReduceMax", infer_reduce},       {"ReduceMin", infer_reduce},
      {"ReduceProd", infer_reduce},      {"ReduceL1", infer_reduce},
      {"ReduceL2", infer_reduce},        {"ReduceSumSquare", infer_reduce},
      {"ReduceLogSumExp", infer_reduce}, {"ArgMax", infer_arg},
      {"ArgMin", infer_arg},
  };
  return rules;
}

}  // namespace kite::ops::detail
