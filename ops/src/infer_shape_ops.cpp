// Rules of the ops that move or reshape data: Reshape, Flatten, Concat,
// Transpose, Split, Slice, Gather, Squeeze, Unsqueeze, Expand, Tile, Shape,
// ConstantOfShape, Range, Pad, Resize.
#include <algorithm>
#include <cmath>
#include <cstring>

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

// Declared output 0 must have `rank` dims and `numel` elements (the
// value-unknown fallback of Reshape, Squeeze, Unsqueeze). A rank from a
// hostile value shape is clamped: no real output has 2^20 dims.
ConsistencyCheck rank_and_numel_check(int64_t rank, int64_t numel) {
  const int r = static_cast<int>(std::clamp<int64_t>(rank, -1, 1 << 20));
  return [r, numel](const std::vector<TensorType>& declared) {
    std::string why = check_rank(declared, 0, r);
    return why.empty() ? check_numel(declared, 0, numel) : why;
  };
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
  c.consistency = rank_and_numel_check(out_rank, numel);
  std::vector<int64_t> target;
  if (!c.read_ints(1, "shape", kI64, true, KITE_MAX_RANK, &target)) return false;
  std::vector<int64_t> shape(target.size());
  RuleError e;
  if (!c.resolved(resolve_reshape(c.shape(0).data(), c.rank(0), target.data(),
                                  static_cast<int64_t>(target.size()), allowzero, shape.data(), &e),
                  e)) {
    return false;
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
  int64_t resolved_perm[KITE_MAX_RANK];
  RuleError e;
  if (!c.resolved(resolve_perm(r, present ? perm.data() : nullptr, static_cast<int64_t>(perm.size()),
                               resolved_perm, &e),
                  e)) {
    return false;
  }
  std::vector<int64_t> shape(r);
  for (int k = 0; k < r; ++k) shape[k] = c.shape(0)[resolved_perm[k]];
  return c.set(0, c.in(0).dtype, shape);
}

// Declared outputs must have `rank` dims (value-unknown fallback).
ConsistencyCheck same_rank_check(int rank) {
  return [rank](const std::vector<TensorType>& declared) {
    for (size_t k = 0; k < declared.size(); ++k) {
      std::string why = check_rank(declared, k, rank);
      if (!why.empty()) return why;
    }
    return std::string();
  };
}

bool infer_split(Ctx& c) {
  if (!c.arity(1, 2, 1, KITE_MAX_RANK * 1024) || !c.dtype_in(0, "input", kAny) ||
      !c.rank_between(0, "input", 1, KITE_MAX_RANK)) {
    return false;
  }
  int64_t axis = 0;
  if (!c.attr_int("axis", 0, &axis) || !c.axis("attribute 'axis'", axis, c.rank(0), &axis)) {
    return false;
  }
  const size_t n = static_cast<size_t>(c.node.num_outputs);
  const std::vector<int64_t> in = c.shape(0);
  const int64_t dim = in[axis];
  std::vector<int64_t> sizes;
  bool attr_present = false;
  if (!c.attr_ints("split", &sizes, &attr_present)) return false;
  if (c.has(1)) {
    if (attr_present) return c.fail("split sizes given both as attribute and as input");
    for (size_t k = 0; k < n; ++k) c.set_dtype(static_cast<int>(k), c.in(0).dtype);
    c.consistency = [in, axis](const std::vector<TensorType>& declared) {
      int64_t total = 0;
      for (size_t k = 0; k < declared.size(); ++k) {
        if (!declared[k].present) return out_label(declared, k) + " is missing";
        std::vector<int64_t> expected = in;
        expected[axis] = declared[k].rank() == static_cast<int>(in.size()) ? declared[k].shape[axis] : -1;
        if (declared[k].shape != expected || !add_ok(total, expected[axis], &total)) {
          return out_label(declared, k) + " has shape " + shape_string(declared[k].shape) +
                 ", which is not a part of " + shape_string(in) + " along axis " +
                 std::to_string(axis);
        }
      }
      if (total != in[axis]) {
        return "the outputs' sizes along axis " + std::to_string(axis) + " add up to " +
               std::to_string(total) + ", expected " + std::to_string(in[axis]);
      }
      return std::string();
    };
    if (!c.read_ints(1, "split", kI64, true, n, &sizes)) return false;
  }
  const bool given = c.has(1) || attr_present;
  int64_t num_outputs_attr = 0;
  if (!c.attr_int("num_outputs", static_cast<int64_t>(n), &num_outputs_attr)) return false;
  if (!given && num_outputs_attr != static_cast<int64_t>(n)) {
    return c.fail("attribute 'num_outputs' is " + std::to_string(num_outputs_attr) +
                  ", the node has " + std::to_string(n) + " outputs");
  }
  if (given && sizes.size() != n) {
    const std::string what = c.has(1) ? c.input_label(1, "split") : "attribute 'split'";
    return c.fail(what + " " + ints_string(sizes) + " has " + std::to_string(sizes.size()) +
                  " sizes for " + std::to_string(n) + " outputs");
  }
  std::vector<int64_t> parts(n);
  RuleError e;
  // Opset 18's num_outputs allows a smaller last part.
  if (!c.resolved(resolve_split(dim, static_cast<int64_t>(n), given ? sizes.data() : nullptr,
                                c.has_attr("num_outputs"), parts.data(), &e),
                  e)) {
    return false;
  }
  sizes = std::move(parts);
  for (size_t k = 0; k < n; ++k) {
    std::vector<int64_t> shape = in;
    shape[axis] = sizes[k];
    if (!c.set(static_cast<int>(k), c.in(0).dtype, shape)) return false;
  }
  return true;
}

// Reads starts/ends/axes/steps of Slice from inputs (opset 10+) or
// attributes (opset < 10).
bool infer_slice(Ctx& c) {
  if (!c.arity(1, 5, 1, 1) || !c.dtype_in(0, "data", kAny) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK)) {
    return false;
  }
  const int r = c.rank(0);
  const std::vector<int64_t> in = c.shape(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.num_inputs() > 1) {
    if (c.has_attr("starts") || c.has_attr("ends")) {
      return c.fail("starts/ends given both as attributes and as inputs");
    }
    static const char* const kRoles[] = {"data", "starts", "ends", "axes", "steps"};
    if (!c.require(1, "starts") || !c.require(2, "ends")) return false;
    const int64_t count = c.shape(1).empty() ? 1 : c.shape(1)[0];
    for (size_t i = 1; i < 5; ++i) {
      if (!c.has(i)) continue;
      if (!c.dtype_in(i, kRoles[i], kIndex) || !c.same_dtype(i, kRoles[i], 1, "starts") ||
          !c.rank_is(i, kRoles[i], 1) || !c.dim_is(i, kRoles[i], 0, count, "as many as starts")) {
        return false;
      }
    }
    if (count > r) {
      return c.fail(c.input_label(1, "starts") + " has " + std::to_string(count) +
                    " values, " + c.input_label(0, "data") + " has " + std::to_string(r) + " dims");
    }
    c.set_dtype(0, c.in(0).dtype);
    c.consistency = [in](const std::vector<TensorType>& declared) {
      std::string why = check_rank(declared, 0, static_cast<int>(in.size()));
      if (!why.empty()) return why;
      for (size_t k = 0; k < in.size(); ++k) {
        if (declared[0].shape[k] > in[k]) {
          return out_label(declared, 0) + " has shape " + shape_string(declared[0].shape) +
                 ", larger than the sliced input " + shape_string(in);
        }
      }
      return std::string();
    };
    for (size_t i = 1; i < 5; ++i) {
      if (!c.has(i)) continue;
      std::vector<int64_t>* dst = i == 1 ? &starts : i == 2 ? &ends : i == 3 ? &axes : &steps;
      if (!c.read_ints(i, kRoles[i], kIndex, true, KITE_MAX_RANK, dst)) return false;
    }
  } else {
    bool has_starts = false, has_ends = false, has_axes = false;
    if (!c.attr_ints("starts", &starts, &has_starts) || !c.attr_ints("ends", &ends, &has_ends) ||
        !c.attr_ints("axes", &axes, &has_axes)) {
      return false;
    }
    if (!has_starts || !has_ends) return c.fail("input 'starts' and 'ends' are required");
    if (starts.size() != ends.size() || (has_axes && axes.size() != starts.size()) ||
        starts.size() > static_cast<size_t>(r)) {
      return c.fail("attributes 'starts' " + ints_string(starts) + ", 'ends' " + ints_string(ends) +
                    " and 'axes' " + ints_string(axes) + " do not fit rank " + std::to_string(r));
    }
  }
  SliceSpec spec;
  spec.starts = starts.data();
  spec.ends = ends.data();
  spec.axes = axes.empty() ? nullptr : axes.data();
  spec.steps = steps.empty() ? nullptr : steps.data();
  spec.count = static_cast<int64_t>(starts.size());
  SliceAxis sliced[KITE_MAX_RANK];
  RuleError e;
  if (!c.resolved(resolve_slice(in.data(), r, spec, sliced, &e), e)) return false;
  std::vector<int64_t> shape(in.size());
  for (size_t k = 0; k < in.size(); ++k) shape[k] = sliced[k].count;
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_gather(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "data", kAny) ||
      !c.rank_between(0, "data", 1, KITE_MAX_RANK) || !c.dtype_in(1, "indices", kIndex)) {
    return false;
  }
  int64_t axis = 0;
  if (!c.attr_int("axis", 0, &axis) || !c.axis("attribute 'axis'", axis, c.rank(0), &axis)) {
    return false;
  }
  const auto& data = c.shape(0);
  const int64_t dim = data[axis];
  // Constant indices are checked here; a kernel must still bounds-check
  // indices that arrive at run time.
  if (!c.constant_indices_in_range(1, [dim](int64_t) { return dim; })) return false;
  const TensorType& indices = c.in(1);
  std::vector<int64_t> shape(data.begin(), data.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.begin() + axis + 1, data.end());
  return c.set(0, c.in(0).dtype, shape);
}

