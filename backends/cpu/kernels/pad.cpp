// Pad (constant, reflect, edge, wrap; negative pads crop). The pads and axes
// are resolved by kite::ops::resolve_pad, the op rule's function: at prepare
// when they are constants, at run (against the declared output shape) when
// they are computed; kite::ops::pad_source maps each output index.
#include <string>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

using kite::ops::PadAxis;
using kite::ops::PadMode;

class PadKernel : public CheckedKernel {
 public:
  PadKernel(const OpNode& op, PadMode mode, size_t es, Shape in, Shape out, IntSource pads,
            IntSource axes, const char* data, char* result)
      : CheckedKernel(op), mode_(mode), es_(es), in_(std::move(in)), out_(std::move(out)),
        pads_(std::move(pads)), axes_(std::move(axes)), data_(data), result_(result) {
    in_strides_ = contiguous_strides(in_);
  }

  const char* value_data = nullptr;  // constant_value input (same dtype as data)
  char value_bytes[8] = {};          // from the attribute or zero

  // Resolves once when pads and axes are known; false with the error set.
  bool prepare_constant() {
    return padded_.prepare(pads_.constant && axes_.constant,
                           [this](PadAxis* out) { return resolve(out); });
  }

  void run(ThreadPool& pool) override {
    clear_error();
    PadAxis scratch[KITE_MAX_RANK];
    const PadAxis* pad = padded_.get(scratch, [this](PadAxis* out) { return resolve(out); });
    if (!pad) return;
    const int nd = static_cast<int>(in_.size());
    const int64_t numel = shape_numel(out_);
    if (numel == 0) return;
    char value[8];
    std::memcpy(value, value_data ? value_data : value_bytes, es_);
    if (nd == 0) {
      copy_element(result_, data_, es_);
      return;
    }
    const int64_t inner = out_[nd - 1];
    const int64_t rows = numel / inner;
    const size_t es = es_;
    const PadMode mode = mode_;
    pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = 0, rest = row;
        bool constant = false;
        for (int d = nd - 2; d >= 0; --d) {
          const int64_t o = rest % out_[d];
          rest /= out_[d];
          const int64_t i = kite::ops::pad_source(pad[d], mode, o);
          if (i < 0) constant = true;
          offset += i * in_strides_[d];
        }
        char* dst = result_ + row * inner * static_cast<int64_t>(es);
        if (constant) {
          for (int64_t k = 0; k < inner; ++k) copy_element(dst + k * es, value, es);
          continue;
        }
        const char* src = data_ + offset * static_cast<int64_t>(es);
        const PadAxis& last = pad[nd - 1];
        for (int64_t k = 0; k < inner; ++k) {
          const int64_t i = kite::ops::pad_source(last, mode, k);
          copy_element(dst + k * es, i < 0 ? value : src + i * static_cast<int64_t>(es), es);
        }
      }
    });
  }

 private:
  bool resolve(PadAxis* out) {
    IntValues pads, axes;
    if (!pads.read(pads_) || !axes.read(axes_)) {
      set_error("pads or axes has too many values");
      return false;
    }
    kite::ops::RuleError err;
    const int64_t rank = static_cast<int64_t>(in_.size());
    if (!kite::ops::resolve_pad(in_.data(), rank, mode_, pads.v, pads.count,
                                axes.values_or_null(), axes.count, out, &err)) {
      return rule_failed(err);
    }
    int64_t dims[KITE_MAX_RANK];
    for (int64_t d = 0; d < rank; ++d) dims[d] = out[d].out;
    return gives_declared("pads", dims, rank, out_);
  }

  PadMode mode_;
  size_t es_;
  Shape in_, out_, in_strides_;
  IntSource pads_, axes_;
  const char* data_;
  char* result_;
  ResolvedAxes<PadAxis> padded_;
};

}  // namespace

std::string check_pad(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  std::string why = expect_movable(op, 0);
  if (!why.empty()) return why;
  PadMode mode;
  const std::string name = op.attr_string("mode", "constant");
  if (!kite::ops::parse_pad_mode(name.c_str(), &mode)) return "mode '" + name + "' is not supported";
  why = expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
  if (why.empty()) why = expect_dtype(op, 3, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
  if (why.empty() && op.has_input(2) && op.inputs[2].dtype != op.inputs[0].dtype) {
    why = "constant_value must have the data's dtype";
  }
  return why;
}

std::unique_ptr<Kernel> prepare_pad(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const Shape out = output_shape(args, 0);
  if (out.size() != in.size()) return prepare_error(err, op, "output rank differs from the input");
  PadMode mode = PadMode::kConstant;
  kite::ops::parse_pad_mode(op.attr_string("mode", "constant").c_str(), &mode);
  const kite_dtype dtype = op.inputs[0].dtype;
  // Pads from input 1 (opset 11+) or the attribute; axes from input 3.
  auto kernel = std::make_unique<PadKernel>(
      op, mode, movable_element_size(dtype), in, out,
      op.has_input(1) ? IntSource::input(args, 1) : IntSource::attribute(op, "pads"),
      IntSource::input(args, 3), static_cast<const char*>(args.input_data(0)),
      static_cast<char*>(args.output_data(0)));
  if (op.has_input(2)) {
    if (shape_numel(op.inputs[2].shape) != 1) {
      return prepare_error(err, op, "constant_value must hold one value");
    }
    kernel->value_data = static_cast<const char*>(args.input_data(2));
  } else {
    kite::ops::encode_scalar(dtype, op.attr_float("value", 0.0f), 0, false, kernel->value_bytes);
  }
  if (!kernel->prepare_constant()) {
    *err = kernel->run_error();
    return nullptr;
  }
  return kernel;
}

}  // namespace kite::cpu
