// Per-channel scale and shift folded into Conv / ConvTranspose / Gemm
// weights and bias (see rescale_weights.h).
#include "passes/rescale_weights.h"

#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"

namespace kite::passes {

namespace {

// Per-channel vector of a constant that broadcasts along one channel axis
// of an output of rank `rank` (channel axis `axis`, `channels` wide):
// a scalar, or shape [..., channels, 1...] aligned to the right. Empty if
// the constant varies along any other axis.
std::vector<double> per_channel(const ir::Model& m, int t, size_t rank, size_t axis,
                                int64_t channels) {
  const std::vector<float> v = float_values(m, t);
  const std::vector<int64_t>& shape = tensor_at(m, t).shape;
  if (v.empty() || shape.size() > rank) return {};
  const size_t offset = rank - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    const size_t out_axis = d + offset;
    if (shape[d] == 1) continue;
    if (out_axis != axis || shape[d] != channels) return {};
  }
  std::vector<double> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) out[static_cast<size_t>(c)] = v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
  return out;
}

}  // namespace

bool rescale_output_channels(PassContext& ctx, int node_index, const std::vector<double>& scale,
                             const std::vector<double>& shift, std::string* why) {
  ir::Model& m = *ctx.model;
  ir::Node& p = m.main().nodes[static_cast<size_t>(node_index)];
  const bool gemm = is_op(p, "Gemm");
  const bool transpose = is_op(p, "ConvTranspose");
  if (p.inputs.size() < 2 || p.outputs.size() != 1) {
    *why = "unexpected arity";
    return false;
  }
  const int w = p.inputs[1];
  const int bias = p.inputs.size() > 2 ? p.inputs[2] : -1;
  if (!is_constant(m, w) || !is_float32(m, w) || (bias >= 0 && (!is_constant(m, bias) || !is_float32(m, bias)))) {
    *why = "weights or bias are not float32 constants";
    return false;
  }
  if (gemm && p.inputs[0] >= 0 && !is_float32(m, p.inputs[0])) {
    *why = "not float32";
    return false;
  }
  std::vector<float> weights = float_values(m, w);
  const std::vector<int64_t> wshape = tensor_at(m, w).shape;
  const std::vector<int64_t>& out_shape = tensor_at(m, p.outputs[0]).shape;
  if (out_shape.size() < 2) {
    *why = "output rank below 2";
    return false;
  }
  const int64_t channels = out_shape[1];
  if ((!scale.empty() && static_cast<int64_t>(scale.size()) != channels) ||
      (!shift.empty() && static_cast<int64_t>(shift.size()) != channels)) {
    *why = "channel count mismatch";
    return false;
  }
  auto s = [&](int64_t o) { return scale.empty() ? 1.0 : scale[static_cast<size_t>(o)]; };
  auto h = [&](int64_t o) { return shift.empty() ? 0.0 : shift[static_cast<size_t>(o)]; };

  // Weights: which output channel each element feeds.
  if (gemm) {
    if (wshape.size() != 2) {
      *why = "Gemm weight is not 2-D";
      return false;
    }
    const bool trans_b = p.attr_int("transB", 0) != 0;
    const int64_t rows = wshape[0], cols = wshape[1];
    if ((trans_b ? rows : cols) != channels) {
      *why = "Gemm weight does not match the output channels";
      return false;
    }
    if (!scale.empty()) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          float& x = weights[static_cast<size_t>(r * cols + c)];
          x = static_cast<float>(x * s(trans_b ? r : c));
        }
      }
    }
  } else {
    if (wshape.size() < 2) {
      *why = "weight rank below 2";
      return false;
    }
    int64_t inner = 1;
    for (size_t d = 2; d < wshape.size(); ++d) inner *= wshape[d];
    const int64_t group = p.attr_int("group", 1);
    if (group <= 0) {
      *why = "bad group";
      return false;
    }
    if (!transpose) {
      if (wshape[0] != channels) {
        *why = "Conv weight does not match the output channels";
        return false;
      }
      if (!scale.empty()) {
        for (int64_t o = 0; o < channels; ++o) {
          for (int64_t k = 0; k < wshape[1] * inner; ++k) {
            float& x = weights[static_cast<size_t>(o * wshape[1] * inner + k)];
            x = static_cast<float>(x * s(o));
          }
        }
      }
    } else {
      // ConvTranspose weight: [C_in, C_out / group, k...].
      const int64_t in_channels = wshape[0], per_group_out = wshape[1];
      if (in_channels % group != 0 || per_group_out * group != channels) {
        *why = "ConvTranspose weight does not match the output channels";
        return false;
      }
      const int64_t in_per_group = in_channels / group;
      if (!scale.empty()) {
        for (int64_t c = 0; c < in_channels; ++c) {
          for (int64_t j = 0; j < per_group_out; ++j) {
            const int64_t o = (c / in_per_group) * per_group_out + j;
            for (int64_t k = 0; k < inner; ++k) {
              float& x = weights[static_cast<size_t>((c * per_group_out + j) * inner + k)];
              x = static_cast<float>(x * s(o));
            }
          }
        }
      }
    }
  }

  // Bias per output channel (Gemm: beta * C, which must broadcast per column).
  std::vector<double> old_bias(static_cast<size_t>(channels), 0.0);
  if (bias >= 0) {
    const std::vector<int64_t>& bshape = tensor_at(m, bias).shape;
    std::vector<double> b;
    if (gemm) {
      b = per_channel(m, bias, 2, 1, channels);
      const float beta = p.attr_float("beta", 1.0f);
      for (double& x : b) x *= beta;
    } else if (bshape.size() == 1 && bshape[0] == channels) {
      b = per_channel(m, bias, 1, 0, channels);
    }
    if (b.empty()) {
      *why = "bias does not broadcast per output channel";
      return false;
    }
    old_bias = b;
  }
  std::vector<float> new_bias(static_cast<size_t>(channels));
  for (int64_t o = 0; o < channels; ++o) {
    new_bias[static_cast<size_t>(o)] = static_cast<float>(old_bias[static_cast<size_t>(o)] * s(o) + h(o));
  }

  const std::string base = p.name.empty() ? std::string("folded") : p.name;
  int new_w = w;
  if (!scale.empty()) {
    new_w = add_float_constant(&m, base + "/folded_weight", wshape, weights);
  }
  const int new_b = add_float_constant(&m, base + "/folded_bias", {channels}, new_bias);
  ir::Node& q = m.main().nodes[static_cast<size_t>(node_index)];  // add_* may not move nodes, but be safe
  q.inputs[1] = new_w;
  if (q.inputs.size() < 3) q.inputs.resize(3, -1);
  q.inputs[2] = new_b;
  if (gemm) set_attr(&q.attrs, float_attr("beta", 1.0f));
  return true;
}

}  // namespace kite::passes
