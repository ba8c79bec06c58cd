// Data movement that keeps element values: Identity, Reshape, Flatten,
// Squeeze, Unsqueeze, Dropout (a copy unless in place), Concat, Transpose,
// Split, Shape and Size. Any dtype: these move bytes.
#include <algorithm>
#include <string>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

constexpr int64_t kCopyChunkBytes = 1 << 16;

bool element_size_ok(kite_dtype d) {
  const size_t s = kite::ops::dtype_size(d);
  return s == 1 || s == 2 || s == 4 || s == 8;
}

// Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout. When Reshape's
// shape (or Squeeze/Unsqueeze's axes) is computed, run checks that its value
// gives the declared output shape.
class CopyKernel : public CheckedKernel {
 public:
  CopyKernel(const OpNode& op, const void* in, void* out, size_t bytes)
      : CheckedKernel(op), op_(op.op), in_(in), out_(out), bytes_(bytes) {}

  void set_mask(uint8_t* mask, int64_t n) {
    mask_ = mask;
    mask_n_ = n;
  }
  // A value input to check at run: the input's data, dtype and count.
  void check_value(const void* data, kite_dtype dtype, int64_t count, Shape in_shape,
                   Shape out_shape, bool allow_zero) {
    value_ = data;
    value_dtype_ = dtype;
    value_count_ = count;
    in_shape_ = std::move(in_shape);
    out_shape_ = std::move(out_shape);
    allow_zero_ = allow_zero;
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (value_ && !value_matches()) return;
    if (in_ != out_ && bytes_ > 0) {
      const char* src = static_cast<const char*>(in_);
      char* dst = static_cast<char*>(out_);
      const int64_t bytes = static_cast<int64_t>(bytes_);
      pool.parallel_for(bytes, 1 << 20, [&](int64_t b, int64_t e) {
        std::memcpy(dst + b, src + b, static_cast<size_t>(e - b));
      });
    }
    if (mask_) std::memset(mask_, 1, static_cast<size_t>(mask_n_));
  }

 private:
  bool value_matches() {
    if (value_count_ > KITE_MAX_RANK * 2) {
      set_error("value input has %lld entries", static_cast<long long>(value_count_));
      return false;
    }
    int64_t v[KITE_MAX_RANK * 2];
    read_int64s(value_, value_dtype_, value_count_, v);
    const int64_t in_rank = static_cast<int64_t>(in_shape_.size());
    const int64_t out_rank = static_cast<int64_t>(out_shape_.size());
    if (op_ == "Reshape") {
      if (value_count_ != out_rank) {
        set_error("shape has %lld entries, the declared output has %lld dims",
                  static_cast<long long>(value_count_), static_cast<long long>(out_rank));
        return false;
      }
      for (int64_t i = 0; i < out_rank; ++i) {
        int64_t dim = v[i];
        if (dim == 0 && !allow_zero_) {
          if (i >= in_rank) {
            set_error("shape entry %lld is 0 but the input has %lld dims",
                      static_cast<long long>(i), static_cast<long long>(in_rank));
            return false;
          }
          dim = in_shape_[i];
        }
        if (dim != -1 && dim != out_shape_[i]) {
          set_error("shape entry %lld is %lld, the declared output dim is %lld",
                    static_cast<long long>(i), static_cast<long long>(v[i]),
                    static_cast<long long>(out_shape_[i]));
          return false;
        }
      }
      return true;
    }
    // Squeeze / Unsqueeze: rebuild the output shape from the axes.
    const bool squeeze = op_ == "Squeeze";
    const int64_t rank = squeeze ? in_rank : in_rank + value_count_;
    bool marked[KITE_MAX_RANK * 2] = {};
    for (int64_t i = 0; i < value_count_; ++i) {
      const int64_t a = normalize_axis(v[i], rank);
      if (a < 0 || rank > KITE_MAX_RANK * 2 || marked[a]) {
        set_error("axes entry %lld is invalid", static_cast<long long>(v[i]));
        return false;
      }
      marked[a] = true;
    }
    int64_t expected[KITE_MAX_RANK * 2];
    int64_t n = 0, src = 0;
    for (int64_t a = 0; a < rank; ++a) {
      if (squeeze) {
        if (marked[a] && in_shape_[a] != 1) {
          set_error("axis %lld has size %lld, not 1", static_cast<long long>(a),
                    static_cast<long long>(in_shape_[a]));
          return false;
        }
        if (!marked[a] && !(value_count_ == 0 && in_shape_[a] == 1)) expected[n++] = in_shape_[a];
      } else {
        expected[n++] = marked[a] ? 1 : in_shape_[src++];
      }
    }
    if (n != out_rank || !std::equal(expected, expected + n, out_shape_.begin())) {
      set_error("axes give a shape other than the declared output");
      return false;
    }
    return true;
  }

