#include "src/ref_eval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "kite/ops/half.h"
#include "kite/ops/op_node.h"
#include "kite/ops/resolve.h"

namespace kite::converter {

namespace {

// One tensor's values: floats as doubles (float32 and float16 hold exactly
// in a double), integers and bools as int64.
struct Values {
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<double> f;   // float dtypes
  std::vector<int64_t> i;  // integer dtypes and bool
  bool is_float() const { return dtype == KITE_DTYPE_FLOAT32 || dtype == KITE_DTYPE_FLOAT16; }
  int64_t numel() const { return static_cast<int64_t>(is_float() ? f.size() : i.size()); }
  double as_double(int64_t k) const { return is_float() ? f[k] : static_cast<double>(i[k]); }
};

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

bool load(const ir::Tensor& t, Values* v) {
  v->dtype = t.dtype;
  v->shape = t.shape;
  int64_t n = 0;
  if (!kite::ops::checked_numel(t.shape, &n)) return false;
  const uint8_t* p = t.data.data();
  const size_t count = static_cast<size_t>(n);
  switch (t.dtype) {
    case KITE_DTYPE_FLOAT32:
      v->f.resize(count);
      for (size_t k = 0; k < count; ++k) {
        float x;
        std::memcpy(&x, p + 4 * k, 4);
        v->f[k] = x;
      }
      return true;
    case KITE_DTYPE_FLOAT16:
      v->f.resize(count);
      for (size_t k = 0; k < count; ++k) {
        uint16_t h;
        std::memcpy(&h, p + 2 * k, 2);
        v->f[k] = kite::half_to_float(h);
      }
      return true;
    case KITE_DTYPE_INT64:
      v->i.resize(count);
      if (count) std::memcpy(v->i.data(), p, 8 * count);
      return true;
    case KITE_DTYPE_INT32:
      v->i.resize(count);
      for (size_t k = 0; k < count; ++k) {
        int32_t x;
        std::memcpy(&x, p + 4 * k, 4);
        v->i[k] = x;
      }
      return true;
    case KITE_DTYPE_INT8:
      v->i.resize(count);
      for (size_t k = 0; k < count; ++k) v->i[k] = static_cast<int8_t>(p[k]);
      return true;
    case KITE_DTYPE_UINT8:
    case KITE_DTYPE_BOOL:
      v->i.resize(count);
      for (size_t k = 0; k < count; ++k) v->i[k] = p[k];
      return true;
    default:
      return false;
  }
}

RefValue store(const Values& v) {
  RefValue out;
  out.dtype = v.dtype;
  out.shape = v.shape;
  const size_t n = static_cast<size_t>(v.numel());
  out.data.resize(n * kite::ops::dtype_size(v.dtype));
  uint8_t* p = out.data.data();
  for (size_t k = 0; k < n; ++k) {
    switch (v.dtype) {
      case KITE_DTYPE_FLOAT32: {
        const float x = static_cast<float>(v.f[k]);
        std::memcpy(p + 4 * k, &x, 4);
        break;
      }
      case KITE_DTYPE_FLOAT16: {
        const uint16_t h = kite::float_to_half(static_cast<float>(v.f[k]));
        std::memcpy(p + 2 * k, &h, 2);
        break;
      }
      case KITE_DTYPE_INT64:
        std::memcpy(p + 8 * k, &v.i[k], 8);
        break;
      case KITE_DTYPE_INT32: {
        const int32_t x = static_cast<int32_t>(v.i[k]);
        std::memcpy(p + 4 * k, &x, 4);
        break;
      }
      case KITE_DTYPE_INT8:
        p[k] = static_cast<uint8_t>(static_cast<int8_t>(v.i[k]));
        break;
      case KITE_DTYPE_UINT8:
        p[k] = static_cast<uint8_t>(v.i[k]);
        break;
      case KITE_DTYPE_BOOL:
        p[k] = v.i[k] != 0 ? 1 : 0;
        break;
      default:
        break;
    }
  }
  return out;
}

Values make(kite_dtype dtype, const std::vector<int64_t>& shape) {
  Values v;
  v.dtype = dtype;
  v.shape = shape;
  const size_t n = static_cast<size_t>(numel_of(shape));
  if (v.is_float()) {
    v.f.assign(n, 0.0);
  } else {
    v.i.assign(n, 0);
  }
  return v;
}

// Copies element `from` of src into element `to` of dst (same dtype).
void copy_element(const Values& src, int64_t from, Values* dst, int64_t to) {
  if (src.is_float()) {
    dst->f[to] = src.f[from];
  } else {
    dst->i[to] = src.i[from];
  }
}

class Evaluator {
 public:
  Evaluator(const ir::Model& model, const ir::Node& node) : model_(model), node_(node) {}

