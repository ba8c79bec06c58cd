// BatchNormalization (inference), InstanceNormalization and
// LayerNormalization, float32. Statistics accumulate in double.
#include <cmath>
#include <string>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

class BatchNormKernel : public Kernel {
 public:
  BatchNormKernel(int64_t batch, int64_t channels, int64_t plane, float epsilon,
                  const float* x, const float* scale, const float* bias, const float* mean,
                  const float* var, float* y)
      : batch_(batch), channels_(channels), plane_(plane), epsilon_(epsilon), x_(x),
        scale_(scale), bias_(bias), mean_(mean), var_(var), y_(y),
        mul_(static_cast<size_t>(channels)), add_(static_cast<size_t>(channels)) {}

  void run(ThreadPool& pool) override {
    // y = (x - mean) / sqrt(var + eps) * scale + bias = x * mul + add.
    for (int64_t c = 0; c < channels_; ++c) {
      const float m = scale_[c] / std::sqrt(var_[c] + epsilon_);
      mul_[c] = m;
      add_[c] = bias_[c] - mean_[c] * m;
    }
    pool.parallel_for(batch_ * channels_, rows_per_chunk(plane_), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = p % channels_;
        const float m = mul_[c], a = add_[c];
        const float* x = x_ + p * plane_;
        float* y = y_ + p * plane_;
        for (int64_t i = 0; i < plane_; ++i) y[i] = x[i] * m + a;
      }
    });
  }

 private:
  int64_t batch_, channels_, plane_;
  float epsilon_;
  const float *x_, *scale_, *bias_, *mean_, *var_;
  float* y_;
  std::vector<float> mul_, add_;
};

class InstanceNormKernel : public Kernel {
 public:
  InstanceNormKernel(int64_t batch, int64_t channels, int64_t plane, float epsilon,
                     const float* x, const float* scale, const float* bias, float* y)
      : batch_(batch), channels_(channels), plane_(plane), epsilon_(epsilon), x_(x),
        scale_(scale), bias_(bias), y_(y) {}

  void run(ThreadPool& pool) override {
    pool.parallel_for(batch_ * channels_, rows_per_chunk(plane_), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = p % channels_;
        const float* x = x_ + p * plane_;
        float* y = y_ + p * plane_;
        float mean, inv;
        moments(x, plane_, epsilon_, &mean, &inv);
        const float m = inv * scale_[c];
        const float a = bias_[c] - mean * m;
        for (int64_t i = 0; i < plane_; ++i) y[i] = x[i] * m + a;
      }
    });
  }

 private:
  int64_t batch_, channels_, plane_;
  float epsilon_;
  const float *x_, *scale_, *bias_;
  float* y_;
};

// Scale and B broadcast within the normalised block; expanded at run into
// buffers of the block's size (they may be computed tensors).
class LayerNormKernel : public Kernel {
 public:
  LayerNormKernel(int64_t rows, int64_t cols, float epsilon, const float* x, const float* scale,
                  const float* bias, float* y, float* mean_out, float* inv_out,
                  BroadcastPlan scale_plan, BroadcastPlan bias_plan, bool scale_full,
                  bool bias_full)
      : rows_(rows), cols_(cols), epsilon_(epsilon), x_(x), scale_(scale), bias_(bias), y_(y),
        mean_out_(mean_out), inv_out_(inv_out), scale_plan_(std::move(scale_plan)),
        bias_plan_(std::move(bias_plan)), scale_full_(scale_full), bias_full_(bias_full) {
    if (!scale_full_) scale_buf_.resize(static_cast<size_t>(cols_));
    if (bias_ && !bias_full_) bias_buf_.resize(static_cast<size_t>(cols_));
  }

  void run(ThreadPool& pool) override {
    const float* scale = scale_full_ ? scale_ : expand(scale_plan_, scale_, scale_buf_);
    const float* bias = !bias_ ? nullptr : bias_full_ ? bias_ : expand(bias_plan_, bias_, bias_buf_);
    pool.parallel_for(rows_, rows_per_chunk(cols_), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* x = x_ + r * cols_;
        float* y = y_ + r * cols_;
        float mean, inv;
        moments(x, cols_, epsilon_, &mean, &inv);
        if (mean_out_) mean_out_[r] = mean;
        if (inv_out_) inv_out_[r] = inv;
        normalize_row(x, cols_, mean, inv, scale, bias, y);
      }
    });
  }

 private:
  static const float* expand(const BroadcastPlan& plan, const float* src, std::vector<float>& buf) {
    plan.for_rows(0, plan.rows, [&](const int64_t* off, int64_t out) {
      for (int64_t i = 0; i < plan.inner; ++i) buf[out + i] = src[off[0] + i * plan.inner_stride[0]];
    });
    return buf.data();
  }

  int64_t rows_, cols_;
  float epsilon_;
  const float *x_, *scale_, *bias_;
  float *y_, *mean_out_, *inv_out_;
  BroadcastPlan scale_plan_, bias_plan_;
  bool scale_full_, bias_full_;
  std::vector<float> scale_buf_, bias_buf_;
};