  std::string op_;
  const void* in_;
  void* out_;
  size_t bytes_;
  uint8_t* mask_ = nullptr;
  int64_t mask_n_ = 0;
  const void* value_ = nullptr;
  kite_dtype value_dtype_ = KITE_DTYPE_INT64;
  int64_t value_count_ = 0;
  Shape in_shape_, out_shape_;
  bool allow_zero_ = false;
};

class ConcatKernel : public Kernel {
 public:
  struct Part {
    const char* data;
    int64_t block;   // bytes per outer index
    int64_t offset;  // byte offset inside the output's block
  };
  ConcatKernel(std::vector<Part> parts, int64_t outer, int64_t out_block, char* out)
      : parts_(std::move(parts)), outer_(outer), out_block_(out_block), out_(out) {}

  void run(ThreadPool& pool) override {
    const int64_t nparts = static_cast<int64_t>(parts_.size());
    const int64_t tasks = outer_ * nparts;
    if (tasks == 0 || out_block_ == 0) return;
    const int64_t avg = std::max<int64_t>(1, out_block_ / nparts);
    pool.parallel_for(tasks, std::max<int64_t>(1, kCopyChunkBytes / avg),
                      [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / nparts;
        const Part& p = parts_[t % nparts];
        char* dst = out_ + o * out_block_ + p.offset;
        const char* src = p.data + o * p.block;
        // The memory plan may have had the producer write straight into the
        // output (a Concat view): then there is nothing to copy.
        if (p.block > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(p.block));
      }
    });
  }

 private:
  std::vector<Part> parts_;
  int64_t outer_, out_block_;
  char* out_;
};

// Output-order iteration over a permuted input, dims collapsed.
template <typename T>
void transpose(const T* in, T* out, const Shape& dims, const Shape& in_strides,
               ThreadPool& pool) {
  const int nd = static_cast<int>(dims.size());
  const int64_t inner = dims[nd - 1];
  const int64_t inner_stride = in_strides[nd - 1];
  const int64_t rows = product(dims, 0, static_cast<size_t>(nd - 1));
  pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
    int64_t index[KITE_MAX_RANK] = {};
    int64_t offset = 0;
    int64_t rest = begin;
    for (int d = nd - 2; d >= 0; --d) {
      index[d] = rest % dims[d];
      rest /= dims[d];
      offset += index[d] * in_strides[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* o = out + row * inner;
      const T* i = in + offset;
      if (inner_stride == 1) {
        std::memcpy(o, i, static_cast<size_t>(inner) * sizeof(T));
      } else {
        for (int64_t k = 0; k < inner; ++k) o[k] = i[k * inner_stride];
      }
      for (int d = nd - 2; d >= 0; --d) {
        offset += in_strides[d];
        if (++index[d] < dims[d]) break;
        offset -= index[d] * in_strides[d];
        index[d] = 0;
      }
    }
  });
}

class TransposeKernel : public Kernel {
 public:
  TransposeKernel(size_t element_size, Shape dims, Shape in_strides, const void* in, void* out,
                  int64_t numel)
      : element_size_(element_size), dims_(std::move(dims)), in_strides_(std::move(in_strides)),
        in_(in), out_(out), numel_(numel) {}

  void run(ThreadPool& pool) override {
    if (numel_ == 0) return;
    switch (element_size_) {
      case 1: transpose(static_cast<const uint8_t*>(in_), static_cast<uint8_t*>(out_), dims_, in_strides_, pool); break;
      case 2: transpose(static_cast<const uint16_t*>(in_), static_cast<uint16_t*>(out_), dims_, in_strides_, pool); break;
      case 4: transpose(static_cast<const uint32_t*>(in_), static_cast<uint32_t*>(out_), dims_, in_strides_, pool); break;
      default: transpose(static_cast<const uint64_t*>(in_), static_cast<uint64_t*>(out_), dims_, in_strides_, pool); break;
    }
  }

 private:
  size_t element_size_;
  Shape dims_, in_strides_;
  const void* in_;
  void* out_;
  int64_t numel_;
};

class SplitKernel : public CheckedKernel {
 public:
  struct Part {
    char* data;
    int64_t block;   // bytes per outer index
    int64_t offset;  // byte offset inside the input's block
    int64_t size;    // dim along the axis (for the run-time check)
  };
  SplitKernel(const OpNode& op, std::vector<Part> parts, int64_t outer, int64_t in_block,
              const char* in)
      : CheckedKernel(op), parts_(std::move(parts)), outer_(outer), in_block_(in_block), in_(in) {}

