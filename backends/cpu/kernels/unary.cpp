// Unary elementwise ops: activations and math functions (float32; Abs, Neg,
// Sign, Relu and Clip also int32/int64; Not on bool). Safe in place.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "common.h"
#include "kernels.h"
#include "vmath.h"

namespace kite::cpu {
namespace {

struct Params {
  float alpha = 0.0f;
  float beta = 0.0f;
  bool tanh_gelu = false;
};

using UnaryFn = void (*)(const void* in, void* out, int64_t n, const Params& p, ThreadPool& pool);

template <typename T, typename F>
void run_unary(const void* in_data, void* out_data, int64_t n, const Params& p,
               ThreadPool& pool) {
  const T* in = static_cast<const T*>(in_data);
  T* out = static_cast<T*>(out_data);
  const F f{p};
  pool.parallel_for(n, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
}

// Sigmoid: the vectorised one the fused activations use too (vmath.h).
void run_sigmoid(const void* in_data, void* out_data, int64_t n, const Params&, ThreadPool& pool) {
  const float* in = static_cast<const float*>(in_data);
  float* out = static_cast<float*>(out_data);
  pool.parallel_for(n, 16384, [&](int64_t begin, int64_t end) {
    vmath::sigmoid(in + begin, out + begin, end - begin, false);
  });
}

// Gelu (approximate "none"): the vectorised one the fused activations use
// too (vmath.h); the tanh form stays GeluOp's.
void run_gelu(const void* in_data, void* out_data, int64_t n, const Params& p, ThreadPool& pool);

#define KITE_UNARY(Name, expr)                      \
  struct Name {                                     \
    const Params& p;                                \
    template <typename T>                           \
    T operator()(T x) const {                       \
      (void)p;                                      \
      return expr;                                  \
    }                                               \
  };

KITE_UNARY(ReluOp, x > T(0) ? x : T(0))
KITE_UNARY(SqrtOp, std::sqrt(x))
KITE_UNARY(ReciprocalOp, 1.0f / x)
KITE_UNARY(ExpOp, std::exp(x))
KITE_UNARY(LogOp, std::log(x))
KITE_UNARY(ErfOp, std::erf(x))
KITE_UNARY(TanhOp, std::tanh(x))
KITE_UNARY(LeakyReluOp, x >= 0.0f ? x : p.alpha * x)
KITE_UNARY(EluOp, x > 0.0f ? x : p.alpha * (std::exp(x) - 1.0f))
KITE_UNARY(HardSigmoidOp, std::max(0.0f, std::min(1.0f, p.alpha * x + p.beta)))
KITE_UNARY(HardSwishOp, x * std::max(0.0f, std::min(1.0f, x * (1.0f / 6.0f) + 0.5f)))
KITE_UNARY(NotOp, static_cast<T>(x == 0))
KITE_UNARY(CeilOp, std::ceil(x))
KITE_UNARY(FloorOp, std::floor(x))
KITE_UNARY(RoundOp, std::nearbyint(x))  // halves to even (default rounding mode)
KITE_UNARY(SinOp, std::sin(x))
KITE_UNARY(CosOp, std::cos(x))
// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
KITE_UNARY(SoftplusOp, std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))))
KITE_UNARY(MishOp, x * std::tanh(std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)))))
#undef KITE_UNARY

// -x for an integer, wrapping at the type's minimum (as two's complement
// hardware does) instead of the undefined behaviour of signed overflow.
template <typename T>
T wrapping_neg(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(x));
}

struct AbsOp {
  const Params& p;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? wrapping_neg(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};

struct NegOp {
  const Params& p;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return wrapping_neg(x);
    } else {
      return -x;
    }
  }
};

struct SignOp {
  const Params& p;
  template <typename T>
  T operator()(T x) const {
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;  // keeps 0 and NaN
  }
};

struct GeluOp {
  const Params& p;
  float operator()(float x) const {
    if (p.tanh_gelu) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
    constexpr float kInvSqrt2 = 0.7071067811865476f;
    return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  }
};

void run_gelu(const void* in_data, void* out_data, int64_t n, const Params& p, ThreadPool& pool) {
  if (p.tanh_gelu) return run_unary<float, GeluOp>(in_data, out_data, n, p, pool);
  const float* in = static_cast<const float*>(in_data);
  float* out = static_cast<float*>(out_data);
  pool.parallel_for(n, 16384, [&](int64_t begin, int64_t end) {
    vmath::gelu(in + begin, out + begin, end - begin);
  });
}

template <typename F>
UnaryFn numeric(kite_dtype d, bool ints) {
  switch (d) {
    case KITE_DTYPE_FLOAT32: return run_unary<float, F>;
    case KITE_DTYPE_INT32: return ints ? run_unary<int32_t, F> : nullptr;
    case KITE_DTYPE_INT64: return ints ? run_unary<int64_t, F> : nullptr;
    default: return nullptr;
  }
}