// The axes of Squeeze/Unsqueeze: input 1 (opset 13+) or attribute.
// Returns false on error or unknown value; *given tells if any were given.
bool squeeze_axes(Ctx& c, std::vector<int64_t>* axes, bool* given) {
  bool attr_present = false;
  if (!c.attr_ints("axes", axes, &attr_present)) return false;
  if (c.has(1)) {
    if (attr_present) return c.fail("axes given both as attribute and as input");
    *given = true;
    return c.read_ints(1, "axes", kI64, true, KITE_MAX_RANK, axes);
  }
  *given = attr_present;
  return true;
}

bool infer_squeeze(Ctx& c) {
  if (!c.arity(1, 2, 1, 1) || !c.dtype_in(0, "data", kAny)) return false;
  const std::vector<int64_t> in = c.shape(0);
  const int64_t numel = c.in(0).numel();
  if (c.has(1) && c.in(1).rank() == 1) {
    c.set_dtype(0, c.in(0).dtype);
    c.consistency = rank_and_numel_check(c.rank(0) - c.shape(1)[0], numel);
  }
  std::vector<int64_t> axes;
  bool given = false;
  if (!squeeze_axes(c, &axes, &given)) return false;
  std::vector<int64_t> shape(in.size());
  int64_t out_rank = 0;
  RuleError e;
  if (!c.resolved(resolve_squeeze(in.data(), c.rank(0), axes.data(), static_cast<int64_t>(axes.size()),
                                  given, shape.data(), &out_rank, &e),
                  e)) {
    return false;
  }
  shape.resize(static_cast<size_t>(out_rank));
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_unsqueeze(Ctx& c) {
  if (!c.arity(1, 2, 1, 1) || !c.dtype_in(0, "data", kAny)) return false;
  const int64_t numel = c.in(0).numel();
  if (c.has(1) && c.in(1).rank() == 1) {
    c.set_dtype(0, c.in(0).dtype);
    c.consistency = rank_and_numel_check(c.rank(0) + c.shape(1)[0], numel);
  }
  std::vector<int64_t> axes;
  bool given = false;
  if (!squeeze_axes(c, &axes, &given)) return false;
  if (!given) return c.fail("axes are required (input 1, or attribute 'axes' before opset 13)");
  int64_t shape[KITE_MAX_RANK];
  int64_t out_rank = 0;
  RuleError e;
  if (!c.resolved(resolve_unsqueeze(c.shape(0).data(), c.rank(0), axes.data(),
                                    static_cast<int64_t>(axes.size()), shape, &out_rank, &e),
                  e)) {
    return false;
  }
  return c.set(0, c.in(0).dtype, {shape, shape + out_rank});
}

bool infer_expand(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "input", kAny)) return false;
  const std::vector<int64_t> in = c.shape(0);
  c.set_dtype(0, c.in(0).dtype);
  c.consistency = [in](const std::vector<TensorType>& declared) {
    if (declared.empty() || !declared[0].present) return std::string();
    std::vector<int64_t> b;
    if (!broadcast_shapes(in, declared[0].shape, &b) || b != declared[0].shape) {
      return out_label(declared, 0) + " has shape " + shape_string(declared[0].shape) +
             ", not a broadcast of the input's " + shape_string(in);
    }
    return std::string();
  };
  std::vector<int64_t> target;
  if (!c.read_ints(1, "shape", kI64, true, KITE_MAX_RANK, &target)) return false;
  int64_t shape[KITE_MAX_RANK];
  int64_t out_rank = 0;
  RuleError e;
  if (!c.resolved(resolve_expand(in.data(), c.rank(0), target.data(),
                                 static_cast<int64_t>(target.size()), shape, &out_rank, &e),
                  e)) {
    return false;
  }
  return c.set(0, c.in(0).dtype, {shape, shape + out_rank});
}

