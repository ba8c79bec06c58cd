#include "half_bridge.h"

#include <cstdint>
#include <utility>

#include "kite/ops/half.h"

namespace kite::cpu {

namespace {

bool is_half(const kite_backend_tensor* t) { return t && t->dtype == KITE_DTYPE_FLOAT16; }

size_t element_count(const kite_backend_tensor& t) {
  size_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

// Elements per task of the conversions (a few microseconds each).
constexpr int64_t kConvertGrain = 1 << 14;

void widen_range(const uint16_t* h, float* f, int64_t b, int64_t e) {
  halves_to_floats(h + b, f + b, static_cast<size_t>(e - b));
}

void widen(const kite_backend_tensor& half, std::vector<float>* wide) {
  widen_range(static_cast<const uint16_t*>(half.data), wide->data(), 0, static_cast<int64_t>(wide->size()));
}

class BridgedKernel : public Kernel {
 public:
  BridgedKernel(std::unique_ptr<HalfBridge> bridge, std::unique_ptr<Kernel> inner)
      : bridge_(std::move(bridge)), inner_(std::move(inner)) {}
  void run(ThreadPool& pool) override {
    bridge_->widen_inputs(pool);
    inner_->run(pool);
    if (inner_->run_error() == nullptr) bridge_->narrow_outputs(pool);
  }
  const char* run_error() const override { return inner_->run_error(); }

 private:
  std::unique_ptr<HalfBridge> bridge_;
  std::unique_ptr<Kernel> inner_;
};

}  // namespace

bool HalfBridge::needed(const kite_backend_node& node) {
  for (int32_t i = 0; i < node.num_inputs; ++i) {
    if (is_half(node.inputs[i])) return true;
  }
  for (int32_t i = 0; i < node.num_outputs; ++i) {
    if (is_half(node.outputs[i])) return true;
  }
  return false;
}

HalfBridge::HalfBridge(const kite_backend_node& node, bool with_data) : node_(node) {
  const size_t count = static_cast<size_t>(node.num_inputs) + static_cast<size_t>(node.num_outputs);
  tensors_.resize(count);  // never resized again: inputs_/outputs_ point into it
  size_t slot = 0;
  auto add = [&](const kite_backend_tensor* t, bool is_input,
                 std::vector<std::unique_ptr<Converted>>* list) -> const kite_backend_tensor* {
    if (!is_half(t)) return t;
    kite_backend_tensor& wide = tensors_[slot++];
    wide = *t;
    wide.dtype = KITE_DTYPE_FLOAT32;
    const size_t n = element_count(*t);
    wide.byte_size = n * sizeof(float);
    wide.data = nullptr;
    auto c = std::make_unique<Converted>();
    c->half = t;
    c->constant = is_input && t->is_constant != 0;
    if (with_data) {
      c->wide.resize(n);
      wide.data = c->wide.data();
      if (c->constant && t->data) widen(*t, &c->wide);
    }
    list->push_back(std::move(c));
    return &wide;
  };
  for (int32_t i = 0; i < node.num_inputs; ++i) inputs_.push_back(add(node.inputs[i], true, &in_));
  for (int32_t i = 0; i < node.num_outputs; ++i) outputs_.push_back(add(node.outputs[i], false, &out_));
  node_.inputs = inputs_.data();
  node_.outputs = outputs_.data();
}

void HalfBridge::widen_inputs(ThreadPool& pool) {
  for (const auto& c : in_) {
    if (c->constant) continue;
    const uint16_t* h = static_cast<const uint16_t*>(c->half->data);
    float* f = c->wide.data();
    pool.parallel_for(static_cast<int64_t>(c->wide.size()), kConvertGrain,
                      [&](int64_t b, int64_t e) { widen_range(h, f, b, e); });
  }
}

void HalfBridge::narrow_outputs(ThreadPool& pool) {
  for (const auto& c : out_) {
    uint16_t* h = static_cast<uint16_t*>(c->half->data);
    const float* f = c->wide.data();
    pool.parallel_for(static_cast<int64_t>(c->wide.size()), kConvertGrain, [&](int64_t b, int64_t e) {
      floats_to_halves(f + b, h + b, static_cast<size_t>(e - b));
    });
  }
}

std::unique_ptr<Kernel> bridge_kernel(std::unique_ptr<HalfBridge> bridge,
                                      std::unique_ptr<Kernel> inner) {
  return std::make_unique<BridgedKernel>(std::move(bridge), std::move(inner));
}

}  // namespace kite::cpu
