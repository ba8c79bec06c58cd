// Ops of today's exporters beyond the classic CNN set (issue 19): IsNaN,
// IsInf, Mod, Trilu, CumSum, GatherElements, ScatterElements, GatherND,
// ScatterND, DepthToSpace, SpaceToDepth, TopK, OneHot, Einsum. Plain loops: these
// ops move or compare elements and are rarely hot; correctness (bounds
// checked at run for computed indices, onnxruntime's tie order) comes first.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <type_traits>

#include "common.h"
#include "kernels.h"
#include "kite/ops/einsum.h"

namespace kite::cpu {
namespace {

// A kernel whose run is a closure built at prepare (which captured the
// pointers and precomputed sizes). The closure returns false after setting
// an error through the kernel.
class FnKernel : public CheckedKernel {
 public:
  using Fn = std::function<void(FnKernel&, ThreadPool&)>;
  FnKernel(const OpNode& op, Fn fn) : CheckedKernel(op), fn_(std::move(fn)) {}
  void run(ThreadPool& pool) override {
    clear_error();
    fn_(*this, pool);
  }
  void index_error(const char* what, int64_t v, int64_t dim) {
    set_error("%s %lld is out of range [%lld, %lld]", what, static_cast<long long>(v),
              static_cast<long long>(-dim), static_cast<long long>(dim - 1));
  }
  void message(const char* text) { set_error("%s", text); }

 private:
  Fn fn_;
};

std::unique_ptr<Kernel> make(const OpNode& op, FnKernel::Fn fn) {
  return std::make_unique<FnKernel>(op, std::move(fn));
}

// Calls fn(T()) for the arithmetic dtypes these kernels compute in.
template <typename F>
bool with_numeric(kite_dtype d, F&& fn) {
  switch (d) {
    case KITE_DTYPE_FLOAT32: fn(float()); return true;
    case KITE_DTYPE_INT32: fn(int32_t()); return true;
    case KITE_DTYPE_INT64: fn(int64_t()); return true;
    case KITE_DTYPE_INT8: fn(int8_t()); return true;
    case KITE_DTYPE_UINT8: fn(uint8_t()); return true;
    default: return false;
  }
}

inline int64_t read_index(const void* p, kite_dtype d, int64_t i) {
  return d == KITE_DTYPE_INT32 ? static_cast<const int32_t*>(p)[i] : static_cast<const int64_t*>(p)[i];
}

// Reduction of ScatterElements / ScatterND.
enum class Reduction { kNone, kAdd, kMul, kMax, kMin };
Reduction parse_reduction(const std::string& s) {
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return Reduction::kNone;
}
template <typename T>
inline void reduce_into(T* dst, T v, Reduction r) {
  switch (r) {
    case Reduction::kNone: *dst = v; break;
    case Reduction::kAdd: *dst = static_cast<T>(*dst + v); break;
    case Reduction::kMul: *dst = static_cast<T>(*dst * v); break;
    case Reduction::kMax: *dst = std::max(*dst, v); break;
    case Reduction::kMin: *dst = std::min(*dst, v); break;
  }
}

// Applies one element (offsets in elements) with the reduction, any dtype:
// kNone moves bytes, the others compute in the numeric dtype.
void scatter_element(char* out, const char* upd, int64_t to, int64_t from, size_t es, kite_dtype d,
                     Reduction r) {
  if (r == Reduction::kNone) {
    std::memcpy(out + to * es, upd + from * es, es);
    return;
  }
  with_numeric(d, [&](auto t) {
    using T = decltype(t);
    T v;
    std::memcpy(&v, upd + from * es, sizeof(T));
    T cur;
    std::memcpy(&cur, out + to * es, sizeof(T));
    reduce_into(&cur, v, r);
    std::memcpy(out + to * es, &cur, sizeof(T));
  });
}

std::string numeric_or_reason(const OpNode& op, size_t i) {
  return expect_dtype(op, i, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64,
                              KITE_DTYPE_INT8, KITE_DTYPE_UINT8});
}

// ------------------------------------------------------------ IsNaN/IsInf --

std::unique_ptr<Kernel> prepare_isnan(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const bool inf = op.op == "IsInf";
  const bool pos = op.attr_int("detect_positive", 1) != 0;
  const bool neg = op.attr_int("detect_negative", 1) != 0;
  const bool half = op.inputs[0].dtype == KITE_DTYPE_FLOAT16;
  const int64_t n = shape_numel(op.inputs[0].shape);
  const void* x = args.input_data(0);
  auto* y = static_cast<uint8_t*>(args.output_data(0));
  return make(op, [=](FnKernel&, ThreadPool& pool) {
    pool.parallel_for(n, 65536, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float v = half ? kite::half_to_float(static_cast<const uint16_t*>(x)[i])
                             : static_cast<const float*>(x)[i];
        y[i] = inf ? (std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg))) : std::isnan(v);
      }
    });
  });
}

