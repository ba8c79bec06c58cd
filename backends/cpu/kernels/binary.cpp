// Binary elementwise ops with numpy broadcasting, and Where.
//
// Add, Sub, Mul, Div: float32, int32, int64 (integers wrap on overflow;
// integer division truncates like C++, and a zero divisor gives 0 instead of
// a trap). Pow: float32/int32/int64 base, float32/int32/int64 exponent, the
// base's dtype out. PRelu: float32.
// Equal, Greater, Less, GreaterOrEqual, LessOrEqual: float32/int32/int64
// (Equal also bool) -> bool. And, Or, Xor: bool. Where: any dtype, bool condition.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "common.h"
#include "kernels.h"
#include "vmath.h"

namespace kite::cpu {
namespace {

using BinaryFn = void (*)(const BroadcastPlan& plan, const void* a, const void* b, void* out,
                          ThreadPool& pool);

template <typename T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_add(a, b); else return a + b;
  }
};
struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_sub(a, b); else return a - b;
  }
};
struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_mul(a, b); else return a * b;
  }
};
struct DivOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if (b == -1) return wrap_sub(T(0), a);  // min / -1 wraps instead of trapping
      return a / b;
    } else {
      return a / b;
    }
  }
};
struct PowOp {
  template <typename E>
  float operator()(float a, E b) const { return std::pow(a, static_cast<float>(b)); }
};
// Integer base: exact repeated squaring (wrapping) for an integer exponent;
// a negative exponent truncates 1/a^n toward zero. A float exponent goes
// through double and saturates.
struct IntPowOp {
  template <typename T, typename E>
  T operator()(T a, E b) const {
    if constexpr (std::is_integral_v<E>) {
      if (b < 0) return a == 1 ? T(1) : a == -1 ? ((b % 2) != 0 ? T(-1) : T(1)) : T(0);
      using U = std::make_unsigned_t<T>;
      U result = 1, base = static_cast<U>(a);
      for (auto e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
        if (e & 1) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
      }
      return static_cast<T>(result);
    } else {
      const double r = std::pow(static_cast<double>(a), static_cast<double>(b));
      if (std::isnan(r)) return T(0);
      if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
      if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
      return static_cast<T>(r);
    }
  }
};
struct PReluOp {
  float operator()(float x, float slope) const { return x < 0.0f ? x * slope : x; }
};
struct EqualOp {
  template <typename T>
  uint8_t operator()(T a, T b) const { return a == b; }
};
struct GreaterOp {
  template <typename T>
  uint8_t operator()(T a, T b) const { return a > b; }
};
struct LessOp {
  template <typename T>
  uint8_t operator()(T a, T b) const { return a < b; }
};
struct GreaterOrEqualOp {
  template <typename T>
  uint8_t operator()(T a, T b) const { return a >= b; }
};
struct LessOrEqualOp {
  template <typename T>
  uint8_t operator()(T a, T b) const { return a <= b; }
};
struct XorOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) != (b != 0); }
};
struct AndOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};
struct OrOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) | (b != 0); }
};

// Float Add, Sub, Mul and Div go to vmath::arith (vectors, the same bits).
template <typename F>
constexpr bool kFloatArith = std::is_same_v<F, AddOp> || std::is_same_v<F, SubOp> ||
                             std::is_same_v<F, MulOp> || std::is_same_v<F, DivOp>;
template <typename F>
constexpr vmath::Arith arith_of() {
  if constexpr (std::is_same_v<F, AddOp>) return vmath::Arith::kAdd;
  if constexpr (std::is_same_v<F, SubOp>) return vmath::Arith::kSub;
  if constexpr (std::is_same_v<F, MulOp>) return vmath::Arith::kMul;
  return vmath::Arith::kDiv;
}

