// LSTM, GRU and RNN as one fused kernel per node: the input projection of
// every time step is one GEMM (X [steps*batch, input] times W^T, packed
// once), then each step does one GEMM of the hidden state by R^T (GRU: two,
// the reset gate applies before the candidate's product) and the gate math.
// Weights and biases given as constants are packed at prepare; otherwise at
// each run, into buffers sized at prepare.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common.h"
#include "kernels.h"
#include "kite/ops/recurrent.h"
#include "sgemm.h"
#include "vmath.h"

namespace kite::cpu {
namespace {

using kite::ops::RecurrentPlan;
using kite::ops::RnnAct;
using kite::ops::RnnActivation;

void activate(const RnnAct& a, float* v, int64_t n) {
  if (a.kind == RnnActivation::kSigmoid) {
    vmath::sigmoid(v, v, n, false);
    return;
  }
  if (a.kind == RnnActivation::kTanh) {
    for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) v[i] = kite::ops::rnn_activate(a, v[i]);
}

class RecurrentKernel : public CheckedKernel {
 public:
  RecurrentKernel(const KernelArgs& args, const RecurrentPlan& plan)
      : CheckedKernel(*args.op), p_(plan) {
    const OpNode& op = *args.op;
    kind_ = op.op == "LSTM" ? 2 : op.op == "GRU" ? 1 : 0;
    auto input = [&](int i) { return i < args.node->num_inputs ? args.input_data(i) : nullptr; };
    x_ = static_cast<const float*>(args.input_data(0));
    w_ = static_cast<const float*>(args.input_data(1));
    r_ = static_cast<const float*>(args.input_data(2));
    b_ = static_cast<const float*>(input(3));
    lens_ = static_cast<const int32_t*>(input(4));
    lens_constant_ = op.has_input(4) && op.inputs[4].data != nullptr;
    h0_ = static_cast<const float*>(input(5));
    if (kind_ == 2) {
      c0_ = static_cast<const float*>(input(6));
      p_peep_ = static_cast<const float*>(input(7));
    }
    for (int k = 0; k < 3; ++k) out_[k] = has_output(args, k) ? static_cast<float*>(args.output_data(k)) : nullptr;
    weights_constant_ = op.inputs[1].data != nullptr && op.inputs[2].data != nullptr;

    const int64_t H = p_.hidden, G = p_.gates, D = p_.directions;
    const int64_t rows = p_.seq * p_.batch;
    // Per direction: W^T (input x G*H); R^T as one block, or for GRU the z,r
    // block (hidden x 2H) and the h block (hidden x H).
    w_pack_ = sgemm::packed_b_floats(p_.input, G * H);
    if (kind_ == 1) {
      r_pack_ = sgemm::packed_b_floats(H, 2 * H);
      rh_pack_ = sgemm::packed_b_floats(H, H);
    } else {
      r_pack_ = sgemm::packed_b_floats(H, G * H);
    }
    packed_.assign(static_cast<size_t>(D * (w_pack_ + r_pack_ + rh_pack_)), 0.0f);
    bias_.assign(static_cast<size_t>(D * 2 * G * H), 0.0f);
    if (weights_constant_) pack_weights(nullptr);
    if (!b_ || op.inputs[3].data) {  // absent or constant
      biases_ready_ = true;
      if (b_) std::memcpy(bias_.data(), b_, bias_.size() * sizeof(float));
    }
    // Scratch: packed X, the projections of all steps, packed H, the
    // recurrent products, h, c and a step temporary.
    xp_ = sgemm::packed_a_floats(rows, p_.input);
    xw_ = rows * G * H;
    hp_ = sgemm::packed_a_floats(p_.batch, H);
    rh_ = p_.batch * G * H;
    st_ = p_.batch * H;
    workspace_ = args.workspace ? args.workspace : &own_workspace_;
    workspace_->reserve(static_cast<size_t>(xp_ + xw_ + hp_ + rh_ + 3 * st_));
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (lens_ && !lens_constant_) {
      for (int64_t b = 0; b < p_.batch; ++b) {
        if (lens_[b] != p_.seq) {
          set_error("sequence_lens holds %d for batch entry %lld: Kite runs only sequences of the "
                    "full length %lld", lens_[b], static_cast<long long>(b),
                    static_cast<long long>(p_.seq));
          return;
        }
      }
    }
    if (!weights_constant_) pack_weights(&pool);
    if (!biases_ready_) std::memcpy(bias_.data(), b_, bias_.size() * sizeof(float));
    float* ws = workspace_->data();
    float* xp = ws;
    float* xw = xp + xp_;
    float* hp = xw + xw_;
    float* rh = hp + hp_;
    float* h = rh + rh_;
    float* c = h + st_;
    float* tmp = c + st_;
    const int64_t rows = p_.seq * p_.batch;
    // X's rows are (step, batch) for layout 0 and (batch, step) for layout
    // 1; both are contiguous rows of `input` floats.
    sgemm::pack_a(x_, p_.input, 1, rows, p_.input, 1.0f, xp, &pool);
    for (int64_t d = 0; d < p_.directions; ++d) run_direction(d, xp, xw, hp, rh, h, c, tmp, pool);
  }