std::string check_floats(const OpNode& op, size_t count) {
  return expect_dtypes(op, 0, count, {KITE_DTYPE_FLOAT32});
}

bool is_vector_of(const OpNode& op, size_t i, int64_t n) {
  return op.has_input(i) && op.inputs[i].shape == Shape{n};
}

}  // namespace

std::string check_batch_norm(const OpNode& op) {
  if (op.attr_int("training_mode", 0) != 0 || op.num_outputs > 1) {
    return "training mode is not supported (inference only)";
  }
  return check_floats(op, 5);
}

std::unique_ptr<Kernel> prepare_batch_norm(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  if (x.size() < 2) return prepare_error(err, op, "X must have at least 2 dims");
  for (size_t i = 1; i < 5; ++i) {
    if (!is_vector_of(op, i, x[1])) {
      return prepare_error(err, op, input_label(op, i) + " must have shape " + std::to_string(x[1]));
    }
  }
  if (!has_output(args, 0) || output_shape(args, 0) != x) {
    return prepare_error(err, op, "output shape differs from X");
  }
  auto f = [&](int i) { return static_cast<const float*>(args.input_data(i)); };
  return std::make_unique<BatchNormKernel>(x[0], x[1], product(x, 2, x.size()),
                                           op.attr_float("epsilon", 1e-5f), f(0), f(1), f(2),
                                           f(3), f(4), static_cast<float*>(args.output_data(0)));
}

std::string check_instance_norm(const OpNode& op) { return check_floats(op, 3); }

std::unique_ptr<Kernel> prepare_instance_norm(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  if (x.size() < 3) return prepare_error(err, op, "input must have at least 3 dims");
  if (!is_vector_of(op, 1, x[1]) || !is_vector_of(op, 2, x[1])) {
    return prepare_error(err, op, "scale and B must have shape " + std::to_string(x[1]));
  }
  if (!has_output(args, 0) || output_shape(args, 0) != x) {
    return prepare_error(err, op, "output shape differs from the input");
  }
  auto f = [&](int i) { return static_cast<const float*>(args.input_data(i)); };
  return std::make_unique<InstanceNormKernel>(x[0], x[1], product(x, 2, x.size()),
                                              op.attr_float("epsilon", 1e-5f), f(0), f(1), f(2),
                                              static_cast<float*>(args.output_data(0)));
}

std::string check_layer_norm(const OpNode& op) {
  if (!op.has_input(0) || !op.has_input(1)) return "needs X and Scale";
  return check_floats(op, 3);
}

std::unique_ptr<Kernel> prepare_layer_norm(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  const int64_t axis = normalize_axis(op.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const Shape block(x.begin() + axis, x.end());
  const int64_t rows = product(x, 0, static_cast<size_t>(axis));
  const int64_t cols = shape_numel(block);
  if (!has_output(args, 0) || output_shape(args, 0) != x) {
    return prepare_error(err, op, "output shape differs from X");
  }
  // Scale and B: numpy-broadcast into the normalised block only.
  BroadcastPlan plans[2];
  bool full[2] = {true, true};
  for (int i = 1; i <= 2; ++i) {
    if (!op.has_input(static_cast<size_t>(i))) continue;
    Shape s = op.inputs[i].shape;
    while (s.size() > block.size() && s.front() == 1) s.erase(s.begin());
    Shape joined;
    if (s.size() > block.size() || !kite::ops::broadcast_shapes(s, block, &joined) ||
        joined != block) {
      return prepare_error(err, op, input_label(op, i) + " does not broadcast to the normalised dims " +
                                        kite::ops::shape_string(block));
    }
    full[i - 1] = shape_numel(s) == cols;
    if (!full[i - 1]) plans[i - 1] = make_broadcast_plan(block, {&s});
  }
  float* outs[3] = {nullptr, nullptr, nullptr};
  Shape stat_shape(x.begin(), x.begin() + axis);
  stat_shape.resize(x.size(), 1);
  for (int k = 0; k < 3; ++k) {
    if (!has_output(args, k)) continue;
    if (k > 0 && (output_shape(args, k) != stat_shape ||
                  output_dtype(args, k) != KITE_DTYPE_FLOAT32)) {
      return prepare_error(err, op, "Mean and InvStdDev outputs must be float32 " +
                                        kite::ops::shape_string(stat_shape));
    }
    outs[k] = static_cast<float*>(args.output_data(k));
  }
  if (!outs[0]) return prepare_error(err, op, "output Y is missing");
  const float* bias = op.has_input(2) ? static_cast<const float*>(args.input_data(2)) : nullptr;
  return std::make_unique<LayerNormKernel>(
      rows, cols, op.attr_float("epsilon", 1e-5f), static_cast<const float*>(args.input_data(0)),
      static_cast<const float*>(args.input_data(1)), bias, outs[0], outs[1], outs[2], plans[0],
      plans[1], full[0], full[1]);
}

}  // namespace kite::cpu
