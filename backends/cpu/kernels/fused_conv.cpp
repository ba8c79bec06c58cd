// FusedConv (Conv + activation) and FusedGemm (Gemm + activation): the
// primitive kernel writes the output, then the activation runs over it in
// place, in the same launch, unless the primitive kernel takes the
// activation into its own store (Kernel::take_activation: Conv's GEMM,
// vectorised depthwise and stem paths for Relu, Clip and every activation
// vmath computes, Winograd for Relu and Clip; Gemm's likewise).
#include "fused_common.h"
#include "kernels.h"
#include "vmath.h"

namespace kite::cpu {

namespace {

class ThenActivation : public Kernel {
 public:
  ThenActivation(std::unique_ptr<fused::SubNode> sub, std::unique_ptr<Kernel> inner,
                 fused::Activation act, float* y, int64_t n)
      : sub_(std::move(sub)), inner_(std::move(inner)), act_(act), y_(y), n_(n),
        inner_applies_(inner_->take_activation(act)) {}
  void run(ThreadPool& pool) override {
    inner_->run(pool);
    if (inner_applies_ || inner_->run_error() != nullptr) return;
    fused::apply_activation(act_, y_, 1, n_, nullptr, pool);
  }
  const char* run_error() const override { return inner_->run_error(); }

 private:
  std::unique_ptr<fused::SubNode> sub_;  // what inner_ was prepared from
  std::unique_ptr<Kernel> inner_;
  fused::Activation act_;
  float* y_;
  int64_t n_;
  bool inner_applies_;  // inner_ applies act_ in its own store
};

std::string check_with_activation(const OpNode& op, const std::string& pattern,
                                  const std::vector<TensorType>& outputs, const char* primitive_op,
                                  CheckFn primitive_check) {
  const std::string prefix = std::string(primitive_op) + "+";
  if (pattern.compare(0, prefix.size(), prefix) != 0) {
    return "pattern '" + pattern + "' is not " + prefix + "<activation>";
  }
  fused::Activation act;
  std::string why = fused::parse_activation(op, pattern, false, &act);
  if (!why.empty()) return why;
  if (op.inputs.size() < 2 || op.inputs.size() > 3) return "expects 2 or 3 inputs";
  if (outputs.size() != 1) return "expects one output";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  const OpNode p = fused::primitive(op, primitive_op, 3);
  why = primitive_check(p);
  if (!why.empty()) return why;
  return fused::check_primitive_output(op, p, outputs, 0);
}

std::unique_ptr<Kernel> prepare_with_activation(const KernelArgs& args, std::string* err,
                                                const char* primitive_op, PrepareFn primitive_prepare) {
  const OpNode& op = *args.op;
  fused::Activation act;
  const std::string why = fused::parse_activation(op, "+" + op.attr_string("activation", ""), false, &act);
  if (!why.empty()) return prepare_error(err, op, why);
  std::vector<int> slots;
  for (size_t i = 0; i < op.inputs.size(); ++i) slots.push_back(op.has_input(i) ? static_cast<int>(i) : -1);
  const OpNode p = fused::primitive(op, primitive_op, 3);
  auto sub = std::make_unique<fused::SubNode>(*args.node, primitive_op, p.attrs, slots, 0);
  std::unique_ptr<Kernel> inner = sub->prepare(primitive_prepare, args, err);
  if (!inner) return nullptr;
  return std::make_unique<ThenActivation>(std::move(sub), std::move(inner), act,
                                          static_cast<float*>(args.output_data(0)),
                                          shape_numel(output_shape(args, 0)));
}

// Conv + a residual Add (+ activation): y = act(Conv(x) + r). The residual
// goes into the convolution's tile hook where its kernel takes one (each
// finished block of y, still in cache); else a pass over y after it. Same
// bits either way, and as the body's: the same float additions, then the
// activation's formulas.
class ThenResidual : public Kernel {
 public:
  ThenResidual(std::unique_ptr<fused::SubNode> sub, std::unique_ptr<Kernel> inner, fused::Activation act,
               const float* r, float* y, int64_t n)
      : sub_(std::move(sub)), inner_(std::move(inner)), act_(act), r_(r), y_(y), n_(n),
        hooked_(inner_->take_tile_hook(&ThenResidual::tile, this)) {}