// -------------------------------------------------------------------- Mod --

template <typename T>
inline bool mod_one(T x, T y, bool fmod, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(x, y);
    // fmod=0: numpy.mod, the sign of the divisor (y = +-inf gives +-inf
    // for an x of the other sign, as numpy does).
    if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;
    *out = r;
    return true;
  } else {
    if (y == 0) return false;
    if (std::is_signed_v<T> && y == static_cast<T>(-1)) {  // MIN % -1 overflows
      *out = 0;
      return true;
    }
    T r = static_cast<T>(x % y);  // truncated: the sign of the dividend
    if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);  // floored
    *out = r;
    return true;
  }
}

std::unique_ptr<Kernel> prepare_mod(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const bool fmod = op.attr_int("fmod", 0) != 0;
  const Shape out = output_shape(args, 0);
  const BroadcastPlan plan = make_broadcast_plan(out, {&op.inputs[0].shape, &op.inputs[1].shape});
  const void* a = args.input_data(0);
  const void* b = args.input_data(1);
  void* y = args.output_data(0);
  const kite_dtype d = op.inputs[0].dtype;
  return make(op, [=](FnKernel& k, ThreadPool&) {
    if (plan.numel == 0) return;
    if (d == KITE_DTYPE_FLOAT16) {  // computed in float32, rounded once
      const uint16_t* pa = static_cast<const uint16_t*>(a);
      const uint16_t* pb = static_cast<const uint16_t*>(b);
      uint16_t* py = static_cast<uint16_t*>(y);
      plan.for_rows(0, plan.rows, [&](const int64_t* off, int64_t o) {
        for (int64_t i = 0; i < plan.inner; ++i) {
          float r = 0;
          mod_one(kite::half_to_float(pa[off[0] + i * plan.inner_stride[0]]),
                  kite::half_to_float(pb[off[1] + i * plan.inner_stride[1]]), fmod, &r);
          py[o + i] = kite::float_to_half(r);
        }
      });
      return;
    }
    with_numeric(d, [&](auto t) {
      using T = decltype(t);
      const T* pa = static_cast<const T*>(a);
      const T* pb = static_cast<const T*>(b);
      T* py = static_cast<T*>(y);
      bool ok = true;
      plan.for_rows(0, plan.rows, [&](const int64_t* off, int64_t o) {
        for (int64_t i = 0; i < plan.inner && ok; ++i) {
          ok = mod_one(pa[off[0] + i * plan.inner_stride[0]], pb[off[1] + i * plan.inner_stride[1]],
                       fmod, &py[o + i]);
        }
      });
      if (!ok) k.message("integer division by zero");
    });
  });
}

// ------------------------------------------------------------------ Trilu --

std::unique_ptr<Kernel> prepare_trilu(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const Shape& s = op.inputs[0].shape;
  const bool upper = op.attr_int("upper", 1) != 0;
  const int64_t rows = s[s.size() - 2], cols = s.back();
  const int64_t n = shape_numel(s);
  const size_t es = movable_element_size(op.inputs[0].dtype);
  const char* x = static_cast<const char*>(args.input_data(0));
  char* y = static_cast<char*>(args.output_data(0));
  const void* kp = op.has_input(1) ? args.input_data(1) : nullptr;
  return make(op, [=](FnKernel&, ThreadPool&) {
    const int64_t k = kp ? *static_cast<const int64_t*>(kp) : 0;
    for (int64_t e = 0; e < n; ++e) {
      const int64_t j = e % cols, i = (e / cols) % rows;
      const bool keep = upper ? j - i >= k : j - i <= k;
      if (keep) {
        std::memmove(y + e * es, x + e * es, es);
      } else {
        std::memset(y + e * es, 0, es);
      }
    }
  });
}

// ----------------------------------------------------------------- CumSum --

