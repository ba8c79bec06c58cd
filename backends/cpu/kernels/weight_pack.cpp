#include "weight_pack.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common.h"
#include "depthwise.h"
#include "kite/ops/fused.h"
#include "kite/ops/resolve.h"
#include "stem.h"
#include "winograd.h"

namespace kite::cpu::weight_pack {
namespace {

using kite::ops::OpNode;

constexpr const char* kStemLayout = "stem-w8";
constexpr const char* kLaneLayout = "dw-c16";

bool is_float_constant(const OpNode& op, size_t i) {
  return op.has_input(i) && op.inputs[i].data != nullptr && op.inputs[i].dtype == KITE_DTYPE_FLOAT32;
}

int64_t product(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t d = from; d < s.size(); ++d) p *= s[d];
  return p;
}

// The primitive op a node's kernel runs its weights through ("" for none).
std::string primitive_of(const OpNode& op) {
  if (!op.domain.empty() && op.domain != "kite") return "";
  if (op.domain.empty()) {
    if (op.op == "Conv" || op.op == "ConvTranspose" || op.op == "Gemm" || op.op == "MatMul") return op.op;
    return "";
  }
  if (op.op == "FusedConv") return "Conv";
  if (op.op == "FusedGemm") return "Gemm";
  if (op.op == "FusedMatMul") return "MatMul";
  return "";
}

// Conv: the GEMM path (every Conv whose groups read more than one input
// channel each; depthwise-like ones run a direct loop, on the weights as
// they are or, in 16-channel blocks, as lane_dims says). Geometry as
// ConvKernel takes it.
struct ConvDims {
  int64_t group = 1, mg = 0, k = 0;  // per group: mg x k
};

bool conv_dims(const OpNode& op, ConvDims* d) {
  if (!op.has_input(0) || !op.has_input(1)) return false;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size()) return false;
  const int64_t group = op.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1]) return false;
  if (x[1] / group == 1) return false;  // direct loop, no packing
  d->group = group;
  d->mg = w[0] / group;
  d->k = product(w, 1);
  return d->mg > 0 && d->k > 0;
}

// A Conv the kernel runs as Winograd (winograd::tile_for), whose weights are
// read transformed ("wino43-a6", "wino23-a6"): tile, out_channels, channels.
bool winograd_dims(const OpNode& op, int64_t* tile, int64_t* m, int64_t* c) {
  if (!op.has_input(0) || !op.has_input(1)) return false;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  if (x.size() != 4 || w.size() != 4) return false;
  const OpNode conv = op.op == "Conv" ? op : kite::ops::fused_primitive(op, "Conv", 3);
  kite::ops::WindowGeometry g;
  if (!kite::ops::window_geometry(conv, &g, nullptr)) return false;
  *tile = winograd::tile_for(g, x[1], w[0]);
  if (*tile == 0 || w[1] != x[1]) return false;
  *m = w[0];
  *c = x[1];
  return true;
}

// A Conv the stem kernel runs at this level (stem::takes), and its geometry.
bool stem_dims(const OpNode& op, sgemm::MicroKernel level, stem::Geometry* out) {
  if (!op.has_input(0) || !op.has_input(1)) return false;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  if (x.size() != 4 || w.size() != 4 || w[1] != x[1]) return false;
  const OpNode conv = op.op == "Conv" ? op : kite::ops::fused_primitive(op, "Conv", 3);
  kite::ops::WindowGeometry g;
  if (!kite::ops::window_geometry(conv, &g, nullptr) || !stem::takes(g, x[1], level)) return false;
  *out = stem::geometry(g, x[1], w[0]);
  return true;
}

// A depthwise Conv's channels and taps for the "dw-c16" form, whatever the
// level: pack arranges what a level's layouts asked for (asking whether
// AVX-512 takes the node left an AVX2 run's weights unarranged once
// AVX-512 stopped taking some layers).
bool lane_shape(const OpNode& op, int64_t* channels, int64_t* taps) {
  if (!op.has_input(0) || !op.has_input(1)) return false;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || w[1] != 1) return false;
  *channels = w[0];
  *taps = product(w, 2);
  return true;
}

// A depthwise Conv the kernel runs sixteen channels at a time at this level
// (depthwise::channels_take), whose weights it reads one vector a tap
// ("dw-c16"): its channels and taps.
bool lane_dims(const OpNode& op, sgemm::MicroKernel level, int64_t* channels, int64_t* taps) {
  if (!lane_shape(op, channels, taps)) return false;
  const Shape& x = op.inputs[0].shape;
  const OpNode conv = op.op == "Conv" ? op : kite::ops::fused_primitive(op, "Conv", 3);
  kite::ops::WindowGeometry g;
  return kite::ops::window_geometry(conv, &g, nullptr) && depthwise::channels_take(g, x[1], *channels, level);
}