UnaryFn select(const std::string& op, kite_dtype d) {
  if (op == "Relu") return numeric<ReluOp>(d, true);
  if (op == "Abs") return numeric<AbsOp>(d, true);
  if (op == "Neg") return numeric<NegOp>(d, true);
  if (op == "Sign") return numeric<SignOp>(d, true);
  if (op == "Not") return d == KITE_DTYPE_BOOL ? run_unary<uint8_t, NotOp> : nullptr;
  if (d != KITE_DTYPE_FLOAT32) return nullptr;
  if (op == "Sigmoid") return run_sigmoid;
  if (op == "Sqrt") return run_unary<float, SqrtOp>;
  if (op == "Reciprocal") return run_unary<float, ReciprocalOp>;
  if (op == "Exp") return run_unary<float, ExpOp>;
  if (op == "Log") return run_unary<float, LogOp>;
  if (op == "Erf") return run_unary<float, ErfOp>;
  if (op == "Tanh") return run_unary<float, TanhOp>;
  if (op == "LeakyRelu") return run_unary<float, LeakyReluOp>;
  if (op == "Elu") return run_unary<float, EluOp>;
  if (op == "HardSigmoid") return run_unary<float, HardSigmoidOp>;
  if (op == "HardSwish") return run_unary<float, HardSwishOp>;
  if (op == "Gelu") return run_gelu;
  if (op == "Ceil") return run_unary<float, CeilOp>;
  if (op == "Floor") return run_unary<float, FloorOp>;
  if (op == "Round") return run_unary<float, RoundOp>;
  if (op == "Sin") return run_unary<float, SinOp>;
  if (op == "Cos") return run_unary<float, CosOp>;
  if (op == "Softplus") return run_unary<float, SoftplusOp>;
  if (op == "Mish") return run_unary<float, MishOp>;
  return nullptr;
}

class UnaryKernel : public Kernel {
 public:
  UnaryKernel(UnaryFn fn, Params p, const void* in, void* out, int64_t n)
      : fn_(fn), params_(p), in_(in), out_(out), n_(n) {}
  void run(ThreadPool& pool) override {
    if (n_ > 0) fn_(in_, out_, n_, params_, pool);
  }

 private:
  UnaryFn fn_;
  Params params_;
  const void* in_;
  void* out_;
  int64_t n_;
};

// Clip: bounds from inputs 1 and 2 (opset 11+, read at run: they may be
// computed) or from attributes min and max (opset 6).
template <typename T>
class ClipKernel : public Kernel {
 public:
  ClipKernel(const T* in, T* out, int64_t n, const T* lo_in, const T* hi_in, T lo, T hi)
      : in_(in), out_(out), n_(n), lo_in_(lo_in), hi_in_(hi_in), lo_(lo), hi_(hi) {}
  void run(ThreadPool& pool) override {
    const T lo = lo_in_ ? *lo_in_ : lo_;
    const T hi = hi_in_ ? *hi_in_ : hi_;
    const T* in = in_;
    T* out = out_;
    pool.parallel_for(n_, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T x = in[i];
        // min then max, as ONNX defines it (also when lo > hi); NaN passes.
        const T y = x < lo ? lo : x;
        out[i] = y > hi ? hi : y;
      }
    });
  }

 private:
  const T* in_;
  T* out_;
  int64_t n_;
  const T* lo_in_;
  const T* hi_in_;
  T lo_, hi_;
};

template <typename T>
std::unique_ptr<Kernel> make_clip(const KernelArgs& args, int64_t n) {
  const OpNode& op = *args.op;
  T lo = std::numeric_limits<T>::lowest();
  T hi = std::numeric_limits<T>::max();
  if constexpr (std::is_floating_point_v<T>) {
    lo = op.attr_float("min", -std::numeric_limits<float>::infinity());
    hi = op.attr_float("max", std::numeric_limits<float>::infinity());
  }
  const T* lo_in = op.has_input(1) ? static_cast<const T*>(args.input_data(1)) : nullptr;
  const T* hi_in = op.has_input(2) ? static_cast<const T*>(args.input_data(2)) : nullptr;
  return std::make_unique<ClipKernel<T>>(static_cast<const T*>(args.input_data(0)),
                                         static_cast<T*>(args.output_data(0)), n, lo_in, hi_in,
                                         lo, hi);
}

}  // namespace

std::string check_unary(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  const kite_dtype d = op.inputs[0].dtype;
  if (op.op == "Clip") {
    for (size_t i = 0; i < 3; ++i) {
      std::string why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
      if (!why.empty()) return why;
      if (op.has_input(i) && op.inputs[i].dtype != d) return "min and max must have the input's dtype";
      if (i > 0 && op.has_input(i) && op.inputs[i].numel() != 1) {
        return input_label(op, i) + " must hold one value";
      }
    }
    return "";
  }
  if (op.op == "Gelu") {
    const std::string approximate = op.attr_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh") {
      return "approximate '" + approximate + "' is not supported";
    }
  }
  if (!select(op.op, d)) {
    return std::string("the CPU kernel does not take dtype ") + kite::ops::dtype_name(d);
  }
  return "";
}

std::unique_ptr<Kernel> prepare_unary(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  std::string why = check_unary(op);
  if (!why.empty()) return prepare_error(err, op, why);
  const int64_t n = shape_numel(op.inputs[0].shape);
  if (!has_output(args, 0) || shape_numel(output_shape(args, 0)) != n) {
    return prepare_error(err, op, "output and input sizes differ");
  }
  if (op.op == "Clip") {
    switch (op.inputs[0].dtype) {
      case KITE_DTYPE_INT32: return make_clip<int32_t>(args, n);
      case KITE_DTYPE_INT64: return make_clip<int64_t>(args, n);
      default: return make_clip<float>(args, n);
    }
  }
  Params p;
  if (op.op == "LeakyRelu") p.alpha = op.attr_float("alpha", 0.01f);
  if (op.op == "Elu") p.alpha = op.attr_float("alpha", 1.0f);
  if (op.op == "HardSigmoid") {
    p.alpha = op.attr_float("alpha", 0.2f);
    p.beta = op.attr_float("beta", 0.5f);
  }
  if (op.op == "Gelu") p.tanh_gelu = op.attr_string("approximate", "none") == "tanh";
  return std::make_unique<UnaryKernel>(select(op.op, op.inputs[0].dtype), p, args.input_data(0),
                                       args.output_data(0), n);
}

}  // namespace kite::cpu
