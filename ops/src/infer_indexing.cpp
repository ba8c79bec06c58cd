// Rules of the ops that exporters of today's PyTorch and Hugging Face models
// emit beyond the classic CNN set (issue 19): NaN/Inf tests, Mod, Trilu,
// CumSum, the Gather/Scatter family, DepthToSpace/SpaceToDepth, TopK and
// OneHot.
#include <algorithm>
#include <cstring>

#include "infer_util.h"
#include "kite/ops/einsum.h"

namespace kite::ops::detail {
namespace {

// ScatterElements/ScatterND: the reduction is one ONNX names, and one that
// combines values needs numeric data.
bool scatter_reduction(Ctx& c, const std::string& reduction) {
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min") {
    return c.fail("attribute 'reduction' is '" + reduction + "', expected none, add, mul, max or min");
  }
  if (reduction != "none" && c.in(0).dtype == KITE_DTYPE_BOOL) {
    return c.fail("reduction '" + reduction + "' needs numeric data, not bool");
  }
  return true;
}

bool infer_isnan(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "X", kFloat)) return false;
  if (c.node.op == "IsInf") {
    bool b = false;
    if (!c.attr_bool("detect_negative", true, &b) || !c.attr_bool("detect_positive", true, &b)) {
      return false;
    }
  }
  return c.set(0, KITE_DTYPE_BOOL, c.shape(0));
}

bool infer_mod(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "A", kNumeric) || !c.same_dtype(1, "B", 0, "A")) {
    return false;
  }
  bool fmod = false;
  if (!c.attr_bool("fmod", false, &fmod)) return false;
  // fmod=0 on floats (ONNX's own node tests use it; numpy.mod semantics:
  // the sign of the divisor) is taken too.
  static const char* const kRoles[] = {"A", "B"};
  std::vector<int64_t> shape;
  return broadcast_inputs(c, {0, 1}, kRoles, &shape) && c.set(0, c.in(0).dtype, shape);
}

bool infer_trilu(Ctx& c) {
  bool upper = true;
  if (!c.arity(1, 2, 1, 1) || !c.dtype_in(0, "input", kAny) ||
      !c.rank_between(0, "input", 2, KITE_MAX_RANK) || !c.attr_bool("upper", true, &upper)) {
    return false;
  }
  if (c.has(1) && (!c.dtype_in(1, "k", kI64) || !c.numel_is(1, "k", 1) ||
                   !c.rank_between(1, "k", 0, 1))) {
    return false;
  }
  return c.same_as_input(0, 0);
}

bool infer_cumsum(Ctx& c) {
  bool b = false;
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "x", kFloat | kI32 | kI64) ||
      !c.rank_between(0, "x", 1, KITE_MAX_RANK) || !c.dtype_in(1, "axis", kIndex) ||
      !c.numel_is(1, "axis", 1) || !c.rank_between(1, "axis", 0, 1) ||
      !c.attr_bool("exclusive", false, &b) || !c.attr_bool("reverse", false, &b)) {
    return false;
  }
  if (c.in(1).data) {
    double axis = 0;
    int64_t a = 0;
    if (!c.read_scalar(1, "axis", &axis) ||
        !c.axis("input 'axis' value", static_cast<int64_t>(axis), c.rank(0), &a)) {
      return false;
    }
  }
  return c.same_as_input(0, 0);
}

bool infer_gather_elements(Ctx& c) {
  int64_t axis = 0;
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "data", kAny) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK) || !c.dtype_in(1, "indices", kIndex) ||
      !c.rank_is(1, "indices", c.rank(0)) || !c.attr_int("axis", 0, &axis) ||
      !c.axis("attribute 'axis'", axis, c.rank(0), &axis)) {
    return false;
  }
  if (!c.indices_fit_data(1, 0, axis)) return false;
  const int64_t dim = c.shape(0)[axis];
  if (!c.constant_indices_in_range(1, [dim](int64_t) { return dim; })) return false;
  return c.set(0, c.in(0).dtype, c.shape(1));
}

