// Ctx: checks and messages shared by all op rules.
#include <cmath>
#include <cstring>

#include "infer_util.h"
#include "kite/ops/half.h"

namespace kite::ops::detail {

std::string dtype_set_string(uint32_t set) {
  std::string s;
  for (int d = 1; d < 32; ++d) {
    if (!(set & (1u << d))) continue;
    if (!s.empty()) s += " or ";
    s += dtype_name(static_cast<kite_dtype>(d));
  }
  return s;
}

std::string ints_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(v[k]);
  }
  return s + "]";
}

Ctx::Ctx(const OpNode& n) : node(n) {
  if (n.num_outputs > 0) out.resize(static_cast<size_t>(n.num_outputs));
}

bool Ctx::fail(const std::string& what) {
  err = node.label() + ": " + what;
  return false;
}

bool Ctx::unknown(size_t i, const char* role) {
  value_unknown = true;
  return fail(input_label(i, role) + " value must be known at convert time (a constant)");
}

bool Ctx::overflow(const std::string& what) { return fail(what + " overflows int64"); }

std::string Ctx::input_label(size_t i, const char* role) const {
  if (i < node.inputs.size() && !node.inputs[i].name.empty()) {
    return "input '" + node.inputs[i].name + "'";
  }
  return "input " + std::to_string(i) + " (" + role + ")";
}

bool Ctx::arity(size_t required, size_t max_inputs, int min_outputs, int max_outputs) {
  size_t given = node.inputs.size();
  while (given > 0 && !node.inputs[given - 1].present) --given;
  if (given > max_inputs) {
    return fail("has " + std::to_string(given) + " inputs, expected at most " +
                std::to_string(max_inputs));
  }
  for (size_t i = 0; i < required; ++i) {
    if (!has(i)) {
      return fail("required input " + std::to_string(i) + " is missing (has " +
                  std::to_string(given) + " inputs, expected at least " +
                  std::to_string(required) + ")");
    }
  }
  if (node.num_outputs < min_outputs || node.num_outputs > max_outputs) {
    std::string expected = min_outputs == max_outputs
                               ? std::to_string(min_outputs)
                               : std::to_string(min_outputs) + ".." + std::to_string(max_outputs);
    return fail("has " + std::to_string(node.num_outputs) + " outputs, expected " + expected);
  }
  return true;
}

bool Ctx::require(size_t i, const char* role) {
  if (has(i)) return true;
  return fail("required input " + std::to_string(i) + " (" + role + ") is missing");
}

bool Ctx::dtype_in(size_t i, const char* role, uint32_t allowed) {
  const kite_dtype d = in(i).dtype;
  if (dtype_size(d) != 0 && (allowed & dtype_bit(d))) return true;
  return fail(input_label(i, role) + " has dtype " + dtype_name(d) + ", expected " +
              dtype_set_string(allowed));
}

bool Ctx::same_dtype(size_t i, const char* role, size_t j, const char* role_j) {
  if (in(i).dtype == in(j).dtype) return true;
  return fail(input_label(i, role) + " has dtype " + dtype_name(in(i).dtype) + ", expected " +
              dtype_name(in(j).dtype) + " (the dtype of " + input_label(j, role_j) + ")");
}

bool Ctx::rank_is(size_t i, const char* role, int r) {
  if (rank(i) == r) return true;
  return fail(input_label(i, role) + " has " + std::to_string(rank(i)) + " dims, expected " +
              std::to_string(r));
}

bool Ctx::rank_between(size_t i, const char* role, int lo, int hi) {
  if (rank(i) >= lo && rank(i) <= hi) return true;
  return fail(input_label(i, role) + " has " + std::to_string(rank(i)) + " dims, expected " +
              (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)));
}

bool Ctx::numel_is(size_t i, const char* role, int64_t n) {
  if (in(i).numel() == n) return true;
  return fail(input_label(i, role) + " has shape " + shape_string(shape(i)) + " (" +
              std::to_string(in(i).numel()) + " elements), expected " + std::to_string(n) +
              " elements");
}

bool Ctx::dim_is(size_t i, const char* role, int axis, int64_t value, const std::string& why) {
  if (shape(i)[axis] == value) return true;
  return fail(input_label(i, role) + " has shape " + shape_string(shape(i)) + ": dim " +
              std::to_string(axis) + " is " + std::to_string(shape(i)[axis]) + ", expected " +
              std::to_string(value) + (why.empty() ? "" : " (" + why + ")"));
}

namespace {
const char* attr_type_name(kite_attr_type t) {
  switch (t) {
    case KITE_ATTR_INT: return "INT";
    case KITE_ATTR_FLOAT: return "FLOAT";
    case KITE_ATTR_STRING: return "STRING";
    case KITE_ATTR_INTS: return "INTS";
    case KITE_ATTR_FLOATS: return "FLOATS";
    case KITE_ATTR_STRINGS: return "STRINGS";
    case KITE_ATTR_GRAPH: return "GRAPH";
    case KITE_ATTR_UNDEFINED: break;
  }
  return "UNDEFINED";
}
}  // namespace