template <typename A, typename B, typename O, typename F>
void run_binary(const BroadcastPlan& plan, const void* a_data, const void* b_data,
                void* out_data, ThreadPool& pool) {
  const A* a = static_cast<const A*>(a_data);
  const B* b = static_cast<const B*>(b_data);
  O* out = static_cast<O*>(out_data);
  const F f{};
  const int64_t n = plan.inner;
  const int64_t sa = plan.inner_stride[0], sb = plan.inner_stride[1];
  // Columns [i0, i1) of the row whose inputs start at off, output at o.
  auto span = [&](const int64_t* off, int64_t o, int64_t i0, int64_t i1) {
    const A* pa = a + off[0] + i0 * sa;
    const B* pb = b + off[1] + i0 * sb;
    O* po = out + o + i0;
    const int64_t m = i1 - i0;
    if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float> && std::is_same_v<O, float> &&
                  kFloatArith<F>) {
      // (The plain loops below stay scalar: GCC's cost model at -O2 does not
      // version a loop for the aliasing of po with pa. Where the operands
      // stream from memory, as the squeeze-and-excitation Muls' planes do,
      // that measured the same.)
      if ((sa == 0 || sa == 1) && (sb == 0 || sb == 1) && (sa | sb) != 0) {
        vmath::arith(arith_of<F>(), pa, sa, pb, sb, po, m);
        return;
      }
    }
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < m; ++i) po[i] = f(pa[i], pb[i]);
    } else if (sa == 0 && sb == 1) {
      const A av = pa[0];
      for (int64_t i = 0; i < m; ++i) po[i] = f(av, pb[i]);
    } else if (sa == 1 && sb == 0) {
      const B bv = pb[0];
      for (int64_t i = 0; i < m; ++i) po[i] = f(pa[i], bv);
    } else {
      for (int64_t i = 0; i < m; ++i) po[i] = f(pa[i * sa], pb[i * sb]);
    }
  };
  // Few long rows (a residual Add of two same-shape tensors is one row):
  // pieces of rows, so that every thread gets some; else whole rows.
  constexpr int64_t kPiece = 16384;
  if (plan.rows < 2 * static_cast<int64_t>(pool.size()) && n > kPiece) {
    const int64_t pieces = (n + kPiece - 1) / kPiece;
    pool.parallel_for(plan.rows * pieces, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t row = t / pieces, i0 = t % pieces * kPiece;
        plan.for_rows(row, row + 1, [&](const int64_t* off, int64_t o) {
          span(off, o, i0, std::min(n, i0 + kPiece));
        });
      }
    });
    return;
  }
  pool.parallel_for(plan.rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](const int64_t* off, int64_t o) { span(off, o, 0, n); });
  });
}

template <typename F>
BinaryFn arithmetic(kite_dtype d) {
  switch (d) {
    case KITE_DTYPE_FLOAT32: return run_binary<float, float, float, F>;
    case KITE_DTYPE_INT32: return run_binary<int32_t, int32_t, int32_t, F>;
    case KITE_DTYPE_INT64: return run_binary<int64_t, int64_t, int64_t, F>;
    default: return nullptr;
  }
}

template <typename F>
BinaryFn comparison(kite_dtype d) {
  switch (d) {
    case KITE_DTYPE_FLOAT32: return run_binary<float, float, uint8_t, F>;
    case KITE_DTYPE_INT32: return run_binary<int32_t, int32_t, uint8_t, F>;
    case KITE_DTYPE_INT64: return run_binary<int64_t, int64_t, uint8_t, F>;
    case KITE_DTYPE_BOOL: return run_binary<uint8_t, uint8_t, uint8_t, F>;
    default: return nullptr;
  }
}

template <typename T>
BinaryFn int_pow(kite_dtype exponent) {
  switch (exponent) {
    case KITE_DTYPE_FLOAT32: return run_binary<T, float, T, IntPowOp>;
    case KITE_DTYPE_INT32: return run_binary<T, int32_t, T, IntPowOp>;
    case KITE_DTYPE_INT64: return run_binary<T, int64_t, T, IntPowOp>;
    default: return nullptr;
  }
}

BinaryFn select_pow(kite_dtype base, kite_dtype exponent) {
  switch (base) {
    case KITE_DTYPE_FLOAT32:
      switch (exponent) {
        case KITE_DTYPE_FLOAT32: return run_binary<float, float, float, PowOp>;
        case KITE_DTYPE_INT32: return run_binary<float, int32_t, float, PowOp>;
        case KITE_DTYPE_INT64: return run_binary<float, int64_t, float, PowOp>;
        default: return nullptr;
      }
    case KITE_DTYPE_INT32: return int_pow<int32_t>(exponent);
    case KITE_DTYPE_INT64: return int_pow<int64_t>(exponent);
    default: return nullptr;
  }
}

// The kernel for (op, dtype of A, dtype of B), or null.
BinaryFn select(const std::string& op, kite_dtype a, kite_dtype b) {
  const bool same = a == b;
  if (op == "Add" && same) return arithmetic<AddOp>(a);
  if (op == "Sub" && same) return arithmetic<SubOp>(a);
  if (op == "Mul" && same) return arithmetic<MulOp>(a);
  if (op == "Div" && same) return arithmetic<DivOp>(a);
  if (op == "Pow") return select_pow(a, b);
  if (op == "PRelu" && same && a == KITE_DTYPE_FLOAT32) return run_binary<float, float, float, PReluOp>;
  if (op == "Equal" && same) return comparison<EqualOp>(a);
  if (op == "Greater" && same && a != KITE_DTYPE_BOOL) return comparison<GreaterOp>(a);
  if (op == "Less" && same && a != KITE_DTYPE_BOOL) return comparison<LessOp>(a);
  if (op == "GreaterOrEqual" && same && a != KITE_DTYPE_BOOL) return comparison<GreaterOrEqualOp>(a);
  if (op == "LessOrEqual" && same && a != KITE_DTYPE_BOOL) return comparison<LessOrEqualOp>(a);
  if (op == "Xor" && same && a == KITE_DTYPE_BOOL) return run_binary<uint8_t, uint8_t, uint8_t, XorOp>;
  if (op == "And" && same && a == KITE_DTYPE_BOOL) return run_binary<uint8_t, uint8_t, uint8_t, AndOp>;
  if (op == "Or" && same && a == KITE_DTYPE_BOOL) return run_binary<uint8_t, uint8_t, uint8_t, OrOp>;
  return nullptr;
}

