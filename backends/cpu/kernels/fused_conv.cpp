// FusedConv (Conv + activation) and FusedGemm (Gemm + activation): the
// primitive kernel writes the output, then the activation runs over it in
// place, in the same launch, unless the primitive kernel takes the
// activation into its own store (Kernel::take_activation: Conv's GEMM,
// vectorised depthwise and stem paths for Relu, Clip and every activation
// vmath computes, Winograd for Relu and Clip; Gemm's likewise).
#include "fused_common.h"
#include "kernels.h"

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

}  // namespace

std::string check_fused_conv(const OpNode& op, const std::string& pattern,
                             const std::vector<TensorType>& outputs) {
  return check_with_activation(op, pattern, outputs, "Conv", check_conv);
}

std::unique_ptr<Kernel> prepare_fused_conv(const KernelArgs& args, std::string* err) {
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