#define KITE_ATTR_TYPE_CHECK(expected)                                                        \
  const Attr* a = node.find_attr(name);                                                       \
  if (a && a->type != (expected)) {                                                           \
    return fail(std::string("attribute '") + name + "' has type " + attr_type_name(a->type) + \
                ", expected " + attr_type_name(expected));                                    \
  }

bool Ctx::attr_int(const char* name, int64_t def, int64_t* v) {
  KITE_ATTR_TYPE_CHECK(KITE_ATTR_INT)
  *v = a ? a->i : def;
  return true;
}

bool Ctx::attr_bool(const char* name, bool def, bool* v) {
  int64_t i = 0;
  if (!attr_int(name, def ? 1 : 0, &i)) return false;
  if (i != 0 && i != 1) {
    return fail(std::string("attribute '") + name + "' is " + std::to_string(i) +
                ", expected 0 or 1");
  }
  *v = i == 1;
  return true;
}

bool Ctx::attr_float(const char* name, float def, float* v) {
  KITE_ATTR_TYPE_CHECK(KITE_ATTR_FLOAT)
  *v = a ? a->f : def;
  return true;
}

bool Ctx::attr_string(const char* name, const std::string& def, std::string* v) {
  KITE_ATTR_TYPE_CHECK(KITE_ATTR_STRING)
  *v = a ? a->s : def;
  return true;
}

bool Ctx::attr_ints(const char* name, std::vector<int64_t>* v, bool* present) {
  KITE_ATTR_TYPE_CHECK(KITE_ATTR_INTS)
  *present = a != nullptr;
  if (a) *v = a->ints;
  return true;
}

bool Ctx::attr_floats(const char* name, std::vector<float>* v, bool* present) {
  KITE_ATTR_TYPE_CHECK(KITE_ATTR_FLOATS)
  *present = a != nullptr;
  if (a) *v = a->floats;
  return true;
}

#undef KITE_ATTR_TYPE_CHECK

bool Ctx::axis(const std::string& what, int64_t value, int r, int64_t* normalized) {
  const int64_t a = normalize_axis(value, r);
  if (a < 0) {
    return fail(what + " is " + std::to_string(value) + ", out of range [" + std::to_string(-r) +
                ", " + std::to_string(r - 1) + "] for rank " + std::to_string(r));
  }
  *normalized = a;
  return true;
}

bool Ctx::axes(const std::string& what, const std::vector<int64_t>& values, int r,
               std::vector<int64_t>* normalized) {
  std::vector<int64_t> result(values.size());
  RuleError e;
  if (!resolved(normalize_axes(what.c_str(), values.data(), static_cast<int64_t>(values.size()), r,
                               result.data(), &e), e)) {
    return false;
  }
  *normalized = std::move(result);
  return true;
}

bool Ctx::value_count(size_t i, const char* role, size_t max_count, int64_t* n) {
  *n = in(i).numel();
  if (*n < 0 || static_cast<uint64_t>(*n) > max_count) {
    return fail(input_label(i, role) + " has " + std::to_string(*n) + " elements, expected at most " +
                std::to_string(max_count));
  }
  if (!in(i).data && *n > 0) return unknown(i, role);  // an empty value is always known
  return true;
}

bool Ctx::read_ints(size_t i, const char* role, uint32_t allowed, bool rank1, size_t max_count,
                    std::vector<int64_t>* v) {
  if (!dtype_in(i, role, allowed)) return false;
  if (rank1 ? !rank_is(i, role, 1) : !rank_between(i, role, 0, 1)) return false;
  int64_t n = 0;
  if (!value_count(i, role, max_count, &n)) return false;
  v->resize(static_cast<size_t>(n));
  const auto* bytes = static_cast<const unsigned char*>(in(i).data);
  for (int64_t k = 0; k < n; ++k) {
    if (in(i).dtype == KITE_DTYPE_INT64) {
      int64_t x = 0;
      std::memcpy(&x, bytes + k * 8, 8);
      (*v)[k] = x;
    } else {
      int32_t x = 0;
      std::memcpy(&x, bytes + k * 4, 4);
      (*v)[k] = x;
    }
  }
  return true;
}

bool Ctx::read_floats(size_t i, const char* role, size_t max_count, std::vector<float>* v) {
  if (!dtype_in(i, role, kFloat) || !rank_is(i, role, 1)) return false;
  int64_t n = 0;
  if (!value_count(i, role, max_count, &n)) return false;
  v->resize(static_cast<size_t>(n));
  if (in(i).dtype == KITE_DTYPE_FLOAT16) {
    const auto* bytes = static_cast<const unsigned char*>(in(i).data);
    for (int64_t k = 0; k < n; ++k) {
      uint16_t h;
      std::memcpy(&h, bytes + k * 2, 2);
      (*v)[static_cast<size_t>(k)] = half_to_float(h);
    }
  } else if (n > 0) {
    std::memcpy(v->data(), in(i).data, static_cast<size_t>(n) * 4);
  }
  return true;
}

