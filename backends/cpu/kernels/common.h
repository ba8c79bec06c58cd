// Helpers shared by the CPU kernels: messages, shapes, dtype checks, a
// broadcast iteration plan and a base class for kernels that check input
// values at run time.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernel.h"
#include "kite/ops/half.h"
#include "kite/ops/resolve.h"
#include "norm_avx512.h"
#include "norm_neon.h"

namespace kite::cpu {

using kite::ops::OpNode;
using kite::ops::TensorType;
using Shape = std::vector<int64_t>;

// Sets *err to "<Op 'name'>: <what>" and returns null; for prepare functions.
std::unique_ptr<Kernel> prepare_error(std::string* err, const OpNode& op, const std::string& what);

// Shapes reaching a kernel are validated, so plain products cannot overflow.
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
int64_t product(const Shape& shape, size_t begin, size_t end);

// Declared outputs (validated against the inputs by check_declared_outputs).
bool has_output(const KernelArgs& args, int i);
Shape output_shape(const KernelArgs& args, int i);
kite_dtype output_dtype(const KernelArgs& args, int i);

// "input 'x'" (or "input 1" for an unnamed tensor) for messages.
std::string input_label(const OpNode& op, size_t i);
// "" when input i is absent or has one of the dtypes, else a short reason.
std::string expect_dtype(const OpNode& op, size_t i, std::initializer_list<kite_dtype> allowed);
// The same for every input in [first, end) (end clamped to the inputs).
std::string expect_dtypes(const OpNode& op, size_t first, size_t end,
                          std::initializer_list<kite_dtype> allowed);
// "" when the value of input i is known at prepare time (a constant).
std::string expect_constant(const OpNode& op, size_t i, const char* role);

// Element sizes. The kernels that move elements without looking at them
// (copies, transposes, gathers, slices, pads, Where) take any dtype whose
// element is 1, 2, 4 or 8 bytes and move it as an unsigned integer of that
// size; this is their one check of it.
// Bytes per element of dtype d, or 0 when the data movers cannot take it.
size_t movable_element_size(kite_dtype d);
// "" when input i is absent or movable_element_size takes its dtype, else
// the reason, naming the input.
std::string expect_movable(const OpNode& op, size_t i);
// Calls fn(T()) with T the unsigned integer of `size` bytes (1, 2, 4 or 8,
// as movable_element_size gives).
template <typename F>
void with_element_type(size_t size, F&& fn) {
  switch (size) {
    case 1: fn(uint8_t()); break;
    case 2: fn(uint16_t()); break;
    case 4: fn(uint32_t()); break;
    default: fn(uint64_t()); break;
  }
}
// Copies one element of `size` bytes (a movable_element_size).
inline void copy_element(void* dst, const void* src, size_t size) {
  with_element_type(size, [&](auto t) { std::memcpy(dst, src, sizeof(t)); });
}

using kite::ops::normalize_axis;

// Reads n int32/int64 values as int64.
void read_int64s(const void* data, kite_dtype dtype, int64_t n, int64_t* out);
// Reads element 0 of a float32/int32/int64 tensor as double.
double read_scalar(const void* data, kite_dtype dtype);

// Copies bytes unless source and destination are the same buffer (in place).
inline void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

// Base for kernels that must check input values at run time.
class CheckedKernel : public Kernel {
 public:
  const char* run_error() const override { return error_[0] ? error_ : nullptr; }

 protected:
  explicit CheckedKernel(const OpNode& op) : label_(op.label()) {}
  void clear_error() { error_[0] = '\0'; }
  // Formats "<label>: <message>" into the kernel's buffer (no allocation).
  void set_error(const char* format, ...) __attribute__((format(printf, 2, 3)));
  // Sets the error to a kite::ops resolve function's message; returns false.
  bool rule_failed(const kite::ops::RuleError& e);
  // True when dims (rank of them) are the declared shape; else sets an error
  // saying the `what` value gives another shape, and returns false.
  bool gives_declared(const char* what, const int64_t* dims, int64_t rank, const Shape& declared);

 private:
  std::string label_;
  char error_[320] = {};
};

// Parameters (one per input dim) that a kernel resolves once at prepare when
// its value inputs are constants, and otherwise at every run, into the
// caller's scratch (run may not allocate).
template <typename Axis>
class ResolvedAxes {
 public:
  // resolve(Axis* out) -> bool fills out or sets the kernel's error.
  template <typename F>
  bool prepare(bool constant, F&& resolve) {
    ready_ = constant && resolve(axes_);
    return ready_ || !constant;
  }
  // The resolved axes, or null when resolve failed.
  template <typename F>
  const Axis* get(Axis* scratch, F&& resolve) const {
    if (ready_) return axes_;
    return resolve(scratch) ? scratch : nullptr;
  }

