#include "memory/budget.h"

#include "passes/pass.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>

namespace kite::memory {
namespace {

// ---------------------------------------------------------------------------
// FLOPs (multiply-add = 2) of one main-graph node, from static shapes.
uint64_t numel_of(const ir::Tensor& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

uint64_t node_flops(const ir::Model& m, const ir::Node& n) {
  if (n.outputs.empty() || n.outputs[0] < 0) return 0;
  const ir::Tensor& out = m.tensors[static_cast<size_t>(n.outputs[0])];
  const uint64_t out_n = numel_of(out);
  const bool conv = n.op == "Conv" || (n.op == "FusedConv" && !n.body.empty() && n.body[0].op == "Conv");
  if (conv && n.inputs.size() >= 2 && n.inputs[1] >= 0) {
    const ir::Tensor& w = m.tensors[static_cast<size_t>(n.inputs[1])];
    uint64_t per = 1;  // weights per output element: Cin/group * kernel
    for (size_t d = 1; d < w.shape.size(); ++d) per *= static_cast<uint64_t>(w.shape[d]);
    return 2 * out_n * per + (n.body.size() > 1 ? out_n * (n.body.size() - 1) : 0);
  }
  if ((n.op == "MaxPool" || n.op == "AveragePool")) {
    uint64_t k = 1;
    for (int64_t d : n.attr_ints("kernel_shape", {})) k *= static_cast<uint64_t>(d);
    return out_n * k;
  }
  if ((n.op == "Gemm" || n.op == "MatMul" || n.op == "FusedGemm" || n.op == "FusedMatMul") &&
      !n.inputs.empty() && n.inputs[0] >= 0) {
    const ir::Tensor& a = m.tensors[static_cast<size_t>(n.inputs[0])];
    const uint64_t k = a.shape.empty() ? 1 : static_cast<uint64_t>(a.shape.back());
    return 2 * out_n * k;
  }
  return out_n * std::max<uint64_t>(1, n.body.size());
}

uint64_t model_flops(const ir::Model& m) {
  uint64_t f = 0;
  for (const ir::Node& n : m.main().nodes) f += node_flops(m, n);
  return f;
}

// ---------------------------------------------------------------------------
// Patches: a run of consecutive main-graph nodes rewritten into row bands.

struct Rows {
  int64_t lo = 0, hi = 0;  // [lo, hi)
  bool empty() const { return hi <= lo; }
};

bool is_rank4_n1(const ir::Tensor& t) {
  return t.shape_known && t.shape.size() == 4 && t.shape[0] == 1 && t.dtype == KITE_DTYPE_FLOAT32;
}

bool is_unary_elementwise(const std::string& op) {
  return is_inplace_op(op, 0) && !is_inplace_op(op, 1);
}
bool is_binary_elementwise(const std::string& op) { return is_inplace_op(op, 1); }

// Window geometry along H of a Conv/FusedConv/pool node.
struct Window {
  int64_t k = 1, stride = 1, dilation = 1, pad_top = 0, pad_bottom = 0;
};

bool window_of(const ir::Model& m, const ir::Node& n, Window* w) {
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET") return false;
  const std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  const std::vector<int64_t> dil = n.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) return false;
  if (n.op == "MaxPool" || n.op == "AveragePool") {
    const std::vector<int64_t> k = n.attr_ints("kernel_shape", {});
    if (k.size() != 2) return false;
    // ceil_mode: the last window may hang past the bottom pad. A MaxPool
    // ignores padding, so each band runs with ceil_mode 0 and a bottom pad
    // that covers its last window (see patch_region); an AveragePool's
    // divisor would change, so it is not banded.
    if (n.attr_int("ceil_mode", 0) != 0) {
      // The band's bottom pad grows by up to stride - 1; pools need pads
      // smaller than the kernel.
      if (n.op != "MaxPool" || pads[2] + strides[0] - 1 >= k[0] || pads[3] + strides[1] - 1 >= k[1]) {
        return false;
      }
    }
    if (n.outputs.size() != 1) return false;  // MaxPool's Indices output
    w->k = k[0];
  } else {
    if (n.inputs.size() < 2 || n.inputs[1] < 0) return false;
    const ir::Tensor& wt = m.tensors[static_cast<size_t>(n.inputs[1])];
    if (!wt.is_constant() || wt.shape.size() != 4) return false;
    w->k = wt.shape[2];
  }
  w->stride = strides[0];
  w->dilation = dil[0];
  w->pad_top = pads[0];
  w->pad_bottom = pads[2];
  return w->k > 0 && w->stride > 0 && w->dilation > 0;
}

// Nearest Resize by an integer factor on H (C and N kept), asymmetric
// coordinates, floor rounding: output row y reads input row y / s, so a band
// whose first row is a multiple of s reads the same rows as the whole.
int64_t resize_factor(const ir::Model& m, const ir::Node& n) {
  if (n.op != "Resize" || !n.body.empty() || n.inputs.size() < 3 || n.inputs.size() > 4) return 0;
  if (n.attr_string("mode", "nearest") != "nearest" ||
      n.attr_string("coordinate_transformation_mode", "half_pixel") != "asymmetric" ||
      n.attr_string("nearest_mode", "round_prefer_floor") != "floor") {
    return 0;
  }
  if (n.inputs.size() == 4 && n.inputs[3] >= 0) return 0;  // sizes
  if (n.inputs[0] < 0 || n.inputs[2] < 0) return 0;
  const ir::Tensor& sc = m.tensors[static_cast<size_t>(n.inputs[2])];
  if (!sc.is_constant() || sc.dtype != KITE_DTYPE_FLOAT32 || sc.data.size() != 16) return 0;
  float f[4];
  std::memcpy(f, sc.data.data(), sizeof(f));
  if (f[0] != 1.0f || f[1] != 1.0f || f[2] < 1.0f || f[2] != static_cast<float>(static_cast<int64_t>(f[2]))) {
    return 0;
  }
  const ir::Tensor& x = m.tensors[static_cast<size_t>(n.inputs[0])];
  const ir::Tensor& y = m.tensors[static_cast<size_t>(n.outputs[0])];
  const int64_t s = static_cast<int64_t>(f[2]);
  if (!is_rank4_n1(x) || x.is_constant() || y.shape[2] != x.shape[2] * s) return 0;
  return s;
}

bool is_window_node(const ir::Node& n) {
  if (n.op == "Conv" || n.op == "MaxPool" || n.op == "AveragePool") return n.body.empty();
  return n.op == "FusedConv" && !n.body.empty() && n.body[0].op == "Conv";
}

// Input slot i of a window node is a fused residual (FusedConv's input 3,
// Conv+Add[+activation]): a float [1, C, H, W] activation of the output's
// shape, whose rows are the output's rows.
bool residual_slot(const ir::Model& m, const ir::Node& n, size_t i) {
  if (n.op != "FusedConv" || i != 3 || n.inputs.size() != 4 || n.inputs[3] < 0 || n.outputs.empty()) return false;
  const ir::Tensor& r = m.tensors[static_cast<size_t>(n.inputs[3])];
  return !r.is_constant() && is_rank4_n1(r) && r.shape == m.tensors[static_cast<size_t>(n.outputs[0])].shape;
}

// Whether node n can run on row bands: its output and every activation input
// are float [1, C, H, W] tensors (or, for elementwise ops, [1, C, 1, 1]
// broadcasts); windows slide over H with explicit pads.
bool tileable(const ir::Model& m, const ir::Node& n) {
  if (n.outputs.size() != 1 || n.has_subgraph()) return false;
  const ir::Tensor& out = m.tensors[static_cast<size_t>(n.outputs[0])];
  if (!is_rank4_n1(out)) return false;  // region_closed keeps outputs at its end
  auto activation_ok = [&](int t, bool allow_broadcast) {
    if (t < 0) return true;
    const ir::Tensor& x = m.tensors[static_cast<size_t>(t)];
    if (x.is_constant()) return allow_broadcast;
    if (!is_rank4_n1(x)) return false;
    if (allow_broadcast && x.shape[2] == 1 && x.shape[3] == 1) return true;
    return true;
  };
  if (is_window_node(n)) {
    Window w;
    if (!window_of(m, n, &w)) return false;
    if (n.inputs.empty() || n.inputs[0] < 0) return false;
    const ir::Tensor& x = m.tensors[static_cast<size_t>(n.inputs[0])];
    if (x.is_constant() || !is_rank4_n1(x)) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] >= 0 && !m.tensors[static_cast<size_t>(n.inputs[i])].is_constant() &&
          !residual_slot(m, n, i)) {
        return false;
      }
    }
    // A fused body: the Conv first, then elementwise nodes over tensors of
    // the output's shape.
    for (size_t b = 1; b < n.body.size(); ++b) {
      const ir::Node& bn = n.body[b];
      if (!is_unary_elementwise(bn.op) && !is_binary_elementwise(bn.op)) return false;
      if (!bn.body.empty()) return false;
    }
    for (const ir::Node& bn : n.body) {
      for (int t : bn.outputs) {
        if (t < 0 || m.tensors[static_cast<size_t>(t)].shape != out.shape) return false;
      }
    }
    return true;
  }
  if (!n.body.empty() || !n.domain.empty()) return false;
  if (n.op == "Resize") return resize_factor(m, n) > 0;
  if (n.op == "BatchNormalization") {
    if (n.inputs.empty() || n.inputs[0] < 0) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] < 0 || !m.tensors[static_cast<size_t>(n.inputs[i])].is_constant()) return false;
    }
    return m.tensors[static_cast<size_t>(n.inputs[0])].shape == out.shape;
  }
  if (is_unary_elementwise(n.op)) {
    if (n.inputs.empty() || n.inputs[0] < 0) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i) {  // Clip's bounds
      if (n.inputs[i] >= 0 && !m.tensors[static_cast<size_t>(n.inputs[i])].is_constant()) return false;
    }
    return m.tensors[static_cast<size_t>(n.inputs[0])].shape == out.shape;
  }
  if (is_binary_elementwise(n.op)) {
    if (n.inputs.size() != 2) return false;
    for (int t : n.inputs) {
      if (t < 0) return false;
      const ir::Tensor& x = m.tensors[static_cast<size_t>(t)];
      if (x.shape == out.shape && !x.is_constant()) continue;
      // Broadcast along C only (constants or [1, C, 1, 1] scales).
      if (x.shape.size() > 4) return false;
      int64_t rest = 1;
      for (size_t d = 0; d < x.shape.size(); ++d) {
        const size_t od = 4 - x.shape.size() + d;
        if (od == 1) continue;
        rest *= x.shape[d];
      }
      if (rest != 1) return false;
      if (!activation_ok(t, true)) return false;
    }
    return true;
  }
  if (n.op == "Concat") {
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += 4;
    if (axis != 1) return false;
    for (int t : n.inputs) {
      if (t < 0) return false;
      const ir::Tensor& x = m.tensors[static_cast<size_t>(t)];
      if (x.is_constant() || !is_rank4_n1(x) || x.shape[2] != out.shape[2]) return false;
    }
    return true;
  }
  return false;
}