bool Ctx::read_scalar(size_t i, const char* role, double* v) {
  if (!dtype_in(i, role, kNumeric | kBool)) return false;
  if (rank(i) > 1 || in(i).numel() != 1) {
    return fail(input_label(i, role) + " has shape " + shape_string(shape(i)) +
                ", expected a scalar");
  }
  if (!in(i).data) return unknown(i, role);
  const void* p = in(i).data;
  switch (in(i).dtype) {
    case KITE_DTYPE_FLOAT32: { float x; std::memcpy(&x, p, 4); *v = x; break; }
    case KITE_DTYPE_FLOAT16: { uint16_t x; std::memcpy(&x, p, 2); *v = half_to_float(x); break; }
    case KITE_DTYPE_INT64: { int64_t x; std::memcpy(&x, p, 8); *v = static_cast<double>(x); break; }
    case KITE_DTYPE_INT32: { int32_t x; std::memcpy(&x, p, 4); *v = x; break; }
    case KITE_DTYPE_INT8: { int8_t x; std::memcpy(&x, p, 1); *v = x; break; }
    case KITE_DTYPE_UINT8:
    case KITE_DTYPE_BOOL: { uint8_t x; std::memcpy(&x, p, 1); *v = x; break; }
    default: return fail(input_label(i, role) + " has an unreadable dtype");
  }
  return true;
}

bool Ctx::constant_indices_in_range(size_t i, const std::function<int64_t(int64_t)>& dim_of) {
  const TensorType& t = in(i);
  if (!t.data) return true;
  const int64_t n = t.numel();
  const auto* bytes = static_cast<const unsigned char*>(t.data);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = 0;
    if (t.dtype == KITE_DTYPE_INT64) {
      std::memcpy(&v, bytes + k * 8, 8);
    } else {
      int32_t v32 = 0;
      std::memcpy(&v32, bytes + k * 4, 4);
      v = v32;
    }
    const int64_t dim = dim_of(k);
    if (v < -dim || v >= dim) {
      return fail(input_label(i, "indices") + " holds " + std::to_string(v) + " at position " +
                  std::to_string(k) + ", out of range [" + std::to_string(-dim) + ", " +
                  std::to_string(dim - 1) + "]");
    }
  }
  return true;
}

bool Ctx::indices_fit_data(size_t i, size_t j, int64_t axis) {
  const auto& data = shape(j);
  const auto& idx = shape(i);
  for (int d = 0; d < rank(j); ++d) {
    if (d != axis && idx[d] > data[d]) {
      return fail(input_label(i, "indices") + " has shape " + shape_string(idx) +
                  ", larger than data's " + shape_string(data) + " in dim " + std::to_string(d));
    }
  }
  return true;
}

bool Ctx::set(int k, kite_dtype dtype, std::vector<int64_t> s) {
  if (k < 0 || static_cast<size_t>(k) >= out.size()) return true;  // output not requested
  if (s.size() > KITE_MAX_RANK) {
    return fail("output " + std::to_string(k) + " would have " + std::to_string(s.size()) +
                " dims, more than " + std::to_string(KITE_MAX_RANK));
  }
  uint64_t bytes = 0;
  if (!checked_byte_size(dtype, s, &bytes)) {
    for (int64_t d : s) {
      if (d < 0) {
        return fail("output " + std::to_string(k) + " would have shape " + shape_string(s) +
                    " with a negative dim");
      }
    }
    return overflow("output " + std::to_string(k) + " of shape " + shape_string(s) +
                    " has a byte size that");
  }
  out[k].present = true;
  out[k].dtype = dtype;
  out[k].shape = std::move(s);
  return true;
}

void Ctx::set_dtype(int k, kite_dtype dtype) {
  if (k >= 0 && static_cast<size_t>(k) < out.size()) out[k].dtype = dtype;
}

bool Ctx::same_as_input(int k, size_t i) { return set(k, in(i).dtype, in(i).shape); }

bool broadcast_inputs(Ctx& c, const std::vector<size_t>& inputs, const char* const* roles,
                      std::vector<int64_t>* out) {
  std::vector<int64_t> result;
  for (size_t n = 0; n < inputs.size(); ++n) {
    std::vector<int64_t> next;
    if (!broadcast_shapes(result, c.shape(inputs[n]), &next)) {
      std::string names;
      for (size_t m = 0; m <= n; ++m) {
        if (m) names += m == n ? " and " : ", ";
        names += c.input_label(inputs[m], roles[m]) + " (" + shape_string(c.shape(inputs[m])) + ")";
      }
      return c.fail("cannot broadcast " + names);
    }
    result = std::move(next);
  }
  *out = std::move(result);
  return true;
}

bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  std::vector<int64_t> b;
  return from.size() <= to.size() && broadcast_shapes(from, to, &b) && b == to;
}

std::string out_label(const std::vector<TensorType>& declared, size_t k) {
  if (k < declared.size() && !declared[k].name.empty()) return "output '" + declared[k].name + "'";
  return "output " + std::to_string(k);
}

}  // namespace kite::ops::detail
