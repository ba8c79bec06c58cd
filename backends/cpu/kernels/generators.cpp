// Ops that make a tensor from scalars rather than from input elements:
// ConstantOfShape (one value everywhere) and Range (an arithmetic
// sequence). A computed shape or computed start/limit/delta is checked at
// run against the declared output, with the op rule's arithmetic
// (kite::ops::range_length).
#include <string>
#include <type_traits>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

// ------------------------------------------------------ ConstantOfShape --

class FillKernel : public CheckedKernel {
 public:
  FillKernel(const OpNode& op, size_t es, const char* value, Shape shape, IntSource shape_value,
             char* out)
      : CheckedKernel(op), es_(es), n_(shape_numel(shape)), out_(out), shape_(std::move(shape)),
        shape_value_(std::move(shape_value)) {
    std::memcpy(value_, value, es);
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (!shape_value_.constant && !shape_matches()) return;
    const size_t es = es_;
    pool.parallel_for(n_, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) copy_element(out_ + i * static_cast<int64_t>(es), value_, es);
    });
  }

 private:
  bool shape_matches() {
    IntValues v;
    if (!v.read(shape_value_) || v.count != static_cast<int64_t>(shape_.size())) {
      set_error("shape value has %lld values, the declared output has %zu dims",
                static_cast<long long>(shape_value_.count), shape_.size());
      return false;
    }
    for (size_t d = 0; d < shape_.size(); ++d) {
      if (v.v[d] != shape_[d]) {
        set_error("shape value %lld differs from the declared output dim %lld",
                  static_cast<long long>(v.v[d]), static_cast<long long>(shape_[d]));
        return false;
      }
    }
    return true;
  }

  size_t es_;
  char value_[8] = {};
  int64_t n_;
  char* out_;
  Shape shape_;
  IntSource shape_value_;
};

// ---------------------------------------------------------------- Range --

template <typename T>
class RangeKernel : public CheckedKernel {
 public:
  RangeKernel(const OpNode& op, const T* start, const T* limit, const T* delta, T* out, int64_t n,
              bool computed)
      : CheckedKernel(op), start_(start), limit_(limit), delta_(delta), out_(out), n_(n),
        computed_(computed) {}

  void run(ThreadPool&) override {
    clear_error();
    const T start = *start_, limit = *limit_, delta = *delta_;
    if (computed_) {
      int64_t count = 0;
      kite::ops::RuleError err;
      // int32 values widen exactly to int64; the rule computes the same.
      using Wide = std::conditional_t<std::is_integral_v<T>, int64_t, float>;
      if (!kite::ops::range_length(static_cast<Wide>(start), static_cast<Wide>(limit),
                                   static_cast<Wide>(delta), &count, &err)) {
        rule_failed(err);
        return;
      }
      if (count != n_) {
        set_error("start, limit and delta give %lld elements, the declared output has %lld",
                  static_cast<long long>(count), static_cast<long long>(n_));
        return;
      }
    }
    for (int64_t i = 0; i < n_; ++i) {
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        out_[i] = static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
      } else {
        out_[i] = start + static_cast<T>(i) * delta;
      }
    }
  }

 private:
  const T *start_, *limit_, *delta_;
  T* out_;
  int64_t n_;
  bool computed_;
};

template <typename T>
std::unique_ptr<Kernel> make_range(const KernelArgs& args, int64_t n, bool computed) {
  return std::make_unique<RangeKernel<T>>(
      *args.op, static_cast<const T*>(args.input_data(0)), static_cast<const T*>(args.input_data(1)),
      static_cast<const T*>(args.input_data(2)), static_cast<T*>(args.output_data(0)), n, computed);
}

}  // namespace

// ------------------------------------------------------------ prepares --

std::string check_constant_of_shape(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs a shape input";
  return expect_dtype(op, 0, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
}

// The value is the op rule's: attribute 'value' (one float for float
// dtypes, one int otherwise, checked by the rule) in the output's dtype.
std::unique_ptr<Kernel> prepare_constant_of_shape(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  const kite_dtype dtype = output_dtype(args, 0);
  char bytes[8] = {};
  const kite::ops::Attr* a = op.find_attr("value");
  bool ok = true;
  if (a && a->type == KITE_ATTR_INTS && a->ints.size() == 1) {
    ok = kite::ops::encode_scalar(dtype, 0.0f, a->ints[0], true, bytes);
  } else if (a && a->type == KITE_ATTR_FLOATS && a->floats.size() == 1) {
    ok = kite::ops::encode_scalar(dtype, a->floats[0], 0, false, bytes);
  } else if (a) {
    return prepare_error(err, op, "attribute 'value' must hold one number");
  } else {
    ok = kite::ops::encode_scalar(dtype, 0.0f, 0, false, bytes);
  }
  if (!ok || movable_element_size(dtype) == 0) {
    return prepare_error(err, op, std::string("output dtype ") + kite::ops::dtype_name(dtype) +
                                      " is not supported");
  }
  return std::make_unique<FillKernel>(op, movable_element_size(dtype), bytes, output_shape(args, 0),
                                      IntSource::input(args, 0),
                                      static_cast<char*>(args.output_data(0)));
}

std::string check_range(const OpNode& op) {
  if (op.inputs.size() < 3) return "needs start, limit and delta";
  for (size_t i = 0; i < 3; ++i) {
    if (!op.has_input(i)) return "needs start, limit and delta";
    std::string why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
    if (!why.empty()) return why;
    if (op.inputs[i].dtype != op.inputs[0].dtype) return "inputs must have one dtype";
  }
  return "";
}

// With constant inputs the declared length is the rule's (checked before
// prepare); computed ones are checked at run.
std::unique_ptr<Kernel> prepare_range(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape out = output_shape(args, 0);
  if (out.size() != 1) return prepare_error(err, op, "output must be 1-D");
  const bool computed = op.inputs[0].data == nullptr || op.inputs[1].data == nullptr ||
                        op.inputs[2].data == nullptr;
  switch (op.inputs[0].dtype) {
    case KITE_DTYPE_INT32: return make_range<int32_t>(args, out[0], computed);
    case KITE_DTYPE_INT64: return make_range<int64_t>(args, out[0], computed);
    default: return make_range<float>(args, out[0], computed);
  }
}

}  // namespace kite::cpu
