#include "fused_common.h"

#include <limits>

#include "vmath.h"

namespace kite::cpu::fused {

namespace {

// Sigmoid and SiLU through vmath::sigmoid, like the unary Sigmoid, so a
// fused node and its decomposition (Sigmoid, then Mul for SiLU) agree bit
// for bit.
void apply_sigmoid(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool,
                   bool silu) {
  if (bias == nullptr) {
    pool.parallel_for(rows * n, 16384, [&](int64_t begin, int64_t end) {
      vmath::sigmoid(y + begin, y + begin, end - begin, silu);
    });
    return;
  }
  pool.parallel_for(rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * n;
      vmath::add(row, bias, row, n);
      vmath::sigmoid(row, row, n, silu);
    }
  });
}

// HardSigmoid and HardSwish through vmath::hard_sigmoid.
void apply_hard_sigmoid(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool,
                        float alpha, float beta, bool times_x) {
  if (bias == nullptr) {
    pool.parallel_for(rows * n, 16384, [&](int64_t begin, int64_t end) {
      vmath::hard_sigmoid(y + begin, y + begin, end - begin, alpha, beta, times_x);
    });
    return;
  }
  pool.parallel_for(rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * n;
      vmath::add(row, bias, row, n);
      vmath::hard_sigmoid(row, row, n, alpha, beta, times_x);
    }
  });
}

// Gelu (erf form) through vmath, as the unary Gelu runs it.
void apply_gelu(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool) {
  if (bias == nullptr) {
    pool.parallel_for(rows * n, 16384, [&](int64_t begin, int64_t end) {
      vmath::gelu(y + begin, y + begin, end - begin);
    });
    return;
  }
  pool.parallel_for(rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * n;
      vmath::add(row, bias, row, n);
      vmath::gelu(row, row, n);
    }
  });
}

// Identity: f is x -> x, so with a bias only the sum runs.
template <bool Identity = false, typename F>
void apply(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool, F f) {
  if (bias == nullptr) {
    pool.parallel_for(rows * n, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] = f(y[i]);
    });
    return;
  }
  pool.parallel_for(rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * n;
      vmath::add(row, bias, row, n);  // the sum rounded once, as f(row[j] + bias[j])
      if constexpr (!Identity) {
        for (int64_t j = 0; j < n; ++j) row[j] = f(row[j]);
      }
    }
  });
}

}  // namespace

void apply_activation(const Activation& act, float* y, int64_t rows, int64_t n, const float* bias,
                      ThreadPool& pool) {
  const float alpha = act.alpha, beta = act.beta;
  switch (act.kind) {
    case Activation::kNone:
      if (bias) apply<true>(y, rows, n, bias, pool, [](float x) { return x; });
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
      return apply_sigmoid(y, rows, n, bias, pool, false);
    case Activation::kSiLU:
      return apply_sigmoid(y, rows, n, bias, pool, true);
    case Activation::kHardSigmoid:
    case Activation::kHardSwish:
      // vmath's 16 lanes, the scalar formula's bits (mobilenet_v3's
      // HardSwish: 7% of the run as a scalar loop on Zen 4).
      return apply_hard_sigmoid(y, rows, n, bias, pool, alpha, beta,
                                act.kind == Activation::kHardSwish);
    case Activation::kLeakyRelu:
      return apply(y, rows, n, bias, pool, [alpha](float x) { return x >= 0.0f ? x : alpha * x; });
    case Activation::kTanh:
      return apply(y, rows, n, bias, pool, [](float x) { return std::tanh(x); });
    case Activation::kGelu:
      return apply_gelu(y, rows, n, bias, pool);
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