std::unique_ptr<Kernel> prepare_cumsum(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const Shape s = op.inputs[0].shape;
  const bool exclusive = op.attr_int("exclusive", 0) != 0;
  const bool reverse = op.attr_int("reverse", 0) != 0;
  const void* x = args.input_data(0);
  const void* axis_data = args.input_data(1);
  const kite_dtype axis_dtype = op.inputs[1].dtype;
  void* y = args.output_data(0);
  const kite_dtype d = op.inputs[0].dtype;
  return make(op, [=](FnKernel& k, ThreadPool&) {
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t raw = read_index(axis_data, axis_dtype, 0);
    const int64_t axis = normalize_axis(raw, rank);
    if (axis < 0) {
      k.index_error("axis", raw, rank);
      return;
    }
    const int64_t len = s[axis];
    const int64_t inner = product(s, static_cast<size_t>(axis) + 1, s.size());
    const int64_t outer = product(s, 0, static_cast<size_t>(axis));
    with_numeric(d, [&](auto t) {
      using T = decltype(t);
      const T* px = static_cast<const T*>(x);
      T* py = static_cast<T*>(y);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          T sum = 0;
          for (int64_t step = 0; step < len; ++step) {
            const int64_t j = reverse ? len - 1 - step : step;
            const int64_t e = (o * len + j) * inner + i;
            const T v = px[e];  // read first: y may alias x
            if (!exclusive) sum = static_cast<T>(sum + v);
            py[e] = sum;
            if (exclusive) sum = static_cast<T>(sum + v);
          }
        }
      }
    });
  });
}

// ---------------------------------------- GatherElements, ScatterElements --

std::unique_ptr<Kernel> prepare_elements(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const bool scatter = op.op == "ScatterElements";
  const Shape ds = op.inputs[0].shape;
  const Shape is = op.inputs[1].shape;
  const int64_t rank = static_cast<int64_t>(ds.size());
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), rank);
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t es = movable_element_size(op.inputs[0].dtype);
  const Reduction r = parse_reduction(op.attr_string("reduction", "none"));
  const kite_dtype d = op.inputs[0].dtype;
  const char* data = static_cast<const char*>(args.input_data(0));
  const void* idx = args.input_data(1);
  const kite_dtype id = op.inputs[1].dtype;
  const char* upd = scatter ? static_cast<const char*>(args.input_data(2)) : nullptr;
  char* out = static_cast<char*>(args.output_data(0));
  const Shape dstr = contiguous_strides(ds);
  const int64_t n = shape_numel(is);
  const int64_t data_bytes = shape_numel(ds) * static_cast<int64_t>(es);
  return make(op, [=](FnKernel& k, ThreadPool&) {
    const int64_t dim = ds[axis];
    for (int64_t e = 0; e < n; ++e) {
      const int64_t v = read_index(idx, id, e);
      if (v < -dim || v >= dim) {
        k.index_error("index", v, dim);
        return;
      }
    }
    if (scatter) copy_bytes(out, data, static_cast<size_t>(data_bytes));
    int64_t coord[KITE_MAX_RANK] = {};
    for (int64_t e = 0; e < n; ++e) {
      int64_t off = 0;
      for (int64_t q = 0; q < rank; ++q) {
        int64_t c = coord[q];
        if (q == axis) {
          c = read_index(idx, id, e);
          if (c < 0) c += dim;
        }
        off += c * dstr[q];
      }
      if (scatter) {
        scatter_element(out, upd, off, e, es, d, r);
      } else {
        std::memcpy(out + e * es, data + off * es, es);
      }
      for (int64_t q = rank - 1; q >= 0; --q) {
        if (++coord[q] < is[q]) break;
        coord[q] = 0;
      }
    }
  });
}

// ------------------------------------------------- GatherND, ScatterND --

