// Pooling (MaxPool, AveragePool: 1-D and 2-D), global pooling and the
// Reduce* ops (over one contiguous block of axes).
#include <algorithm>

#include "plan_util.h"

namespace kite::cuda {

namespace {

// y[o, i] = reduce over r of x[o, r, i].
void add_reduce(Kernel* k, const kite_backend_tensor2* x, const kite_backend_tensor2* y, int64_t outer, int64_t r,
                int64_t inner, int32_t op) {
  using kite_cuda::ReduceParams;
  ReduceParams p{};
  p.outer = static_cast<int32_t>(outer);
  p.r = static_cast<int32_t>(r);
  p.inner = static_cast<int32_t>(inner);
  p.op = op;
  std::initializer_list<Bind> binds = {{offsetof(ReduceParams, x), tensor_operand(x)},
                                       {offsetof(ReduceParams, y), tensor_operand(y)}};
  if (inner == 1 && r >= 32 && outer <= (int64_t{1} << 31) - 1) {
    // One block per row; 64 threads for short rows, 256 for long ones.
    add_launch(k, KernelId::kite_reduce_rows, p, binds, static_cast<uint64_t>(outer), 1, 1, r >= 1024 ? 256 : 64);
  } else {
    add_launch(k, KernelId::kite_reduce_cols, p, binds, blocks_for(outer * inner), 1, 1, kite_cuda::kBlock);
  }
}

}  // namespace

std::string plan_pool(const NodeView& n, const PlanContext&, Kernel* k) {
  bool half = false;  // float16: fp16 storage, fp32 arithmetic
  std::string why = float_storage(n, {0}, &half);
  if (!why.empty()) return why;
  if (n.outputs.size() > 1 && n.outputs[1].present) return "MaxPool's Indices output is not supported";
  const Shape& x = n.in_shape(0);
  if (x.size() != 3 && x.size() != 4) return "a " + std::to_string(x.size() - 2) + "-D pooling (CUDA runs 1-D and 2-D)";
  kite::ops::WindowGeometry g;
  if (!kite::ops::window_geometry(n.op, &g, &why)) return why;
  Window2d win;
  if (!window_2d(g, &win)) return "the window is not 1-D or 2-D";
  const bool is_max = n.op.op == "MaxPool";
  if (is_max && n.op.attr_int("storage_order", 0) != 0) return "storage_order 1 is not supported";
  using kite_cuda::PoolParams;
  PoolParams p{};
  p.N = static_cast<int32_t>(x[0]);
  p.C = static_cast<int32_t>(x[1]);
  p.H = static_cast<int32_t>(win.h);
  p.W = static_cast<int32_t>(win.w);
  p.OH = static_cast<int32_t>(win.oh);
  p.OW = static_cast<int32_t>(win.ow);
  p.KH = static_cast<int32_t>(win.kh);
  p.KW = static_cast<int32_t>(win.kw);
  p.SH = static_cast<int32_t>(win.sh);
  p.SW = static_cast<int32_t>(win.sw);
  p.PH = static_cast<int32_t>(win.ph);
  p.PW = static_cast<int32_t>(win.pw);
  p.PHE = static_cast<int32_t>(win.ph_end);
  p.PWE = static_cast<int32_t>(win.pw_end);
  p.DH = static_cast<int32_t>(win.dh);
  p.DW = static_cast<int32_t>(win.dw);
  p.mode = is_max ? 0 : 1;
  p.count_include_pad = static_cast<int32_t>(n.op.attr_int("count_include_pad", 0));
  const int64_t total = numel(n.out_shape(0));
  if (total == 0) return "";
  add_launch(k, storage_kernel(half, KernelId::kite_pool2d, KernelId::kite_pool2d_f16), p,
             {{offsetof(PoolParams, x), tensor_operand(n.in(0))}, {offsetof(PoolParams, y), tensor_operand(n.out(0))}},
             blocks_for(total), 1, 1, kite_cuda::kBlock);
  return "";
}

std::string plan_global_pool(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const Shape& x = n.in_shape(0);
  if (x.size() < 2) return "needs at least 2 dims";
  const int64_t rows = x[0] * x[1];
  const int64_t r = numel(x) / std::max<int64_t>(rows, 1);
  if (rows == 0) return "";
  if (r == 0) return "global pooling over an empty window";
  add_reduce(k, n.in(0), n.out(0), rows, r, 1,
             n.op.op == "GlobalMaxPool" ? kite_cuda::kReduceMax : kite_cuda::kReduceMean);
  return "";
}

std::string plan_reduce(const NodeView& n, const PlanContext&, Kernel* k) {
  std::string why = expect_dtype(n, 0, {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const std::string& op = n.op.op;
  const int32_t code = op == "ReduceSum" ? kite_cuda::kReduceSum : op == "ReduceMean" ? kite_cuda::kReduceMean
                     : op == "ReduceMax" ? kite_cuda::kReduceMax : op == "ReduceMin" ? kite_cuda::kReduceMin
                     : op == "ReduceProd" ? kite_cuda::kReduceProd : op == "ReduceL1" ? kite_cuda::kReduceL1
                     : op == "ReduceL2" ? kite_cuda::kReduceL2 : op == "ReduceSumSquare" ? kite_cuda::kReduceSumSquare
                     : kite_cuda::kReduceLogSumExp;
  const Shape& x = n.in_shape(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes;
  why = reduce_axes_of(n, &axes);
  if (!why.empty()) return why;
  std::vector<bool> reduced(x.size(), false);
  if (axes.empty()) {
    if (n.op.attr_int("noop_with_empty_axes", 0) != 0) {
      add_copy(k, n.in(0), 0, n.out(0), 0, n.in(0)->byte_size);
      if (code == kite_cuda::kReduceL1 || code == kite_cuda::kReduceL2 || code == kite_cuda::kReduceSumSquare ||
          code == kite_cuda::kReduceLogSumExp) {
        return "a no-op reduction of " + op + " (it still transforms the values)";
      }
      return "";
    }
    std::fill(reduced.begin(), reduced.end(), true);
  }
  for (int64_t a : axes) {
    const int64_t d = normalize_axis(a, rank);
    if (d < 0) return "axes entry is out of range";
    reduced[static_cast<size_t>(d)] = true;
  }
  // The reduced axes (ignoring size-1 axes) must form one block.
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[static_cast<size_t>(d)] || x[static_cast<size_t>(d)] == 1) continue;
    if (first < 0) first = d;
    last = d;
  }
  int64_t outer = 1, r = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t len = x[static_cast<size_t>(d)];
    if (first >= 0 && d >= first && d <= last) {
      if (!reduced[static_cast<size_t>(d)] && len != 1) return "the reduced axes are not contiguous (CUDA reduces one block of axes)";
      r *= len;
    } else if (first < 0 || d < first) {
      outer *= len;
    } else {
      inner *= len;
    }
  }
  if (numel(n.out_shape(0)) == 0) return "";
  if (r == 0 && (code == kite_cuda::kReduceMax || code == kite_cuda::kReduceMin || code == kite_cuda::kReduceMean)) {
    return "reducing an empty axis";
  }
  add_reduce(k, n.in(0), n.out(0), outer, r, inner, code);
  return "";
}

}  // namespace kite::cuda
