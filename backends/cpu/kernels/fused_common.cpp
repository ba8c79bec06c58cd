#include "fused_common.h"

#include <limits>

#include "vmath.h"

namespace kite::cpu::fused {

namespace {

// y[i] = act(y[i] + bias[i % n]) over rows x n values, act run in place by
// f(values, count) on contiguous spans: the whole tensor in chunks without a
// bias, else row by row after vmath::add (the sum rounded once, as the
// decomposed Add then activation round it).
template <typename F>
void in_place(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool, F f) {
  if (bias == nullptr) {
    pool.parallel_for(rows * n, 16384,
                      [&](int64_t begin, int64_t end) { f(y + begin, end - begin); });
    return;
  }
  pool.parallel_for(rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * n;
      vmath::add(row, bias, row, n);
      f(row, n);
    }
  });
}

// An activation given one value at a time.
template <typename F>
void apply(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool, F f) {
  in_place(y, rows, n, bias, pool, [&f](float* v, int64_t count) {
    for (int64_t i = 0; i < count; ++i) v[i] = f(v[i]);
  });
}

}  // namespace

void apply_activation(const Activation& act, float* y, int64_t rows, int64_t n, const float* bias,
                      ThreadPool& pool) {
  const float alpha = act.alpha, beta = act.beta;
  switch (act.kind) {
    case Activation::kNone:
      if (bias) in_place(y, rows, n, bias, pool, [](float*, int64_t) {});
      return;
    case Activation::kRelu:
      return apply(y, rows, n, bias, pool, [](float x) { return x > 0.0f ? x : 0.0f; });
    case Activation::kClip:
      // min then max, as ONNX Clip (NaN passes).
      return apply(y, rows, n, bias, pool, [alpha, beta](float x) {
        const float v = x < alpha ? alpha : x;
        return v > beta ? beta : v;
      });
    case Activation::kSigmoid:
      // Sigmoid and SiLU through vmath::sigmoid, like the unary Sigmoid, so
      // a fused node and its decomposition (Sigmoid, then Mul for SiLU)
      // agree bit for bit.
    case Activation::kSiLU:
      return in_place(y, rows, n, bias, pool, [&](float* v, int64_t c) {
        vmath::sigmoid(v, v, c, act.kind == Activation::kSiLU);
      });
    case Activation::kHardSigmoid:
    case Activation::kHardSwish:
      // vmath's 16 lanes, the scalar formula's bits (mobilenet_v3's
      // HardSwish: 7% of the run as a scalar loop on Zen 4).
      return in_place(y, rows, n, bias, pool, [&](float* v, int64_t c) {
        vmath::hard_sigmoid(v, v, c, alpha, beta, act.kind == Activation::kHardSwish);
      });
    case Activation::kLeakyRelu:
      return apply(y, rows, n, bias, pool, [alpha](float x) { return x >= 0.0f ? x : alpha * x; });
    case Activation::kTanh:
      return apply(y, rows, n, bias, pool, [](float x) { return std::tanh(x); });
    case Activation::kGelu:
      // Gelu (erf form) through vmath, as the unary Gelu runs it.
      return in_place(y, rows, n, bias, pool, [](float* v, int64_t c) { vmath::gelu(v, v, c); });
    case Activation::kGeluTanh:
      return apply(y, rows, n, bias, pool, [](float x) {
        return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      });
  }
}

SubNode::SubNode(const kite_backend_node& fused, const char* op_type,
                 const std::vector<kite::ops::Attr>& attrs, const std::vector<int>& input_slots,
                 int output_slot)
    : op_type_(op_type), attr_values_(attrs) {
  for (int slot : input_slots) {
    inputs_.push_back(slot >= 0 && slot < fused.num_inputs ? fused.inputs[slot] : nullptr);
  }
  outputs_.push_back(output_slot >= 0 && output_slot < fused.num_outputs ? fused.outputs[output_slot]
                                                                         : nullptr);
  attrs_.assign(attr_values_);
  node_.name = fused.name;
  node_.op = op_type_.c_str();
  node_.domain = "";
  node_.fused_pattern = "";
  node_.num_inputs = static_cast<int32_t>(inputs_.size());
  node_.inputs = inputs_.data();
  node_.num_outputs = static_cast<int32_t>(outputs_.size());
  node_.outputs = outputs_.data();
  node_.num_attrs = attrs_.count();
  node_.attrs = attrs_.data();
}

std::unique_ptr<Kernel> SubNode::prepare(PrepareFn fn, const KernelArgs& outer, std::string* err) {
  if (outputs_[0] == nullptr) {
    if (err) *err = op_type_ + ": the fused node lacks the output";
    return nullptr;
  }
  if (!kite::ops::from_backend_node(node_, &op_, err, true)) return nullptr;
  if (!kite::ops::check_declared_outputs(op_, kite::ops::outputs_from_backend_node(node_), err)) {
    return nullptr;
  }
  KernelArgs args{&node_, &op_, outer.threads};
  args.winograd = outer.winograd;
  args.workspace = outer.workspace;
  args.packed = outer.packed;
  args.pack_stats = outer.pack_stats;
  return fn(args, err);
}

}  // namespace kite::cpu::fused