// Whether input slot i of n carries rows (the others pass whole).
bool row_input(const ir::Model& m, const ir::Node& n, size_t i) {
  const int t = n.inputs[i];
  if (t < 0) return false;
  const ir::Tensor& x = m.tensors[static_cast<size_t>(t)];
  if (x.is_constant()) return false;
  if (is_window_node(n) || n.op == "Resize") return i == 0 || residual_slot(m, n, i);
  return x.shape.size() == 4 && x.shape[2] > 1;
}

// Rows of input slot i needed for output rows r of n; the pads the band's
// window then needs are returned through pads (top, bottom).
Rows input_rows(const ir::Model& m, const ir::Node& n, size_t i, Rows r, int64_t* pad_top,
                int64_t* pad_bottom) {
  const ir::Tensor& x = m.tensors[static_cast<size_t>(n.inputs[i])];
  if (n.op == "Resize") {
    const int64_t s = resize_factor(m, n);  // r is aligned (see patch_region)
    return Rows{r.lo / s, (r.hi + s - 1) / s};
  }
  if (!is_window_node(n) || residual_slot(m, n, i)) return r;
  Window w;
  window_of(m, n, &w);
  const int64_t lo = r.lo * w.stride - w.pad_top;
  const int64_t hi = (r.hi - 1) * w.stride - w.pad_top + (w.k - 1) * w.dilation + 1;
  Rows in{std::max<int64_t>(0, lo), std::min<int64_t>(x.shape[2], hi)};
  if (pad_top) *pad_top = in.lo - lo;
  if (pad_bottom) *pad_bottom = hi - in.hi;
  return in;
}

