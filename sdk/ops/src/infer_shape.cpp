// Rules of the ops that move or reshape data: Reshape, Flatten, Concat,
// Transpose, Split, Slice, Gather, Squeeze, Unsqueeze, Expand, Tile, Shape,
// ConstantOfShape, Range, Pad, Resize.
#include <algorithm>
#include <cmath>

#include "infer_util.h"

namespace kite::ops::detail {
namespace {

std::string check_numel(const std::vector<TensorType>& declared, size_t k, int64_t numel) {
  if (k >= declared.size() || !declared[k].present) return "";
  if (declared[k].numel() != numel) {
    return out_label(declared, k) + " has shape " + shape_string(declared[k].shape) +
           " (" + std::to_string(declared[k].numel()) + " elements), expected " +
           std::to_string(numel) + " elements";
  }
  return "";
}

std::string check_rank(const std::vector<TensorType>& declared, size_t k, int rank) {
  if (k >= declared.size() || !declared[k].present) return "";
  if (declared[k].rank() != rank) {
    return out_label(declared, k) + " has " + std::to_string(declared[k].rank()) +
           " dims, expected " + std::to_string(rank);
  }
  return "";
}

bool infer_flatten(Ctx& c) {
  int64_t axis = 0;
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "input", kAny) || !c.attr_int("axis", 1, &axis)) {
    return false;
  }
  const int r = c.rank(0);
  if (axis < -r || axis > r) {
    return c.fail("attribute 'axis' is " + std::to_string(axis) + ", out of range [" +
                  std::to_string(-r) + ", " + std::to_string(r) + "]");
  }
  if (axis < 0) axis += r;
  const auto& s = c.shape(0);
  int64_t outer = 0, inner = 0;
  checked_numel({s.begin(), s.begin() + axis}, &outer);  // parts of a checked shape
  checked_numel({s.begin() + axis, s.end()}, &inner);
  return c.set(0, c.in(0).dtype, {outer, inner});
}

bool infer_reshape(Ctx& c) {
  bool allowzero = false;
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "data", kAny) || !c.dtype_in(1, "shape", kI64) ||
      !c.rank_is(1, "shape", 1) || !c.attr_bool("allowzero", false, &allowzero)) {
    return false;
  }
  const int64_t numel = c.in(0).numel();
  const int64_t out_rank = c.shape(1)[0];
  c.set_dtype(0, c.in(0).dtype);
  c.consistency = [numel, out_rank](const std::vector<TensorType>& declared) {
    std::string why = check_rank(declared, 0, static_cast<int>(std::min<int64_t>(out_rank, 1 << 20)));
    return why.empty() ? check_numel(declared, 0, numel) : why;
  };
  std::vector<int64_t> target;
  if (!c.read_ints(1, "shape", kI64, true, KITE_MAX_RANK, &target)) return false;
  const std::string what = c.input_label(1, "shape") + " " + ints_string(target);
  int infer_at = -1;
  int64_t known = 1;  // product of the dims other than -1
  std::vector<int64_t> shape = target;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == -1) {
      if (infer_at >= 0) return c.fail(what + " has more than one -1");
      infer_at = static_cast<int>(k);
      continue;
    }
    if (shape[k] == 0 && !allowzero) {
      if (k >= c.shape(0).size()) {
        return c.fail(what + " copies dim " + std::to_string(k) + " (0), but " +
                      c.input_label(0, "data") + " has only " + std::to_string(c.rank(0)) +
                      " dims");
      }
      shape[k] = c.shape(0)[k];
    }
    if (shape[k] < 0) return c.fail(what + " has invalid dim " + std::to_string(shape[k]));
    if (!mul_ok(known, shape[k], &known)) return c.overflow(what + ": the element count");
  }
  if (infer_at >= 0) {
    if (known == 0) {
      return c.fail(what + ": -1 cannot be inferred when the other dims hold 0 elements");
    }
    if (numel % known != 0) {
      return c.fail(what + " does not fit " + c.input_label(0, "data") + " of shape " +
                    shape_string(c.shape(0)) + " (" + std::to_string(numel) + " elements)");
    }
    shape[infer_at] = numel / known;
  } else if (known != numel) {
    return c.fail(what + " has " + std::to_string(known) + " elements, " +
                  c.input_label(0, "data") + " of shape " + shape_string(c.shape(0)) + " has " +
                  std::to_string(numel));
  }
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_concat(Ctx& c) {
  if (!c.arity(1, 1u << 16, 1, 1) || !c.dtype_in(0, "inputs", kAny)) return false;
  if (!c.has_attr("axis")) return c.fail("attribute 'axis' is required");
  int64_t axis = 0;
  if (!c.attr_int("axis", 0, &axis)) return false;
  const int r = c.rank(0);
  if (r == 0) return c.fail(c.input_label(0, "inputs") + " is a scalar; Concat needs rank >= 1");
  if (!c.axis("attribute 'axis'", axis, r, &axis)) return false;
  std::vector<int64_t> shape = c.shape(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.require(i, "inputs") || !c.same_dtype(i, "inputs", 0, "inputs") ||
        !c.rank_is(i, "inputs", r)) {
      return false;
    }
    for (int k = 0; k < r; ++k) {
      if (k == axis) continue;
      if (!c.dim_is(i, "inputs", k, shape[k], "as in " + c.input_label(0, "inputs"))) return false;
    }
    if (!add_ok(shape[axis], c.shape(i)[axis], &shape[axis])) {
      return c.overflow("the concatenated dim " + std::to_string(axis));
    }
  }
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_transpose(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "data", kAny)) return false;
  const int r = c.rank(0);
  std::vector<int64_t> perm;
  bool present = false;
  if (!c.attr_ints("perm", &perm, &present)) return false;
  if (!present) {
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  }
  if (perm.size() != static_cast<size_t>(r)) {
    return c.fail("attribute 'perm' " + ints_string(perm) + " has " + std::to_string(perm.size()) +
                  " values, " + c.input_label(0, "data") + " has " + std::to_string(r) + " dims");
  }
  std::vector<bool> seen(r, false);
  std::vector<int64_t> shape(r);
  for (int k = 0; k < r; ++k) {
    if (perm[k] < 0 || perm[k] >= r || seen[perm[k]]) {
      return c.fail("attribute 'perm' " + ints_string(perm) + " is not a permutation of 0.." +
                    std::to_string(r - 1));
    }
    seen[perm[k]] = true;
    shape[k] = c.shape(0)[perm[k]];
  }
  return c.set(0, c.in(0).dtype, shape);
}

}  // namespace

const std::vector<OpRule>& shape_rules() {
  static const std::vector<OpRule> rules = {
      {"Flatten", infer_flatten},
      {"Reshape", infer_reshape},
      {"Concat", infer_concat},
      {"Transpose", infer_transpose},
  };
  return rules;
}

}  // namespace kite::ops::detail