class BinaryKernel : public Kernel {
 public:
  BinaryKernel(BinaryFn fn, BroadcastPlan plan, const void* a, const void* b, void* out)
      : fn_(fn), plan_(std::move(plan)), a_(a), b_(b), out_(out) {}
  void run(ThreadPool& pool) override {
    if (plan_.numel > 0) fn_(plan_, a_, b_, out_, pool);
  }

 private:
  BinaryFn fn_;
  BroadcastPlan plan_;
  const void* a_;
  const void* b_;
  void* out_;
};

template <typename T>
void run_where(const BroadcastPlan& plan, const uint8_t* cond, const void* x_data,
               const void* y_data, void* out_data, ThreadPool& pool) {
  const T* x = static_cast<const T*>(x_data);
  const T* y = static_cast<const T*>(y_data);
  T* out = static_cast<T*>(out_data);
  const int64_t n = plan.inner;
  const int64_t sc = plan.inner_stride[0], sx = plan.inner_stride[1], sy = plan.inner_stride[2];
  pool.parallel_for(plan.rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](const int64_t* off, int64_t o) {
      const uint8_t* pc = cond + off[0];
      const T* px = x + off[1];
      const T* py = y + off[2];
      for (int64_t i = 0; i < n; ++i) out[o + i] = pc[i * sc] ? px[i * sx] : py[i * sy];
    });
  });
}

class WhereKernel : public Kernel {
 public:
  WhereKernel(size_t element_size, BroadcastPlan plan, const void* cond, const void* x,
              const void* y, void* out)
      : element_size_(element_size), plan_(std::move(plan)), cond_(cond), x_(x), y_(y),
        out_(out) {}
  void run(ThreadPool& pool) override {
    if (plan_.numel == 0) return;
    const uint8_t* c = static_cast<const uint8_t*>(cond_);
    with_element_type(element_size_, [&](auto t) {
      run_where<decltype(t)>(plan_, c, x_, y_, out_, pool);
    });
  }

 private:
  size_t element_size_;
  BroadcastPlan plan_;
  const void* cond_;
  const void* x_;
  const void* y_;
  void* out_;
};

}  // namespace

std::string check_binary(const OpNode& op) {
  if (op.inputs.size() < 2 || !op.has_input(0) || !op.has_input(1)) return "needs two inputs";
  const kite_dtype a = op.inputs[0].dtype, b = op.inputs[1].dtype;
  if (!select(op.op, a, b)) {
    return std::string("the CPU kernel does not take dtypes ") + kite::ops::dtype_name(a) +
           " and " + kite::ops::dtype_name(b);
  }
  return "";
}

std::unique_ptr<Kernel> prepare_binary(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  BinaryFn fn = select(op.op, op.inputs[0].dtype, op.inputs[1].dtype);
  if (!fn) return prepare_error(err, op, check_binary(op));
  // The output is the inputs' broadcast: the op rule checked it before prepare.
  const Shape out = output_shape(args, 0);
  return std::make_unique<BinaryKernel>(
      fn, make_broadcast_plan(out, {&op.inputs[0].shape, &op.inputs[1].shape}),
      args.input_data(0), args.input_data(1), args.output_data(0));
}

std::string check_where(const OpNode& op) {
  if (op.inputs.size() < 3 || !op.has_input(0) || !op.has_input(1) || !op.has_input(2)) {
    return "needs three inputs";
  }
  std::string why = expect_dtype(op, 0, {KITE_DTYPE_BOOL});
  if (!why.empty()) return why;
  if (op.inputs[1].dtype != op.inputs[2].dtype) return "X and Y must have one dtype";
  return expect_movable(op, 1);
}

std::unique_ptr<Kernel> prepare_where(const KernelArgs& args, std::string* /*err*/) {
  const OpNode& op = *args.op;
  const Shape out = output_shape(args, 0);  // the inputs' broadcast (checked by the rule)
  return std::make_unique<WhereKernel>(
      movable_element_size(op.inputs[1].dtype),
      make_broadcast_plan(out, {&op.inputs[0].shape, &op.inputs[1].shape, &op.inputs[2].shape}),
      args.input_data(0), args.input_data(1), args.input_data(2), args.output_data(0));
}

}  // namespace kite::cpu
