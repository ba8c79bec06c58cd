// Resolved op parameters (kite/ops/resolve.h): allocation-free and
// overflow-checked, shared by the op rules and the kernels.
#include "kite/ops/resolve.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "kite/ops/half.h"

namespace kite::ops {
namespace {

inline bool add_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_add_overflow(a, b, r); }
inline bool mul_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_mul_overflow(a, b, r); }

// |v| as unsigned: -INT64_MIN does not fit int64.
inline uint64_t magnitude(int64_t v) {
  return v >= 0 ? static_cast<uint64_t>(v) : static_cast<uint64_t>(-(v + 1)) + 1u;
}

}  // namespace

// ----------------------------------------------------------- RuleError --

bool RuleError::fail(const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(message, sizeof(message), format, ap);
  va_end(ap);
  return false;
}

void RuleError::append(const char* text) {
  const size_t used = std::strlen(message);
  if (used + 1 >= sizeof(message)) return;
  std::snprintf(message + used, sizeof(message) - used, "%s", text);
}

void RuleError::append_ints(const int64_t* values, int64_t count) {
  append("[");
  for (int64_t k = 0; k < count; ++k) {
    char item[32];
    std::snprintf(item, sizeof(item), "%s%lld", k ? ", " : "", static_cast<long long>(values[k]));
    append(item);
  }
  append("]");
}

bool RuleError::fail_values(const char* what, const int64_t* values, int64_t count,
                            const char* format, ...) {
  fail("%s ", what);
  append_ints(values, std::min<int64_t>(count, 2 * KITE_MAX_RANK));
  char tail[160];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(tail, sizeof(tail), format, ap);
  va_end(ap);
  append(tail);
  return false;
}

// ---------------------------------------------------------------- axes --

int64_t normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
}

bool normalize_axes(const char* what, const int64_t* axes, int64_t n, int64_t rank, int64_t* out,
                    RuleError* err) {
  bool seen[KITE_MAX_RANK * 2] = {};
  if (rank > KITE_MAX_RANK * 2) return err->fail("%s: rank %lld is too large", what, static_cast<long long>(rank));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t a = normalize_axis(axes[k], rank);
    if (a < 0) {
      return err->fail_values(what, axes, n, ": axis %lld is out of range [%lld, %lld] for rank %lld",
                              static_cast<long long>(axes[k]), static_cast<long long>(-rank),
                              static_cast<long long>(rank - 1), static_cast<long long>(rank));
    }
    if (seen[a]) return err->fail_values(what, axes, n, " names axis %lld twice", static_cast<long long>(a));
    seen[a] = true;
    out[k] = a;
  }
  return true;
}

// --------------------------------------------------------------- Slice --

SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceAxis r;
  // A negative start/end counts from the end: v + dim, for v < 0 <= dim,
  // cannot overflow.
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    // 0 <= end - start <= dim: no overflow, and no `+ step - 1` either.
    if (end > start) r.count = (end - start - 1) / step + 1;
  } else if (dim > 0) {  // an empty dim gives nothing (and [0, dim - 1] is no range)
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    if (start > end) {
      r.count = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / magnitude(step)) + 1;
    }
  }
  if (r.count > 0) r.start = start;
  if (r.count > 1) r.step = step;  // else it never moves: 1 keeps offsets small
  return r;
}

