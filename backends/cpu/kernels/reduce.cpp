// ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceSumSquare (float32, int32, int64; ReduceMax/ReduceMin also bool),
// ReduceL2, ReduceLogSumExp (float32), and ArgMax, ArgMin (float32, int32, int64 -> int64). Axes come
// from the attribute (older opsets) or from a constant input. Float
// reductions accumulate in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSumExp };

// Kept and reduced dims of the input, each list collapsed where neighbours
// of one kind are contiguous.
struct ReducePlan {
  Shape kept_dims, kept_strides;
  Shape red_dims, red_strides;
  int64_t out_numel = 1;
  int64_t red_numel = 1;
};

ReducePlan make_reduce_plan(const Shape& in, const bool* reduce) {
  ReducePlan p;
  const Shape strides = contiguous_strides(in);
  int last_kind = -1;  // 0 kept, 1 reduced
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1) continue;
    const int kind = reduce[d] ? 1 : 0;
    Shape& dims = kind ? p.red_dims : p.kept_dims;
    Shape& st = kind ? p.red_strides : p.kept_strides;
    if (kind == last_kind && st.back() == strides[d] * in[d]) {
      dims.back() *= in[d];
      st.back() = strides[d];
    } else {
      dims.push_back(in[d]);
      st.push_back(strides[d]);
    }
    last_kind = kind;
  }
  p.out_numel = shape_numel(p.kept_dims);
  p.red_numel = shape_numel(p.red_dims);
  if (p.red_dims.empty()) {
    p.red_dims.push_back(1);
    p.red_strides.push_back(0);
  }
  return p;
}

// Calls f(value) for every input element reduced into output o.
template <typename T, typename F>
inline void for_reduced(const ReducePlan& p, const T* in, int64_t o, F&& f) {
  const int nk = static_cast<int>(p.kept_dims.size());
  const int nr = static_cast<int>(p.red_dims.size());
  if (p.red_numel == 0) return;
  int64_t base = 0, rest = o;
  for (int d = nk - 1; d >= 0; --d) {
    base += (rest % p.kept_dims[d]) * p.kept_strides[d];
    rest /= p.kept_dims[d];
  }
  const int64_t inner = p.red_dims[nr - 1];
  const int64_t inner_stride = p.red_strides[nr - 1];
  const int64_t red_rows = p.red_numel / inner;
  for (int64_t r = 0; r < red_rows; ++r) {
    int64_t offset = base, rr = r;
    for (int d = nr - 2; d >= 0; --d) {
      offset += (rr % p.red_dims[d]) * p.red_strides[d];
      rr /= p.red_dims[d];
    }
    const T* x = in + offset;
    if (inner_stride == 1) {
      for (int64_t i = 0; i < inner; ++i) f(x[i]);
    } else {
      for (int64_t i = 0; i < inner; ++i) f(x[i * inner_stride]);
    }
  }
}

// Integer sums and products wrap like the elementwise ops.
template <typename T>
T wrap(uint64_t v) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(v));
}

template <typename T, ReduceKind K>
T reduce_one(const ReducePlan& p, const T* in, int64_t o) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) {
    constexpr bool kMax = K == ReduceKind::kMax;
    T best = kFloat ? (kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity())
                    : (kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max());
    if constexpr (std::is_same_v<T, uint8_t>) best = kMax ? 0 : 1;  // bool: any / all
    for_reduced(p, in, o, [&](T v) {
      if (kMax ? v > best : v < best) best = v;
      if constexpr (kFloat) {
        if (v != v) best = v;  // NaN propagates
      }
    });
    return best;
  } else if constexpr (K == ReduceKind::kLogSumExp) {
    T max = -std::numeric_limits<T>::infinity();
    for_reduced(p, in, o, [&](T v) { max = std::max(max, v); });
    if (!std::isfinite(max)) max = 0;
    double sum = 0.0;
    for_reduced(p, in, o, [&](T v) { sum += std::exp(static_cast<double>(v) - max); });
    return static_cast<T>(std::log(sum) + max);
  } else if constexpr (kFloat) {
    double acc = K == ReduceKind::kProd ? 1.0 : 0.0;
    for_reduced(p, in, o, [&](T v) {
      const double d = v;
      if constexpr (K == ReduceKind::kProd) acc *= d;
      else if constexpr (K == ReduceKind::kL1) acc += std::fabs(d);
      else if constexpr (K == ReduceKind::kL2 || K == ReduceKind::kSumSquare) acc += d * d;
      else acc += d;  // Sum, Mean
    });
    if constexpr (K == ReduceKind::kMean) acc /= static_cast<double>(p.red_numel);
    if constexpr (K == ReduceKind::kL2) acc = std::sqrt(acc);
    return static_cast<T>(acc);
  } else {
    uint64_t acc = K == ReduceKind::kProd ? 1 : 0;
    for_reduced(p, in, o, [&](T v) {
      const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(v));
      if constexpr (K == ReduceKind::kProd) acc *= u;
      else if constexpr (K == ReduceKind::kL1) acc += v < 0 ? uint64_t(0) - u : u;
      else if constexpr (K == ReduceKind::kSumSquare) acc += u * u;
      else acc += u;  // Sum, Mean
    });
    if constexpr (K == ReduceKind::kMean) {
      const int64_t sum = static_cast<int64_t>(acc);
      return p.red_numel > 0 ? wrap<T>(static_cast<uint64_t>(sum / p.red_numel)) : T(0);
    }
    return wrap<T>(acc);
  }
}

