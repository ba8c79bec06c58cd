// Attention: out = softmax(q kt * scale + mask) v, per leading index and
// query row, without materialising the scores: each row's scores live in a
// per-thread buffer of length T allocated at prepare. q [..., S, D],
// kt [..., D, T], v [..., T, Dv], mask broadcasting to [..., S, T].
// Softmax as the Softmax kernel computes it (max-shifted, float sums).
// nan_to_zero = 1 (Hugging Face's Where(IsNaN(p), 0, p) guard, fused with
// it): a NaN probability (a row masked with -inf throughout) counts as 0.
#include <cmath>
#include <limits>

#include "fused_common.h"
#include "kernels.h"
#include "kite/abi/device_node.h"
#include "kite/ops/attention.h"
#include "softmax_neon.h"
#include "vmath.h"

namespace kite::cpu {

namespace {

class AttentionKernel : public Kernel {
 public:
  AttentionKernel(int64_t batches, int64_t s, int64_t d, int64_t t, int64_t dv, float scale,
                  const float* q, const float* kt, const float* v, const float* mask,
                  Shape lead_dims, Shape mask_lead_strides, int64_t mask_row_stride,
                  int64_t mask_col_stride, float* out, int threads, bool nan_to_zero)
      : batches_(batches), s_(s), d_(d), t_(t), dv_(dv), scale_(scale), q_(q), kt_(kt), v_(v),
        mask_(mask), lead_dims_(std::move(lead_dims)), mask_lead_strides_(std::move(mask_lead_strides)),
        mask_row_stride_(mask_row_stride), mask_col_stride_(mask_col_stride), out_(out),
        nan_to_zero_(nan_to_zero),
        scores_(static_cast<size_t>(std::max(threads, 1)) * static_cast<size_t>(t)) {}

  void run(ThreadPool& pool) override {
    // Rows are split into one contiguous chunk per thread at most, so each
    // chunk owns the scores buffer of its chunk index.
    const int64_t rows = batches_ * s_;
    const int64_t slots = static_cast<int64_t>(scores_.size()) / std::max<int64_t>(t_, 1);
    const int64_t chunk = std::max<int64_t>(1, (rows + slots - 1) / std::max<int64_t>(slots, 1));
    const int64_t chunks = rows == 0 ? 0 : (rows + chunk - 1) / chunk;
    pool.parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        float* scores = scores_.data() + c * t_;
        const int64_t last = std::min(rows, (c + 1) * chunk);
        for (int64_t r = c * chunk; r < last; ++r) row(r, scores);
      }
    });
  }

 private:
  void row(int64_t r, float* scores) const {
    const int64_t b = r / s_, i = r % s_;
    const float* q = q_ + (b * s_ + i) * d_;
    const float* kt = kt_ + b * d_ * t_;
    const float* v = v_ + b * t_ * dv_;
    float* out = out_ + (b * s_ + i) * dv_;
    for (int64_t j = 0; j < t_; ++j) scores[j] = 0.0f;
    for (int64_t k = 0; k < d_; ++k) {
      const float qk = q[k];
      const float* krow = kt + k * t_;
      for (int64_t j = 0; j < t_; ++j) scores[j] += qk * krow[j];
    }
    for (int64_t j = 0; j < t_; ++j) scores[j] *= scale_;
    if (mask_) {
      int64_t offset = i * mask_row_stride_, rest = b;
      for (size_t dim = lead_dims_.size(); dim-- > 0;) {
        offset += (rest % lead_dims_[dim]) * mask_lead_strides_[dim];
        rest /= lead_dims_[dim];
      }
      for (int64_t j = 0; j < t_; ++j) scores[j] += mask_[offset + j * mask_col_stride_];
    }
    // Scores become probabilities in place, by the Softmax kernel's row
    // (NEON on arm64, softmax_neon.h; vectorised exp elsewhere, vmath.h).
#if defined(__aarch64__)
    neon::softmax_contiguous(scores, scores, t_, false);
#else
    vmath::softmax(scores, scores, t_);
#endif
    for (int64_t c = 0; c < dv_; ++c) out[c] = 0.0f;
    for (int64_t j = 0; j < t_; ++j) {
      float p = scores[j];
      if (nan_to_zero_ && std::isnan(p)) p = 0.0f;
      const float* vrow = v + j * dv_;
      for (int64_t c = 0; c < dv_; ++c) out[c] += p * vrow[c];
    }
  }

  int64_t batches_, s_, d_, t_, dv_;
  float scale_;
  const float *q_, *kt_, *v_, *mask_;
  Shape lead_dims_, mask_lead_strides_;
  int64_t mask_row_stride_, mask_col_stride_;
  float* out_;
  bool nan_to_zero_;
  std::vector<float> scores_;
};

}  // namespace

std::string check_fused_attention(const OpNode& op, const std::string& pattern,
                                  const std::vector<TensorType>& outputs) {
  Shape scores, out;
  std::string why = kite::ops::attention_shapes(op, pattern, outputs, &scores, &out);
  if (why.empty()) why = expect_dtypes(op, 0, op.inputs.size(), {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const size_t r = scores.size();
  if (op.has_input(3)) {
    Shape joined;
    if (op.inputs[3].shape.size() > r || !kite::ops::broadcast_shapes(op.inputs[3].shape, scores, &joined) ||
        joined != scores) {
      return input_label(op, 3) + " does not broadcast to the scores " + kite::ops::shape_string(scores);
    }
  }
  return fused::expect_output(op, outputs, 0, KITE_DTYPE_FLOAT32, out);
}

std::unique_ptr<Kernel> prepare_fused_attention(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& q = op.inputs[0].shape;
  const Shape& kt = op.inputs[1].shape;
  const Shape& v = op.inputs[2].shape;
  const size_t r = q.size();
  if (r < 2 || kt.size() != r || v.size() != r) return prepare_error(err, op, "bad ranks");
  const Shape lead(q.begin(), q.end() - 2);
  const int64_t batches = shape_numel(lead);
  Shape scores(q.begin(), q.end() - 1);
  scores.push_back(kt[r - 1]);
  Shape mask_strides(r, 0);
  const float* mask = nullptr;
  if (op.has_input(3)) {
    mask = static_cast<const float*>(args.input_data(3));
    mask_strides = kite::abi::broadcast_strides(op.inputs[3].shape, scores);
  }
  const Shape lead_strides(mask_strides.begin(), mask_strides.end() - 2);
  auto in = [&](int i) { return static_cast<const float*>(args.input_data(i)); };
  return std::make_unique<AttentionKernel>(batches, q[r - 2], q[r - 1], kt[r - 1], v[r - 1],
                                           op.attr_float("scale", 1.0f), in(0), in(1), in(2), mask,
                                           lead, lead_strides, mask_strides[r - 2], mask_strides[r - 1],
                                           static_cast<float*>(args.output_data(0)), args.threads,
                                           op.attr_int("nan_to_zero", 0) != 0);
}

}  // namespace kite::cpu
