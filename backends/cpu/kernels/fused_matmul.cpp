// FusedMatMul: MatMul(a, b) + bias (+ activation). The MatMul kernel writes
// the product and, by its GEMM's tile hook, adds the bias along the last
// axis and applies the activation to each block while it is in cache; a
// kernel without the hook leaves that to one more pass over the output,
// in the same launch.
#include "fused_common.h"
#include "kernels.h"
#include "vmath.h"

namespace kite::cpu {

namespace {

class MatMulBiasKernel : public Kernel {
 public:
  MatMulBiasKernel(std::unique_ptr<fused::SubNode> sub, std::unique_ptr<Kernel> inner,
                   fused::Activation act, float* y, int64_t rows, int64_t n, const float* bias)
      : sub_(std::move(sub)), inner_(std::move(inner)), act_(act), y_(y), rows_(rows), n_(n),
        bias_(bias) {
    inner_applies_ = n_ > 0 && inner_->take_tile_hook(bias_then_activation, this);
  }
  void run(ThreadPool& pool) override {
    inner_->run(pool);
    if (inner_->run_error() == nullptr && !inner_applies_) {
      fused::apply_activation(act_, y_, rows_, n_, bias_, pool);
    }
  }
  const char* run_error() const override { return inner_->run_error(); }

 private:
  // The MatMul's tile hook: on a finished block of the output (its rows n_
  // floats apart, so its first column is its offset from y_ modulo n_),
  // each row + the bias by vmath::add, then the activation: the bits of
  // apply_activation's pass, on a block still in cache (convnext_tiny's
  // MLPs: 3136 x 384 outputs a layer, the pass read them back from L3).
  static void bias_then_activation(const void* ctx, float* c, int64_t ld, int64_t rows, int64_t cols) {
    const MatMulBiasKernel& k = *static_cast<const MatMulBiasKernel*>(ctx);
    const int64_t j0 = (c - k.y_) % k.n_;
    for (int64_t r = 0; r < rows; ++r) vmath::add(c + r * ld, k.bias_ + j0, c + r * ld, cols);
    fused::activation_tile(&k.act_, c, ld, rows, cols);
  }

  bool inner_applies_ = false;  // inner_ calls bias_then_activation on every block
  std::unique_ptr<fused::SubNode> sub_;
  std::unique_ptr<Kernel> inner_;
  fused::Activation act_;
  float* y_;
  int64_t rows_, n_;
  const float* bias_;
};

}  // namespace

std::string check_fused_matmul(const OpNode& op, const std::string& pattern,
                               const std::vector<TensorType>& outputs) {
  const std::string base = "MatMul+Add";
  if (pattern.compare(0, base.size(), base) != 0) return "pattern '" + pattern + "' is not MatMul+Add[+<activation>]";
  fused::Activation act;
  std::string why = fused::parse_activation(op, pattern, true, &act);
  if (!why.empty()) return why;
  if (act.kind == fused::Activation::kNone && pattern != base) {
    return "pattern '" + pattern + "' names an activation the node lacks";
  }
  if (op.inputs.size() != 3 || !op.has_input(0) || !op.has_input(1) || !op.has_input(2)) {
    return "expects inputs a, b and bias";
  }
  if (outputs.size() != 1) return "expects one output";
  for (size_t i = 0; i < 3; ++i) {
    why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  const OpNode p = fused::primitive(op, "MatMul", 2);
  why = check_matmul(p);
  if (!why.empty()) return why;
  why = fused::check_primitive_output(op, p, outputs, 0);
  if (!why.empty()) return why;
  const Shape& out = outputs[0].shape;
  if (out.empty()) return "output must have at least one dim";
  if (op.inputs[2].shape != Shape{out.back()}) {
    return input_label(op, 2) + " is " + kite::ops::shape_string(op.inputs[2].shape) + ", expected " +
           kite::ops::shape_string({out.back()});
  }
  return "";
}

std::unique_ptr<Kernel> prepare_fused_matmul(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  fused::Activation act;
  const std::string pattern = "MatMul+Add" + std::string(op.find_attr("activation") ? "+" + op.attr_string("activation", "") : "");
  const std::string why = fused::parse_activation(op, pattern, true, &act);
  if (!why.empty()) return prepare_error(err, op, why);
  auto sub = std::make_unique<fused::SubNode>(*args.node, "MatMul", std::vector<kite::ops::Attr>{},
                                              std::vector<int>{0, 1}, 0);
  std::unique_ptr<Kernel> inner = sub->prepare(prepare_matmul, args, err);
  if (!inner) return nullptr;
  const Shape out = output_shape(args, 0);
  const int64_t n = out.back();
  const int64_t rows = n == 0 ? 0 : shape_numel(out) / n;
  return std::make_unique<MatMulBiasKernel>(std::move(sub), std::move(inner), act,
                                            static_cast<float*>(args.output_data(0)), rows, n,
                                            static_cast<const float*>(args.input_data(2)));
}

}  // namespace kite::cpu