  void check_split(const void* data, kite_dtype dtype) {
    split_ = data;
    split_dtype_ = dtype;
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (split_) {
      for (size_t i = 0; i < parts_.size(); ++i) {
        int64_t v = 0;
        read_int64s(static_cast<const char*>(split_) + i * kite::ops::dtype_size(split_dtype_),
                    split_dtype_, 1, &v);
        if (v != parts_[i].size) {
          set_error("split entry %zu is %lld, the declared output has %lld", i,
                    static_cast<long long>(v), static_cast<long long>(parts_[i].size));
          return;
        }
      }
    }
    const int64_t nparts = static_cast<int64_t>(parts_.size());
    const int64_t tasks = outer_ * nparts;
    if (tasks == 0 || in_block_ == 0) return;
    const int64_t avg = std::max<int64_t>(1, in_block_ / nparts);
    pool.parallel_for(tasks, std::max<int64_t>(1, kCopyChunkBytes / avg),
                      [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / nparts;
        const Part& p = parts_[t % nparts];
        if (p.block > 0) {
          std::memcpy(p.data + o * p.block, in_ + o * in_block_ + p.offset,
                      static_cast<size_t>(p.block));
        }
      }
    });
  }

 private:
  std::vector<Part> parts_;
  int64_t outer_, in_block_;
  const char* in_;
  const void* split_ = nullptr;
  kite_dtype split_dtype_ = KITE_DTYPE_INT64;
};

class ShapeKernel : public Kernel {
 public:
  ShapeKernel(Shape values, int64_t* out) : values_(std::move(values)), out_(out) {}
  void run(ThreadPool&) override {
    if (!values_.empty()) std::memcpy(out_, values_.data(), values_.size() * sizeof(int64_t));
  }

 private:
  Shape values_;
  int64_t* out_;
};

}  // namespace

std::string check_copy(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (op.op == "Reshape" || op.op == "Squeeze" || op.op == "Unsqueeze") {
    std::string why = expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
    if (!why.empty()) return why;
  }
  return "";
}

std::unique_ptr<Kernel> prepare_copy(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  const Shape out = output_shape(args, 0);
  if (shape_numel(in) != shape_numel(out) || output_dtype(args, 0) != op.inputs[0].dtype) {
    return prepare_error(err, op, "output must hold the input's elements");
  }
  const size_t bytes = static_cast<size_t>(shape_numel(in)) * kite::ops::dtype_size(op.inputs[0].dtype);
  auto kernel = std::make_unique<CopyKernel>(op, args.input_data(0), args.output_data(0), bytes);
  if (op.op == "Dropout" && has_output(args, 1)) {
    if (output_dtype(args, 1) != KITE_DTYPE_BOOL || output_shape(args, 1) != in) {
      return prepare_error(err, op, "mask output must be bool of the input's shape");
    }
    kernel->set_mask(static_cast<uint8_t*>(args.output_data(1)), shape_numel(in));
  }
  const bool value_op = op.op == "Reshape" || op.op == "Squeeze" || op.op == "Unsqueeze";
  if (value_op && op.has_input(1) && op.inputs[1].data == nullptr) {
    const int64_t count = shape_numel(op.inputs[1].shape);
    kernel->check_value(args.input_data(1), op.inputs[1].dtype, count, in, out,
                        op.attr_int("allowzero", 0) != 0);
  }
  return kernel;
}

std::string check_concat(const OpNode& op) {
  if (op.inputs.empty()) return "needs inputs";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.has_input(i)) return "inputs must all be present";
    if (op.inputs[i].dtype != op.inputs[0].dtype) return "inputs must have one dtype";
  }
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  return "";
}

std::unique_ptr<Kernel> prepare_concat(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape out = output_shape(args, 0);
  const int64_t rank = static_cast<int64_t>(out.size());
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), rank);
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t es = static_cast<int64_t>(kite::ops::dtype_size(op.inputs[0].dtype));
  const int64_t inner = product(out, a + 1, out.size()) * es;
  std::vector<ConcatKernel::Part> parts;
  int64_t offset = 0, total = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Shape& s = op.inputs[i].shape;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s.size() != out.size() || (d != a && s[d] != out[d])) {
        return prepare_error(err, op, input_label(op, i) + " does not fit the output shape");
      }
    }
    const int64_t block = s[a] * inner;
    parts.push_back({static_cast<const char*>(args.input_data(static_cast<int>(i))), block, offset});
    offset += block;
    total += s[a];
  }
  if (total != out[a]) return prepare_error(err, op, "input sizes along the axis do not add up");
  return std::make_unique<ConcatKernel>(std::move(parts), product(out, 0, a), offset,
                                        static_cast<char*>(args.output_data(0)));
}

