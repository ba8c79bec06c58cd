// Fused normalisations and GELU:
//  - LayerNormalization (from its decomposed form) and Gelu (from the erf or
//    tanh formula) run the primitive kernels of the ops they spell out.
//  - SkipLayerNormalization: y = LayerNorm(a + b) in one pass per row, the
//    sum written to the optional second output. Statistics accumulate in
//    double, as in the LayerNormalization kernel.
#include "fused_common.h"
#include "kernels.h"

namespace kite::cpu {

namespace {

class Wrapped : public Kernel {
 public:
  Wrapped(std::unique_ptr<fused::SubNode> sub, std::unique_ptr<Kernel> inner)
      : sub_(std::move(sub)), inner_(std::move(inner)) {}
  void run(ThreadPool& pool) override { inner_->run(pool); }
  const char* run_error() const override { return inner_->run_error(); }

 private:
  std::unique_ptr<fused::SubNode> sub_;
  std::unique_ptr<Kernel> inner_;
};

std::unique_ptr<Kernel> wrap(const KernelArgs& args, const char* op_type, PrepareFn fn,
                             std::string* err) {
  const OpNode& op = *args.op;
  std::vector<int> slots;
  for (size_t i = 0; i < op.inputs.size(); ++i) slots.push_back(op.has_input(i) ? static_cast<int>(i) : -1);
  auto sub = std::make_unique<fused::SubNode>(*args.node, op_type, op.attrs, slots, 0);
  std::unique_ptr<Kernel> inner = sub->prepare(fn, args, err);
  if (!inner) return nullptr;
  return std::make_unique<Wrapped>(std::move(sub), std::move(inner));
}

class SkipLayerNormKernel : public Kernel {
 public:
  SkipLayerNormKernel(int64_t rows, int64_t cols, float epsilon, const float* a, const float* b,
                      const float* scale, const float* bias, float* y, float* sum)
      : rows_(rows), cols_(cols), epsilon_(epsilon), a_(a), b_(b), scale_(scale), bias_(bias),
        y_(y), sum_(sum) {}

  void run(ThreadPool& pool) override {
    pool.parallel_for(rows_, rows_per_chunk(cols_), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* a = a_ + r * cols_;
        const float* b = b_ + r * cols_;
        float* y = y_ + r * cols_;
        float* s = sum_ ? sum_ + r * cols_ : y;  // without a sum output: in y, normalised in place
        for (int64_t i = 0; i < cols_; ++i) s[i] = a[i] + b[i];
        float mean, inv;
        moments(s, cols_, epsilon_, &mean, &inv);  // LayerNormalization's, so both paths agree
        normalize_row(s, cols_, mean, inv, scale_, bias_, y);
      }
    });
  }

 private:
  int64_t rows_, cols_;
  float epsilon_;
  const float *a_, *b_, *scale_, *bias_;
  float *y_, *sum_;
};

}  // namespace

std::string check_fused_gelu(const OpNode& op, const std::string& pattern,
                             const std::vector<TensorType>& outputs) {
  const std::string approximate = op.attr_string("approximate", "none");
  if (!(pattern == "Gelu" && approximate == "none") && !(pattern == "Gelu(tanh)" && approximate == "tanh")) {
    return "pattern '" + pattern + "' with approximate '" + approximate + "' is not a known GELU";
  }
  if (op.inputs.size() != 1 || outputs.size() != 1) return "expects one input and one output";
  const OpNode p = fused::primitive(op, "Gelu", 1);
  std::string why = check_unary(p);
  if (!why.empty()) return why;
  return fused::check_primitive_output(op, p, outputs, 0);
}

std::unique_ptr<Kernel> prepare_fused_gelu(const KernelArgs& args, std::string* err) {
  return wrap(args, "Gelu", prepare_unary, err);
}

std::string check_fused_layer_norm(const OpNode& op, const std::string& pattern,
                                   const std::vector<TensorType>& outputs) {
  if (pattern != "LayerNormalization") return "pattern '" + pattern + "' is not LayerNormalization";
  if (op.inputs.size() < 2 || op.inputs.size() > 3 || outputs.size() != 1) {
    return "expects inputs x, scale [, bias] and one output";
  }
  const OpNode p = fused::primitive(op, "LayerNormalization", 3);
  std::string why = check_layer_norm(p);
  if (!why.empty()) return why;
  return fused::check_primitive_output(op, p, outputs, 0);
}

std::unique_ptr<Kernel> prepare_fused_layer_norm(const KernelArgs& args, std::string* err) {
  return wrap(args, "LayerNormalization", prepare_layer_norm, err);
}

std::string check_fused_skip_layer_norm(const OpNode& op, const std::string& pattern,
                                        const std::vector<TensorType>& outputs) {
  if (pattern != "Add+LayerNormalization") return "pattern '" + pattern + "' is not Add+LayerNormalization";
  if (op.inputs.size() < 3 || op.inputs.size() > 4 || !op.has_input(0) || !op.has_input(1) ||
      !op.has_input(2)) {
    return "expects inputs a, b, scale [, bias]";
  }
  std::string why = expect_dtypes(op, 0, op.inputs.size(), {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const Shape& x = op.inputs[0].shape;
  if (op.inputs[1].shape != x) {
    return input_label(op, 1) + " is " + kite::ops::shape_string(op.inputs[1].shape) + ", expected " +
           kite::ops::shape_string(x) + " like " + input_label(op, 0);
  }
  const int64_t axis = normalize_axis(op.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  if (axis < 0) return "axis is out of range";
  const Shape block(x.begin() + axis, x.end());
  for (size_t i = 2; i < op.inputs.size(); ++i) {
    if (op.has_input(i) && op.inputs[i].shape != block) {
      return input_label(op, i) + " is " + kite::ops::shape_string(op.inputs[i].shape) +
             ", expected the normalised dims " + kite::ops::shape_string(block);
    }
  }
  if (outputs.empty() || outputs.size() > 2) return "expects outputs y [, a + b]";
  for (size_t k = 0; k < outputs.size() && why.empty(); ++k) {
    why = fused::expect_output(op, outputs, k, KITE_DTYPE_FLOAT32, x);
  }
  return why;
}

std::unique_ptr<Kernel> prepare_fused_skip_layer_norm(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  const int64_t axis = normalize_axis(op.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const int64_t rows = product(x, 0, static_cast<size_t>(axis));
  const int64_t cols = product(x, static_cast<size_t>(axis), x.size());
  auto in = [&](size_t i) {
    return op.has_input(i) ? static_cast<const float*>(args.input_data(static_cast<int>(i))) : nullptr;
  };
  float* sum = has_output(args, 1) ? static_cast<float*>(args.output_data(1)) : nullptr;
  return std::make_unique<SkipLayerNormKernel>(rows, cols, op.attr_float("epsilon", 1e-5f), in(0),
                                               in(1), in(2), in(3),
                                               static_cast<float*>(args.output_data(0)), sum);
}

}  // namespace kite::cpu
