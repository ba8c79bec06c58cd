// BatchNormalization (inference mode) folded into the Conv, ConvTranspose or
// Gemm that feeds it: with a = scale / sqrt(var + epsilon) (the node's own
// epsilon) and b = B - mean * a per output channel, the weights of channel o
// are multiplied by a[o] and the bias becomes bias * a + b. Computed in
// double, rounded once to float32. The BatchNormalization node disappears;
// the producer writes its output. Folding needs the producer's weights (and
// bias) and all BatchNorm parameters to be float32 constants, and the
// producer's result to have no other reader.
#include <cmath>

#include "passes/graph_util.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

void set_float_attr(ir::Node* node, const std::string& name, float v) {
  for (ir::Attr& a : node->attrs) {
    if (a.name == name) {
      a = float_attr(name, v);
      return;
    }
  }
  node->attrs.push_back(float_attr(name, v));
}

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
    const bool trans_b = attr_int(p, "transB", 0) != 0;
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
    const int64_t group = attr_int(p, "group", 1);
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
      const float beta = attr_float(p, "beta", 1.0f);
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
  if (gemm) set_float_attr(&q, "beta", 1.0f);
  return true;
}

bool fold_batch_norm(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  bool again = true;
  while (again) {
    again = false;
    const UseMap uses(m);
    std::vector<ir::Node>& nodes = m.main().nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ir::Node& bn = nodes[i];
      if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty()) continue;
      if (attr_int(bn, "training_mode", 0) != 0) continue;
      bool extra_outputs = false;
      for (size_t k = 1; k < bn.outputs.size(); ++k) {
        if (bn.outputs[k] >= 0 && (uses.escapes(bn.outputs[k]) || !uses.readers(bn.outputs[k]).empty())) {
          extra_outputs = true;
        }
      }
      if (extra_outputs) continue;
      const int x = bn.inputs[0];
      const int p = uses.producer(x);
      if (p < 0 || uses.sole_reader(x) != static_cast<int>(i)) continue;
      const ir::Node& prod = nodes[static_cast<size_t>(p)];
      if (!is_op(prod, "Conv") && !is_op(prod, "ConvTranspose") && !is_op(prod, "Gemm")) continue;
      if (prod.outputs.size() != 1 || !is_float32(m, x)) continue;
      const std::vector<int64_t>& shape = tensor_at(m, x).shape;
      if (shape.size() < 2) continue;
      const int64_t channels = shape[1];
      std::vector<double> stats[4];
      bool ok = true;
      for (int k = 0; k < 4; ++k) {
        const int t = bn.inputs[static_cast<size_t>(k + 1)];
        const std::vector<float> v = float_values(m, t);
        if (static_cast<int64_t>(v.size()) != channels) {
          ok = false;
          break;
        }
        stats[k].assign(v.begin(), v.end());
      }
      if (!ok) continue;
      const double epsilon = attr_float(bn, "epsilon", 1e-5f);
      std::vector<double> a(static_cast<size_t>(channels)), b(static_cast<size_t>(channels));
      for (int64_t c = 0; c < channels; ++c) {
        const size_t k = static_cast<size_t>(c);
        const double var = stats[3][k] + epsilon;
        if (!(var > 0.0) || !std::isfinite(var)) {
          ok = false;
          break;
        }
        a[k] = stats[0][k] / std::sqrt(var);
        b[k] = stats[1][k] - stats[2][k] * a[k];
      }
      if (!ok) continue;
      std::string why;
      const int y = bn.outputs[0];
      const std::string producer_op = prod.op;
      if (!rescale_output_channels(ctx, p, a, b, &why)) {
        result->count("skipped");
        continue;
      }
      std::vector<ir::Node>& after = m.main().nodes;
      after[static_cast<size_t>(p)].outputs[0] = y;
      std::vector<bool> dead(after.size(), false);
      dead[i] = true;
      erase_nodes(&m, dead);
      result->count("into_" + producer_op);
      result->changed = true;
      again = true;
      break;  // the use map is stale; rescan
    }
  }
  return true;
}

}  // namespace kite::passes