// ConvTranspose: W (C, M/G, k...); per group A = W_g^T, rows (m, tap), cols c.
bool conv_transpose_dims(const OpNode& op, ConvDims* d) {
  if (!op.has_input(0) || !op.has_input(1)) return false;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size()) return false;
  const int64_t group = op.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0 || w[0] != x[1]) return false;
  d->group = group;
  d->mg = w[1] * product(w, 2);  // rows: (m, tap)
  d->k = x[1] / group;           // cols: input channels of the group
  return d->mg > 0 && d->k > 0;
}

// A or B of a Gemm or MatMul as the kernel views it: count matrices of
// rows x cols (A: m x k, B: k x n) with the given strides.
struct MatrixDims {
  int64_t rows = 0, cols = 0, count = 1;
  int64_t row_stride = 0, col_stride = 0;
  bool is_a = false;
  bool transposed = false;
  float alpha = 1.0f;
};

// "gemm-a6", "gemm-b8t", "gemm-a6-x3f000000" (A scaled by alpha 0.5: its
// float bits, so the name is exact).
std::string matrix_layout(const MatrixDims& d) {
  std::string name = std::string(d.is_a ? "gemm-a6" : "gemm-b8") + (d.transposed ? "t" : "");
  if (d.alpha != 1.0f) {
    uint32_t bits = 0;
    std::memcpy(&bits, &d.alpha, sizeof bits);
    char hex[16];
    std::snprintf(hex, sizeof hex, "-x%08x", bits);
    name += hex;
  }
  return name;
}

bool matrix_dims(const std::string& prim, const OpNode& op, int input, MatrixDims* d) {
  if (!op.has_input(0) || !op.has_input(1)) return false;
  const Shape& a = op.inputs[0].shape;
  const Shape& b = op.inputs[1].shape;
  kite::ops::MatMulShape p;
  kite::ops::RuleError err;
  bool trans = false;
  if (prim == "Gemm") {
    if (a.size() != 2 || b.size() != 2) return false;
    const bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
    if (!kite::ops::resolve_gemm(a.data(), b.data(), ta, tb, &p, &err)) return false;
    trans = input == 0 ? ta : tb;
    if (input == 0) d->alpha = op.attr_float("alpha", 1.0f);  // A is scaled while packed
  } else {
    if (!kite::ops::resolve_matmul(a.data(), static_cast<int64_t>(a.size()), b.data(),
                                   static_cast<int64_t>(b.size()), &p, &err)) {
      return false;
    }
  }
  d->is_a = input == 0;
  d->transposed = trans;
  d->rows = d->is_a ? p.m : p.k;
  d->cols = d->is_a ? p.k : p.n;
  if (d->rows <= 0 || d->cols <= 0) return false;
  const int64_t numel = op.inputs[static_cast<size_t>(input)].numel();
  if (numel % (d->rows * d->cols) != 0) return false;
  d->count = numel / (d->rows * d->cols);
  // (rows x cols) view of a row-major (rows x cols) matrix, or of a stored
  // (cols x rows) one when transposed.
  d->row_stride = trans ? 1 : d->cols;
  d->col_stride = trans ? d->rows : 1;
  return true;
}

int64_t matrix_floats(const MatrixDims& d) {
  return d.count * (d.is_a ? sgemm::packed_a_floats(d.rows, d.cols) : sgemm::packed_b_floats(d.rows, d.cols));
}

}  // namespace

const char* isa_name(sgemm::MicroKernel level) {
  switch (level) {
    case sgemm::MicroKernel::kAvx2Fma: return "x86-avx2";
    case sgemm::MicroKernel::kAvx512: return "x86-avx512";
    case sgemm::MicroKernel::kNeon: return "arm64-neon";
    case sgemm::MicroKernel::kPortable: break;
  }
  return "portable";
}

std::string host_isa() { return isa_name(sgemm::micro_kernel_in_use()); }

const std::vector<std::string>& isa_names() {
  static const std::vector<std::string> names = {"x86-avx512", "x86-avx2", "arm64-neon", "portable"};
  return names;
}