bool infer_scatter_elements(Ctx& c) {
  int64_t axis = 0;
  std::string reduction;
  if (!c.arity(3, 3, 1, 1) || !c.dtype_in(0, "data", kAny) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK) || !c.dtype_in(1, "indices", kIndex) ||
      !c.rank_is(1, "indices", c.rank(0)) || !c.same_dtype(2, "updates", 0, "data") ||
      !c.attr_int("axis", 0, &axis) || !c.axis("attribute 'axis'", axis, c.rank(0), &axis) ||
      !c.attr_string("reduction", "none", &reduction)) {
    return false;
  }
  if (!scatter_reduction(c, reduction)) return false;
  if (c.shape(2) != c.shape(1)) {
    return c.fail(c.input_label(2, "updates") + " has shape " + shape_string(c.shape(2)) +
                  ", expected the indices' " + shape_string(c.shape(1)));
  }
  if (!c.indices_fit_data(1, 0, axis)) return false;
  const int64_t dim = c.shape(0)[axis];
  if (!c.constant_indices_in_range(1, [dim](int64_t) { return dim; })) return false;
  return c.same_as_input(0, 0);
}

bool infer_gather_nd(Ctx& c) {
  int64_t b = 0;
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "data", kAny) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK) || !c.dtype_in(1, "indices", kI64) ||
      !c.rank_between(1, "indices", 1, KITE_MAX_RANK) || !c.attr_int("batch_dims", 0, &b)) {
    return false;
  }
  const auto& data = c.shape(0);
  const auto& idx = c.shape(1);
  const int64_t r = c.rank(0), q = c.rank(1);
  if (b < 0 || b >= std::min(r, q)) {
    return c.fail("attribute 'batch_dims' is " + std::to_string(b) + ", expected [0, " +
                  std::to_string(std::min(r, q) - 1) + "]");
  }
  for (int64_t d = 0; d < b; ++d) {
    if (data[d] != idx[d]) {
      return c.fail(c.input_label(1, "indices") + " has shape " + shape_string(idx) +
                    ", whose batch dims differ from data's " + shape_string(data));
    }
  }
  const int64_t k = idx.back();
  if (k < 1 || k > r - b) {
    return c.fail(c.input_label(1, "indices") + " has last dim " + std::to_string(k) +
                  ", expected [1, " + std::to_string(r - b) + "]");
  }
  if (!c.constant_indices_in_range(1, [&](int64_t e) { return data[b + e % k]; })) return false;
  std::vector<int64_t> shape(idx.begin(), idx.end() - 1);
  shape.insert(shape.end(), data.begin() + b + k, data.end());
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_scatter_nd(Ctx& c) {
  std::string reduction;
  if (!c.arity(3, 3, 1, 1) || !c.dtype_in(0, "data", kAny) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK) || !c.dtype_in(1, "indices", kI64) ||
      !c.rank_between(1, "indices", 1, KITE_MAX_RANK) || !c.same_dtype(2, "updates", 0, "data") ||
      !c.attr_string("reduction", "none", &reduction)) {
    return false;
  }
  if (!scatter_reduction(c, reduction)) return false;
  const auto& data = c.shape(0);
  const auto& idx = c.shape(1);
  const int64_t k = idx.back();
  if (k < 1 || k > c.rank(0)) {
    return c.fail(c.input_label(1, "indices") + " has last dim " + std::to_string(k) +
                  ", expected [1, " + std::to_string(c.rank(0)) + "]");
  }
  std::vector<int64_t> expect(idx.begin(), idx.end() - 1);
  expect.insert(expect.end(), data.begin() + k, data.end());
  if (c.shape(2) != expect) {
    return c.fail(c.input_label(2, "updates") + " has shape " + shape_string(c.shape(2)) +
                  ", expected " + shape_string(expect));
  }
  if (!c.constant_indices_in_range(1, [&](int64_t e) { return data[e % k]; })) return false;
  return c.same_as_input(0, 0);
}

bool infer_depth_space(Ctx& c) {
  int64_t b = 0;
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "input", kAny) || !c.rank_is(0, "input", 4) ||
      !c.attr_int("blocksize", 0, &b)) {
    return false;
  }
  if (!c.has_attr("blocksize") || b < 1 || b > (int64_t{1} << 20)) {
    return c.fail("attribute 'blocksize' must be given and >= 1 (it is " + std::to_string(b) + ")");
  }
  std::vector<int64_t> s = c.shape(0);
  // mode: DepthToSpace's since opset 11; SpaceToDepth's in newer opsets.
  std::string mode;
  if (!c.attr_string("mode", "DCR", &mode)) return false;
  if (mode != "DCR" && mode != "CRD") {
    return c.fail("attribute 'mode' is '" + mode + "', expected DCR or CRD");
  }
  if (c.node.op == "DepthToSpace") {
    if (s[1] % (b * b) != 0) {
      return c.fail(c.input_label(0, "input") + " has " + std::to_string(s[1]) +
                    " channels, not a multiple of blocksize^2 = " + std::to_string(b * b));
    }
    s[1] /= b * b;
    if (!mul_ok(s[2], b, &s[2]) || !mul_ok(s[3], b, &s[3])) return c.overflow("the output shape");
  } else {
    if (s[2] % b != 0 || s[3] % b != 0) {
      return c.fail(c.input_label(0, "input") + " has shape " + shape_string(s) +
                    ": height and width must be multiples of blocksize " + std::to_string(b));
    }
    if (!mul_ok(s[1], b * b, &s[1])) return c.overflow("the output shape");
    s[2] /= b;
    s[3] /= b;
  }
  return c.set(0, c.in(0).dtype, s);
}