bool resolve_slice(const int64_t* dims, int64_t rank, const SliceSpec& spec, SliceAxis* out,
                   RuleError* err) {
  if (rank < 0 || rank > KITE_MAX_RANK) {
    return err->fail("input has %lld dims, at most %d are supported", static_cast<long long>(rank),
                     KITE_MAX_RANK);
  }
  if (spec.count < 0 || spec.count > rank) {
    return err->fail("starts has %lld values, the input has %lld dims",
                     static_cast<long long>(spec.count), static_cast<long long>(rank));
  }
  for (int64_t d = 0; d < rank; ++d) out[d] = slice_axis(dims[d], 0, dims[d], 1);
  int64_t given[KITE_MAX_RANK] = {}, axes[KITE_MAX_RANK] = {};
  for (int64_t k = 0; k < spec.count; ++k) given[k] = spec.axes ? spec.axes[k] : k;
  if (!normalize_axes("Slice axes", given, spec.count, rank, axes, err)) return false;
  for (int64_t k = 0; k < spec.count; ++k) {
    const int64_t step = spec.steps ? spec.steps[k] : 1;
    if (step == 0) return err->fail_values("Slice steps", spec.steps, spec.count, " has a 0 step");
    out[axes[k]] = slice_axis(dims[axes[k]], spec.starts[k], spec.ends[k], step);
  }
  return true;
}

// ----------------------------------------------------------------- Pad --

bool parse_pad_mode(const char* name, PadMode* out) {
  static const struct {
    const char* name;
    PadMode mode;
  } kModes[] = {{"constant", PadMode::kConstant},
                {"reflect", PadMode::kReflect},
                {"edge", PadMode::kEdge},
                {"wrap", PadMode::kWrap}};
  for (const auto& m : kModes) {
    if (std::strcmp(name, m.name) == 0) {
      *out = m.mode;
      return true;
    }
  }
  return false;
}

const char* pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::kReflect: return "reflect";
    case PadMode::kEdge: return "edge";
    case PadMode::kWrap: return "wrap";
    case PadMode::kConstant: break;
  }
  return "constant";
}

bool resolve_pad(const int64_t* dims, int64_t rank, PadMode mode, const int64_t* pads,
                 int64_t num_pads, const int64_t* axes, int64_t naxes, PadAxis* out,
                 RuleError* err) {
  if (rank < 0 || rank > KITE_MAX_RANK) {
    return err->fail("input has %lld dims, at most %d are supported", static_cast<long long>(rank),
                     KITE_MAX_RANK);
  }
  if (!axes) naxes = rank;
  if (naxes < 0 || naxes > rank) {
    return err->fail("axes has %lld values, the input has %lld dims", static_cast<long long>(naxes),
                     static_cast<long long>(rank));
  }
  if (num_pads != 2 * naxes) {
    return err->fail_values("pads", pads, num_pads, " has %lld values, expected %lld",
                            static_cast<long long>(num_pads), static_cast<long long>(2 * naxes));
  }
  int64_t given[KITE_MAX_RANK] = {}, normalized[KITE_MAX_RANK] = {};
  for (int64_t k = 0; k < naxes; ++k) given[k] = axes ? axes[k] : k;
  if (!normalize_axes("Pad axes", given, naxes, rank, normalized, err)) return false;
  for (int64_t d = 0; d < rank; ++d) out[d] = PadAxis{0, dims[d], 0, 0, dims[d]};
  for (int64_t k = 0; k < naxes; ++k) {
    const int64_t a = normalized[k], dim = dims[a], pb = pads[k], pe = pads[k + naxes];
    const long long axis = static_cast<long long>(a);
    PadAxis& p = out[a];
    // Negative pads crop first: together they may remove at most dim.
    const uint64_t crop_begin = pb < 0 ? magnitude(pb) : 0, crop_end = pe < 0 ? magnitude(pe) : 0;
    if (crop_begin > static_cast<uint64_t>(dim) ||
        crop_end > static_cast<uint64_t>(dim) - crop_begin) {
      return err->fail_values("pads", pads, num_pads, " on axis %lld remove more than the %lld elements there",
                              axis, static_cast<long long>(dim));
    }
    p.crop = static_cast<int64_t>(crop_begin);
    p.kept = dim - p.crop - static_cast<int64_t>(crop_end);
    p.begin = std::max<int64_t>(pb, 0);
    p.end = std::max<int64_t>(pe, 0);
    if (!add_ok(p.kept, p.begin, &p.out) || !add_ok(p.out, p.end, &p.out)) {
      return err->fail_values("pads", pads, num_pads, " on axis %lld overflows int64", axis);
    }
    const int64_t grow = std::max(p.begin, p.end);
    if (grow == 0 || mode == PadMode::kConstant) continue;
    const long long kept = static_cast<long long>(p.kept);
    if (p.kept < 1) {
      return err->fail_values("pads", pads, num_pads, " on axis %lld: mode %s cannot pad an empty axis",
                              axis, pad_mode_name(mode));
    }
    if (mode == PadMode::kReflect && grow >= p.kept) {
      return err->fail_values("pads", pads, num_pads,
                              " on axis %lld: reflect pads must be smaller than the size %lld", axis, kept);
    }
    if (mode == PadMode::kWrap && grow > p.kept) {
      return err->fail_values("pads", pads, num_pads,
                              " on axis %lld: wrap pads must not exceed the size %lld", axis, kept);
    }
  }
  return true;
}