struct Region {
  size_t first = 0, last = 0;  // main-graph node indices, inclusive
};

// The region's nodes consume everything they produce except the last
// node's output, which nothing in the region reads.
bool region_closed(const ir::Model& m, const Region& r, const std::vector<std::vector<size_t>>& users) {
  const auto& nodes = m.main().nodes;
  for (size_t i = r.first; i < r.last; ++i) {
    for (int t : nodes[i].outputs) {
      if (t < 0) continue;
      if (m.tensors[static_cast<size_t>(t)].kind == ir::TensorKind::Output) return false;
      for (size_t u : users[static_cast<size_t>(t)]) {
        if (u < r.first || u > r.last) return false;
      }
    }
  }
  for (size_t u : users[static_cast<size_t>(nodes[r.last].outputs[0])]) {
    if (u >= r.first && u <= r.last) return false;
  }
  return true;
}

// Main-graph consumers of each tensor (including fused bodies and branches).
std::vector<std::vector<size_t>> all_users(const ir::Model& m) {
  std::vector<std::vector<size_t>> users(m.tensors.size());
  std::function<void(const ir::Node&, size_t)> visit = [&](const ir::Node& n, size_t idx) {
    for (int t : n.inputs) {
      if (t >= 0 && (users[static_cast<size_t>(t)].empty() || users[static_cast<size_t>(t)].back() != idx)) {
        users[static_cast<size_t>(t)].push_back(idx);
      }
    }
    for (const ir::Node& b : n.body) visit(b, idx);
    for (const ir::Attr& a : n.attrs) {
      if (a.type != KITE_ATTR_GRAPH) continue;
      for (const ir::Node& g : m.graphs[static_cast<size_t>(a.i)].nodes) visit(g, idx);
    }
  };
  const auto& nodes = m.main().nodes;
  for (size_t i = 0; i < nodes.size(); ++i) visit(nodes[i], i);
  return users;
}

int add_i64_constant(ir::Model* m, const std::string& base, int64_t v) {
  ir::Tensor t;
  t.name = m->unused_tensor_name(base);
  t.dtype = KITE_DTYPE_INT64;
  t.shape = {1};
  t.shape_known = true;
  t.kind = ir::TensorKind::Constant;
  t.data.resize(8);
  for (int b = 0; b < 8; ++b) t.data[static_cast<size_t>(b)] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * b));
  return m->add_tensor(std::move(t));
}

int add_band_tensor(ir::Model* m, int like, int64_t rows, const std::string& suffix) {
  ir::Tensor t = m->tensors[static_cast<size_t>(like)];
  t.name = m->unused_tensor_name(t.name + suffix);
  t.shape[2] = rows;
  t.kind = ir::TensorKind::Activation;
  t.data.clear();
  return m->add_tensor(std::move(t));
}

