// LSTM, GRU and RNN resolved against their input shapes and attributes: one
// place for the op rule (output shapes, checks) and the kernels (sizes,
// gate activations). Allocates: call it at prepare, not at run.
//
// Layout 0: X [seq, batch, input], Y [seq, dirs, batch, hidden], states
// [dirs, batch, hidden]; layout 1: X [batch, seq, input], Y [batch, seq,
// dirs, hidden], states [batch, dirs, hidden]. W [dirs, gates*hidden, input],
// R [dirs, gates*hidden, hidden], B [dirs, 2*gates*hidden] (W's bias, then
// R's), gates in ONNX order: LSTM i, o, f, c; GRU z, r, h; RNN one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/ops/op_node.h"

namespace kite::ops {

enum class RnnActivation {
  kSigmoid, kTanh, kRelu, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
  kElu, kSoftsign, kSoftplus
};
struct RnnAct {
  RnnActivation kind = RnnActivation::kSigmoid;
  float alpha = 0;
  float beta = 0;
};

struct RecurrentPlan {
  int gates = 1;          // 4 LSTM, 3 GRU, 1 RNN
  int acts_per_dir = 1;   // 3 LSTM (f, g, h), 2 GRU (f, g), 1 RNN (f)
  int64_t directions = 1;
  bool reverse = false;   // one direction, run from the last step to the first
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int64_t layout = 0;
  bool has_clip = false;
  float clip = 0;         // pre-activations clipped to [-clip, clip]
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM: f = 1 - i
  std::vector<RnnAct> acts;          // directions * acts_per_dir
  std::vector<int64_t> y_shape;      // output Y
  std::vector<int64_t> state_shape;  // Y_h, Y_c, initial_h, initial_c
};

// Validates node (op LSTM, GRU or RNN; inputs' dtypes are the caller's) and
// fills plan. False with *err (no node label) naming the input or
// attribute and the bad value.
bool resolve_recurrent(const OpNode& node, RecurrentPlan* plan, std::string* err);

// Applies an activation to v[0..n) in place (scalar reference form).
float rnn_activate(const RnnAct& a, float x);

}  // namespace kite::ops
