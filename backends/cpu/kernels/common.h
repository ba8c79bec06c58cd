// Helpers shared by the CPU kernels: messages, shapes, dtype checks, a
// broadcast iteration plan and a base class for kernels that check input
// values at run time.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernel.h"

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
// "" when the value of input i is known at prepare time (a constant).
std::string expect_constant(const OpNode& op, size_t i, const char* role);

// Axis in [-rank, rank) to [0, rank); -1 when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank);

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

 private:
  std::string label_;
  char error_[320] = {};
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

// Rows per parallel chunk so that a chunk holds about `elements` elements.
inline int64_t rows_per_chunk(int64_t row_length, int64_t elements = 16384) {
  return row_length <= 0 ? 1 : (elements + row_length - 1) / row_length;
}

// IEEE half <-> float, for Cast.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

}  // namespace kite::cpu