bool infer_tile(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "input", kAny) || !c.dtype_in(1, "repeats", kI64) ||
      !c.rank_is(1, "repeats", 1) || !c.dim_is(1, "repeats", 0, c.rank(0), "one per input dim")) {
    return false;
  }
  const std::vector<int64_t> in = c.shape(0);
  c.set_dtype(0, c.in(0).dtype);
  c.consistency = [in](const std::vector<TensorType>& declared) {
    std::string why = check_rank(declared, 0, static_cast<int>(in.size()));
    if (!why.empty()) return why;
    for (size_t k = 0; k < in.size(); ++k) {
      const int64_t d = declared[0].shape[k];
      if (in[k] == 0 ? d != 0 : d % in[k] != 0) {
        return out_label(declared, 0) + " has shape " + shape_string(declared[0].shape) +
               ", not a tiling of " + shape_string(in);
      }
    }
    return std::string();
  };
  std::vector<int64_t> repeats;
  if (!c.read_ints(1, "repeats", kI64, true, KITE_MAX_RANK, &repeats)) return false;
  std::vector<int64_t> shape(in.size());
  RuleError e;
  if (!c.resolved(resolve_tile(in.data(), c.rank(0), repeats.data(), shape.data(), &e), e)) {
    return false;
  }
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_shape_op(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "data", kAny)) return false;
  const int64_t r = c.rank(0);
  int64_t start = 0, end = 0;
  if (!c.attr_int("start", 0, &start) || !c.attr_int("end", r, &end)) return false;
  int64_t begin = 0, stop = 0;
  shape_op_range(r, start, end, &begin, &stop);
  return c.set(0, KITE_DTYPE_INT64, {stop - begin});
}