// ---------------------------------------------------- Expand, Tile, ... --

bool broadcast_dims(const int64_t* a, int64_t na, const int64_t* b, int64_t nb, int64_t* out,
                    int64_t* out_rank) {
  const int64_t rank = std::max(na, nb);
  for (int64_t k = 0; k < rank; ++k) {
    // Align from the right; a missing leading dim acts as 1.
    const int64_t da = k < rank - na ? 1 : a[k - (rank - na)];
    const int64_t db = k < rank - nb ? 1 : b[k - (rank - nb)];
    if (da < 0 || db < 0) return false;
    if (da == db || db == 1) {
      out[k] = da;
    } else if (da == 1) {
      out[k] = db;
    } else {
      return false;
    }
  }
  *out_rank = rank;
  return true;
}

bool resolve_expand(const int64_t* in, int64_t rank, const int64_t* target, int64_t n,
                    int64_t* out, int64_t* out_rank, RuleError* err) {
  for (int64_t k = 0; k < n; ++k) {
    if (target[k] < 0) return err->fail_values("shape", target, n, " has a negative dim");
  }
  if (n > KITE_MAX_RANK || !broadcast_dims(in, rank, target, n, out, out_rank)) {
    err->fail_values("the input of shape", in, rank, " cannot be expanded to shape ");
    err->append_ints(target, std::min<int64_t>(n, KITE_MAX_RANK));
    return false;
  }
  return true;
}

bool resolve_tile(const int64_t* in, int64_t rank, const int64_t* repeats, int64_t* out,
                  RuleError* err) {
  for (int64_t k = 0; k < rank; ++k) {
    if (repeats[k] < 0) return err->fail_values("repeats", repeats, rank, " has a negative value");
    if (!mul_ok(in[k], repeats[k], &out[k])) {
      return err->fail("dim %lld tiled %lld times overflows int64", static_cast<long long>(k),
                       static_cast<long long>(repeats[k]));
    }
  }
  return true;
}

bool resolve_reshape(const int64_t* in, int64_t rank, const int64_t* target, int64_t n,
                     bool allowzero, int64_t* out, RuleError* err) {
  int64_t numel = 1;
  for (int64_t k = 0; k < rank; ++k) numel *= in[k];  // a validated input shape
  int64_t infer_at = -1;
  int64_t known = 1;  // product of the dims other than -1
  for (int64_t k = 0; k < n; ++k) {
    out[k] = target[k];
    if (target[k] == -1) {
      if (infer_at >= 0) return err->fail_values("shape", target, n, " has more than one -1");
      infer_at = k;
      continue;
    }
    if (target[k] == 0 && !allowzero) {
      if (k >= rank) {
        return err->fail_values("shape", target, n,
                                " copies dim %lld (0), but the input has only %lld dims",
                                static_cast<long long>(k), static_cast<long long>(rank));
      }
      out[k] = in[k];
    }
    if (out[k] < 0) {
      return err->fail_values("shape", target, n, " has invalid dim %lld", static_cast<long long>(out[k]));
    }
    if (!mul_ok(known, out[k], &known)) {
      return err->fail_values("shape", target, n, ": the element count overflows int64");
    }
  }
  if (infer_at >= 0) {
    if (known == 0) {
      return err->fail_values("shape", target, n,
                              ": -1 cannot be inferred when the other dims hold 0 elements");
    }
    if (numel % known != 0) {
      return err->fail_values("shape", target, n, " does not fit the input of %lld elements",
                              static_cast<long long>(numel));
    }
    out[infer_at] = numel / known;
  } else if (known != numel) {
    return err->fail_values("shape", target, n, " has %lld elements, the input has %lld",
                            static_cast<long long>(known), static_cast<long long>(numel));
  }
  return true;
}