 private:
  void pack_weights(ThreadPool* pool) {
    const int64_t H = p_.hidden, G = p_.gates, I = p_.input;
    for (int64_t d = 0; d < p_.directions; ++d) {
      float* base = packed_.data() + d * (w_pack_ + r_pack_ + rh_pack_);
      sgemm::pack_b(w_ + d * G * H * I, 1, I, I, G * H, base, pool);
      const float* r = r_ + d * G * H * H;
      if (kind_ == 1) {
        sgemm::pack_b(r, 1, H, H, 2 * H, base + w_pack_, pool);
        sgemm::pack_b(r + 2 * H * H, 1, H, H, H, base + w_pack_ + r_pack_, pool);
      } else {
        sgemm::pack_b(r, 1, H, H, G * H, base + w_pack_, pool);
      }
    }
  }

  // Index of the row of (step t, batch b) in X and the projections.
  int64_t row(int64_t t, int64_t b) const {
    return p_.layout == 0 ? t * p_.batch + b : b * p_.seq + t;
  }
  int64_t state_index(int64_t d, int64_t b) const {
    return (p_.layout == 0 ? d * p_.batch + b : b * p_.directions + d) * p_.hidden;
  }
  int64_t y_index(int64_t t, int64_t d, int64_t b) const {
    return (p_.layout == 0 ? (t * p_.directions + d) * p_.batch + b
                           : (b * p_.seq + t) * p_.directions + d) * p_.hidden;
  }
  void clip(float* v, int64_t n) const {
    if (!p_.has_clip) return;
    for (int64_t i = 0; i < n; ++i) v[i] = std::min(p_.clip, std::max(-p_.clip, v[i]));
  }

  void run_direction(int64_t d, const float* xp, float* xw, float* hp, float* rh, float* h,
                     float* c, float* tmp, ThreadPool& pool) {
    const int64_t H = p_.hidden, G = p_.gates, B = p_.batch, S = p_.seq;
    const float* base = packed_.data() + d * (w_pack_ + r_pack_ + rh_pack_);
    sgemm::gemm_packed(S * B, G * H, p_.input, xp, base, xw, G * H, nullptr, false, &pool);
    const float* wb = bias_.data() + d * 2 * G * H;
    const float* rb = wb + G * H;
    const RnnAct* act = p_.acts.data() + d * p_.acts_per_dir;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        h[b * H + j] = h0_ ? h0_[state_index(d, b) + j] : 0.0f;
        c[b * H + j] = c0_ ? c0_[state_index(d, b) + j] : 0.0f;
      }
    }
    const bool reverse = p_.reverse || d == 1;
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      sgemm::pack_a(h, H, 1, B, H, 1.0f, hp, nullptr);
      const int64_t n_first = kind_ == 1 ? 2 * H : G * H;
      sgemm::gemm_packed(B, n_first, H, hp, base + w_pack_, rh, G * H, nullptr, false, &pool);
      if (kind_ == 1 && p_.linear_before_reset) {
        sgemm::gemm_packed(B, H, H, hp, base + w_pack_ + r_pack_, rh + 2 * H, G * H, nullptr,
                           false, &pool);
      }
      for (int64_t b = 0; b < B; ++b) {
        float* g = xw + row(t, b) * G * H;  // the step's gate pre-activations, in place
        const float* r = rh + b * G * H;
        float* hb = h + b * H;
        if (kind_ == 0) {
          for (int64_t j = 0; j < H; ++j) g[j] += wb[j] + rb[j] + r[j];
          clip(g, H);
          activate(act[0], g, H);
          std::memcpy(hb, g, static_cast<size_t>(H) * sizeof(float));
        } else if (kind_ == 2) {
          lstm_cell(g, r, wb, rb, d, act, hb, c + b * H);
        } else {
          gru_gates(g, r, wb, rb, act, hb);
        }
      }
      if (kind_ == 1 && !p_.linear_before_reset) gru_candidate(t, xw, hp, rh, h, tmp, base, wb, rb, act, pool);
      if (out_[0]) {
        for (int64_t b = 0; b < B; ++b) {
          std::memcpy(out_[0] + y_index(t, d, b), h + b * H, static_cast<size_t>(H) * sizeof(float));
        }
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (out_[1]) std::memcpy(out_[1] + state_index(d, b), h + b * H, static_cast<size_t>(H) * sizeof(float));
      if (out_[2]) std::memcpy(out_[2] + state_index(d, b), c + b * H, static_cast<size_t>(H) * sizeof(float));
    }
  }