bool infer_size(Ctx& c) {
  return c.arity(1, 1, 1, 1) && c.dtype_in(0, "data", kAny) && c.set(0, KITE_DTYPE_INT64, {});
}

// ConstantOfShape: the importer turns the TENSOR attribute 'value' into
// 'value' (FLOATS or INTS, one element) and 'value_dtype' (a kite_dtype).
bool infer_constant_of_shape(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "input", kI64) || !c.rank_is(0, "input", 1)) {
    return false;
  }
  int64_t raw = 0;
  if (!c.attr_int("value_dtype", KITE_DTYPE_FLOAT32, &raw)) return false;
  if (raw <= KITE_DTYPE_UNDEFINED || raw > KITE_DTYPE_UINT8) {
    return c.fail("attribute 'value_dtype' is " + std::to_string(raw) + ", not a kite dtype");
  }
  const kite_dtype dtype = static_cast<kite_dtype>(raw);
  const bool is_float = dtype == KITE_DTYPE_FLOAT32 || dtype == KITE_DTYPE_FLOAT16;
  const Attr* value = c.node.find_attr("value");
  if (value) {
    const kite_attr_type expected = is_float ? KITE_ATTR_FLOATS : KITE_ATTR_INTS;
    const size_t count = is_float ? value->floats.size() : value->ints.size();
    if (value->type != expected || count != 1) {
      return c.fail(std::string("attribute 'value' must hold one ") + (is_float ? "float" : "int") +
                    " for value_dtype " + dtype_name(dtype));
    }
  }
  const int64_t out_rank = c.shape(0)[0];
  c.set_dtype(0, dtype);
  c.consistency = [out_rank](const std::vector<TensorType>& declared) {
    return check_rank(declared, 0, static_cast<int>(std::min<int64_t>(out_rank, 1 << 20)));
  };
  std::vector<int64_t> shape;
  if (!c.read_ints(0, "input", kI64, true, KITE_MAX_RANK, &shape)) return false;
  for (int64_t v : shape) {
    if (v < 0) return c.fail(c.input_label(0, "input") + " " + ints_string(shape) + " has a negative dim");
  }
  return c.set(0, dtype, shape);
}