bool resolve_squeeze(const int64_t* in, int64_t rank, const int64_t* axes, int64_t n, bool given,
                     int64_t* out, int64_t* out_rank, RuleError* err) {
  bool drop[KITE_MAX_RANK] = {};
  if (given) {
    if (n > rank) return err->fail("Squeeze has %lld axes for %lld dims", static_cast<long long>(n), static_cast<long long>(rank));
    int64_t normalized[KITE_MAX_RANK];
    if (!normalize_axes("Squeeze axes", axes, n, rank, normalized, err)) return false;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t a = normalized[k];
      if (in[a] != 1) {
        return err->fail_values("the input has shape", in, rank, ": dim %lld is %lld, Squeeze needs 1",
                                static_cast<long long>(a), static_cast<long long>(in[a]));
      }
      drop[a] = true;
    }
  } else {
    for (int64_t k = 0; k < rank; ++k) drop[k] = in[k] == 1;
  }
  *out_rank = 0;
  for (int64_t k = 0; k < rank; ++k) {
    if (!drop[k]) out[(*out_rank)++] = in[k];
  }
  return true;
}

bool resolve_unsqueeze(const int64_t* in, int64_t rank, const int64_t* axes, int64_t n,
                       int64_t* out, int64_t* out_rank, RuleError* err) {
  if (n < 0 || rank + n > KITE_MAX_RANK) {
    return err->fail("output would have %lld dims, more than %d", static_cast<long long>(rank + n),
                     KITE_MAX_RANK);
  }
  const int64_t r = rank + n;
  int64_t normalized[KITE_MAX_RANK];
  if (!normalize_axes("Unsqueeze axes", axes, n, r, normalized, err)) return false;
  bool inserted[KITE_MAX_RANK] = {};
  for (int64_t k = 0; k < n; ++k) inserted[normalized[k]] = true;
  int64_t next = 0;
  for (int64_t k = 0; k < r; ++k) out[k] = inserted[k] ? 1 : in[next++];
  *out_rank = r;
  return true;
}

bool resolve_split(int64_t dim, int64_t num_outputs, const int64_t* sizes, bool uneven_ok,
                   int64_t* out, RuleError* err) {
  if (num_outputs < 1) return err->fail("Split needs at least one output");
  if (sizes) {
    int64_t total = 0;
    for (int64_t k = 0; k < num_outputs; ++k) {
      if (sizes[k] < 0) return err->fail_values("split", sizes, num_outputs, " has a negative size");
      if (!add_ok(total, sizes[k], &total)) {
        return err->fail_values("split", sizes, num_outputs, ": the sum overflows int64");
      }
      out[k] = sizes[k];
    }
    if (total != dim) {
      return err->fail_values("split", sizes, num_outputs, " adds up to %lld, the input has %lld on the axis",
                              static_cast<long long>(total), static_cast<long long>(dim));
    }
    return true;
  }
  if (!uneven_ok && dim % num_outputs != 0) {
    return err->fail("the input has %lld on the axis, not divisible into %lld equal outputs",
                     static_cast<long long>(dim), static_cast<long long>(num_outputs));
  }
  // Opset 18: chunks of ceil(dim / n), the last one smaller.
  const int64_t chunk = dim / num_outputs + (dim % num_outputs != 0 ? 1 : 0);
  const int64_t last = dim - chunk * (num_outputs - 1);  // chunk * (n - 1) <= dim + n: no overflow
  if (last < 0) {
    return err->fail("the input has %lld on the axis, too small for %lld outputs",
                     static_cast<long long>(dim), static_cast<long long>(num_outputs));
  }
  for (int64_t k = 0; k + 1 < num_outputs; ++k) out[k] = chunk;
  out[num_outputs - 1] = last;
  return true;
}