std::unique_ptr<Kernel> prepare_nd(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const bool scatter = op.op == "ScatterND";
  const Shape ds = op.inputs[0].shape;
  const Shape is = op.inputs[1].shape;
  const int64_t b = scatter ? 0 : op.attr_int("batch_dims", 0);
  const int64_t kdim = is.back();
  const size_t es = movable_element_size(op.inputs[0].dtype);
  const Reduction r = parse_reduction(op.attr_string("reduction", "none"));
  const kite_dtype d = op.inputs[0].dtype;
  const char* data = static_cast<const char*>(args.input_data(0));
  const int64_t* idx = static_cast<const int64_t*>(args.input_data(1));
  const char* upd = scatter ? static_cast<const char*>(args.input_data(2)) : nullptr;
  char* out = static_cast<char*>(args.output_data(0));
  const Shape dstr = contiguous_strides(ds);
  // Slices: one per index tuple; each covers data.shape[b + k:].
  const int64_t slice = product(ds, static_cast<size_t>(b + kdim), ds.size());
  const int64_t batch = product(is, 0, static_cast<size_t>(b));
  const int64_t tuples = product(is, static_cast<size_t>(b), is.size() - 1);  // per batch
  const int64_t batch_stride = b > 0 ? dstr[static_cast<size_t>(b - 1)] : 0;
  const int64_t data_bytes = shape_numel(ds) * static_cast<int64_t>(es);
  return make(op, [=](FnKernel& k, ThreadPool&) {
    for (int64_t t = 0; t < batch * tuples * kdim; ++t) {
      const int64_t dim = ds[static_cast<size_t>(b + t % kdim)];
      if (idx[t] < -dim || idx[t] >= dim) {
        k.index_error("index", idx[t], dim);
        return;
      }
    }
    if (scatter) copy_bytes(out, data, static_cast<size_t>(data_bytes));
    for (int64_t bi = 0; bi < batch; ++bi) {
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t* tuple = idx + (bi * tuples + t) * kdim;
        int64_t off = bi * batch_stride;
        for (int64_t q = 0; q < kdim; ++q) {
          const int64_t dim = ds[static_cast<size_t>(b + q)];
          off += (tuple[q] < 0 ? tuple[q] + dim : tuple[q]) * dstr[static_cast<size_t>(b + q)];
        }
        const int64_t u = (bi * tuples + t) * slice;
        if (scatter) {
          for (int64_t s = 0; s < slice; ++s) scatter_element(out, upd, off + s, u + s, es, d, r);
        } else {
          std::memcpy(out + u * es, data + off * es, static_cast<size_t>(slice) * es);
        }
      }
    }
  });
}

// ------------------------------------------- DepthToSpace, SpaceToDepth --

std::unique_ptr<Kernel> prepare_depth_space(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const bool to_space = op.op == "DepthToSpace";
  const bool crd = op.attr_string("mode", "DCR") == "CRD";
  const int64_t bs = op.attr_int("blocksize", 1);
  const Shape os = output_shape(args, 0);
  const Shape is = op.inputs[0].shape;
  const size_t es = movable_element_size(op.inputs[0].dtype);
  const char* x = static_cast<const char*>(args.input_data(0));
  char* y = static_cast<char*>(args.output_data(0));
  return make(op, [=](FnKernel&, ThreadPool&) {
    // Iterate over the space-side tensor [N, C, H*b, W*b] and the depth-side
    // [N, C*b*b, H, W]: element (n, c, h, w) of the space side is
    // (n, channel(c, h % b, w % b), h / b, w / b) of the depth side.
    const Shape& space = to_space ? os : is;
    const Shape& depth = to_space ? is : os;
    const int64_t C = space[1], H = space[2], W = space[3];
    const int64_t DC = depth[1], DH = depth[2], DW = depth[3];
    int64_t e = 0;
    for (int64_t n = 0; n < space[0]; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t w = 0; w < W; ++w, ++e) {
            const int64_t bh = h % bs, bw = w % bs;
            const int64_t dc = crd ? (c * bs + bh) * bs + bw : (bh * bs + bw) * C + c;
            const int64_t de = ((n * DC + dc) * DH + h / bs) * DW + w / bs;
            if (to_space) {
              std::memcpy(y + e * es, x + de * es, es);
            } else {
              std::memcpy(y + de * es, x + e * es, es);
            }
          }
        }
      }
    }
  });
}

// ------------------------------------------------------------------- TopK --

std::unique_ptr<Kernel> prepare_topk(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape s = op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  const int64_t axis = normalize_axis(op.attr_int("axis", -1), rank);
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const bool largest = op.attr_int("largest", 1) != 0;
  const Shape os = output_shape(args, 0);
  const int64_t k = os[axis];
  const int64_t len = s[axis];
  const int64_t inner = product(s, static_cast<size_t>(axis) + 1, s.size());
  const int64_t outer = product(s, 0, static_cast<size_t>(axis));
  const void* x = args.input_data(0);
  void* values = has_output(args, 0) ? args.output_data(0) : nullptr;
  int64_t* indices = has_output(args, 1) ? static_cast<int64_t*>(args.output_data(1)) : nullptr;
  const kite_dtype d = op.inputs[0].dtype;
  // Scratch order, made at prepare (run does not allocate).
  auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(len));
  return make(op, [=](FnKernel&, ThreadPool&) {
    with_numeric(d, [&](auto t) {
      using T = decltype(t);
      const T* px = static_cast<const T*>(x);
      T* pv = static_cast<T*>(values);
      int64_t* idx = order->data();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* row = px + o * len * inner + i;
          std::iota(idx, idx + len, int64_t{0});
          // Ties: the lower index first (onnxruntime's order); NaN counts
          // as the largest value.
          auto before = [&](int64_t a, int64_t b) {
            const T va = row[a * inner], vb = row[b * inner];
            if constexpr (std::is_floating_point_v<T>) {
              const bool na = std::isnan(va), nb = std::isnan(vb);
              if (na || nb) {
                if (na && nb) return a < b;
                return largest ? na : nb;
              }
            }
            if (va != vb) return largest ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(idx, idx + k, idx + len, before);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t at = (o * k + j) * inner + i;
            if (pv) pv[at] = row[idx[j] * inner];
            if (indices) indices[at] = idx[j];
          }
        }
      }
    });
  });
}

