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

// act on count contiguous values v[i] in place, one value at a time or
// through vmath: the same bits however the values are split into spans.
void activate(const Activation& act, float* v, int64_t count) {
  const float alpha = act.alpha, beta = act.beta;
  switch (act.kind) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < count; ++i) v[i] = v[i] > 0.0f ? v[i] : 0.0f;
      return;
    case Activation::kClip:
      // min then max, as ONNX Clip (NaN passes).
      for (int64_t i = 0; i < count; ++i) {
        const float x = v[i] < alpha ? alpha : v[i];
        v[i] = x > beta ? beta : x;
      }
      return;
    case Activation::kSigmoid:
      // Sigmoid and SiLU through vmath::sigmoid, like the unary Sigmoid, so
      // a fused node and its decomposition (Sigmoid, then Mul for SiLU)
      // agree bit for bit.
    case Activation::kSiLU:
      vmath::sigmoid(v, v, count, act.kind == Activation::kSiLU);
      return;
    case Activation::kHardSigmoid:
    case Activation::kHardSwish:
      // vmath's 16 lanes, the scalar formula's bits (mobilenet_v3's
      // HardSwish: 7% of the run as a scalar loop on Zen 4).
      vmath::hard_sigmoid(v, v, count, alpha, beta, act.kind == Activation::kHardSwish);
      return;
    case Activation::kLeakyRelu:
      for (int64_t i = 0; i < count; ++i) v[i] = v[i] >= 0.0f ? v[i] : alpha * v[i];
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < count; ++i) v[i] = std::tanh(v[i]);
      return;
    case Activation::kGelu:
      // Gelu (erf form) through vmath, as the unary Gelu runs it.
      vmath::gelu(v, v, count);
      return;
    case Activation::kGeluTanh:
      for (int64_t i = 0; i < count; ++i) {
        const float x = v[i];
        v[i] = 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      }
      return;
  }
}

}  // namespace

void apply_activation(const Activation& act, float* y, int64_t rows, int64_t n, const float* bias,
                      ThreadPool& pool) {
  if (act.kind == Activation::kNone && bias == nullptr) return;
  in_place(y, rows, n, bias, pool, [&act](float* v, int64_t count) { activate(act, v, count); });
}

void activation_tile(const void* act, float* c, int64_t ldc, int64_t rows, int64_t cols) {
  const Activation& a = *static_cast<const Activation*>(act);
  if (ldc == cols || rows == 1) {
    activate(a, c, rows * cols);  // contiguous (a GEMV's column of a 1x1 plane)
    return;
  }
  if (cols == 1) {
    // A column (the GEMV's): gathered contiguous in chunks first, not a
    // vector of one useful lane a row (that way efficientnet_b0's
    // squeeze-and-excitation layers, 1152 rows, took 0.04 ms instead of
    // 0.01 on Zen 4).
    constexpr int64_t kChunk = 256;
    float column[kChunk];
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int64_t count = std::min(kChunk, rows - r0);
      for (int64_t r = 0; r < count; ++r) column[r] = c[(r0 + r) * ldc];
      activate(a, column, count);
      for (int64_t r = 0; r < count; ++r) c[(r0 + r) * ldc] = column[r];
    }
    return;
  }
  switch (a.kind) {
    case Activation::kSigmoid:
    case Activation::kSiLU:
      return vmath::sigmoid_rows(c, ldc, rows, cols, a.kind == Activation::kSiLU);
    case Activation::kHardSigmoid:
    case Activation::kHardSwish:
      return vmath::hard_sigmoid_rows(c, ldc, rows, cols, a.alpha, a.beta,
                                      a.kind == Activation::kHardSwish);
    case Activation::kGelu:
      return vmath::gelu_rows(c, ldc, rows, cols);
    default:
      for (int64_t r = 0; r < rows; ++r) activate(a, c + r * ldc, cols);
  }
}

bool activation_into_epilogue(const Activation& act, bool hook, sgemm::Epilogue* e) {
  switch (act.kind) {
    case Activation::kRelu:
      e->kind = sgemm::Epilogue::kRelu;
      return true;
    case Activation::kClip:
      e->kind = sgemm::Epilogue::kClip;
      e->lo = act.alpha;
      e->hi = act.beta;
      return true;
    case Activation::kSigmoid:
    case Activation::kSiLU:
    case Activation::kHardSigmoid:
    case Activation::kHardSwish:
    case Activation::kGelu:
      if (!hook) return false;
      e->kind = sgemm::Epilogue::kNone;
      e->tile = activation_tile;
      e->tile_ctx = &act;
      return true;
    default:
      return false;
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