bool resolve_perm(int64_t rank, const int64_t* perm, int64_t n, int64_t* out, RuleError* err) {
  if (!perm) {
    for (int64_t k = 0; k < rank; ++k) out[k] = rank - 1 - k;
    return true;
  }
  if (n != rank) {
    return err->fail_values("attribute 'perm'", perm, n, " has %lld values, the input has %lld dims",
                            static_cast<long long>(n), static_cast<long long>(rank));
  }
  bool seen[KITE_MAX_RANK] = {};
  for (int64_t k = 0; k < n; ++k) {
    if (perm[k] < 0 || perm[k] >= rank || rank > KITE_MAX_RANK || seen[perm[k]]) {
      return err->fail_values("attribute 'perm'", perm, n, " is not a permutation of 0..%lld",
                              static_cast<long long>(rank - 1));
    }
    seen[perm[k]] = true;
    out[k] = perm[k];
  }
  return true;
}

void shape_op_range(int64_t rank, int64_t start, int64_t end, int64_t* begin, int64_t* stop) {
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  *begin = clamp(start);
  *stop = std::max(*begin, clamp(end));
}

// ------------------------------------------------------- Gemm, MatMul --

bool resolve_gemm(const int64_t* a, const int64_t* b, bool trans_a, bool trans_b,
                  MatMulShape* out, RuleError* err) {
  *out = MatMulShape();
  out->m = trans_a ? a[1] : a[0];
  out->k = trans_a ? a[0] : a[1];
  out->n = trans_b ? b[0] : b[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  if (kb != out->k) {
    return err->fail("B has shape %lldx%lld (K=%lld), expected K=%lld from A of shape %lldx%lld%s",
                     static_cast<long long>(b[0]), static_cast<long long>(b[1]),
                     static_cast<long long>(kb), static_cast<long long>(out->k),
                     static_cast<long long>(a[0]), static_cast<long long>(a[1]),
                     trans_a || trans_b ? " (with transA/transB)" : "");
  }
  out->out[0] = out->m;
  out->out[1] = out->n;
  out->out_rank = 2;
  return true;
}

bool resolve_matmul(const int64_t* a, int64_t a_rank, const int64_t* b, int64_t b_rank,
                    MatMulShape* out, RuleError* err) {
  *out = MatMulShape();
  if (a_rank < 1 || b_rank < 1 || a_rank > KITE_MAX_RANK || b_rank > KITE_MAX_RANK) {
    return err->fail("A has %lld dims and B %lld, expected 1 to %d each",
                     static_cast<long long>(a_rank), static_cast<long long>(b_rank), KITE_MAX_RANK);
  }
  const bool a_vector = a_rank == 1, b_vector = b_rank == 1;
  out->m = a_vector ? 1 : a[a_rank - 2];
  out->k = a[a_rank - 1];
  const int64_t kb = b_vector ? b[0] : b[b_rank - 2];
  out->n = b_vector ? 1 : b[b_rank - 1];
  if (kb != out->k) {
    err->fail_values("inner dims differ: A has shape", a, a_rank, ", B has shape ");
    err->append_ints(b, b_rank);
    return false;
  }
  out->a_batch_rank = a_vector ? 0 : a_rank - 2;
  out->b_batch_rank = b_vector ? 0 : b_rank - 2;
  std::copy(a, a + out->a_batch_rank, out->a_batch);
  std::copy(b, b + out->b_batch_rank, out->b_batch);
  if (!broadcast_dims(out->a_batch, out->a_batch_rank, out->b_batch, out->b_batch_rank, out->batch,
                      &out->batch_rank)) {
    err->fail_values("batch dims of A", a, a_rank, " and of B ");
    err->append_ints(b, b_rank);
    err->append(" do not broadcast");
    return false;
  }
  std::copy(out->batch, out->batch + out->batch_rank, out->out);
  out->out_rank = out->batch_rank;
  if (!a_vector) out->out[out->out_rank++] = out->m;
  if (!b_vector) out->out[out->out_rank++] = out->n;
  return true;
}

// ---------------------------------------------------------- reductions --

bool resolve_reduce_axes(const char* op, const int64_t* axes, int64_t n, int64_t rank,
                         bool noop_with_empty_axes, bool* reduced, bool* identity, RuleError* err) {
  *identity = n == 0 && noop_with_empty_axes;
  for (int64_t d = 0; d < rank; ++d) reduced[d] = n == 0 && !*identity;
  if (n == 0) return true;
  if (n > rank) return err->fail("%s has %lld axes for %lld dims", op, static_cast<long long>(n), static_cast<long long>(rank));
  int64_t normalized[KITE_MAX_RANK];
  char what[64];
  std::snprintf(what, sizeof(what), "%s axes", op);
  if (!normalize_axes(what, axes, n, rank, normalized, err)) return false;
  for (int64_t k = 0; k < n; ++k) reduced[normalized[k]] = true;
  return true;
}

// --------------------------------------------------------------- Range --

bool range_length(int64_t start, int64_t limit, int64_t delta, int64_t* n, RuleError* err) {
  if (delta == 0) return err->fail("delta is 0");
  *n = 0;
  // Distance and step as unsigned magnitudes: limit - start may not fit int64.
  if ((delta > 0 && limit > start) || (delta < 0 && limit < start)) {
    const uint64_t distance = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                        : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    const uint64_t count = (distance - 1) / magnitude(delta) + 1;
    if (count > static_cast<uint64_t>(INT64_MAX)) return err->fail("Range length overflows int64");
    *n = static_cast<int64_t>(count);
  }
  return true;
}

bool range_length(float start, float limit, float delta, int64_t* n, RuleError* err) {
  if (delta == 0) return err->fail("delta is 0");
  // In float32, as ONNX Runtime computes it.
  const double count = std::ceil(static_cast<double>((limit - start) / delta));
  if (!std::isfinite(count) || count > 9.0e18) {
    return err->fail("Range from %g to %g by %g has no finite length", static_cast<double>(start),
                     static_cast<double>(limit), static_cast<double>(delta));
  }
  *n = count > 0 ? static_cast<int64_t>(count) : 0;
  return true;
}

// -------------------------------------------------------------- Resize --

bool parse_aspect_policy(const char* name, AspectPolicy* out) {
  if (std::strcmp(name, "stretch") == 0) *out = AspectPolicy::kStretch;
  else if (std::strcmp(name, "not_larger") == 0) *out = AspectPolicy::kNotLarger;
  else if (std::strcmp(name, "not_smaller") == 0) *out = AspectPolicy::kNotSmaller;
  else return false;
  return true;
}

bool resolve_resize(const int64_t* in, int64_t rank, const int64_t* axes, int64_t n,
                    const float* scales, const int64_t* sizes, const float* roi,
                    AspectPolicy policy, ResizeAxis* out, RuleError* err) {
  if (rank < 0 || rank > KITE_MAX_RANK) return err->fail("input has %lld dims", static_cast<long long>(rank));
  if (n > rank) return err->fail("Resize has %lld axes for %lld dims", static_cast<long long>(n), static_cast<long long>(rank));
  int64_t given[KITE_MAX_RANK] = {}, normalized[KITE_MAX_RANK] = {};
  for (int64_t k = 0; k < n; ++k) given[k] = axes ? axes[k] : k;
  if (!normalize_axes("Resize axes", given, n, rank, normalized, err)) return false;
  for (int64_t d = 0; d < rank; ++d) out[d] = ResizeAxis{in[d], 1.0f};
  if ((scales == nullptr) == (sizes == nullptr)) {
    return err->fail("exactly one of scales and sizes must be given");
  }
  if (scales) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t a = normalized[k];
      const double extent = roi ? static_cast<double>(roi[n + k]) - roi[k] : 1.0;
      const double size = std::floor(static_cast<double>(in[a]) * extent * scales[k]);
      if (!(scales[k] > 0) || !std::isfinite(size) || size < 0 || size > 9.0e18) {
        return err->fail("scales give axis %lld the invalid size %g (scale %g)",
                         static_cast<long long>(a), size, static_cast<double>(scales[k]));
      }
      out[a] = ResizeAxis{static_cast<int64_t>(size), scales[k]};
    }
  } else {
    double common = policy == AspectPolicy::kNotLarger ? INFINITY : 0.0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t a = normalized[k];
      if (sizes[k] < 0) return err->fail_values("sizes", sizes, n, " has a negative size");
      if (policy == AspectPolicy::kStretch) {
        const float scale = in[a] > 0 ? static_cast<float>(sizes[k]) / static_cast<float>(in[a]) : 1.0f;
        out[a] = ResizeAxis{sizes[k], scale};
        continue;
      }
      if (in[a] == 0) return err->fail("cannot keep the aspect ratio of an empty axis");
      const double s = static_cast<double>(sizes[k]) / static_cast<double>(in[a]);
      common = policy == AspectPolicy::kNotLarger ? std::min(common, s) : std::max(common, s);
    }
    if (policy != AspectPolicy::kStretch) {
      // The common scale, not out / in: the sizes are rounded, so out / in
      // differs from it on all but the deciding axis.
      for (int64_t k = 0; k < n; ++k) {
        const int64_t a = normalized[k];
        const double size = std::floor(common * static_cast<double>(in[a]) + 0.5);
        if (!(size >= 0 && size <= 9.0e18)) {
          return err->fail("resized axis %lld overflows int64", static_cast<long long>(a));
        }
        out[a] = ResizeAxis{static_cast<int64_t>(size), static_cast<float>(common)};
      }
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (in[d] == 0 && out[d].out > 0) {
      return err->fail("cannot resize the empty axis %lld to %lld", static_cast<long long>(d),
                       static_cast<long long>(out[d].out));
    }
  }
  return true;
}