  bool run(std::vector<RefValue>* outputs, std::string* err) {
    outputs->clear();
    for (int index : node_.inputs) {
      Values v;
      if (index < 0) {
        inputs_.push_back(v);
        present_.push_back(false);
        continue;
      }
      const ir::Tensor& t = model_.tensors.at(static_cast<size_t>(index));
      if (!t.is_constant() || !t.shape_known || t.data.size() != t.byte_size()) {
        return fail(err, "input '" + t.name + "' is not a constant");
      }
      if (!load(t, &v)) {
        return fail(err, "input '" + t.name + "' has dtype " + kite::ops::dtype_name(t.dtype) +
                             ", which the reference evaluator does not read");
      }
      inputs_.push_back(std::move(v));
      present_.push_back(true);
      names_.push_back(t.name);
    }
    static const std::map<std::string, bool (Evaluator::*)()> table = {
        {"Mod", &Evaluator::mod},
        {"IsNaN", &Evaluator::is_nan},
        {"IsInf", &Evaluator::is_inf},
        {"Trilu", &Evaluator::trilu},
        {"NonZero", &Evaluator::non_zero},
        {"EyeLike", &Evaluator::eye_like},
        {"GatherElements", &Evaluator::gather_elements},
        {"ScatterND", &Evaluator::scatter_nd},
        {"CumSum", &Evaluator::cum_sum},
    };
    auto it = table.find(node_.op);
    if (it == table.end() || !node_.domain.empty()) {
      return fail(err, "the reference evaluator does not compute this op");
    }
    if (!(this->*(it->second))()) return fail(err, error_);
    if (results_.size() != node_.outputs.size()) {
      return fail(err, "has " + std::to_string(node_.outputs.size()) + " outputs, expected " +
                           std::to_string(results_.size()));
    }
    for (const Values& v : results_) outputs->push_back(store(v));
    return true;
  }

  static const std::vector<std::string>& ops() {
    static const std::vector<std::string> names = {"CumSum",  "EyeLike", "GatherElements",
                                                   "IsInf",   "IsNaN",   "Mod",
                                                   "NonZero", "ScatterND", "Trilu"};
    return names;
  }

 private:
  bool fail(std::string* err, const std::string& message) {
    if (err) *err = node_.label() + ": " + message;
    return false;
  }
  bool bad(const std::string& message) {
    error_ = message;
    return false;
  }
  bool need_inputs(size_t min, size_t max) {
    size_t given = inputs_.size();
    while (given > 0 && !present_[given - 1]) --given;
    if (given < min || inputs_.size() > max) {
      return bad("takes " + std::to_string(min) + (min == max ? "" : "-" + std::to_string(max)) +
                 " inputs, it has " + std::to_string(inputs_.size()));
    }
    for (size_t k = 0; k < min; ++k) {
      if (!present_[k]) return bad("input " + std::to_string(k) + " is required");
    }
    return true;
  }
  const Values& in(size_t k) const { return inputs_[k]; }
  bool has(size_t k) const { return k < inputs_.size() && present_[k]; }

  // A scalar (or one-element) integer input's value.
  bool scalar_int(size_t k, int64_t* out) {
    const Values& v = in(k);
    if (v.is_float() || v.numel() != 1) {
      return bad("input " + std::to_string(k) + " must be one integer");
    }
    *out = v.i[0];
    return true;
  }

