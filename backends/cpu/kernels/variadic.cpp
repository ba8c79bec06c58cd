// Max, Min, Sum, Mean over any number of inputs with numpy broadcasting
// (float32; Max, Min and Sum also int32/int64). The output is built in
// passes, one per input; an input that shares the output's buffer (in
// place) goes first so that it is read before it is overwritten.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

enum class Kind { kMax, kMin, kSum, kMean };

template <typename T>
T combine(Kind kind, T acc, T v) {
  switch (kind) {
    case Kind::kMax: return v > acc || v != v ? v : acc;
    case Kind::kMin: return v < acc || v != v ? v : acc;
    default:
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(acc) + static_cast<U>(v));
      } else {
        return acc + v;
      }
  }
}

template <typename T>
void pass(Kind kind, bool first, const BroadcastPlan& plan, const T* in, T* out, ThreadPool& pool) {
  const int64_t n = plan.inner, s = plan.inner_stride[0];
  pool.parallel_for(plan.rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](const int64_t* off, int64_t o) {
      const T* src = in + off[0];
      T* dst = out + o;
      if (first) {
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i * s];
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = combine(kind, dst[i], src[i * s]);
      }
    });
  });
}

template <typename T>
class VariadicKernel : public Kernel {
 public:
  VariadicKernel(Kind kind, std::vector<BroadcastPlan> plans, std::vector<const T*> inputs, T* out,
                 int64_t numel)
      : kind_(kind), plans_(std::move(plans)), inputs_(std::move(inputs)), out_(out),
        numel_(numel) {}

  void run(ThreadPool& pool) override {
    if (numel_ == 0) return;
    for (size_t k = 0; k < inputs_.size(); ++k) pass(kind_, k == 0, plans_[k], inputs_[k], out_, pool);
    if constexpr (std::is_floating_point_v<T>) {
      if (kind_ == Kind::kMean) {
        const T scale = T(1) / static_cast<T>(inputs_.size());
        T* out = out_;
        pool.parallel_for(numel_, 16384, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[i] *= scale;
        });
      }
    }
  }

 private:
  Kind kind_;
  std::vector<BroadcastPlan> plans_;
  std::vector<const T*> inputs_;
  T* out_;
  int64_t numel_;
};

template <typename T>
std::unique_ptr<Kernel> make(const KernelArgs& args, Kind kind) {
  const OpNode& op = *args.op;
  const Shape out = output_shape(args, 0);
  std::vector<size_t> order;
  for (size_t i = 0; i < op.inputs.size(); ++i) order.push_back(i);
  // The input that aliases the output (in place) is read in the first pass.
  std::stable_partition(order.begin(), order.end(), [&](size_t i) {
    return args.input_data(static_cast<int>(i)) == args.output_data(0);
  });
  // Every input broadcasts to the output: the op rule checked it before prepare.
  std::vector<BroadcastPlan> plans;
  std::vector<const T*> inputs;
  for (size_t i : order) {
    plans.push_back(make_broadcast_plan(out, {&op.inputs[i].shape}));
    inputs.push_back(static_cast<const T*>(args.input_data(static_cast<int>(i))));
  }
  return std::make_unique<VariadicKernel<T>>(kind, std::move(plans), std::move(inputs),
                                             static_cast<T*>(args.output_data(0)),
                                             shape_numel(out));
}

}  // namespace

std::string check_variadic(const OpNode& op) {
  if (op.inputs.empty()) return "needs inputs";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.has_input(i)) return "inputs must all be present";
    if (op.inputs[i].dtype != op.inputs[0].dtype) return "inputs must have one dtype";
  }
  if (op.op == "Mean") return expect_dtype(op, 0, {KITE_DTYPE_FLOAT32});
  return expect_dtype(op, 0, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
}

std::unique_ptr<Kernel> prepare_variadic(const KernelArgs& args, std::string* /*err*/) {
  const OpNode& op = *args.op;
  const Kind kind = op.op == "Max" ? Kind::kMax
                    : op.op == "Min" ? Kind::kMin
                    : op.op == "Sum" ? Kind::kSum
                                     : Kind::kMean;
  switch (op.inputs[0].dtype) {
    case KITE_DTYPE_INT32: return make<int32_t>(args, kind);
    case KITE_DTYPE_INT64: return make<int64_t>(args, kind);
    default: return make<float>(args, kind);
  }
}

}  // namespace kite::cpu