bool infer_range(Ctx& c) {
  static const char* const kRoles[] = {"start", "limit", "delta"};
  if (!c.arity(3, 3, 1, 1) || !c.dtype_in(0, "start", kF32 | kI32 | kI64)) return false;
  for (size_t i = 0; i < 3; ++i) {
    if (!c.same_dtype(i, kRoles[i], 0, "start")) return false;
    if (c.rank(i) > 1 || c.in(i).numel() != 1) {
      return c.fail(c.input_label(i, kRoles[i]) + " has shape " + shape_string(c.shape(i)) +
                    ", expected a scalar");
    }
  }
  const kite_dtype dtype = c.in(0).dtype;
  c.set_dtype(0, dtype);
  c.consistency = same_rank_check(1);
  int64_t n = 0;
  RuleError e;
  if (dtype == KITE_DTYPE_FLOAT32) {
    double v[3];
    for (size_t i = 0; i < 3; ++i) {
      if (!c.read_scalar(i, kRoles[i], &v[i])) return false;
    }
    if (!c.resolved(range_length(static_cast<float>(v[0]), static_cast<float>(v[1]),
                                 static_cast<float>(v[2]), &n, &e),
                    e)) {
      return false;
    }
  } else {
    std::vector<int64_t> v[3];
    for (size_t i = 0; i < 3; ++i) {
      if (!c.read_ints(i, kRoles[i], kIndex, false, 1, &v[i])) return false;
    }
    if (!c.resolved(range_length(v[0][0], v[1][0], v[2][0], &n, &e), e)) return false;
  }
  return c.set(0, dtype, {n});
}