  bool mod() {
    if (!need_inputs(2, 2)) return false;
    const Values& a = in(0);
    const Values& b = in(1);
    if (a.dtype != b.dtype || a.dtype == KITE_DTYPE_BOOL) return bad("inputs must share a numeric dtype");
    const int64_t fmod = node_.attr_int("fmod", 0);
    if (fmod != 0 && fmod != 1) return bad("fmod must be 0 or 1");
    std::vector<int64_t> shape;
    if (!kite::ops::broadcast_shapes(a.shape, b.shape, &shape)) return bad("inputs do not broadcast");
    Values out = make(a.dtype, shape);
    const int64_t n = numel_of(shape);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t ia = kite::ops::broadcast_index(a.shape, shape, k);
      const int64_t ib = kite::ops::broadcast_index(b.shape, shape, k);
      if (a.is_float()) {
        double r = std::fmod(a.f[ia], b.f[ib]);
        if (fmod == 0 && r != 0 && ((r < 0) != (b.f[ib] < 0))) r += b.f[ib];  // numpy.mod
        out.f[k] = r;
        continue;
      }
      const int64_t x = a.i[ia], y = b.i[ib];
      if (y == 0) return bad("integer division by zero");
      if (y == -1) {  // INT64_MIN % -1 overflows in C++; the remainder is 0
        out.i[k] = 0;
        continue;
      }
      int64_t r = x % y;  // truncated: sign of the dividend (C fmod)
      if (fmod == 0 && r != 0 && ((r < 0) != (y < 0))) r += y;  // floored: sign of the divisor
      out.i[k] = r;
    }
    results_.push_back(std::move(out));
    return true;
  }

  bool is_nan() {
    if (!need_inputs(1, 1)) return false;
    const Values& x = in(0);
    if (!x.is_float()) return bad("input must be a float tensor");
    Values out = make(KITE_DTYPE_BOOL, x.shape);
    for (int64_t k = 0; k < x.numel(); ++k) out.i[k] = std::isnan(x.f[k]) ? 1 : 0;
    results_.push_back(std::move(out));
    return true;
  }