void set_ints(std::vector<ir::Attr>* attrs, const std::string& name, const std::vector<int64_t>& v) {
  for (ir::Attr& a : *attrs) {
    if (a.name == name) {
      a.type = KITE_ATTR_INTS;
      a.ints = v;
      return;
    }
  }
  attrs->push_back(kite::ops::ints_attr(name, v));
}

// Rewrites region r into `tiles` row bands of its output followed by a
// Concat on H into the original output tensor. Returns false (model
// untouched) when the region cannot be banded that way.
bool patch_region(ir::Model* m, const Region& r, int tiles, Patch* rec) {
  const std::vector<ir::Node> region(m->main().nodes.begin() + static_cast<long>(r.first),
                                     m->main().nodes.begin() + static_cast<long>(r.last) + 1);
  const int out = region.back().outputs[0];
  const int64_t H = m->tensors[static_cast<size_t>(out)].shape[2];
  if (tiles < 2 || H < tiles) return false;
  std::vector<ir::Node> emitted;
  std::vector<int> band_outputs;
  const int axes = add_i64_constant(m, region.back().name + "/patch_axes", 2);
  uint64_t flops_before = 0;
  for (const ir::Node& n : region) flops_before += node_flops(*m, n);
  uint64_t flops_after = 0;
  for (int k = 0; k < tiles; ++k) {
    const Rows band{H * k / tiles, H * (k + 1) / tiles};
    const std::string sfx = "/patch" + std::to_string(k);
    // Rows of each tensor this band needs (union over its region consumers).
    std::map<int, Rows> need;
    need[out] = band;
    for (size_t q = region.size(); q-- > 0;) {
      const ir::Node& n = region[q];
      if (n.op == "Resize") {  // a band of it starts and ends on whole input rows
        const int64_t f = resize_factor(*m, n);
        Rows& r = need[n.outputs[0]];
        const int64_t full = m->tensors[static_cast<size_t>(n.outputs[0])].shape[2];
        r = Rows{r.lo / f * f, std::min(full, (r.hi + f - 1) / f * f)};
      }
      const Rows o = need[n.outputs[0]];
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!row_input(*m, n, i)) continue;
        const Rows in = input_rows(*m, n, i, o, nullptr, nullptr);
        auto it = need.find(n.inputs[i]);
        if (it == need.end()) need[n.inputs[i]] = in;
        else it->second = Rows{std::min(it->second.lo, in.lo), std::max(it->second.hi, in.hi)};
      }
    }
    std::map<int, int> band_tensor;  // original tensor -> this band's tensor
    std::map<int, Rows> have;        // rows that band tensor holds
    auto rows_of = [&](int t, Rows want) -> int {
      auto it = band_tensor.find(t);
      int src = t;
      Rows held{0, m->tensors[static_cast<size_t>(t)].shape[2]};
      if (it != band_tensor.end()) {
        src = it->second;
        held = have[t];
      }
      if (want.lo == held.lo && want.hi == held.hi) return src;
      ir::Node s;
      s.op = "Slice";
      s.name = m->tensors[static_cast<size_t>(t)].name + sfx + "/slice" + std::to_string(emitted.size());
      const int y = add_band_tensor(m, t, want.hi - want.lo, sfx + "/rows");
      s.inputs = {src, add_i64_constant(m, s.name + "/starts", want.lo - held.lo),
                  add_i64_constant(m, s.name + "/ends", want.hi - held.lo), axes};
      s.outputs = {y};
      emitted.push_back(std::move(s));
      return y;
    };
    for (const ir::Node& n : region) {
      const int o = n.outputs[0];
      const Rows orows = need[o];
      ir::Node c = n;
      c.name = n.name + sfx;
      int64_t pt = 0, pb = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!row_input(*m, n, i)) continue;
        const Rows in = input_rows(*m, n, i, orows, &pt, &pb);
        // Input rows must hold what the window reads; the padding used at
        // a band edge must be the image's own padding.
        c.inputs[i] = rows_of(n.inputs[i], in);
      }
      const int y = add_band_tensor(m, o, orows.hi - orows.lo, sfx);
      c.outputs = {y};
      if (is_window_node(n)) {
        std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
        pads[0] = pt;
        pads[2] = pb;
        set_ints(&c.attrs, "pads", pads);
        if (!c.body.empty()) set_ints(&c.body[0].attrs, "pads", pads);
        if (n.attr_int("ceil_mode", 0) != 0) {
          // Along W too: a right pad that makes floor give the ceil width.
          const std::vector<int64_t> k = n.attr_ints("kernel_shape", {1, 1});
          const std::vector<int64_t> st = n.attr_ints("strides", {1, 1});
          const std::vector<int64_t> dl = n.attr_ints("dilations", {1, 1});
          const int64_t w_in = m->tensors[static_cast<size_t>(n.inputs[0])].shape[3];
          const int64_t w_out = m->tensors[static_cast<size_t>(o)].shape[3];
          pads[3] = std::max(pads[3], (w_out - 1) * st[1] + (k[1] - 1) * dl[1] + 1 - w_in - pads[1]);
          set_ints(&c.attrs, "pads", pads);
          for (ir::Attr& at : c.attrs) {
            if (at.name == "ceil_mode") at.i = 0;
          }
        }
      }
      // A fused body: its scratch tensors get band shapes too.
      std::map<int, int> body_map;
      for (size_t i = 0; i < n.inputs.size(); ++i) body_map[n.inputs[i]] = c.inputs[i];
      body_map[o] = y;
      for (ir::Node& b : c.body) {
        b.name += sfx;
        for (int& t : b.inputs) {
          auto it = body_map.find(t);
          if (it != body_map.end()) t = it->second;
        }
        for (int& t : b.outputs) {
          auto it = body_map.find(t);
          if (it == body_map.end()) {
            const int nt = add_band_tensor(m, t, orows.hi - orows.lo, sfx);
            body_map[t] = nt;
            t = nt;
          } else {
            t = it->second;
          }
        }
      }
      band_tensor[o] = y;
      have[o] = orows;
      flops_after += node_flops(*m, c);
      emitted.push_back(std::move(c));
    }
    if (have[out].lo != band.lo || have[out].hi != band.hi) return false;
    band_outputs.push_back(band_tensor[out]);
  }
  ir::Node cat;
  cat.op = "Concat";
  cat.name = region.back().name + "/patch_concat";
  cat.inputs = band_outputs;
  cat.outputs = {out};
  cat.attrs.push_back(kite::ops::int_attr("axis", 2));
  emitted.push_back(std::move(cat));
  auto& nodes = m->main().nodes;
  nodes.erase(nodes.begin() + static_cast<long>(r.first), nodes.begin() + static_cast<long>(r.last) + 1);
  nodes.insert(nodes.begin() + static_cast<long>(r.first), emitted.begin(), emitted.end());
  rec->first_node = region.front().name;
  rec->last_node = region.back().name;
  rec->output = m->tensors[static_cast<size_t>(out)].name;
  rec->nodes = static_cast<int>(region.size());
  rec->tiles = tiles;
  rec->flops_added = flops_after > flops_before ? flops_after - flops_before : 0;
  // The chain's old intermediates are no longer used by any node.
  passes::compact_model(m);
  return true;
}