template <typename T, ReduceKind K>
void reduce_run(const ReducePlan& p, const T* in, T* out, ThreadPool& pool) {
  pool.parallel_for(p.out_numel, rows_per_chunk(std::max<int64_t>(p.red_numel, 1)),
                    [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) out[o] = reduce_one<T, K>(p, in, o);
  });
}

using ReduceFn = void (*)(const ReducePlan&, const void*, void*, ThreadPool&);

template <typename T, ReduceKind K>
void reduce_entry(const ReducePlan& p, const void* in, void* out, ThreadPool& pool) {
  reduce_run<T, K>(p, static_cast<const T*>(in), static_cast<T*>(out), pool);
}

template <ReduceKind K>
ReduceFn reduce_for(kite_dtype d) {
  constexpr bool kFloatOnly = K == ReduceKind::kL2 || K == ReduceKind::kLogSumExp;
  switch (d) {
    case KITE_DTYPE_FLOAT32: return reduce_entry<float, K>;
    case KITE_DTYPE_INT32: return kFloatOnly ? nullptr : reduce_entry<int32_t, K>;
    case KITE_DTYPE_INT64: return kFloatOnly ? nullptr : reduce_entry<int64_t, K>;
    default: return nullptr;
  }
}

ReduceFn select_reduce(const std::string& op, kite_dtype d) {
  if (d == KITE_DTYPE_BOOL) {  // opset 20: max = any, min = all
    if (op == "ReduceMax") return reduce_entry<uint8_t, ReduceKind::kMax>;
    if (op == "ReduceMin") return reduce_entry<uint8_t, ReduceKind::kMin>;
    return nullptr;
  }
  if (op == "ReduceSum") return reduce_for<ReduceKind::kSum>(d);
  if (op == "ReduceMean") return reduce_for<ReduceKind::kMean>(d);
  if (op == "ReduceMax") return reduce_for<ReduceKind::kMax>(d);
  if (op == "ReduceMin") return reduce_for<ReduceKind::kMin>(d);
  if (op == "ReduceProd") return reduce_for<ReduceKind::kProd>(d);
  if (op == "ReduceL1") return reduce_for<ReduceKind::kL1>(d);
  if (op == "ReduceL2") return reduce_for<ReduceKind::kL2>(d);
  if (op == "ReduceSumSquare") return reduce_for<ReduceKind::kSumSquare>(d);
  if (op == "ReduceLogSumExp") return reduce_for<ReduceKind::kLogSumExp>(d);
  return nullptr;
}

class ReduceKernel : public Kernel {
 public:
  ReduceKernel(ReduceFn fn, ReducePlan plan, const void* in, void* out)
      : fn_(fn), plan_(std::move(plan)), in_(in), out_(out) {}
  void run(ThreadPool& pool) override {
    if (plan_.out_numel > 0) fn_(plan_, in_, out_, pool);
  }

 private:
  ReduceFn fn_;
  ReducePlan plan_;
  const void* in_;
  void* out_;
};