  bool is_inf() {
    if (!need_inputs(1, 1)) return false;
    const Values& x = in(0);
    if (!x.is_float()) return bad("input must be a float tensor");
    const bool pos = node_.attr_int("detect_positive", 1) != 0;
    const bool neg = node_.attr_int("detect_negative", 1) != 0;
    Values out = make(KITE_DTYPE_BOOL, x.shape);
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double v = x.f[k];
      out.i[k] = std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg)) ? 1 : 0;
    }
    results_.push_back(std::move(out));
    return true;
  }

  bool trilu() {
    if (!need_inputs(1, 2)) return false;
    const Values& x = in(0);
    if (x.shape.size() < 2) return bad("input must have at least 2 dims");
    int64_t k = 0;
    if (has(1) && !scalar_int(1, &k)) return false;
    const bool upper = node_.attr_int("upper", 1) != 0;
    const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
    Values out = make(x.dtype, x.shape);
    for (int64_t e = 0; e < x.numel(); ++e) {
      const int64_t j = e % cols, i = (e / cols) % rows;
      const bool keep = upper ? j - i >= k : j - i <= k;
      if (keep) copy_element(x, e, &out, e);
    }
    results_.push_back(std::move(out));
    return true;
  }

  bool non_zero() {
    if (!need_inputs(1, 1)) return false;
    const Values& x = in(0);
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    std::vector<int64_t> hits;
    for (int64_t e = 0; e < x.numel(); ++e) {
      if (x.as_double(e) != 0.0) hits.push_back(e);
    }
    const int64_t nnz = static_cast<int64_t>(hits.size());
    if (rank == 0) return bad("input must have at least 1 dim");
    Values out = make(KITE_DTYPE_INT64, {rank, nnz});
    const std::vector<int64_t> strides = strides_of(x.shape);
    for (int64_t h = 0; h < nnz; ++h) {
      for (int64_t d = 0; d < rank; ++d) {
        out.i[d * nnz + h] = (hits[h] / strides[d]) % x.shape[d];
      }
    }
    results_.push_back(std::move(out));
    return true;
  }

  bool eye_like() {
    if (!need_inputs(1, 1)) return false;
    const Values& x = in(0);
    if (x.shape.size() != 2) return bad("input must have 2 dims");
    kite_dtype dtype = x.dtype;
    if (const ir::Attr* a = node_.find_attr("dtype")) {
      dtype = kite::ops::dtype_from_onnx(a->i);
      if (dtype == KITE_DTYPE_UNDEFINED) return bad("dtype " + std::to_string(a->i) + " is not supported");
    }
    const int64_t k = node_.attr_int("k", 0);
    Values out = make(dtype, x.shape);
    for (int64_t i = 0; i < x.shape[0]; ++i) {
      const int64_t j = i + k;
      if (j < 0 || j >= x.shape[1]) continue;
      if (out.is_float()) {
        out.f[i * x.shape[1] + j] = 1.0;
      } else {
        out.i[i * x.shape[1] + j] = 1;
      }
    }
    results_.push_back(std::move(out));
    return true;
  }

  // Index value v along a dim of size n, negative counting from the end.
  bool index_in(int64_t v, int64_t n, const char* what, int64_t* out) {
    const int64_t w = v < 0 ? v + n : v;
    if (w < 0 || w >= n) {
      return bad(std::string(what) + " value " + std::to_string(v) + " is out of range [" +
                 std::to_string(-n) + ", " + std::to_string(n - 1) + "]");
    }
    *out = w;
    return true;
  }

  bool gather_elements() {
    if (!need_inputs(2, 2)) return false;
    const Values& data = in(0);
    const Values& idx = in(1);
    if (idx.is_float() || idx.dtype == KITE_DTYPE_BOOL) return bad("indices must be integers");
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    if (rank == 0 || static_cast<int64_t>(idx.shape.size()) != rank) {
      return bad("data and indices must have the same rank (>= 1)");
    }
    const int64_t axis = kite::ops::normalize_axis(node_.attr_int("axis", 0), rank);
    if (axis < 0) return bad("axis is out of range");
    const std::vector<int64_t> ds = strides_of(data.shape);
    const std::vector<int64_t> is = strides_of(idx.shape);
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && idx.shape[d] > data.shape[d]) return bad("indices are larger than data off the axis");
    }
    Values out = make(data.dtype, idx.shape);
    for (int64_t e = 0; e < idx.numel(); ++e) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t c = (e / is[d]) % idx.shape[d];
        if (d == axis && !index_in(idx.i[e], data.shape[d], "index", &c)) return false;
        src += c * ds[d];
      }
      copy_element(data, src, &out, e);
    }
    results_.push_back(std::move(out));
    return true;
  }

  bool scatter_nd() {
    if (!need_inputs(3, 3)) return false;
    const Values& data = in(0);
    const Values& idx = in(1);
    const Values& upd = in(2);
    if (idx.is_float() || idx.dtype == KITE_DTYPE_BOOL) return bad("indices must be integers");
    if (upd.dtype != data.dtype) return bad("updates must have data's dtype");
    const std::string reduction = node_.attr_string("reduction", "none");
    if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
        reduction != "min") {
      return bad("reduction '" + reduction + "' is not one of none, add, mul, max, min");
    }
    const int64_t r = static_cast<int64_t>(data.shape.size());
    const int64_t q = static_cast<int64_t>(idx.shape.size());
    if (q < 1) return bad("indices must have at least 1 dim");
    const int64_t kdim = idx.shape.back();
    if (kdim < 1 || kdim > r) return bad("the last dim of indices must be in [1, rank of data]");
    // updates: indices.shape[:-1] + data.shape[k:]
    std::vector<int64_t> expect(idx.shape.begin(), idx.shape.end() - 1);
    expect.insert(expect.end(), data.shape.begin() + kdim, data.shape.end());
    if (upd.shape != expect) {
      return bad("updates have shape " + kite::ops::shape_string(upd.shape) + ", expected " +
                 kite::ops::shape_string(expect));
    }
    const std::vector<int64_t> ds = strides_of(data.shape);
    const int64_t slice = kdim == r ? 1 : ds[kdim - 1];
    const int64_t count = kdim == 0 ? 1 : idx.numel() / kdim;
    Values out = data;
    for (int64_t u = 0; u < count; ++u) {
      int64_t base = 0;
      for (int64_t d = 0; d < kdim; ++d) {
        int64_t c = 0;
        if (!index_in(idx.i[u * kdim + d], data.shape[d], "index", &c)) return false;
        base += c * ds[d];
      }
      for (int64_t s = 0; s < slice; ++s) combine(upd, u * slice + s, &out, base + s, reduction);
    }
    results_.push_back(std::move(out));
    return true;
  }

  static void combine(const Values& src, int64_t from, Values* dst, int64_t to,
                      const std::string& reduction) {
    if (reduction == "none") {
      copy_element(src, from, dst, to);
    } else if (src.is_float()) {
      double& d = dst->f[to];
      const double s = src.f[from];
      if (reduction == "add") d += s;
      if (reduction == "mul") d *= s;
      if (reduction == "max") d = std::max(d, s);
      if (reduction == "min") d = std::min(d, s);
    } else {
      int64_t& d = dst->i[to];
      const int64_t s = src.i[from];
      if (reduction == "add") d = static_cast<int64_t>(static_cast<uint64_t>(d) + static_cast<uint64_t>(s));
      if (reduction == "mul") d = static_cast<int64_t>(static_cast<uint64_t>(d) * static_cast<uint64_t>(s));
      if (reduction == "max") d = std::max(d, s);
      if (reduction == "min") d = std::min(d, s);
    }
  }

  bool cum_sum() {
    if (!need_inputs(2, 2)) return false;
    const Values& x = in(0);
    if (x.dtype == KITE_DTYPE_BOOL) return bad("input must be numeric");
    int64_t axis = 0;
    if (!scalar_int(1, &axis)) return false;
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const int64_t a = kite::ops::normalize_axis(axis, rank);
    if (a < 0) return bad("axis " + std::to_string(axis) + " is out of range");
    const bool exclusive = node_.attr_int("exclusive", 0) != 0;
    const bool reverse = node_.attr_int("reverse", 0) != 0;
    const int64_t n = x.shape[a];
    const int64_t inner = strides_of(x.shape)[a];
    const int64_t outer = n == 0 ? 0 : x.numel() / (n * inner);
    Values out = make(x.dtype, x.shape);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in_ = 0; in_ < inner; ++in_) {
        double fs = 0;
        int64_t is = 0;
        for (int64_t step = 0; step < n; ++step) {
          const int64_t j = reverse ? n - 1 - step : step;
          const int64_t e = (o * n + j) * inner + in_;
          if (x.is_float()) {
            if (!exclusive) fs += x.f[e];
            out.f[e] = fs;
            if (exclusive) fs += x.f[e];
          } else {
            if (!exclusive) is = static_cast<int64_t>(static_cast<uint64_t>(is) + static_cast<uint64_t>(x.i[e]));
            out.i[e] = is;
            if (exclusive) is = static_cast<int64_t>(static_cast<uint64_t>(is) + static_cast<uint64_t>(x.i[e]));
          }
        }
      }
    }
    results_.push_back(std::move(out));
    return true;
  }

  const ir::Model& model_;
  const ir::Node& node_;
  std::vector<Values> inputs_;
  std::vector<bool> present_;
  std::vector<std::string> names_;
  std::vector<Values> results_;
  std::string error_;
};

}  // namespace

bool has_reference_evaluator(const std::string& op) {
  const std::vector<std::string>& ops = Evaluator::ops();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

std::vector<std::string> reference_evaluator_ops() { return Evaluator::ops(); }

bool reference_evaluate(const ir::Model& model, const ir::Node& node, std::vector<RefValue>* outputs,
                        std::string* err) {
  if (!outputs) {
    if (err) *err = "reference_evaluate: outputs is null";
    return false;
  }
  Evaluator evaluator(model, node);
  return evaluator.run(outputs, err);
}

}  // namespace kite::converter
