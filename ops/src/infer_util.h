// Internal helpers shared by the per-family shape/dtype rule files
// (infer_*.cpp). Every check reports through Ctx::fail with a message that
// names the node, the tensor or attribute and the bad value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kite/ops/op_node.h"
#include "kite/ops/resolve.h"

namespace kite::ops::detail {

// Sets of dtypes, as bit masks indexed by kite_dtype.
constexpr uint32_t dtype_bit(kite_dtype d) { return 1u << static_cast<unsigned>(d); }
constexpr uint32_t kF32 = dtype_bit(KITE_DTYPE_FLOAT32);
constexpr uint32_t kF16 = dtype_bit(KITE_DTYPE_FLOAT16);
constexpr uint32_t kI32 = dtype_bit(KITE_DTYPE_INT32);
constexpr uint32_t kI64 = dtype_bit(KITE_DTYPE_INT64);
constexpr uint32_t kI8 = dtype_bit(KITE_DTYPE_INT8);
constexpr uint32_t kU8 = dtype_bit(KITE_DTYPE_UINT8);
constexpr uint32_t kBool = dtype_bit(KITE_DTYPE_BOOL);
constexpr uint32_t kFloat = kF32 | kF16;
constexpr uint32_t kIndex = kI32 | kI64;
constexpr uint32_t kSigned = kFloat | kI32 | kI64 | kI8;
constexpr uint32_t kNumeric = kSigned | kU8;
constexpr uint32_t kAny = kNumeric | kBool;

std::string dtype_set_string(uint32_t set);  // "float32 or float16"
std::string ints_string(const std::vector<int64_t>& v);  // "[1, 2, 3]"

// Overflow-checked int64 arithmetic.
inline bool add_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_add_overflow(a, b, r); }
inline bool sub_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_sub_overflow(a, b, r); }
inline bool mul_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_mul_overflow(a, b, r); }

// Checks, for check_declared_outputs, that the declared outputs agree with
// what is known when an input value is not. Returns "" or what is wrong.
using ConsistencyCheck = std::function<std::string(const std::vector<TensorType>& declared)>;

// The state of one inference: the node, its outputs so far, the error.
class Ctx {
 public:
  explicit Ctx(const OpNode& node);

  const OpNode& node;
  std::vector<TensorType> out;  // node.num_outputs entries
  std::string err;
  bool value_unknown = false;   // failed only because an input value is unknown
  ConsistencyCheck consistency;  // set with value_unknown, may stay empty

  // ---- failures (all return false) ----
  bool fail(const std::string& what);
  // "input 'shape' value must be known at convert time"; sets value_unknown.
  bool unknown(size_t i, const char* role);
  bool overflow(const std::string& what);  // "<what> overflows int64"
  // ok, or fail with the message of a kite/ops/resolve.h function.
  bool resolved(bool ok, const RuleError& e) { return ok || fail(e.message); }

  // ---- inputs ----
  size_t num_inputs() const { return node.inputs.size(); }
  bool has(size_t i) const { return node.has_input(i); }
  const TensorType& in(size_t i) const { return node.inputs[i]; }
  const std::vector<int64_t>& shape(size_t i) const { return node.inputs[i].shape; }
  int rank(size_t i) const { return node.inputs[i].rank(); }
  // "input 'x'" or, for an unnamed tensor, "input 1 (W)".
  std::string input_label(size_t i, const char* role) const;

  // Between min and max inputs (a trailing absent one counts as absent); the
  // first `required` must be present. Also bounds the outputs.
  bool arity(size_t required, size_t max_inputs, int min_outputs, int max_outputs);
  bool require(size_t i, const char* role);
  bool dtype_in(size_t i, const char* role, uint32_t allowed);
  bool same_dtype(size_t i, const char* role, size_t j, const char* role_j);
  bool rank_is(size_t i, const char* role, int r);
  bool rank_between(size_t i, const char* role, int lo, int hi);
  bool numel_is(size_t i, const char* role, int64_t n);
  bool dim_is(size_t i, const char* role, int axis, int64_t value, const std::string& why);

  // ---- attributes: absent -> default; wrong type -> error ----
  bool attr_int(const char* name, int64_t def, int64_t* v);
  bool attr_bool(const char* name, bool def, bool* v);  // must be 0 or 1
  bool attr_float(const char* name, float def, float* v);
  bool attr_string(const char* name, const std::string& def, std::string* v);
  bool attr_ints(const char* name, std::vector<int64_t>* v, bool* present);
  bool attr_floats(const char* name, std::vector<float>* v, bool* present);
  bool has_attr(const char* name) const { return node.find_attr(name) != nullptr; }
  // Normalizes an axis in [-rank, rank-1] (what names it in the message).
  bool axis(const std::string& what, int64_t value, int rank, int64_t* normalized);
  // Normalizes a list of distinct axes.
  bool axes(const std::string& what, const std::vector<int64_t>& values, int rank,
            std::vector<int64_t>* normalized);

  // ---- input values (constants) ----
  // Reads an int32/int64 input of rank <= 1 (or exactly 1 when rank1), at
  // most max_count elements. Unknown value -> unknown().
  bool read_ints(size_t i, const char* role, uint32_t allowed, bool rank1, size_t max_count,
                 std::vector<int64_t>* v);
  bool read_floats(size_t i, const char* role, size_t max_count, std::vector<float>* v);
  // The element count of a value input read by the two above: at most
  // max_count, and known (or empty).
  bool value_count(size_t i, const char* role, size_t max_count, int64_t* n);
  // Reads a scalar (numel 1, rank <= 1) of any numeric dtype as double.
  bool read_scalar(size_t i, const char* role, double* v);
  // Constant int32/int64 index values of input i lie in [-dim, dim), where
  // dim_of(k) is the dim element k indexes (Gather, GatherElements,
  // ScatterElements, GatherND). Unknown values pass: a kernel checks
  // run-time indices itself.
  bool constant_indices_in_range(size_t i, const std::function<int64_t(int64_t)>& dim_of);
  // GatherElements/ScatterElements: input i (indices) is no larger than
  // input j (data) in every dim but `axis`.
  bool indices_fit_data(size_t i, size_t j, int64_t axis);

  // ---- outputs ----
  // Sets output k if the node has it; checks rank and byte size.
  bool set(int k, kite_dtype dtype, std::vector<int64_t> shape);
  void set_dtype(int k, kite_dtype dtype);  // for the value-unknown path
  bool same_as_input(int k, size_t i);      // output k = input i's type
};

// Numpy broadcast of input shapes, with a message naming them on failure.
bool broadcast_inputs(Ctx& c, const std::vector<size_t>& inputs, const char* const* roles,
                      std::vector<int64_t>* out);
// True if `from` broadcasts to exactly `to` (unidirectional).
bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to);

// Declared-output helpers for ConsistencyCheck.
std::string out_label(const std::vector<TensorType>& declared, size_t k);

// One op's rules.
using InferFn = bool (*)(Ctx& c);
struct OpRule {
  const char* op;
  InferFn infer;
};
// Each family file exposes its rules; infer_types.cpp joins them.
const std::vector<OpRule>& nn_rules();
const std::vector<OpRule>& elementwise_rules();
const std::vector<OpRule>& shape_rules();
const std::vector<OpRule>& reduce_rules();
const std::vector<OpRule>& indexing_rules();
const std::vector<OpRule>& recurrent_rules();  // LSTM, GRU, RNN, GridSample

// Fills WindowGeometry for Conv/ConvTranspose/MaxPool/AveragePool.
bool window_rules(Ctx& c, WindowGeometry* g);

}  // namespace kite::ops::detail