class CopyAllKernel : public Kernel {
 public:
  CopyAllKernel(const void* in, void* out, size_t bytes) : in_(in), out_(out), bytes_(bytes) {}
  void run(ThreadPool&) override { copy_bytes(out_, in_, bytes_); }

 private:
  const void* in_;
  void* out_;
  size_t bytes_;
};

template <typename T>
class ArgReduceKernel : public Kernel {
 public:
  ArgReduceKernel(bool max, bool last, int64_t outer, int64_t len, int64_t inner, const T* in,
                  int64_t* out)
      : max_(max), last_(last), outer_(outer), len_(len), inner_(inner), in_(in), out_(out) {}

  void run(ThreadPool& pool) override {
    pool.parallel_for(outer_ * inner_, rows_per_chunk(std::max<int64_t>(len_, 1)),
                      [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line) {
        const int64_t o = line / inner_, i = line % inner_;
        const T* x = in_ + o * len_ * inner_ + i;
        int64_t best_index = 0;
        for (int64_t j = 1; j < len_; ++j) {
          const T v = x[j * inner_], b = x[best_index * inner_];
          const bool better = max_ ? (last_ ? v >= b : v > b) : (last_ ? v <= b : v < b);
          if (better) best_index = j;
        }
        out_[line] = best_index;
      }
    });
  }

 private:
  bool max_, last_;
  int64_t outer_, len_, inner_;
  const T* in_;
  int64_t* out_;
};

}  // namespace

std::string check_reduce(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (!select_reduce(op.op, op.inputs[0].dtype)) {
    return std::string("the CPU kernel does not take dtype ") + kite::ops::dtype_name(op.inputs[0].dtype);
  }
  std::string why = expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
  if (why.empty()) why = expect_constant(op, 1, "axes");
  return why;
}

std::unique_ptr<Kernel> prepare_reduce(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  std::string why = check_reduce(op);
  if (!why.empty()) return prepare_error(err, op, why);
  const Shape& in = op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  // The axes the op rule resolves (the output shape is the rule's, checked
  // before prepare).
  IntValues axes;
  if (!axes.read(op.has_input(1) ? IntSource::input(args, 1) : IntSource::attribute(op, "axes"))) {
    return prepare_error(err, op, "axes has too many values");
  }
  bool reduce[KITE_MAX_RANK] = {};
  bool identity = false;
  kite::ops::RuleError rule_err;
  if (!kite::ops::resolve_reduce_axes(op.op.c_str(), axes.v, std::max<int64_t>(axes.count, 0), rank,
                                      op.attr_int("noop_with_empty_axes", 0) != 0, reduce,
                                      &identity, &rule_err)) {
    return prepare_error(err, op, rule_err.message);
  }
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  if (identity) {
    const size_t es = kite::ops::dtype_size(op.inputs[0].dtype);
    return std::make_unique<CopyAllKernel>(args.input_data(0), args.output_data(0),
                                           static_cast<size_t>(shape_numel(in)) * es);
  }
  return std::make_unique<ReduceKernel>(select_reduce(op.op, op.inputs[0].dtype),
                                        make_reduce_plan(in, reduce), args.input_data(0),
                                        args.output_data(0));
}

std::string check_arg_reduce(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  return expect_dtype(op, 0, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
}

std::unique_ptr<Kernel> prepare_arg_reduce(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), rank);
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  // The output (int64, the axis kept as 1 or dropped) is the op rule's,
  // checked before prepare.
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  const bool max = op.op == "ArgMax";
  const bool last = op.attr_int("select_last_index", 0) != 0;
  const int64_t outer = product(in, 0, a), len = in[a], inner = product(in, a + 1, in.size());
  int64_t* out = static_cast<int64_t*>(args.output_data(0));
  switch (op.inputs[0].dtype) {
    case KITE_DTYPE_INT32:
      return std::make_unique<ArgReduceKernel<int32_t>>(max, last, outer, len, inner, static_cast<const int32_t*>(args.input_data(0)), out);
    case KITE_DTYPE_INT64:
      return std::make_unique<ArgReduceKernel<int64_t>>(max, last, outer, len, inner, static_cast<const int64_t*>(args.input_data(0)), out);
    default:
      return std::make_unique<ArgReduceKernel<float>>(max, last, outer, len, inner, static_cast<const float*>(args.input_data(0)), out);
  }
}

}  // namespace kite::cpu