// ------------------------------------------------------- scalar values --

namespace {
// A C-like conversion that is defined for every double: truncation toward
// zero, saturated at the int64 limits, NaN -> 0.
int64_t saturate_to_int64(double f) {
  if (!(f == f)) return 0;
  if (f >= 9223372036854775808.0) return INT64_MAX;
  if (f < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(f);
}
}  // namespace

bool encode_scalar(kite_dtype d, float f, int64_t i, bool is_int, void* out) {
  const int64_t as_int = is_int ? i : saturate_to_int64(f);
  const float as_float = is_int ? static_cast<float>(i) : f;
  switch (d) {
    case KITE_DTYPE_FLOAT32:
      std::memcpy(out, &as_float, 4);
      return true;
    case KITE_DTYPE_FLOAT16: {
      const uint16_t v = float_to_half(as_float);
      std::memcpy(out, &v, 2);
      return true;
    }
    case KITE_DTYPE_INT64:
      std::memcpy(out, &as_int, 8);
      return true;
    case KITE_DTYPE_INT32: {
      const int32_t v = static_cast<int32_t>(as_int);  // modulo 2^32, like C++20
      std::memcpy(out, &v, 4);
      return true;
    }
    case KITE_DTYPE_INT8:
    case KITE_DTYPE_UINT8: {
      const uint8_t v = static_cast<uint8_t>(as_int);
      std::memcpy(out, &v, 1);
      return true;
    }
    case KITE_DTYPE_BOOL: {
      const uint8_t v = is_int ? i != 0 : f != 0.0f;
      std::memcpy(out, &v, 1);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kite::ops