bool infer_topk(Ctx& c) {
  int64_t axis = -1;
  bool b = false;
  if (!c.arity(2, 2, 2, 2) || !c.dtype_in(0, "X", kNumeric) ||
      !c.rank_between(0, "X", 1, KITE_MAX_RANK) || !c.attr_int("axis", -1, &axis) ||
      !c.axis("attribute 'axis'", axis, c.rank(0), &axis) || !c.attr_bool("largest", true, &b) ||
      !c.attr_bool("sorted", true, &b)) {
    return false;
  }
  std::vector<int64_t> k;
  if (!c.read_ints(1, "K", kI64, true, 1, &k)) return false;
  if (k.size() != 1 || k[0] < 0 || k[0] > c.shape(0)[axis]) {
    return c.fail(c.input_label(1, "K") + " must hold one value in [0, " +
                  std::to_string(c.shape(0)[axis]) + "] (the size of axis " +
                  std::to_string(axis) + ")");
  }
  std::vector<int64_t> s = c.shape(0);
  s[axis] = k[0];
  return c.set(0, c.in(0).dtype, s) && c.set(1, KITE_DTYPE_INT64, s);
}

bool infer_onehot(Ctx& c) {
  int64_t axis = -1;
  if (!c.arity(3, 3, 1, 1) || !c.dtype_in(0, "indices", kNumeric) || !c.dtype_in(2, "values", kAny) ||
      !c.rank_is(2, "values", 1) || !c.numel_is(2, "values", 2) || !c.attr_int("axis", -1, &axis)) {
    return false;
  }
  double depth = 0;
  if (!c.read_scalar(1, "depth", &depth)) return false;
  if (!(depth >= 1 && depth <= 1e9)) {
    return c.fail(c.input_label(1, "depth") + " is " + std::to_string(depth) +
                  ", expected a positive number");
  }
  int64_t a = 0;
  if (!c.axis("attribute 'axis'", axis, c.rank(0) + 1, &a)) return false;
  std::vector<int64_t> s = c.shape(0);
  s.insert(s.begin() + a, static_cast<int64_t>(depth));
  return c.set(0, c.in(2).dtype, s);
}

bool infer_einsum(Ctx& c) {
  if (c.num_inputs() < 1) return c.fail("has no inputs, expected at least 1");
  if (!c.arity(c.num_inputs(), c.num_inputs(), 1, 1) ||
      !c.dtype_in(0, "Inputs", kF32 | kI32 | kI64)) {
    return false;
  }
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (i > 0 && !c.same_dtype(i, "Inputs", 0, "Inputs")) return false;
    shapes.push_back(c.shape(i));
  }
  std::string equation;
  if (!c.attr_string("equation", "", &equation)) return false;
  if (!c.has_attr("equation")) return c.fail("attribute 'equation' is required");
  EinsumPlan plan;
  std::string why;
  if (!resolve_einsum(equation, shapes, &plan, &why)) return c.fail(why);
  return c.set(0, c.in(0).dtype, plan.output_shape);
}

}  // namespace

const std::vector<OpRule>& indexing_rules() {
  static const std::vector<OpRule> rules = {
      {"IsNaN", infer_isnan},
      {"IsInf", infer_isnan},
      {"Mod", infer_mod},
      {"Trilu", infer_trilu},
      {"CumSum", infer_cumsum},
      {"GatherElements", infer_gather_elements},
      {"ScatterElements", infer_scatter_elements},
      {"GatherND", infer_gather_nd},
      {"ScatterND", infer_scatter_nd},
      {"DepthToSpace", infer_depth_space},
      {"SpaceToDepth", infer_depth_space},
      {"TopK", infer_topk},
      {"OneHot", infer_onehot},
      {"Einsum", infer_einsum},
  };
  return rules;
}

}  // namespace kite::ops::detail
