// Slice: starts/ends/axes/steps resolved by kite::ops::resolve_slice, the
// function the op rule uses, at prepare when they are constants and at run
// (checked against the declared output shape) when they are computed.
#include <algorithm>
#include <string>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

using kite::ops::SliceAxis;

class SliceKernel : public CheckedKernel {
 public:
  // params: starts, ends, axes, steps (axes and steps may be absent).
  SliceKernel(const OpNode& op, size_t element_size, Shape in, Shape out, const char* data,
              char* result, const IntSource (&params)[4])
      : CheckedKernel(op), es_(element_size), in_(std::move(in)), out_(std::move(out)),
        data_(data), result_(result) {
    std::copy(params, params + 4, params_);
    in_strides_ = contiguous_strides(in_);
  }

  // Resolves once when every parameter is known; false with the error set.
  bool prepare_constant() {
    bool constant = true;
    for (const IntSource& p : params_) constant = constant && p.constant;
    return axes_.prepare(constant, [this](SliceAxis* out) { return resolve(out); });
  }

  void run(ThreadPool& pool) override {
    clear_error();
    SliceAxis scratch[KITE_MAX_RANK];
    const SliceAxis* axes = axes_.get(scratch, [this](SliceAxis* out) { return resolve(out); });
    if (!axes) return;
    int nd = static_cast<int>(out_.size());
    const int64_t numel = shape_numel(out_);
    if (numel == 0) return;
    // resolve_slice keeps |step| * (count - 1) < dim, so these offsets stay
    // inside the input.
    int64_t base = 0;
    int64_t stride[KITE_MAX_RANK];
    for (int d = 0; d < nd; ++d) {
      base += axes[d].start * in_strides_[d];
      stride[d] = axes[d].step * in_strides_[d];
    }
    // Trailing axes taken whole are one contiguous run with the axis before
    // them when that one has step 1: a row is then the whole run (a channel
    // split of NCHW, as shufflenet's, is one copy per batch item instead of
    // one per image row; those small copies and each row's divisions were
    // 5% of shufflenet_v2's samples).
    // (The run is axes [nd - 1, rank), every one with step 1 and all but
    // its first whole; it takes in axis nd - 2 when axis nd - 1 is whole.)
    int64_t inner = out_[nd - 1];
    const bool contiguous = stride[nd - 1] == 1;
    if (contiguous) {
      while (nd > 1 && axes[nd - 1].start == 0 && out_[nd - 1] == in_[nd - 1] && axes[nd - 2].step == 1) {
        inner *= out_[nd - 2];
        --nd;
      }
    }
    const int64_t rows = numel / inner;
    const size_t es = es_;
    pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = base, rest = row;
        for (int d = nd - 2; d >= 0; --d) {
          offset += (rest % out_[d]) * stride[d];
          rest /= out_[d];
        }
        char* dst = result_ + row * inner * static_cast<int64_t>(es);
        const char* src = data_ + offset * static_cast<int64_t>(es);
        if (contiguous) {
          std::memcpy(dst, src, static_cast<size_t>(inner) * es);
        } else {
          const int64_t s = stride[nd - 1] * static_cast<int64_t>(es);
          for (int64_t k = 0; k < inner; ++k) copy_element(dst + k * es, src + k * s, es);
        }
      }
    });
  }

 private:
  // The parameters into one SliceAxis per input dim, which must give the
  // declared output shape.
  bool resolve(SliceAxis* out) {
    IntValues starts, ends, axes, steps;
    if (!starts.read(params_[0]) || !ends.read(params_[1]) || !axes.read(params_[2]) ||
        !steps.read(params_[3])) {
      set_error("starts, ends, axes or steps has more than %lld values",
                static_cast<long long>(IntValues::kCapacity));
      return false;
    }
    const int64_t n = starts.count;
    if (ends.count != n || (axes.count >= 0 && axes.count != n) ||
        (steps.count >= 0 && steps.count != n)) {
      set_error("starts, ends, axes and steps differ in length");
      return false;
    }
    kite::ops::SliceSpec spec;
    spec.starts = starts.v;
    spec.ends = ends.v;
    spec.axes = axes.values_or_null();
    spec.steps = steps.values_or_null();
    spec.count = n;
    kite::ops::RuleError err;
    const int64_t rank = static_cast<int64_t>(in_.size());
    if (!kite::ops::resolve_slice(in_.data(), rank, spec, out, &err)) return rule_failed(err);
    int64_t dims[KITE_MAX_RANK];
    for (int64_t d = 0; d < rank; ++d) dims[d] = out[d].count;
    return gives_declared("starts/ends/axes/steps", dims, rank, out_);
  }

  size_t es_;
  Shape in_, out_, in_strides_;
  const char* data_;
  char* result_;
  IntSource params_[4];
  ResolvedAxes<SliceAxis> axes_;
};

}  // namespace

std::string check_slice(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  std::string why = expect_movable(op, 0);
  return why.empty() ? expect_dtypes(op, 1, 5, {KITE_DTYPE_INT64, KITE_DTYPE_INT32}) : why;
}

std::unique_ptr<Kernel> prepare_slice(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const Shape out = output_shape(args, 0);
  if (in.empty() || out.size() != in.size()) {
    return prepare_error(err, op, "output rank differs from the input, or it is a scalar");
  }
  // Opset 10+: inputs starts, ends, axes, steps; opset 1: attributes (no steps).
  IntSource params[4];
  static const char* const kNames[3] = {"starts", "ends", "axes"};
  for (size_t k = 0; k < 4; ++k) {
    params[k] = op.inputs.size() >= 3 ? IntSource::input(args, k + 1)
                : k < 3               ? IntSource::attribute(op, kNames[k])
                                      : IntSource();
  }
  if (!params[0].present() || !params[1].present()) {
    return prepare_error(err, op, "starts and ends are required");
  }
  auto kernel = std::make_unique<SliceKernel>(
      op, movable_element_size(op.inputs[0].dtype), in, out,
      static_cast<const char*>(args.input_data(0)), static_cast<char*>(args.output_data(0)), params);
  if (!kernel->prepare_constant()) {
    *err = kernel->run_error();
    return nullptr;
  }
  return kernel;
}

}  // namespace kite::cpu