// ----------------------------------------------------------------- OneHot --

std::unique_ptr<Kernel> prepare_onehot(const KernelArgs& args) {
  const OpNode& op = *args.op;
  const Shape is = op.inputs[0].shape;
  const Shape os = output_shape(args, 0);
  const int64_t rank = static_cast<int64_t>(os.size());
  const int64_t axis = normalize_axis(op.attr_int("axis", -1), rank);
  const int64_t depth = os[static_cast<size_t>(axis)];
  const int64_t inner = product(os, static_cast<size_t>(axis) + 1, os.size());
  const int64_t outer = product(os, 0, static_cast<size_t>(axis));
  const size_t es = movable_element_size(op.inputs[2].dtype);
  const void* idx = args.input_data(0);
  const kite_dtype id = op.inputs[0].dtype;
  const char* vals = static_cast<const char*>(args.input_data(2));
  char* y = static_cast<char*>(args.output_data(0));
  return make(op, [=](FnKernel&, ThreadPool&) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < depth; ++j) {
        for (int64_t i = 0; i < inner; ++i) {
          double raw = 0;
          with_numeric(id, [&](auto t) {
            using T = decltype(t);
            raw = static_cast<double>(static_cast<const T*>(idx)[o * inner + i]);
          });
          int64_t v = static_cast<int64_t>(raw);  // float indices truncate, as onnxruntime
          if (v < 0) v += depth;
          const char* src = vals + (v == j ? es : 0);
          std::memcpy(y + ((o * depth + j) * inner + i) * es, src, es);
        }
      }
    }
  });
}

// ----------------------------------------------------------------- Einsum --

// Every index tuple of the labels, output labels outermost: one sum of
// products per output element (float32 sums in double). Plain, not fast:
// at -O2 the converter lowers the float32 forms that are batched matrix
// products to Transpose + MatMul (converter/passes/lower_einsum.cpp); what
// reaches this kernel is the rest (diagonals, sums, three operands, ...).
std::unique_ptr<Kernel> prepare_einsum(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  std::vector<Shape> shapes;
  for (const TensorType& t : op.inputs) shapes.push_back(t.shape);
  auto plan = std::make_shared<kite::ops::EinsumPlan>();
  std::string why;
  if (!kite::ops::resolve_einsum(op.attr_string("equation", ""), shapes, plan.get(), &why)) {
    return prepare_error(err, op, why);
  }
  std::vector<const void*> ins;
  for (size_t i = 0; i < op.inputs.size(); ++i) ins.push_back(args.input_data(static_cast<int>(i)));
  void* y = args.output_data(0);
  const kite_dtype d = op.inputs[0].dtype;
  const int64_t outputs = shape_numel(plan->output_shape);
  int64_t summed = 1;
  for (int l : plan->summed_labels) summed *= plan->label_dims[static_cast<size_t>(l)];
  return make(op, [=](FnKernel&, ThreadPool& pool) {
    const kite::ops::EinsumPlan& p = *plan;
    const size_t n_in = ins.size();
    const size_t n_out = p.output_labels.size(), n_sum = p.summed_labels.size();
    pool.parallel_for(outputs, std::max<int64_t>(1, 4096 / std::max<int64_t>(summed, 1)),
                      [&](int64_t begin, int64_t end) {
      int64_t base[16] = {};  // per input: the offset of the output labels
      int64_t idx[2 * KITE_MAX_RANK + 26] = {};
      for (int64_t o = begin; o < end; ++o) {
        for (size_t i = 0; i < n_in; ++i) base[i] = 0;
        int64_t rest = o;
        for (size_t k = n_out; k-- > 0;) {
          const int l = p.output_labels[k];
          const int64_t v = rest % p.label_dims[static_cast<size_t>(l)];
          rest /= p.label_dims[static_cast<size_t>(l)];
          for (size_t i = 0; i < n_in; ++i) base[i] += v * p.strides[i][static_cast<size_t>(l)];
        }
        for (size_t k = 0; k < n_sum; ++k) idx[k] = 0;
        double fsum = 0;
        int64_t isum = 0;
        for (int64_t s = 0; s < summed; ++s) {
          double fprod = 1;
          int64_t iprod = 1;
          for (size_t i = 0; i < n_in; ++i) {
            int64_t off = base[i];
            for (size_t k = 0; k < n_sum; ++k) {
              off += idx[k] * p.strides[i][static_cast<size_t>(p.summed_labels[k])];
            }
            if (d == KITE_DTYPE_FLOAT32) {
              fprod *= static_cast<const float*>(ins[i])[off];
            } else {  // integers wrap (two's complement), never overflow
              const int64_t v = d == KITE_DTYPE_INT32 ? static_cast<const int32_t*>(ins[i])[off]
                                                      : static_cast<const int64_t*>(ins[i])[off];
              iprod = static_cast<int64_t>(static_cast<uint64_t>(iprod) * static_cast<uint64_t>(v));
            }
          }
          fsum += fprod;
          isum = static_cast<int64_t>(static_cast<uint64_t>(isum) + static_cast<uint64_t>(iprod));
          for (size_t k = n_sum; k-- > 0;) {
            if (++idx[k] < p.label_dims[static_cast<size_t>(p.summed_labels[k])]) break;
            idx[k] = 0;
          }
        }
        if (d == KITE_DTYPE_FLOAT32) {
          static_cast<float*>(y)[o] = static_cast<float>(fsum);
        } else if (d == KITE_DTYPE_INT32) {
          static_cast<int32_t*>(y)[o] = static_cast<int32_t>(isum);
        } else {
          static_cast<int64_t*>(y)[o] = isum;
        }
      }
    });
  });
}

}  // namespace

