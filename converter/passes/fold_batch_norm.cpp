// BatchNormalization (inference mode) folded into the Conv, ConvTranspose or
// Gemm that feeds it: with a = scale / sqrt(var + epsilon) (the node's own
// epsilon) and b = B - mean * a per output channel, the weights of channel o
// are multiplied by a[o] and the bias becomes bias * a + b. Computed in
// double, rounded once to float32. The BatchNormalization node disappears;
// the producer writes its output. Folding needs the producer's weights (and
// bias) and all BatchNorm parameters to be float32 constants, and the
// producer's result to have no other reader.
#include <cmath>

#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"
#include "passes/rescale_weights.h"

namespace kite::passes {

bool fold_batch_norm(PassContext& ctx, PassResult* result) {
  ir::Model& m = *ctx.model;
  return rewrite_until_stable(ctx, result, [&](size_t i, const UseMap& uses) {
    std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& bn = nodes[i];
    if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty()) return false;
    if (bn.attr_int("training_mode", 0) != 0) return false;
    if (uses.reads_extra_outputs(bn)) return false;
    const int x = bn.inputs[0];
    const int p = uses.producer(x);
    if (p < 0 || uses.sole_reader(x) != static_cast<int>(i)) return false;
    const ir::Node& prod = nodes[static_cast<size_t>(p)];
    if (!is_op(prod, "Conv") && !is_op(prod, "ConvTranspose") && !is_op(prod, "Gemm")) return false;
    if (prod.outputs.size() != 1 || !is_float32(m, x)) return false;
    const std::vector<int64_t>& shape = tensor_at(m, x).shape;
    if (shape.size() < 2) return false;
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
    if (!ok) return false;
    const double epsilon = bn.attr_float("epsilon", 1e-5f);
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
    if (!ok) return false;
    std::string why;
    const int y = bn.outputs[0];
    const std::string producer_op = prod.op;
    if (!rescale_output_channels(ctx, p, a, b, &why)) {
      result->count("skipped");
      return false;
    }
    std::vector<ir::Node>& after = m.main().nodes;
    after[static_cast<size_t>(p)].outputs[0] = y;
    std::vector<bool> dead(after.size(), false);
    dead[i] = true;
    erase_nodes(&m, dead);
    result->count("into_" + producer_op);
    return true;
  });
}

}  // namespace kite::passes