  // LSTM, gates i, o, f, c in g (4H), recurrent products in r.
  void lstm_cell(float* g, const float* r, const float* wb, const float* rb, int64_t d,
                 const RnnAct* act, float* h, float* c) const {
    const int64_t H = p_.hidden;
    for (int64_t j = 0; j < 4 * H; ++j) g[j] += wb[j] + rb[j] + r[j];
    float* gi = g;
    float* go = g + H;
    float* gf = g + 2 * H;
    float* gc = g + 3 * H;
    const float* pi = p_peep_ ? p_peep_ + d * 3 * H : nullptr;
    if (pi) {
      for (int64_t j = 0; j < H; ++j) {
        gi[j] += pi[j] * c[j];
        gf[j] += pi[2 * H + j] * c[j];
      }
    }
    clip(gi, H);
    activate(act[0], gi, H);
    if (p_.input_forget) {
      for (int64_t j = 0; j < H; ++j) gf[j] = 1.0f - gi[j];
    } else {
      clip(gf, H);
      activate(act[0], gf, H);
    }
    clip(gc, H);
    activate(act[1], gc, H);
    for (int64_t j = 0; j < H; ++j) c[j] = gf[j] * c[j] + gi[j] * gc[j];
    if (pi) {
      for (int64_t j = 0; j < H; ++j) go[j] += pi[H + j] * c[j];
    }
    clip(go, H);
    activate(act[0], go, H);
    for (int64_t j = 0; j < H; ++j) h[j] = c[j];
    activate(act[2], h, H);
    for (int64_t j = 0; j < H; ++j) h[j] *= go[j];
  }

  // GRU: z and r (and, linear_before_reset, the candidate and the new h).
  void gru_gates(float* g, const float* r, const float* wb, const float* rb, const RnnAct* act,
                 float* h) const {
    const int64_t H = p_.hidden;
    for (int64_t j = 0; j < 2 * H; ++j) g[j] += wb[j] + rb[j] + r[j];
    clip(g, 2 * H);
    activate(act[0], g, 2 * H);
    if (!p_.linear_before_reset) return;
    float* gh = g + 2 * H;
    for (int64_t j = 0; j < H; ++j) gh[j] += wb[2 * H + j] + g[H + j] * (r[2 * H + j] + rb[2 * H + j]);
    clip(gh, H);
    activate(act[1], gh, H);
    for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - g[j]) * gh[j] + g[j] * h[j];
  }

  // GRU, linear_before_reset = 0: (r . h_prev) R_h^T, then the new h.
  void gru_candidate(int64_t t, float* xw, float* hp, float* rh, float* h, float* tmp,
                     const float* base, const float* wb, const float* rb, const RnnAct* act,
                     ThreadPool& pool) const {
    const int64_t H = p_.hidden, B = p_.batch, G = p_.gates;
    for (int64_t b = 0; b < B; ++b) {
      const float* g = xw + row(t, b) * G * H;
      for (int64_t j = 0; j < H; ++j) tmp[b * H + j] = g[H + j] * h[b * H + j];
    }
    sgemm::pack_a(tmp, H, 1, B, H, 1.0f, hp, nullptr);
    sgemm::gemm_packed(B, H, H, hp, base + w_pack_ + r_pack_, rh + 2 * H, G * H, nullptr, false, &pool);
    for (int64_t b = 0; b < B; ++b) {
      float* g = xw + row(t, b) * G * H;
      float* gh = g + 2 * H;
      const float* r = rh + b * G * H + 2 * H;
      for (int64_t j = 0; j < H; ++j) gh[j] += wb[2 * H + j] + rb[2 * H + j] + r[j];
      clip(gh, H);
      activate(act[1], gh, H);
      float* hb = h + b * H;
      for (int64_t j = 0; j < H; ++j) hb[j] = (1.0f - g[j]) * gh[j] + g[j] * hb[j];
    }
  }

  RecurrentPlan p_;
  int kind_ = 0;  // 0 RNN, 1 GRU, 2 LSTM
  const float* x_ = nullptr;
  const float* w_ = nullptr;
  const float* r_ = nullptr;
  const float* b_ = nullptr;
  const int32_t* lens_ = nullptr;
  bool lens_constant_ = false;
  const float* h0_ = nullptr;
  const float* c0_ = nullptr;
  const float* p_peep_ = nullptr;
  float* out_[3] = {nullptr, nullptr, nullptr};
  bool weights_constant_ = false;
  bool biases_ready_ = false;
  int64_t w_pack_ = 0, r_pack_ = 0, rh_pack_ = 0;
  std::vector<float> packed_;
  std::vector<float> bias_;
  int64_t xp_ = 0, xw_ = 0, hp_ = 0, rh_ = 0, st_ = 0;
  Workspace own_workspace_;
  Workspace* workspace_ = nullptr;
};

}  // namespace

std::string check_recurrent(const OpNode& op) {
  std::string why = expect_dtypes(op, 0, op.inputs.size(), {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32});
  if (!why.empty()) return why;
  RecurrentPlan plan;
  if (!kite::ops::resolve_recurrent(op, &plan, &why)) return why;
  return "";
}

std::unique_ptr<Kernel> prepare_recurrent(const KernelArgs& args, std::string* err) {
  RecurrentPlan plan;
  std::string why;
  if (!kite::ops::resolve_recurrent(*args.op, &plan, &why)) return prepare_error(err, *args.op, why);
  return std::make_unique<RecurrentKernel>(args, plan);
}

}  // namespace kite::cpu