struct PatchCandidate {
  Region region;
  uint64_t boundary = 0;  // bytes live at the region's edges (inputs + 2x output)
};

std::vector<PatchCandidate> patch_candidates(const ir::Model& m, bool aliasing) {
  std::vector<PatchCandidate> found;
  const auto& nodes = m.main().nodes;
  if (nodes.empty()) return found;
  const std::vector<std::vector<size_t>> users = all_users(m);
  const std::vector<uint64_t> live = live_bytes_per_node(m, aliasing);
  // The node live at the highest bytes that a patch could still cover (not a
  // band of an earlier patch).
  size_t p = nodes.size();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!tileable(m, nodes[i]) || nodes[i].name.find("/patch") != std::string::npos) continue;
    if (p == nodes.size() || live[i] > live[p]) p = i;
  }
  if (p == nodes.size()) return found;
  if (std::getenv("KITE_BUDGET_DEBUG")) {
    std::fprintf(stderr, "peak node %zu %s tileable %d live %llu\n", p, nodes[p].label().c_str(), tileable(m, nodes[p]), static_cast<unsigned long long>(live[p]));
  }
  if (!tileable(m, nodes[p])) return found;
  size_t lo = p, hi = p;
  while (lo > 0 && tileable(m, nodes[lo - 1])) --lo;
  while (hi + 1 < nodes.size() && tileable(m, nodes[hi + 1])) ++hi;
  for (size_t i = lo; i <= p; ++i) {
    for (size_t j = p; j <= hi; ++j) {
      Region r{i, j};
      if (!region_closed(m, r, users)) continue;
      PatchCandidate c;
      c.region = r;
      std::set<int> inside;
      for (size_t q = i; q <= j; ++q) inside.insert(nodes[q].outputs[0]);
      std::set<int> ext;
      for (size_t q = i; q <= j; ++q) {
        for (int t : nodes[q].inputs) {
          if (t >= 0 && !inside.count(t) && !m.tensors[static_cast<size_t>(t)].is_constant()) ext.insert(t);
        }
      }
      for (int t : ext) c.boundary += m.tensors[static_cast<size_t>(t)].byte_size();
      c.boundary += 2 * m.tensors[static_cast<size_t>(nodes[j].outputs[0])].byte_size();
      found.push_back(c);
    }
  }
  std::sort(found.begin(), found.end(), [](const PatchCandidate& a, const PatchCandidate& b) {
    if (a.boundary != b.boundary) return a.boundary < b.boundary;
    return a.region.last - a.region.first < b.region.last - b.region.first;
  });
  return found;
}

