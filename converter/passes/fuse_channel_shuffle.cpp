// A channel shuffle (ShuffleNet's): Reshape [N, C, H, W] -> [N, g, C/g, H,
// W], Transpose perm [0, 2, 1, 3, 4], Reshape back to [N, C, H, W]; with the
// Concat along channels that feeds it, and the channel Slices that read its
// result, when those are its only reader and readers. Each output channel is
// one input channel's plane, so the fused kernel copies each plane once,
// from the Concat's inputs straight to the Slices' outputs, where the
// primitives move every value three times (Concat, Transpose, Slice): on
// shufflenet_v2_x1_0 at 2 threads those copies were a fifth of the run.
//
// Result: op ChannelShuffle (domain kite), inputs the Concat's (or the
// shuffled tensor alone), attributes group (g) and channel_starts (each
// output's first channel in the shuffled tensor), outputs the Slices' (or
// the shuffled tensor); pattern "[Concat+]ChannelShuffle[+Slice]".
#include <algorithm>

#include "passes/fusion.h"
#include "passes/graph_query.h"
#include "passes/graph_rewrite.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

// A Slice of t along axis 1 with step 1 and constant bounds: its channel
// range [*begin, *end) (clamped as ONNX does) when its output is
// [N, end - begin, H, W] of t's [N, C, H, W].
bool channel_slice(const ir::Model& m, const ir::Node& s, int t, int64_t* begin, int64_t* end) {
  if (!is_op(s, "Slice") || s.inputs.size() < 3 || s.inputs[0] != t || s.outputs.size() != 1) return false;
  const std::vector<int64_t>& shape = tensor_at(m, t).shape;
  std::vector<int64_t> starts, ends, axes = {0}, steps = {1};
  if (!int_values(m, s.inputs[1], &starts) || !int_values(m, s.inputs[2], &ends)) return false;
  if (s.inputs.size() > 3 && s.inputs[3] >= 0 && !int_values(m, s.inputs[3], &axes)) return false;
  if (s.inputs.size() > 4 && s.inputs[4] >= 0 && !int_values(m, s.inputs[4], &steps)) return false;
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1 || steps[0] != 1) {
    return false;
  }
  if (axes[0] != 1 && axes[0] != -3) return false;
  const int64_t c = shape[1];
  auto clamp = [c](int64_t v) {
    if (v < 0) v += c;
    return std::min(std::max<int64_t>(v, 0), c);
  };
  *begin = clamp(starts[0]);
  *end = std::max(*begin, clamp(ends[0]));
  std::vector<int64_t> want = shape;
  want[1] = *end - *begin;
  return tensor_at(m, s.outputs[0]).shape == want && *end > *begin;
}

}  // namespace

bool fuse_channel_shuffle(PassContext& ctx, PassResult* result) {
  const ir::Model& m = *ctx.model;
  return fuse_until_stable(ctx, result, [&](size_t i, const UseMap& uses, FusionSpec* spec) {
    const std::vector<ir::Node>& nodes = m.main().nodes;
    const ir::Node& tr = nodes[i];
    if (!is_op(tr, "Transpose") || tr.inputs.size() != 1 || tr.outputs.size() != 1) return false;
    const ir::Attr* perm = tr.find_attr("perm");
    if (perm == nullptr || perm->ints != std::vector<int64_t>{0, 2, 1, 3, 4}) return false;
    // Reshape [N, C, H, W] -> [N, g, C / g, H, W] before it.
    const int p = uses.producer(tr.inputs[0]);
    if (p < 0 || !is_op(nodes[static_cast<size_t>(p)], "Reshape")) return false;
    const ir::Node& split = nodes[static_cast<size_t>(p)];
    if (split.outputs.size() != 1 || uses.sole_reader(split.outputs[0]) != static_cast<int>(i)) return false;
    const int x = split.inputs[0];
    const std::vector<int64_t>& xs = tensor_at(m, x).shape;
    const std::vector<int64_t>& gs = tensor_at(m, tr.inputs[0]).shape;
    if (xs.size() != 4 || gs.size() != 5 || gs[0] != xs[0] || gs[3] != xs[2] || gs[4] != xs[3] ||
        gs[1] * gs[2] != xs[1] || gs[1] < 1) {
      return false;
    }
    // Reshape back to [N, C, H, W] after it.
    const int q = uses.sole_reader(tr.outputs[0]);
    if (q < 0 || !is_op(nodes[static_cast<size_t>(q)], "Reshape")) return false;
    const ir::Node& merge = nodes[static_cast<size_t>(q)];
    if (merge.outputs.size() != 1 || tensor_at(m, merge.outputs[0]).shape != xs) return false;
    const int y = merge.outputs[0];
    spec->nodes.clear();
    spec->inputs.clear();
    spec->outputs.clear();
    std::string pattern = "ChannelShuffle";
    // The Concat along channels that makes x, when x is read only here.
    const int c = uses.producer(x);
    if (c >= 0 && is_op(nodes[static_cast<size_t>(c)], "Concat") && uses.sole_reader(x) == p) {
      const ir::Node& concat = nodes[static_cast<size_t>(c)];
      int64_t axis = concat.attr_int("axis", 0);
      if (axis < 0) axis += 4;
      bool fits = axis == 1 && concat.outputs.size() == 1 && !concat.inputs.empty();
      for (int in : concat.inputs) {
        if (!fits || in < 0) {
          fits = false;
          break;
        }
        const std::vector<int64_t>& s = tensor_at(m, in).shape;
        fits = s.size() == 4 && s[0] == xs[0] && s[2] == xs[2] && s[3] == xs[3] &&
               tensor_at(m, in).dtype == tensor_at(m, x).dtype;
      }
      if (fits) {
        spec->nodes.push_back(c);
        spec->inputs = concat.inputs;
        pattern = "Concat+" + pattern;
      }
    }
    if (spec->inputs.empty()) spec->inputs = {x};
    spec->nodes.push_back(p);
    spec->nodes.push_back(static_cast<int>(i));
    spec->nodes.push_back(q);
    // The channel Slices that are y's only readers.
    std::vector<int64_t> starts;
    bool slices = !uses.escapes(y) && !uses.readers(y).empty();
    std::vector<int> slice_nodes;
    for (int r : uses.readers(y)) {
      int64_t b = 0, e = 0;
      if (!slices || std::find(slice_nodes.begin(), slice_nodes.end(), r) != slice_nodes.end() ||
          !channel_slice(m, nodes[static_cast<size_t>(r)], y, &b, &e)) {
        slices = false;
        break;
      }
      slice_nodes.push_back(r);
      starts.push_back(b);
    }
    if (slices) {
      for (int r : slice_nodes) {
        spec->nodes.push_back(r);
        spec->outputs.push_back(nodes[static_cast<size_t>(r)].outputs[0]);
      }
      pattern += "+Slice";
    } else {
      spec->outputs = {y};
      starts = {0};
    }
    std::sort(spec->nodes.begin(), spec->nodes.end());
    spec->pattern = pattern;
    spec->op = "ChannelShuffle";
    spec->attrs = {int_attr("group", gs[1]), ints_attr("channel_starts", starts)};
    return true;
  });
}

}  // namespace kite::passes
