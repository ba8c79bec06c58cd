// MaxPool, AveragePool (1 to 3 spatial axes), GlobalAveragePool,
// GlobalMaxPool and the Reduce ops (float32). Pool geometry from
// kite::ops::window_geometry; reductions over one contiguous block of axes
// (after dropping size-1 dims), as [outer, R, inner].
#include <algorithm>

#include "kernels.h"

namespace kite::vk {

namespace {

enum ReduceCode : uint32_t { kSum = 0, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSumExp };

std::string add_reduce(Kernel* k, const PlanContext& ctx, const kite_backend_tensor2* x,
                       const kite_backend_tensor2* y, int64_t outer, int64_t R, int64_t inner,
                       uint32_t code) {
  if (outer * R * inner > static_cast<int64_t>(UINT32_MAX)) return "tensor is too large for 32-bit indexing";
  if (outer * inner == 0) return "";
  if (R == 0) return "a reduction over an empty axis is not supported on Vulkan";
  const float scale = code == kMean ? 1.0f / static_cast<float>(R) : 1.0f;
  uint32_t groups[3];
  const bool rows = inner == 1;
  if (rows ? !grid_groups(ctx, static_cast<uint64_t>(outer), groups)
           : !grid_1d(ctx, static_cast<uint64_t>(outer * inner), 64, groups)) {
    return "tensor is too large for the grid";
  }
  add_dispatch(k, kShaderReduce, {read(x), write(y)},
               {static_cast<uint32_t>(outer), static_cast<uint32_t>(R), static_cast<uint32_t>(inner), code,
                rows ? 1u : 0u, float_bits(scale)},
               groups);
  return "";
}

}  // namespace

std::string plan_pool(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const bool is_max = n.op.op == "MaxPool";
  if (is_max && n.outputs.size() > 1 && n.outputs[1].present) return "MaxPool's Indices output is not supported on Vulkan";
  kite::ops::WindowGeometry g;
  std::string err;
  if (!kite::ops::window_geometry(n.op, &g, &err)) return err;
  const size_t r = g.input.size();
  if (r < 1 || r > 3) return "pooling over " + std::to_string(r) + " spatial dims is not supported";
  const Shape& x = n.in_shape(0);
  const int64_t planes = x[0] * x[1];
  int64_t total = planes;
  for (int64_t o : g.output) total *= o;
  if (total > static_cast<int64_t>(INT32_MAX) || numel(x) > static_cast<int64_t>(INT32_MAX)) {
    return "tensor is too large for 32-bit indexing";
  }
  const uint32_t mode = is_max ? 0u : n.op.attr_int("count_include_pad", 0) != 0 ? 2u : 1u;
  std::vector<uint32_t> params = {static_cast<uint32_t>(total), mode};
  // Axes D, H, W with the missing leading ones of size 1.
  const size_t lead = 3 - r;
  auto axis = [&](const Shape& v, size_t a, int64_t fill) -> int64_t { return a < lead ? fill : v[a - lead]; };
  for (size_t a = 0; a < 3; ++a) params.push_back(static_cast<uint32_t>(axis(g.input, a, 1)));
  for (size_t a = 0; a < 3; ++a) params.push_back(static_cast<uint32_t>(axis(g.output, a, 1)));
  for (size_t a = 0; a < 3; ++a) params.push_back(static_cast<uint32_t>(axis(g.kernel, a, 1)));
  for (size_t a = 0; a < 3; ++a) params.push_back(static_cast<uint32_t>(axis(g.strides, a, 1)));
  for (size_t a = 0; a < 3; ++a) params.push_back(static_cast<uint32_t>(axis(g.dilations, a, 1)));
  for (size_t a = 0; a < 3; ++a) params.push_back(int_bits(axis(g.pads_begin, a, 0)));
  for (size_t a = 0; a < 3; ++a) params.push_back(int_bits(axis(g.pads_end, a, 0)));
  if (total == 0) return "";
  uint32_t groups[3];
  if (!grid_1d(ctx, static_cast<uint64_t>(total), 256, groups)) return "tensor is too large for the grid";
  add_dispatch(k, kShaderPool, {read(n.in(0)), write(n.out(0))}, params, groups);
  return "";
}

std::string plan_global_pool(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  if (x.size() < 3) return "needs an input of rank >= 3";
  int64_t plane = 1;
  for (size_t d = 2; d < x.size(); ++d) plane *= x[d];
  return add_reduce(k, ctx, n.in(0), n.out(0), x[0] * x[1], plane, 1,
                    n.op.op == "GlobalMaxPool" ? kMax : kMean);
}

std::string plan_reduce(const NodeView& n, const PlanContext& ctx, Kernel* k) {
  static constexpr OpCodeEntry kCodes[] = {{"ReduceSum", kSum}, {"ReduceMean", kMean}, {"ReduceMax", kMax}, {"ReduceMin", kMin},
                {"ReduceProd", kProd}, {"ReduceL1", kL1}, {"ReduceL2", kL2},
                {"ReduceSumSquare", kSumSquare}, {"ReduceLogSumExp", kLogSumExp}};
  uint32_t code = 0;
  std::string why = op_code(n, kCodes, &code);
  if (why.empty()) why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  const int64_t r = static_cast<int64_t>(x.size());
  Shape axes;
  why = reduce_axes_of(n, &axes);
  if (!why.empty()) return why;
  const bool noop = n.op.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduce(static_cast<size_t>(r), axes.empty());
  if (axes.empty() && noop) {
    // The input unchanged: a sum over one element is the element.
    std::fill(reduce.begin(), reduce.end(), false);
    code = kSum;
  }
  for (int64_t a : axes) {
    const int64_t d = normalize_axis(a, r);
    if (d < 0) return "axes entry is out of range";
    reduce[static_cast<size_t>(d)] = true;
  }
  // [outer, R, inner]: the reduced axes (ignoring size-1 dims) must be one block.
  int64_t outer = 1, R = 1, inner = 1;
  int state = 0;  // 0 before the block, 1 in it, 2 after it
  for (int64_t d = 0; d < r; ++d) {
    const int64_t dim = x[static_cast<size_t>(d)];
    if (dim == 1) continue;
    const bool red = reduce[static_cast<size_t>(d)];
    if (red) {
      if (state == 2) return "reducing axes that are not adjacent is not supported on Vulkan";
      state = 1;
      R *= dim;
    } else {
      if (state == 1) state = 2;
      (state == 0 ? outer : inner) *= dim;
    }
  }
  return add_reduce(k, ctx, n.in(0), n.out(0), outer, R, inner, code);
}

}  // namespace kite::vk