// Patch rounds (see apply_memory_budget). local_first: a round may settle
// for the cheapest banding that brings its own peak under the budget (the
// nodes replacing the region), leaving other peaks to later rounds, unless
// a banding that meets the whole budget costs at most twice as much.
bool patch_rounds(ir::Model* model, uint64_t budget, const PlanOptions& options, bool local_first,
                  BudgetReport* report, std::string* err) {
  // Patches first: they lower the peak of the high-resolution layers at the
  // cost of their halos. Each round bands one region around the current
  // peak: every (region, band count) whose halos stay under a quarter of the
  // region's own FLOPs is ranked by FLOPs added, and planned in that order
  // (those whose edge tensors alone exceed the budget last) until one meets
  // the budget; else the one that lowered the arena most is kept.
  static const int kTiles[] = {2, 3, 4, 6, 8, 12, 16};
  const bool debug = std::getenv("KITE_BUDGET_DEBUG") != nullptr;
  if (debug) std::fprintf(stderr, "patch rounds, local_first %d\n", local_first);
  for (int round = 0; round < 16 && model->plan.arena_size > budget; ++round) {
    const std::vector<PatchCandidate> candidates = patch_candidates(*model, options.allow_aliasing);
    // Trials run on a copy without the weights' bytes (planning needs none).
    ir::Model light = *model;
    for (ir::Tensor& t : light.tensors) {
      if (t.is_constant() && t.data.size() > 64) std::vector<uint8_t>().swap(t.data);
    }
    struct Option {
      size_t candidate;
      int tiles;
      uint64_t flops;
      bool fits;  // edge tensors within the budget
    };
    std::vector<Option> ranked;
    for (size_t ci = 0; ci < candidates.size(); ++ci) {
      const Region& r = candidates[ci].region;
      uint64_t region_flops = 0;
      for (size_t q = r.first; q <= r.last; ++q) region_flops += node_flops(light, light.main().nodes[q]);
      for (int tiles : kTiles) {
        ir::Model trial = light;
        Patch rec;
        if (!patch_region(&trial, r, tiles, &rec)) break;
        if (rec.flops_added * 4 > region_flops) break;  // more bands only add halo
        ranked.push_back({ci, tiles, rec.flops_added, candidates[ci].boundary <= budget});
      }
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Option& x, const Option& y) {
      if (x.fits != y.fits) return x.fits;
      return x.flops < y.flops;
    });
    // Bytes above the budget, summed over nodes: lowers when this peak
    // goes down even while another peak still sets the arena.
    auto excess = [&](const ir::Model& mm) {
      uint64_t e = 0;
      for (uint64_t v : live_bytes_per_node(mm, options.allow_aliasing)) e += v > budget ? v - budget : 0;
      return e;
    };
    const Option* best = nullptr;
    const Option* local = nullptr;
    uint64_t best_arena = model->plan.arena_size;
    uint64_t best_excess = excess(*model);
    int planned = 0;
    for (const Option& o : ranked) {
      if (++planned > 48) break;  // each trial replans the model
      if (local != nullptr && o.flops > 2 * local->flops) break;
      ir::Model trial = light;
      Patch rec;
      patch_region(&trial, candidates[o.candidate].region, o.tiles, &rec);
      std::string plan_err;
      if (!plan_memory(&trial, options, nullptr, &plan_err)) continue;
      if (debug) {
        std::fprintf(stderr, "  try [%zu..%zu] x%d: +%llu flops, arena %llu lb %llu\n",
                     candidates[o.candidate].region.first, candidates[o.candidate].region.last,
                     o.tiles, static_cast<unsigned long long>(o.flops),
                     static_cast<unsigned long long>(trial.plan.arena_size),
                     static_cast<unsigned long long>(trial.plan.lower_bound));
      }
      if (trial.plan.arena_size <= budget) {
        best = &o;
        local = nullptr;
        break;
      }
      if (local_first && local == nullptr) {
        const std::vector<uint64_t> live = live_bytes_per_node(trial, options.allow_aliasing);
        const Region& r = candidates[o.candidate].region;
        const size_t end = r.last + 1 + trial.main().nodes.size() - model->main().nodes.size();
        uint64_t peak = 0;
        for (size_t q = r.first; q < end && q < live.size(); ++q) peak = std::max(peak, live[q]);
        if (peak <= budget - budget / 50) local = &o;  // 2% for alignment
      }
      const uint64_t e = excess(trial);
      if (trial.plan.arena_size < best_arena || (trial.plan.arena_size == best_arena && e < best_excess)) {
        best_arena = trial.plan.arena_size;
        best_excess = e;
        best = &o;
      }
    }
    if (local != nullptr) best = local;
    if (best == nullptr) break;
    Patch rec;
    ir::Model patched = *model;
    if (!patch_region(&patched, candidates[best->candidate].region, best->tiles, &rec) ||
        !plan_memory(&patched, options, nullptr, err)) {
      return false;
    }
    rec.arena_before = model->plan.arena_size;
    rec.arena_after = patched.plan.arena_size;
    *model = std::move(patched);
    report->flops_added += rec.flops_added;
    report->patches.push_back(rec);
  }
  return true;
}

// ---------------------------------------------------------------------------
// Recompute chains: a tensor live across a long gap between its uses, and
// across the peak, is dropped after its early uses and computed again right
// before its late ones by a chain of its producers (convolutions included),
// back to tensors that are live there anyway (constants, graph inputs, or
// tensors with later uses).

struct Candidate {
  size_t producer = 0;        // main-graph node index of the tensor's producer
  size_t first_late = 0;      // index of the first consumer after the gap
  std::vector<size_t> chain;  // nodes to clone, ascending
  uint64_t flops = 0;
  uint64_t bytes = 0;
  bool covers_peak = false;
};