bool infer_pad(Ctx& c) {
  if (!c.arity(1, 4, 1, 1) || !c.dtype_in(0, "data", kAny)) return false;
  const int r = c.rank(0);
  const std::vector<int64_t> in = c.shape(0);
  std::string mode_name;
  PadMode mode = PadMode::kConstant;
  if (!c.attr_string("mode", "constant", &mode_name)) return false;
  if (!parse_pad_mode(mode_name.c_str(), &mode)) {
    return c.fail("attribute 'mode' is '" + mode_name + "', expected constant, reflect, edge or wrap");
  }
  if (c.has(2)) {
    if (!c.same_dtype(2, "constant_value", 0, "data")) return false;
    if (c.rank(2) > 1 || c.in(2).numel() != 1) {
      return c.fail(c.input_label(2, "constant_value") + " has shape " + shape_string(c.shape(2)) +
                    ", expected a scalar");
    }
  }
  std::vector<int64_t> pads, axes;
  bool attr_present = false;
  if (!c.attr_ints("pads", &pads, &attr_present)) return false;
  if (c.has(1)) {
    if (attr_present) return c.fail("pads given both as attribute and as input");
    if (!c.dtype_in(1, "pads", kI64) || !c.rank_is(1, "pads", 1)) return false;
    if (c.has(3) && (!c.dtype_in(3, "axes", kIndex) || !c.rank_is(3, "axes", 1))) return false;
    const int64_t padded_axes = c.has(3) ? c.shape(3)[0] : r;
    if (padded_axes > r || c.shape(1)[0] != 2 * padded_axes) {
      return c.fail(c.input_label(1, "pads") + " has " + std::to_string(c.shape(1)[0]) +
                    " values, expected " + std::to_string(2 * padded_axes));
    }
    c.set_dtype(0, c.in(0).dtype);
    c.consistency = same_rank_check(r);
    if (!c.read_ints(1, "pads", kI64, true, 2 * KITE_MAX_RANK, &pads)) return false;
    if (c.has(3) && !c.read_ints(3, "axes", kIndex, true, KITE_MAX_RANK, &axes)) return false;
  } else if (!attr_present) {
    return c.fail("pads are required (input 1, or attribute 'pads' before opset 11)");
  } else if (c.has(3)) {
    return c.fail("input 'axes' needs pads as an input");
  }
  PadAxis padded[KITE_MAX_RANK];
  RuleError e;
  if (!c.resolved(resolve_pad(in.data(), r, mode, pads.data(), static_cast<int64_t>(pads.size()),
                              c.has(3) ? axes.data() : nullptr, static_cast<int64_t>(axes.size()),
                              padded, &e),
                  e)) {
    return false;
  }
  std::vector<int64_t> shape(in.size());
  for (size_t k = 0; k < in.size(); ++k) shape[k] = padded[k].out;
  return c.set(0, c.in(0).dtype, shape);
}

bool one_of(Ctx& c, const char* name, const std::string& def,
            std::initializer_list<const char*> allowed) {
  std::string v;
  if (!c.attr_string(name, def, &v)) return false;
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return true;
    list += list.empty() ? a : std::string(", ") + a;
  }
  return c.fail(std::string("attribute '") + name + "' is '" + v + "', expected one of " + list);
}

