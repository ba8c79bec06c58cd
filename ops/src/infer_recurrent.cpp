// Shape and dtype rules of the recurrent ops (LSTM, GRU, RNN) and
// GridSample (issue 19).
#include <cstring>

#include "infer_util.h"
#include "kite/ops/recurrent.h"

namespace kite::ops::detail {
namespace {

bool infer_recurrent(Ctx& c) {
  const bool lstm = c.node.op == "LSTM";
  const size_t max_inputs = lstm ? 8 : 6;
  if (!c.arity(3, max_inputs, 1, lstm ? 3 : 2)) return false;
  static const char* const kRoles[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (size_t i = 0; i < max_inputs; ++i) {
    if (i == 4 || !c.has(i)) continue;
    if (!c.dtype_in(i, kRoles[i], kF32)) return false;
  }
  if (c.has(4) && !c.dtype_in(4, "sequence_lens", kI32)) return false;
  int64_t v = 0;
  float f = 0;
  std::string s;
  if (!c.attr_int("hidden_size", 0, &v) || !c.attr_int("layout", 0, &v) ||
      !c.attr_string("direction", "forward", &s) || !c.attr_float("clip", 0, &f) ||
      (c.node.op == "GRU" && !c.attr_int("linear_before_reset", 0, &v)) ||
      (lstm && !c.attr_int("input_forget", 0, &v))) {
    return false;
  }
  std::vector<float> fl;
  bool present = false;
  if (!c.attr_floats("activation_alpha", &fl, &present) ||
      !c.attr_floats("activation_beta", &fl, &present)) {
    return false;
  }
  RecurrentPlan p;
  std::string why;
  if (!resolve_recurrent(c.node, &p, &why)) return c.fail(why);
  // Kite runs every sequence over the whole static length: a known
  // sequence_lens must say so (the kernel checks one computed at run).
  if (c.has(4) && c.in(4).data) {
    const auto* lens = static_cast<const unsigned char*>(c.in(4).data);
    for (int64_t b = 0; b < p.batch; ++b) {
      int32_t len = 0;
      std::memcpy(&len, lens + 4 * b, 4);
      if (len != p.seq) {
        return c.fail(c.input_label(4, "sequence_lens") + " holds " + std::to_string(len) +
                      " for batch entry " + std::to_string(b) +
                      ": Kite runs only sequences of the full length " + std::to_string(p.seq));
      }
    }
  }
  std::vector<int64_t> y = p.y_shape, st = p.state_shape;
  return c.set(0, KITE_DTYPE_FLOAT32, y) && c.set(1, KITE_DTYPE_FLOAT32, st) &&
         c.set(2, KITE_DTYPE_FLOAT32, st);
}

bool infer_grid_sample(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "X", kF32) || !c.dtype_in(1, "grid", kF32)) return false;
  std::string mode, padding;
  bool align = false;
  if (!c.attr_string("mode", "bilinear", &mode) || !c.attr_string("padding_mode", "zeros", &padding) ||
      !c.attr_bool("align_corners", false, &align)) {
    return false;
  }
  if (mode != "bilinear" && mode != "linear" && mode != "nearest" && mode != "bicubic" && mode != "cubic") {
    return c.fail("attribute 'mode' is '" + mode + "', expected bilinear, nearest or bicubic");
  }
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return c.fail("attribute 'padding_mode' is '" + padding + "', expected zeros, border or reflection");
  }
  if (c.rank(0) != 4) {
    return c.fail(c.input_label(0, "X") + " has shape " + shape_string(c.shape(0)) +
                  ": Kite's GridSample takes 4-D inputs (N, C, H, W) only");
  }
  const std::vector<int64_t>& x = c.shape(0);
  const std::vector<int64_t>& g = c.shape(1);
  if (g.size() != 4 || g[0] != x[0] || g[3] != 2) {
    return c.fail(c.input_label(1, "grid") + " has shape " + shape_string(g) + ", expected [" +
                  std::to_string(x[0]) + ", H_out, W_out, 2]");
  }
  if (x[2] <= 0 || x[3] <= 0) {
    return c.fail(c.input_label(0, "X") + " has shape " + shape_string(x) + ": H and W must be positive");
  }
  return c.set(0, KITE_DTYPE_FLOAT32, {x[0], x[1], g[1], g[2]});
}

}  // namespace

const std::vector<OpRule>& recurrent_rules() {
  static const std::vector<OpRule> rules = {
      {"LSTM", infer_recurrent},
      {"GRU", infer_recurrent},
      {"RNN", infer_recurrent},
      {"GridSample", infer_grid_sample},
  };
  return rules;
}

}  // namespace kite::ops::detail