std::vector<Candidate> find_candidates(const ir::Model& m, size_t peak,
                                       const std::set<std::pair<size_t, size_t>>& tried) {
  std::vector<Candidate> found;
  const auto& nodes = m.main().nodes;
  const std::vector<std::vector<size_t>> users = all_users(m);
  std::vector<int> producer(m.tensors.size(), -1);
  std::vector<size_t> last_use(m.tensors.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) {
      if (t >= 0) producer[static_cast<size_t>(t)] = static_cast<int>(i);
    }
  }
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    if (!users[t].empty()) last_use[t] = users[t].back();
  }
  std::vector<bool> graph_input(m.tensors.size(), false);
  for (int t : m.main().inputs) graph_input[static_cast<size_t>(t)] = true;
  for (int t : m.main().outputs) last_use[static_cast<size_t>(t)] = nodes.size();
  auto clonable = [&](const ir::Node& n) {
    return n.outputs.size() == 1 && n.outputs[0] >= 0 && !n.has_subgraph() &&
           m.tensors[static_cast<size_t>(n.outputs[0])].kind != ir::TensorKind::Output;
  };
  for (size_t p = 0; p < nodes.size(); ++p) {
    const ir::Node& node = nodes[p];
    if (!clonable(node)) continue;
    const int t = node.outputs[0];
    const std::vector<size_t>& uses = users[static_cast<size_t>(t)];
    if (uses.empty()) continue;
    // The widest gap between consecutive uses (the production counts as one).
    size_t prev = p, gap_end = 0, gap_start = 0, widest = 0;
    for (size_t u : uses) {
      if (u - prev > widest) {
        widest = u - prev;
        gap_end = u;
        gap_start = prev;
      }
      prev = u;
    }
    if (widest < 3 || gap_end == uses.front() || tried.count({p, gap_end})) continue;
    // The chain: producers of whatever is not live at gap_end anyway.
    std::vector<size_t> chain = {p};
    bool ok = true;
    for (size_t k = 0; k < chain.size() && ok; ++k) {
      std::vector<int> ins = nodes[chain[k]].inputs;
      for (const ir::Node& b : nodes[chain[k]].body) ins.insert(ins.end(), b.inputs.begin(), b.inputs.end());
      for (int in : ins) {
        if (in < 0) continue;
        const size_t ti = static_cast<size_t>(in);
        if (m.tensors[ti].is_constant() || graph_input[ti] || last_use[ti] >= gap_end) continue;
        if (m.tensors[ti].kind == ir::TensorKind::Scratch) continue;  // inside the fused body
        const int q = producer[ti];
        if (q < 0 || !clonable(nodes[static_cast<size_t>(q)]) || chain.size() >= 8) {
          ok = false;
          break;
        }
        if (std::find(chain.begin(), chain.end(), static_cast<size_t>(q)) == chain.end()) {
          chain.push_back(static_cast<size_t>(q));
        }
      }
    }
    if (!ok) continue;
    std::sort(chain.begin(), chain.end());
    Candidate c;
    c.producer = p;
    c.first_late = gap_end;
    c.chain = chain;
    for (size_t q : chain) c.flops += node_flops(m, nodes[q]);
    c.bytes = m.tensors[static_cast<size_t>(t)].byte_size();
    c.covers_peak = gap_start < peak && peak < gap_end;
    found.push_back(c);
  }
  // Bytes freed at the peak per FLOP added, best first.
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    if (a.covers_peak != b.covers_peak) return a.covers_peak;
    return static_cast<double>(a.bytes) / (static_cast<double>(a.flops) + 1.0) >
           static_cast<double>(b.bytes) / (static_cast<double>(b.flops) + 1.0);
  });
  return found;
}

// Clones the chain right before the first late consumer (fused bodies'
// scratch tensors cloned too); consumers from there on read the clone.
void recompute(ir::Model* m, const Candidate& c, Recomputation* rec) {
  auto& nodes = m->main().nodes;
  const int t = nodes[c.producer].outputs[0];
  std::map<int, int> copy_of;
  auto clone_tensor = [&](int x) {
    auto it = copy_of.find(x);
    if (it != copy_of.end()) return it->second;
    ir::Tensor copy = m->tensors[static_cast<size_t>(x)];
    copy.name = m->unused_tensor_name(copy.name + "/recomputed");
    if (copy.kind != ir::TensorKind::Scratch) copy.kind = ir::TensorKind::Activation;
    const int y = m->add_tensor(std::move(copy));
    copy_of[x] = y;
    return y;
  };
  std::vector<ir::Node> clones;
  uint64_t flops = 0;
  for (size_t q : c.chain) {
    ir::Node clone = nodes[q];
    flops += node_flops(*m, clone);
    clone.name += "/recompute";
    for (int& o : clone.outputs) o = clone_tensor(o);
    for (int& i : clone.inputs) {
      auto it = copy_of.find(i);
      if (it != copy_of.end()) i = it->second;
    }
    for (ir::Node& b : clone.body) {
      b.name += "/recompute";
      for (int& i : b.inputs) {
        auto it = copy_of.find(i);
        if (it != copy_of.end()) i = it->second;
      }
      for (int& o : b.outputs) {
        // The body's last node writes the fused node's (already cloned)
        // output; the others write scratch.
        o = clone_tensor(o);
      }
    }
    clones.push_back(std::move(clone));
  }
  const int t2 = copy_of[t];
  int late_uses = 0;
  std::function<void(ir::Node&)> rewire = [&](ir::Node& n) {
    for (int& i : n.inputs) {
      if (i == t) {
        i = t2;
        ++late_uses;
      }
    }
    for (ir::Node& b : n.body) rewire(b);
  };
  for (size_t i = c.first_late; i < nodes.size(); ++i) rewire(nodes[i]);
  nodes.insert(nodes.begin() + static_cast<long>(c.first_late), clones.begin(), clones.end());
  rec->node = nodes[c.producer].name;
  rec->tensor = m->tensors[static_cast<size_t>(t)].name;
  rec->late_uses = late_uses;
  rec->nodes = static_cast<int>(c.chain.size());
  rec->flops = flops;
  uint64_t numel = 0;
  for (size_t q : c.chain) {
    for (int o : nodes[q].outputs) numel += numel_of(m->tensors[static_cast<size_t>(o)]);
  }
  rec->elements = numel;
}

}  // namespace

