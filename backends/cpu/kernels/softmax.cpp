// Softmax, LogSoftmax and Hardmax (float32) along one axis, opset-13 semantics
// (default axis -1). Rows along the axis may be strided (axis not last).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common.h"
#include "kernels.h"
#include "softmax_neon.h"
#include "vmath.h"

namespace kite::cpu {
namespace {

class SoftmaxKernel : public Kernel {
 public:
  enum class Mode { kSoftmax, kLogSoftmax, kHardmax };

  SoftmaxKernel(Mode mode, int64_t outer, int64_t axis_len, int64_t inner, const float* x,
                float* y)
      : mode_(mode), log_(mode == Mode::kLogSoftmax), outer_(outer), len_(axis_len), inner_(inner), x_(x), y_(y) {}

  void run(ThreadPool& pool) override {
    if (len_ == 0) return;
    // One line = the axis_len values at stride inner.
    pool.parallel_for(outer_ * inner_, rows_per_chunk(len_), [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line) {
        const int64_t o = line / inner_, i = line % inner_;
        const float* x = x_ + o * len_ * inner_ + i;
        float* y = y_ + o * len_ * inner_ + i;
        if (mode_ == Mode::kHardmax) {
          hardmax(x, y);
        } else if (inner_ == 1) {
          contiguous(x, y);
        } else {
          strided(x, y);
        }
      }
    });
  }

 private:
  // 1 at the first maximum along the axis, 0 elsewhere.
  void hardmax(const float* x, float* y) const {
    const int64_t s = inner_;
    int64_t best = 0;
    for (int64_t j = 1; j < len_; ++j) {
      if (x[j * s] > x[best * s]) best = j;
    }
    for (int64_t j = 0; j < len_; ++j) y[j * s] = j == best ? 1.0f : 0.0f;
  }

  void contiguous(const float* x, float* y) const {
#if defined(__aarch64__)
    neon::softmax_contiguous(x, y, len_, log_);
    return;
#endif
    if (!log_) {
      vmath::softmax(x, y, len_);  // vectorised exp (vmath.h)
      return;
    }
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len_; ++j) max = std::max(max, x[j]);
    float sum = 0.0f;
    if (log_) {
      for (int64_t j = 0; j < len_; ++j) sum += std::exp(x[j] - max);
      const float shift = max + std::log(sum);
      for (int64_t j = 0; j < len_; ++j) y[j] = x[j] - shift;
    } else {
      for (int64_t j = 0; j < len_; ++j) {
        y[j] = std::exp(x[j] - max);
        sum += y[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < len_; ++j) y[j] *= inv;
    }
  }

  void strided(const float* x, float* y) const {
    const int64_t s = inner_;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len_; ++j) max = std::max(max, x[j * s]);
    float sum = 0.0f;
    if (log_) {
      for (int64_t j = 0; j < len_; ++j) sum += std::exp(x[j * s] - max);
      const float shift = max + std::log(sum);
      for (int64_t j = 0; j < len_; ++j) y[j * s] = x[j * s] - shift;
    } else {
      for (int64_t j = 0; j < len_; ++j) {
        y[j * s] = std::exp(x[j * s] - max);
        sum += y[j * s];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < len_; ++j) y[j * s] *= inv;
    }
  }

  Mode mode_;
  bool log_;
  int64_t outer_, len_, inner_;
  const float* x_;
  float* y_;
};

}  // namespace

std::string check_softmax(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  return expect_dtype(op, 0, {KITE_DTYPE_FLOAT32});
}

std::unique_ptr<Kernel> prepare_softmax(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) return prepare_error(err, op, "input must have at least 1 dim");
  const int64_t axis = normalize_axis(op.attr_int("axis", -1), rank);
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  if (!has_output(args, 0) || output_shape(args, 0) != x) {
    return prepare_error(err, op, "output shape differs from the input");
  }
  const size_t a = static_cast<size_t>(axis);
  const SoftmaxKernel::Mode mode = op.op == "LogSoftmax" ? SoftmaxKernel::Mode::kLogSoftmax
                                   : op.op == "Hardmax"  ? SoftmaxKernel::Mode::kHardmax
                                                         : SoftmaxKernel::Mode::kSoftmax;
  return std::make_unique<SoftmaxKernel>(mode, product(x, 0, a), x[a],
                                         product(x, a + 1, x.size()),
                                         static_cast<const float*>(args.input_data(0)),
                                         static_cast<float*>(args.output_data(0)));
}

}  // namespace kite::cpu