 private:
  bool ready_ = false;
  Axis axes_[KITE_MAX_RANK];
};

// Iteration plan for an elementwise op over up to three inputs that
// broadcast (numpy rules) to the output. Dims of size 1 are dropped and
// neighbours that stay contiguous in every input are merged, so a same-shape
// op is one row and a scalar operand has stride 0.
struct BroadcastPlan {
  static constexpr int kMaxInputs = 3;
  int num_inputs = 0;
  Shape dims;                          // collapsed output dims, never empty
  Shape strides[kMaxInputs];           // element strides per input, 0 where broadcast
  int64_t inner = 1;                   // dims.back()
  int64_t rows = 1;                    // product of the other dims
  int64_t inner_stride[kMaxInputs] = {};
  int64_t numel = 0;

  // Calls fn(row_offsets_per_input, output_offset) for rows [begin, end).
  template <typename F>
  void for_rows(int64_t begin, int64_t end, F&& fn) const {
    if (begin >= end) return;
    const int nd = static_cast<int>(dims.size()) - 1;  // outer dims
    int64_t index[KITE_MAX_RANK] = {};
    int64_t offsets[kMaxInputs] = {};
    int64_t rest = begin;
    for (int d = nd - 1; d >= 0; --d) {
      index[d] = rest % dims[d];
      rest /= dims[d];
      for (int k = 0; k < num_inputs; ++k) offsets[k] += index[d] * strides[k][d];
    }
    for (int64_t row = begin; row < end; ++row) {
      fn(static_cast<const int64_t*>(offsets), row * inner);
      for (int d = nd - 1; d >= 0; --d) {
        for (int k = 0; k < num_inputs; ++k) offsets[k] += strides[k][d];
        if (++index[d] < dims[d]) break;
        for (int k = 0; k < num_inputs; ++k) offsets[k] -= index[d] * strides[k][d];
        index[d] = 0;
      }
    }
  }
};

// The inputs must broadcast to out (checked by the caller); ranks <= KITE_MAX_RANK.
BroadcastPlan make_broadcast_plan(const Shape& out, std::initializer_list<const Shape*> inputs);

// Normalisation (LayerNormalization, InstanceNormalization, the fused
// Add+LayerNormalization): mean and 1 / sqrt(var + eps) of n values, two
// passes with double sums; then y = (x - mean) * inv * scale (+ bias).
// y may be x.
inline void moments(const float* x, int64_t n, float epsilon, float* mean_out, float* inv_out) {
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  neon::moments(x, n, epsilon, mean_out, inv_out);  // norm_neon.cpp
#else
  if (avx512::moments(x, n, epsilon, mean_out, inv_out)) return;  // norm_avx512.cpp
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  *mean_out = static_cast<float>(mean);
  *inv_out = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(epsilon)));
#endif
}
inline void normalize_row(const float* x, int64_t n, float mean, float inv, const float* scale,
                          const float* bias, float* y) {
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  neon::normalize_row(x, n, mean, inv, scale, bias, y);  // norm_neon.cpp
#else
  if (avx512::normalize_row(x, n, mean, inv, scale, bias, y)) return;  // norm_avx512.cpp
  if (bias) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i];
  }
#endif
}

// Rows per parallel chunk so that a chunk holds about `elements` elements.
inline int64_t rows_per_chunk(int64_t row_length, int64_t elements = 16384) {
  return row_length <= 0 ? 1 : (elements + row_length - 1) / row_length;
}

// An integer parameter of a node (Slice's starts, Pad's pads, Tile's
// repeats, ...): an int32/int64 input, whose value may be computed (then it
// is read at run), or an attribute's values (older opsets).
struct IntSource {
  const void* data = nullptr;  // the input's data; null: `attr` holds the values
  kite_dtype dtype = KITE_DTYPE_INT64;
  int64_t count = -1;          // -1: absent
  bool constant = true;        // known at prepare (an attribute or a constant input)
  Shape attr;

  bool present() const { return count >= 0; }
  // Input i of the node (absent when the node lacks it).
  static IntSource input(const KernelArgs& args, size_t i);
  // The INTS attribute `name` (absent when the node lacks it).
  static IntSource attribute(const OpNode& op, const char* name);
  // Copies the values into out (capacity entries); false when there are
  // more. Does not allocate, so run may call it.
  bool read(int64_t* out, int64_t capacity) const;
};
// A fixed array of IntSource values, for the parameters of a rank-bounded op.
struct IntValues {
  static constexpr int64_t kCapacity = KITE_MAX_RANK * 2;
  int64_t v[kCapacity] = {};
  int64_t count = -1;  // -1: absent
  // Reads src (absent stays absent); false when it has too many values.
  bool read(const IntSource& src) {
    count = src.count;
    return !src.present() || src.read(v, kCapacity);
  }
  const int64_t* values_or_null() const { return count >= 0 ? v : nullptr; }
};

}  // namespace kite::cpu