bool patch_nodes(ir::Model* model, size_t first, size_t last, int tiles, Patch* rec,
                 std::string* err) {
  const auto& nodes = model->main().nodes;
  if (first > last || last >= nodes.size()) {
    *err = "no such node range";
    return false;
  }
  for (size_t i = first; i <= last; ++i) {
    if (!tileable(*model, nodes[i])) {
      *err = nodes[i].label() + " cannot run in row bands";
      return false;
    }
  }
  if (!region_closed(*model, Region{first, last}, all_users(*model))) {
    *err = "nodes " + nodes[first].label() + " .. " + nodes[last].label() +
           " are read from outside the range";
    return false;
  }
  ir::Model trial = *model;
  Patch local;
  if (!patch_region(&trial, Region{first, last}, tiles, rec ? rec : &local)) {
    *err = "cannot split " + nodes[last].label() + "'s output into " + std::to_string(tiles) +
           " row bands";
    return false;
  }
  *model = std::move(trial);
  return true;
}

bool apply_memory_budget(ir::Model* model, uint64_t budget, double ratio, const PlanOptions& options,
                         BudgetReport* report, std::string* err) {
  if (!plan_memory(model, options, nullptr, err)) return false;
  report->lower_bound = model->plan.lower_bound;
  report->ratio = ratio;
  if (budget == 0) {
    budget = static_cast<uint64_t>(ratio * static_cast<double>(model->plan.lower_bound));
  }
  report->budget = budget;
  report->arena_before = model->plan.arena_size;
  report->flops_before = model_flops(*model);
  // Patches first: local peaks one by one, else (when that falls short)
  // the banding that meets the whole budget soonest.
  {
    ir::Model first = *model;
    BudgetReport first_report = *report;
    if (!patch_rounds(&first, budget, options, true, &first_report, err)) return false;
    if (first.plan.arena_size <= budget) {
      *model = std::move(first);
      *report = std::move(first_report);
    } else {
      if (!patch_rounds(model, budget, options, false, report, err)) return false;
      if (first.plan.arena_size < model->plan.arena_size) {
        *model = std::move(first);
        *report = std::move(first_report);
      }
    }
  }
  std::set<std::pair<size_t, size_t>> tried;
  // Each accepted step shrinks the arena, so the loop ends; the bound keeps
  // conversion time predictable on large graphs.
  for (int round = 0; round < 256 && model->plan.arena_size > budget; ++round) {
    const std::vector<uint64_t> live = live_bytes_per_node(*model, options.allow_aliasing);
    const size_t peak = live.empty() ? 0 : static_cast<size_t>(std::max_element(live.begin(), live.end()) - live.begin());
    const std::vector<Candidate> candidates = find_candidates(*model, peak, tried);
    bool improved = false;
    int trials = 0;
    for (const Candidate& c : candidates) {
      if (++trials > 16) break;  // each trial replans the model
      tried.insert({c.producer, c.first_late});
      ir::Model trial = *model;
      Recomputation rec;
      recompute(&trial, c, &rec);
      std::string plan_err;
      const bool planned = plan_memory(&trial, options, nullptr, &plan_err);
      if (std::getenv("KITE_BUDGET_DEBUG")) {
        std::fprintf(stderr, "  recompute %s (chain %zu, %llu flops, peak %d): arena %llu %s\n",
                     rec.tensor.c_str(), c.chain.size(), static_cast<unsigned long long>(c.flops),
                     c.covers_peak, static_cast<unsigned long long>(planned ? trial.plan.arena_size : 0),
                     plan_err.c_str());
      }
      if (!planned) continue;
      if (trial.plan.arena_size >= model->plan.arena_size) continue;
      rec.arena_before = model->plan.arena_size;
      rec.arena_after = trial.plan.arena_size;
      report->flops_added += rec.flops;
      *model = std::move(trial);
      report->recomputed.push_back(rec);
      tried.clear();  // node indices shifted
      improved = true;
      break;
    }
    if (!improved) break;
  }
  report->arena_after = model->plan.arena_size;
  report->met = model->plan.arena_size <= budget;
  return true;
}

}  // namespace kite::memory
