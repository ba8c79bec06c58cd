// Cast between float32, float16, int64, int32, int8, uint8 and bool.
// Float to integer truncates toward zero and saturates (NaN gives 0), so no
// input value has undefined behaviour.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

struct Half {
  uint16_t bits;
};
struct Bool {
  uint8_t value;
};

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, Bool>) return v.value != 0 ? 1.0 : 0.0;
  else return static_cast<double>(v);
}

template <typename D, typename S>
D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<D, Bool>) {
    if constexpr (std::is_same_v<S, Half> || std::is_floating_point_v<S>) return Bool{to_double(v) != 0.0};
    else return Bool{v != 0};
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(static_cast<float>(to_double(v)))};
  } else if constexpr (std::is_same_v<S, Bool>) {
    return static_cast<D>(v.value != 0);
  } else if constexpr (std::is_integral_v<D> &&
                       (std::is_floating_point_v<S> || std::is_same_v<S, Half>)) {
    const double d = to_double(v);
    if (std::isnan(d)) return 0;
    if (d <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(d);
  } else if constexpr (std::is_same_v<S, Half>) {
    return static_cast<D>(half_to_float(v.bits));  // to float
  } else {
    return static_cast<D>(v);  // integer narrowing wraps (two's complement)
  }
}

using CastFn = void (*)(const void* in, void* out, int64_t n, ThreadPool& pool);

template <typename S, typename D>
void run_cast(const void* in_data, void* out_data, int64_t n, ThreadPool& pool) {
  const S* in = static_cast<const S*>(in_data);
  D* out = static_cast<D*>(out_data);
  pool.parallel_for(n, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = convert<D>(in[i]);
  });
}

template <typename S>
CastFn select_to(kite_dtype to) {
  switch (to) {
    case KITE_DTYPE_FLOAT32: return run_cast<S, float>;
    case KITE_DTYPE_FLOAT16: return run_cast<S, Half>;
    case KITE_DTYPE_INT64: return run_cast<S, int64_t>;
    case KITE_DTYPE_INT32: return run_cast<S, int32_t>;
    case KITE_DTYPE_INT8: return run_cast<S, int8_t>;
    case KITE_DTYPE_UINT8: return run_cast<S, uint8_t>;
    case KITE_DTYPE_BOOL: return run_cast<S, Bool>;
    default: return nullptr;
  }
}

CastFn select(kite_dtype from, kite_dtype to) {
  switch (from) {
    case KITE_DTYPE_FLOAT32: return select_to<float>(to);
    case KITE_DTYPE_FLOAT16: return select_to<Half>(to);
    case KITE_DTYPE_INT64: return select_to<int64_t>(to);
    case KITE_DTYPE_INT32: return select_to<int32_t>(to);
    case KITE_DTYPE_INT8: return select_to<int8_t>(to);
    case KITE_DTYPE_UINT8: return select_to<uint8_t>(to);
    case KITE_DTYPE_BOOL: return select_to<Bool>(to);
    default: return nullptr;
  }
}

class CastKernel : public Kernel {
 public:
  CastKernel(CastFn fn, const void* in, void* out, int64_t n) : fn_(fn), in_(in), out_(out), n_(n) {}
  void run(ThreadPool& pool) override {
    if (n_ > 0) fn_(in_, out_, n_, pool);
  }

 private:
  CastFn fn_;
  const void* in_;
  void* out_;
  int64_t n_;
};

}  // namespace

std::string check_cast(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  // The target dtype is checked at prepare, where the declared output gives it.
  if (!select(op.inputs[0].dtype, KITE_DTYPE_FLOAT32)) {
    return std::string("cannot cast from ") + kite::ops::dtype_name(op.inputs[0].dtype);
  }
  return "";
}

std::unique_ptr<Kernel> prepare_cast(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  const kite_dtype to = output_dtype(args, 0);
  CastFn fn = select(op.inputs[0].dtype, to);
  if (!fn) {
    return prepare_error(err, op, std::string("cannot cast to ") + kite::ops::dtype_name(to));
  }
  const int64_t n = shape_numel(op.inputs[0].shape);
  if (shape_numel(output_shape(args, 0)) != n) return prepare_error(err, op, "output size differs");
  return std::make_unique<CastKernel>(fn, args.input_data(0), args.output_data(0), n);
}

}  // namespace kite::cpu
