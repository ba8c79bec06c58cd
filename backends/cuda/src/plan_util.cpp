#include "plan_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backend.h"
#include "kite/abi/device_rules.h"
#include "kite/ops/fused.h"

namespace kite::cuda {

using kite_cuda::Act;

// The kernels' activation codes follow kite::ops::FusedActivation::Kind.
static_assert(kite_cuda::kOpIdentity == int{kite::ops::FusedActivation::kNone} &&
                  kite_cuda::kOpRelu == int{kite::ops::FusedActivation::kRelu} &&
                  kite_cuda::kOpGeluTanh == int{kite::ops::FusedActivation::kGeluTanh},
              "kite_cuda::OpCode's activations are out of step with kite::ops::FusedActivation");

std::string float_storage(const NodeView& n, const std::vector<size_t>& inputs, bool* half) {
  return abi::float_storage(n, inputs, "CUDA", half);
}

std::string float_storage_all(const NodeView& n, bool* half) {
  std::vector<size_t> all(n.op.inputs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return float_storage(n, all, half);
}

std::string parse_activation(const NodeView& n, bool optional, Act* out) {
  kite::ops::FusedActivation a;
  const std::string why = kite::ops::parse_fused_activation(n.op, n.pattern, optional, &a);
  *out = Act{static_cast<int32_t>(a.kind), a.alpha, a.beta};
  return why;
}

void add_unary(Kernel* k, const kite_backend_tensor2* x, const kite_backend_tensor2* y, int64_t n, Act act,
               bool half) {
  using kite_cuda::UnaryParams;
  UnaryParams p{};
  p.n = static_cast<int32_t>(n);
  p.act = act;
  add_launch(k, storage_kernel(half, KernelId::kite_unary, KernelId::kite_unary_f16), p,
             {{offsetof(UnaryParams, x), tensor_operand(x)}, {offsetof(UnaryParams, y), tensor_operand(y)}},
             blocks_for(n), 1, 1, kite_cuda::kBlock);
}

void add_bias_act(Kernel* k, const kite_backend_tensor2* y, const kite_backend_tensor2* bias, int64_t n,
                  int64_t channels, int64_t inner, Act act) {
  using kite_cuda::BiasActParams;
  BiasActParams p{};
  p.n = static_cast<int32_t>(n);
  p.channels = static_cast<int32_t>(std::max<int64_t>(channels, 1));
  p.inner = static_cast<int32_t>(std::max<int64_t>(inner, 1));
  p.act = act;
  if (bias) {
    add_launch(k, KernelId::kite_bias_act, p,
               {{offsetof(BiasActParams, y), tensor_operand(y)}, {offsetof(BiasActParams, bias), tensor_operand(bias)}},
               blocks_for(n), 1, 1, kite_cuda::kBlock);
  } else {
    add_launch(k, KernelId::kite_bias_act, p, {{offsetof(BiasActParams, y), tensor_operand(y)}}, blocks_for(n), 1, 1,
               kite_cuda::kBlock);
  }
}

void add_copy(Kernel* k, const kite_backend_tensor2* src, uint64_t src_extra, const kite_backend_tensor2* dst,
              uint64_t dst_extra, uint64_t bytes) {
  Step s;
  s.kind = Step::Kind::kCopy;
  s.src = tensor_operand(src, src_extra);
  s.dst = tensor_operand(dst, dst_extra);
  s.bytes = bytes;
  k->steps.push_back(std::move(s));
}

std::string add_strided_copy(Kernel* k, const kite_backend_tensor2* src, uint64_t src_extra,
                             const kite_backend_tensor2* dst, uint64_t dst_extra, const Shape& shape_in,
                             const Shape& src_strides_in, const Shape& dst_strides_in, size_t elem_size) {
  using kite_cuda::CopyParams;
  // Drop size-1 axes and merge axes contiguous on both sides.
  const abi::MergedAxes m = abi::merge_axes(shape_in, src_strides_in, dst_strides_in);
  const Shape &shape = m.dims, &ss = m.a, &ds = m.b;
  const int64_t n = numel(shape);
  if (n == 0) return "";
  if (shape.size() > static_cast<size_t>(kite_cuda::kMaxRank)) {
    return "a copy over " + std::to_string(shape.size()) + " axes (the CUDA kernel takes " +
           std::to_string(kite_cuda::kMaxRank) + ")";
  }
  if (shape.size() <= 1 && (shape.empty() || (ss[0] == 1 && ds[0] == 1))) {
    add_copy(k, src, src_extra, dst, dst_extra, static_cast<uint64_t>(n) * elem_size);
    return "";
  }
  CopyParams p{};
  p.n = static_cast<int32_t>(n);
  p.rank = static_cast<int32_t>(shape.size());
  p.elem_size = static_cast<int32_t>(elem_size);
  for (size_t i = 0; i < shape.size(); ++i) {
    p.shape[i] = static_cast<int32_t>(shape[i]);
    p.src_strides[i] = static_cast<int32_t>(ss[i]);
    p.dst_strides[i] = static_cast<int32_t>(ds[i]);
  }
  add_launch(k, KernelId::kite_copy, p,
             {{offsetof(CopyParams, src), tensor_operand(src, src_extra)},
              {offsetof(CopyParams, dst), tensor_operand(dst, dst_extra)}},
             blocks_for(n), 1, 1, kite_cuda::kBlock);
  return "";
}

void add_own_gemm(Kernel* k, const kite_backend_tensor2* a, const kite_backend_tensor2* b,
                  const kite_backend_tensor2* bias, const kite_backend_tensor2* y, const GemmDesc& g) {
  using kite_cuda::GemmParams;
  GemmParams p{};
  p.M = static_cast<int32_t>(g.M);
  p.N = static_cast<int32_t>(g.N);
  p.K = static_cast<int32_t>(g.K);
  p.sam = static_cast<int32_t>(g.sam);
  p.sak = static_cast<int32_t>(g.sak);
  p.sbk = static_cast<int32_t>(g.sbk);
  p.sbn = static_cast<int32_t>(g.sbn);
  p.nb1 = static_cast<int32_t>(g.nb1);
  p.nb2 = static_cast<int32_t>(g.nb2);
  p.sa1 = g.sa1;
  p.sa2 = g.sa2;
  p.sb1 = g.sb1;
  p.sb2 = g.sb2;
  p.sbias1 = g.sbias1;
  p.sbias2 = g.sbias2;
  p.sbias_m = static_cast<int32_t>(g.sbias_m);
  p.sbias_n = static_cast<int32_t>(g.sbias_n);
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.act = g.act;
  const int64_t batches = g.nb1 * g.nb2;
  // Tiles pay off once a 64x64 tile is reasonably full; a row vector times
  // a matrix (classifier heads at batch 1) runs one thread per output.
  const bool tiled = g.M >= 16 && g.N >= 16 && g.K >= 16 && batches <= 65535;
  std::initializer_list<Bind> binds = {{offsetof(GemmParams, a), tensor_operand(a)},
                                       {offsetof(GemmParams, b), tensor_operand(b)},
                                       {offsetof(GemmParams, y), tensor_operand(y)}};
  Step* s;
  if (tiled) {
    s = &add_launch(k, storage_kernel(g.half, KernelId::kite_gemm_tiled, KernelId::kite_gemm_tiled_f16), p, binds,
                    static_cast<uint64_t>((g.N + 63) / 64),
                    static_cast<uint32_t>((g.M + 63) / 64), static_cast<uint32_t>(batches), 256);
  } else {
    s = &add_launch(k, storage_kernel(g.half, KernelId::kite_gemm_simple, KernelId::kite_gemm_simple_f16), p, binds,
                    blocks_for(g.M * g.N * batches), 1, 1, kite_cuda::kBlock);
  }
  if (bias) s->fixups.push_back(Fixup{static_cast<uint32_t>(offsetof(GemmParams, bias)), tensor_operand(bias)});
}

std::string pick_faster(Backend& b, Kernel* k, Kernel* own, Kernel* lib, const std::string& lib_why,
                        bool forced, float lib_ms, const char* lib_name) {
  if (!lib) {
    if (forced) return std::string(lib_name) + ": " + lib_why;
    b.log(KITE_LOG_INFO, k->label + ": " + lib_name + " declined (" + lib_why + "); own kernel");
    k->steps = std::move(own->steps);
    k->how = own->how;
    return "";
  }
  const float own_ms = forced ? -1.0f : b.measure(own->steps);
  const bool use_own = !forced && own_ms >= 0.0f && (lib_ms < 0.0f || own_ms < lib_ms);
  Kernel& pick = use_own ? *own : *lib;
  k->steps = std::move(pick.steps);
  k->how = pick.how;
  char line[256];
  std::snprintf(line, sizeof line, "%s: %s (%s %.3f ms, own %.3f ms)", k->label.c_str(), k->how.c_str(), lib_name,
                lib_ms, own_ms);
  b.log(KITE_LOG_DEBUG, line);
  return "";
}

}  // namespace kite::cuda