bool level_of(const std::string& name, sgemm::MicroKernel* level) {
  for (sgemm::MicroKernel l : {sgemm::MicroKernel::kAvx512, sgemm::MicroKernel::kAvx2Fma,
                               sgemm::MicroKernel::kNeon, sgemm::MicroKernel::kPortable}) {
    if (name == isa_name(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

bool is_isa_name(const std::string& name) {
  const auto& n = isa_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

std::vector<Layout> layouts(const OpNode& op, bool winograd, sgemm::MicroKernel level) {
  std::vector<Layout> out;
  const std::string prim = primitive_of(op);
  if (prim == "Conv" || prim == "ConvTranspose") {
    ConvDims d;
    if (!is_float_constant(op, 1)) return out;
    stem::Geometry sg;
    if (prim == "Conv" && stem_dims(op, level, &sg)) {
      out.push_back({1, kStemLayout, stem::weight_floats(sg)});
      return out;
    }
    int64_t lc = 0, lt = 0;
    if (prim == "Conv" && lane_dims(op, level, &lc, &lt)) {
      out.push_back({1, kLaneLayout, depthwise::lane_weight_floats(lc, lt)});
      return out;
    }
    int64_t wt = 0, wm = 0, wc = 0;
    if (prim == "Conv" && winograd && winograd_dims(op, &wt, &wm, &wc)) {
      out.push_back({1, winograd::layout_name(wt), winograd::packed_weight_floats(wt, wm, wc)});
      return out;
    }
    if (!(prim == "Conv" ? conv_dims(op, &d) : conv_transpose_dims(op, &d))) return out;
    const std::string family = prim == "Conv" ? "conv-a6-g" : "convt-a6-g";
    out.push_back({1, family + std::to_string(d.group), d.group * sgemm::packed_a_floats(d.mg, d.k)});
  } else if (prim == "Gemm" || prim == "MatMul") {
    for (int input = 0; input < 2; ++input) {
      MatrixDims d;
      if (!is_float_constant(op, static_cast<size_t>(input)) || !matrix_dims(prim, op, input, &d)) continue;
      out.push_back({input, matrix_layout(d), matrix_floats(d)});
    }
  }
  return out;
}

void pack(const OpNode& op, const Layout& layout, float* dst) {
  const float* w = static_cast<const float*>(op.inputs[static_cast<size_t>(layout.input)].data);
  const std::string prim = primitive_of(op);
  if (prim == "Conv" && layout.name == kStemLayout) {
    stem::Geometry sg;
    if (stem_dims(op, sgemm::MicroKernel::kAvx512, &sg)) stem::arrange_weights(sg, w, dst);
  } else if (prim == "Conv" && layout.name == kLaneLayout) {
    int64_t channels = 0, taps = 0;
    if (lane_shape(op, &channels, &taps) && layout.floats == depthwise::lane_weight_floats(channels, taps)) {
      depthwise::arrange_channel_weights(w, channels, taps, dst);
    }
  } else if (prim == "Conv" && layout.name.compare(0, 4, "wino") == 0) {
    int64_t t = 0, m = 0, c = 0;
    if (winograd_dims(op, &t, &m, &c) && layout.name == winograd::layout_name(t)) {
      winograd::pack_weights(t, w, m, c, dst);
    }
  } else if (prim == "Conv") {
    ConvDims d;
    if (!conv_dims(op, &d)) return;
    const int64_t per_group = sgemm::packed_a_floats(d.mg, d.k);
    for (int64_t g = 0; g < d.group; ++g) {
      sgemm::pack_a(w + g * d.mg * d.k, d.k, 1, d.mg, d.k, 1.0f, dst + g * per_group, nullptr);
    }
  } else if (prim == "ConvTranspose") {
    ConvDims d;
    if (!conv_transpose_dims(op, &d)) return;
    const int64_t per_group = sgemm::packed_a_floats(d.mg, d.k);
    for (int64_t g = 0; g < d.group; ++g) {
      sgemm::pack_a(w + g * d.k * d.mg, 1, d.mg, d.mg, d.k, 1.0f, dst + g * per_group, nullptr);
    }
  } else if (prim == "Gemm" || prim == "MatMul") {
    MatrixDims d;
    if (!matrix_dims(prim, op, layout.input, &d)) return;
    const int64_t per = matrix_floats(d) / d.count;
    for (int64_t i = 0; i < d.count; ++i) {
      const float* src = w + i * d.rows * d.cols;
      if (d.is_a) {
        sgemm::pack_a(src, d.row_stride, d.col_stride, d.rows, d.cols, d.alpha, dst + i * per, nullptr);
      } else {
        sgemm::pack_b(src, d.row_stride, d.col_stride, d.rows, d.cols, dst + i * per, nullptr);
      }
    }
  }
}

const float* acquire(const KernelArgs& args, const Layout& layout, std::vector<float>* own,
                     std::string* err) {
  const kite_backend_tensor* t = args.node->inputs[layout.input];
  if (args.packed != nullptr && t != nullptr) {
    const std::string k = key(host_isa(), layout.name);
    uint64_t bytes = 0;
    if (const void* form = args.packed->find(t, k, &bytes)) {
      const uint64_t want = static_cast<uint64_t>(layout.floats) * sizeof(float);
      if (bytes != want || reinterpret_cast<uintptr_t>(form) % alignof(float) != 0) {
        if (err) {
          *err = args.op->label() + ": packed form " + k + " of '" + (t->name ? t->name : "") +
                 "' holds " + std::to_string(bytes) + " bytes, the layout needs " + std::to_string(want);
        }
        if (args.pack_stats) args.pack_stats->malformed = true;
        return nullptr;
      }
      if (args.pack_stats) ++args.pack_stats->from_file;
      return static_cast<const float*>(form);
    }
  }
  own->assign(static_cast<size_t>(layout.floats), 0.0f);
  pack(*args.op, layout, own->data());
  if (args.pack_stats) ++args.pack_stats->at_prepare;
  return own->data();
}

}  // namespace kite::cpu::weight_pack