  void run(ThreadPool& pool) override {
    inner_->run(pool);
    if (hooked_ || inner_->run_error() != nullptr) return;
    pool.parallel_for(n_, 16384, [&](int64_t b, int64_t e) { add_block(this, y_ + b, 0, 1, e - b); });
  }
  const char* run_error() const override { return inner_->run_error(); }

 private:
  static void tile(const void* ctx, float* c, int64_t ld, int64_t rows, int64_t cols) {
    add_block(static_cast<const ThenResidual*>(ctx), c, ld, rows, cols);
  }
  static void add_block(const ThenResidual* k, float* c, int64_t ld, int64_t rows, int64_t cols) {
    const float* r = k->r_ + (c - k->y_);
    for (int64_t i = 0; i < rows; ++i) {
      vmath::arith(vmath::Arith::kAdd, c + i * ld, 1, r + i * ld, 1, c + i * ld, cols);
    }
    if (k->act_.kind != fused::Activation::kNone) fused::activation_tile(&k->act_, c, ld, rows, cols);
  }

  std::unique_ptr<fused::SubNode> sub_;  // what inner_ was prepared from
  std::unique_ptr<Kernel> inner_;
  fused::Activation act_;
  const float* r_;
  float* y_;
  int64_t n_;
  bool hooked_;  // inner_ calls tile on every block of y
};

bool residual_pattern(const std::string& pattern) {
  return pattern == "Conv+Add" || pattern.compare(0, 9, "Conv+Add+") == 0;
}

// Inputs X, W, B (may be absent), R of the output's shape.
std::string check_residual(const OpNode& op, const std::string& pattern,
                           const std::vector<TensorType>& outputs) {
  fused::Activation act;
  std::string why = fused::parse_activation(op, pattern, pattern == "Conv+Add", &act);
  if (!why.empty()) return why;
  if (op.inputs.size() != 4 || !op.has_input(3)) return "expects inputs X, W, B (or none), R";
  if (outputs.size() != 1) return "expects one output";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  const OpNode p = fused::primitive(op, "Conv", 3);
  why = check_conv(p);
  if (!why.empty()) return why;
  why = fused::check_primitive_output(op, p, outputs, 0);
  if (!why.empty()) return why;
  if (op.inputs[3].shape != outputs[0].shape) {
    return input_label(op, 3) + " (the residual) must have the output's shape " +
           kite::ops::shape_string(outputs[0].shape);
  }
  return "";
}

std::unique_ptr<Kernel> prepare_residual(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  fused::Activation act;
  const std::string pattern = op.find_attr("activation") ? "+" + op.attr_string("activation", "") : "";
  const std::string why = fused::parse_activation(op, pattern, true, &act);
  if (!why.empty()) return prepare_error(err, op, why);
  const OpNode p = fused::primitive(op, "Conv", 3);
  const std::vector<int> slots = {0, 1, op.has_input(2) ? 2 : -1};
  auto sub = std::make_unique<fused::SubNode>(*args.node, "Conv", p.attrs, slots, 0);
  std::unique_ptr<Kernel> inner = sub->prepare(prepare_conv, args, err);
  if (!inner) return nullptr;
  return std::make_unique<ThenResidual>(std::move(sub), std::move(inner), act,
                                        static_cast<const float*>(args.input_data(3)),
                                        static_cast<float*>(args.output_data(0)),
                                        shape_numel(output_shape(args, 0)));
}

}  // namespace

std::string check_fused_conv(const OpNode& op, const std::string& pattern,
                             const std::vector<TensorType>& outputs) {
  if (residual_pattern(pattern)) return check_residual(op, pattern, outputs);
  return check_with_activation(op, pattern, outputs, "Conv", check_conv);
}

std::unique_ptr<Kernel> prepare_fused_conv(const KernelArgs& args, std::string* err) {
  if (residual_pattern(args.node->fused_pattern ? args.node->fused_pattern : "")) {
    return prepare_residual(args, err);
  }
  return prepare_with_activation(args, err, "Conv", prepare_conv);
}

std::string check_fused_gemm(const OpNode& op, const std::string& pattern,
                             const std::vector<TensorType>& outputs) {
  return check_with_activation(op, pattern, outputs, "Gemm", check_gemm);
}

std::unique_ptr<Kernel> prepare_fused_gemm(const KernelArgs& args, std::string* err) {
  return prepare_with_activation(args, err, "Gemm", prepare_gemm);
}

}  // namespace kite::cpu