// Resize (opset 11+): X, roi, scales, sizes; exactly one of scales/sizes.
bool infer_resize(Ctx& c) {
  if (!c.arity(1, 4, 1, 1) || !c.dtype_in(0, "X", kFloat | kI8 | kU8) ||
      !c.rank_between(0, "X", 1, KITE_MAX_RANK)) {
    return false;
  }
  if (!one_of(c, "mode", "nearest", {"nearest", "linear", "cubic"}) ||
      !one_of(c, "coordinate_transformation_mode", "half_pixel",
              {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize"}) ||
      !one_of(c, "nearest_mode", "round_prefer_floor",
              {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) ||
      !one_of(c, "keep_aspect_ratio_policy", "stretch", {"stretch", "not_larger", "not_smaller"})) {
    return false;
  }
  bool flag = false;
  float f = 0;
  if (!c.attr_bool("exclude_outside", false, &flag) || !c.attr_bool("antialias", false, &flag) ||
      !c.attr_float("cubic_coeff_a", -0.75f, &f) || !c.attr_float("extrapolation_value", 0.0f, &f)) {
    return false;
  }
  const int r = c.rank(0);
  const std::vector<int64_t> in = c.shape(0);
  std::vector<int64_t> axes;
  bool has_axes = false;
  if (!c.attr_ints("axes", &axes, &has_axes)) return false;
  if (!has_axes) {
    for (int k = 0; k < r; ++k) axes.push_back(k);
  }
  if (!c.axes("attribute 'axes'", axes, r, &axes)) return false;
  const int64_t n = static_cast<int64_t>(axes.size());
  // An empty scales tensor stands for an absent one (opset 11-12).
  const bool has_scales = c.has(2) && c.in(2).numel() != 0;
  const bool has_sizes = c.has(3) && c.in(3).numel() != 0;
  if (has_scales == has_sizes) return c.fail("exactly one of scales and sizes must be given");
  const size_t i = has_scales ? 2 : 3;
  const char* role = has_scales ? "scales" : "sizes";
  if (!c.dtype_in(i, role, has_scales ? kF32 : kI64) || !c.rank_is(i, role, 1) ||
      !c.dim_is(i, role, 0, n, "one per resized axis")) {
    return false;
  }
  std::string ctm;
  c.attr_string("coordinate_transformation_mode", "half_pixel", &ctm);
  const bool crop = ctm == "tf_crop_and_resize";
  if (crop && (!c.has(1) || !c.dtype_in(1, "roi", kFloat) || !c.rank_is(1, "roi", 1) ||
               !c.dim_is(1, "roi", 0, 2 * n, "start and end per resized axis"))) {
    return c.has(1) ? false : c.fail("tf_crop_and_resize needs the roi input");
  }
  c.set_dtype(0, c.in(0).dtype);
  c.consistency = same_rank_check(r);
  std::vector<float> scales, roi;
  std::vector<int64_t> sizes;
  if (has_scales) {
    if (!c.read_floats(2, "scales", KITE_MAX_RANK, &scales)) return false;
    if (crop && !c.read_floats(1, "roi", 2 * KITE_MAX_RANK, &roi)) return false;
  } else if (!c.read_ints(3, "sizes", kI64, true, KITE_MAX_RANK, &sizes)) {
    return false;
  }
  std::string policy_name;
  c.attr_string("keep_aspect_ratio_policy", "stretch", &policy_name);
  AspectPolicy policy = AspectPolicy::kStretch;
  parse_aspect_policy(policy_name.c_str(), &policy);  // one_of checked the name
  ResizeAxis resized[KITE_MAX_RANK];
  RuleError e;
  if (!c.resolved(resolve_resize(in.data(), r, axes.data(), n, has_scales ? scales.data() : nullptr,
                                 has_scales ? nullptr : sizes.data(), crop ? roi.data() : nullptr,
                                 policy, resized, &e),
                  e)) {
    return false;
  }
  std::vector<int64_t> shape(in.size());
  for (size_t k = 0; k < in.size(); ++k) shape[k] = resized[k].out;
  return c.set(0, c.in(0).dtype, shape);
}

bool infer_if(Ctx& c) {
  return c.fail("output types cannot be inferred from the node alone: they come from its "
                "then_branch and else_branch (the converter infers If itself)");
}

}  // namespace

const std::vector<OpRule>& shape_rules() {
  static const std::vector<OpRule> rules = {
      {"Flatten", infer_flatten},
      {"Reshape", infer_reshape},
      {"Concat", infer_concat},
      {"Transpose", infer_transpose},
      {"Split", infer_split},
      {"Slice", infer_slice},
      {"Gather", infer_gather},
      {"Squeeze", infer_squeeze},
      {"Unsqueeze", infer_unsqueeze},
      {"Expand", infer_expand},
      {"Tile", infer_tile},
      {"Shape", infer_shape_op},
      {"Size", infer_size},
      {"ConstantOfShape", infer_constant_of_shape},
      {"Range", infer_range},
      {"Pad", infer_pad},
      {"Resize", infer_resize},
      {"If", infer_if},
  };
  return rules;
}

}  // namespace kite::ops::detail