std::string check_transpose(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  return "";
}

std::unique_ptr<Kernel> prepare_transpose(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const size_t rank = in.size();
  Shape perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  perm = op.attr_ints("perm", perm);
  if (perm.size() != rank) return prepare_error(err, op, "perm has the wrong length");
  std::vector<bool> used(rank, false);
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank) || used[perm[i]]) {
      return prepare_error(err, op, "perm is not a permutation");
    }
    used[perm[i]] = true;
    out[i] = in[perm[i]];
  }
  if (!has_output(args, 0) || output_shape(args, 0) != out) {
    return prepare_error(err, op, "output shape is not " + kite::ops::shape_string(out));
  }
  // Output dims with their input strides; drop size-1 dims and merge
  // neighbours that are also neighbours (in order) in the input.
  const Shape in_strides = contiguous_strides(in);
  Shape dims, strides;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = out[i];
    const int64_t s = in_strides[perm[i]];
    if (d == 1) continue;
    if (!dims.empty() && strides.back() == s * d) {
      dims.back() *= d;
      strides.back() = s;
    } else {
      dims.push_back(d);
      strides.push_back(s);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    strides.push_back(1);
  }
  return std::make_unique<TransposeKernel>(kite::ops::dtype_size(op.inputs[0].dtype),
                                           std::move(dims), std::move(strides),
                                           args.input_data(0), args.output_data(0),
                                           shape_numel(in));
}

std::string check_split(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  return expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
}

std::unique_ptr<Kernel> prepare_split(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t es = static_cast<int64_t>(kite::ops::dtype_size(op.inputs[0].dtype));
  const int64_t inner = product(in, a + 1, in.size()) * es;
  std::vector<SplitKernel::Part> parts;
  int64_t offset = 0, total = 0;
  for (int k = 0; k < args.node->num_outputs; ++k) {
    if (!has_output(args, k)) return prepare_error(err, op, "every output must be present");
    const Shape s = output_shape(args, k);
    for (size_t d = 0; d < in.size(); ++d) {
      if (s.size() != in.size() || (d != a && s[d] != in[d])) {
        return prepare_error(err, op, "output " + std::to_string(k) + " does not fit the input");
      }
    }
    const int64_t block = s[a] * inner;
    parts.push_back({static_cast<char*>(args.output_data(k)), block, offset, s[a]});
    offset += block;
    total += s[a];
  }
  if (total != in[a]) return prepare_error(err, op, "output sizes along the axis do not add up");
  auto kernel = std::make_unique<SplitKernel>(op, std::move(parts), product(in, 0, a), offset,
                                              static_cast<const char*>(args.input_data(0)));
  if (op.has_input(1) && op.inputs[1].data == nullptr) {
    if (shape_numel(op.inputs[1].shape) != args.node->num_outputs) {
      return prepare_error(err, op, "split has a different count than the outputs");
    }
    kernel->check_split(args.input_data(1), op.inputs[1].dtype);
  }
  return kernel;
}

std::string check_shape(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  return "";
}

std::unique_ptr<Kernel> prepare_shape(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  if (op.op == "Size") {
    if (!has_output(args, 0) || output_dtype(args, 0) != KITE_DTYPE_INT64 ||
        shape_numel(output_shape(args, 0)) != 1) {
      return prepare_error(err, op, "output must be an int64 scalar");
    }
    return std::make_unique<ShapeKernel>(Shape{shape_numel(in)},
                                         static_cast<int64_t*>(args.output_data(0)));
  }
  const int64_t rank = static_cast<int64_t>(in.size());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  const int64_t start = clamp(op.attr_int("start", 0));
  const int64_t end = clamp(op.attr_int("end", rank));
  Shape values;
  for (int64_t i = start; i < end; ++i) values.push_back(in[i]);
  if (!has_output(args, 0) || output_dtype(args, 0) != KITE_DTYPE_INT64 ||
      output_shape(args, 0) != Shape{static_cast<int64_t>(values.size())}) {
    return prepare_error(err, op, "output must be int64 of shape " + std::to_string(values.size()));
  }
  return std::make_unique<ShapeKernel>(std::move(values), static_cast<int64_t*>(args.output_data(0)));
}

}  // namespace kite::cpu