std::string check_indexing(const OpNode& op) {
  const std::string& t = op.op;
  if (t == "IsNaN" || t == "IsInf") {
    return expect_dtype(op, 0, {KITE_DTYPE_FLOAT32, KITE_DTYPE_FLOAT16});
  }
  if (t == "Einsum") {
    if (op.inputs.size() > 16) return "more than 16 operands";
    std::string why = expect_dtypes(op, 0, op.inputs.size(),
                                    {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
    if (!why.empty()) return why;
    std::vector<Shape> shapes;
    for (const TensorType& in : op.inputs) shapes.push_back(in.shape);
    kite::ops::EinsumPlan plan;
    if (!kite::ops::resolve_einsum(op.attr_string("equation", ""), shapes, &plan, &why)) return why;
    if (plan.label_dims.size() > 2 * KITE_MAX_RANK + 26) return "too many labels";
    return "";
  }
  if (t == "Mod") {
    return op.inputs[0].dtype == KITE_DTYPE_FLOAT16 ? std::string() : numeric_or_reason(op, 0);
  }
  if (t == "CumSum" || t == "TopK") return numeric_or_reason(op, 0);
  if (t == "OneHot") {
    std::string why = numeric_or_reason(op, 0);
    return why.empty() ? expect_movable(op, 2) : why;
  }
  std::string why = expect_movable(op, 0);
  if (!why.empty()) return why;
  if (t == "ScatterElements" || t == "ScatterND") {
    if (op.attr_string("reduction", "none") != "none") return numeric_or_reason(op, 0);
  }
  return "";
}

std::unique_ptr<Kernel> prepare_indexing(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const std::string& t = op.op;
  if (t == "IsNaN" || t == "IsInf") return prepare_isnan(args);
  if (t == "Mod") return prepare_mod(args);
  if (t == "Trilu") return prepare_trilu(args);
  if (t == "CumSum") return prepare_cumsum(args);
  if (t == "GatherElements" || t == "ScatterElements") return prepare_elements(args, err);
  if (t == "GatherND" || t == "ScatterND") return prepare_nd(args);
  if (t == "DepthToSpace" || t == "SpaceToDepth") return prepare_depth_space(args);
  if (t == "TopK") return prepare_topk(args, err);
  if (t == "OneHot") return prepare_onehot(args);
  if (t == "Einsum") return prepare_einsum(args, err);
  return prepare_error(err, op, "no kernel in the indexing family");
}

}  // namespace kite::cpu
