// Data movement that selects or repeats elements: Slice, Gather, Expand,
// Tile, Pad, ConstantOfShape, Range. Value inputs (starts, pads, repeats,
// indices, ...) that are not constants are read at run and checked against
// the declared output shape; nothing is allocated at run.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

bool element_size_ok(kite_dtype d) {
  const size_t s = kite::ops::dtype_size(d);
  return s == 1 || s == 2 || s == 4 || s == 8;
}

// Copies one element of `size` bytes (size is 1, 2, 4 or 8).
inline void copy_element(char* dst, const char* src, size_t size) {
  switch (size) {
    case 1: *dst = *src; break;
    case 2: std::memcpy(dst, src, 2); break;
    case 4: std::memcpy(dst, src, 4); break;
    default: std::memcpy(dst, src, 8); break;
  }
}

// Reads up to max_count int values of a (possibly computed) input.
struct IntValues {
  int64_t v[KITE_MAX_RANK * 2] = {};
  int64_t count = 0;
};

// ---------------------------------------------------------------- Slice --

class SliceKernel : public CheckedKernel {
 public:
  SliceKernel(const OpNode& op, size_t element_size, Shape in, Shape out, const char* data,
              char* result)
      : CheckedKernel(op), es_(element_size), in_(std::move(in)), out_(std::move(out)),
        data_(data), result_(result) {
    in_strides_ = contiguous_strides(in_);
  }

  // Value sources: each a pointer with dtype and count, or attribute values.
  struct Source {
    const void* data = nullptr;
    kite_dtype dtype = KITE_DTYPE_INT64;
    int64_t count = -1;  // -1: absent
    Shape attr;          // used when data is null and count >= 0
  };
  Source starts, ends, axes, steps;

  // Resolves starts/ends/axes/steps into per-dim start and step, and checks
  // that they give the declared output shape. Returns false with the error set.
  bool resolve(int64_t* start, int64_t* step) {
    const int64_t rank = static_cast<int64_t>(in_.size());
    for (int64_t d = 0; d < rank; ++d) {
      start[d] = 0;
      step[d] = 1;
    }
    IntValues s, e, a, st;
    if (!read(starts, &s, "starts") || !read(ends, &e, "ends") || !read(axes, &a, "axes") ||
        !read(steps, &st, "steps")) {
      return false;
    }
    const int64_t n = s.count;
    if (e.count != n || (axes.count >= 0 && a.count != n) || (steps.count >= 0 && st.count != n)) {
      set_error("starts, ends, axes and steps differ in length");
      return false;
    }
    int64_t dims[KITE_MAX_RANK];
    for (int64_t d = 0; d < rank; ++d) dims[d] = in_[d];
    bool seen[KITE_MAX_RANK] = {};
    for (int64_t i = 0; i < n; ++i) {
      const int64_t axis = normalize_axis(axes.count >= 0 ? a.v[i] : i, rank);
      if (axis < 0 || seen[axis]) {
        set_error("axes entry %lld is invalid", static_cast<long long>(axes.count >= 0 ? a.v[i] : i));
        return false;
      }
      seen[axis] = true;
      const int64_t p = steps.count >= 0 ? st.v[i] : 1;
      if (p == 0) {
        set_error("step is 0");
        return false;
      }
      const int64_t dim = in_[axis];
      int64_t b = s.v[i], f = e.v[i];
      if (b < 0) b += dim;
      if (f < 0) f += dim;
      int64_t count;
      if (p > 0) {
        b = std::clamp<int64_t>(b, 0, dim);
        f = std::clamp<int64_t>(f, 0, dim);
        count = f > b ? (f - b + p - 1) / p : 0;
      } else {
        b = std::clamp<int64_t>(b, 0, dim - 1);
        f = std::clamp<int64_t>(f, -1, dim - 1);
        count = b > f ? (b - f + (-p) - 1) / (-p) : 0;
      }
      start[axis] = b;
      step[axis] = p;
      dims[axis] = count;
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (dims[d] != out_[d]) {
        set_error("gives %lld elements along axis %lld, the declared output has %lld",
                  static_cast<long long>(dims[d]), static_cast<long long>(d),
                  static_cast<long long>(out_[d]));
        return false;
      }
    }
    return true;
  }

  bool prepare_constant() {
    resolved_ = resolve(start_, step_);
    return resolved_;
  }

  void run(ThreadPool& pool) override {
    clear_error();
    int64_t start[KITE_MAX_RANK], step[KITE_MAX_RANK];
    if (resolved_) {
      std::copy(start_, start_ + KITE_MAX_RANK, start);
      std::copy(step_, step_ + KITE_MAX_RANK, step);
    } else if (!resolve(start, step)) {
      return;
    }
    const int nd = static_cast<int>(out_.size());
    const int64_t numel = shape_numel(out_);
    if (numel == 0) return;
    if (nd == 0) {
      copy_element(result_, data_, es_);
      return;
    }
    const int64_t inner = out_[nd - 1];
    const int64_t rows = numel / inner;
    int64_t base = 0;
    int64_t stride[KITE_MAX_RANK];
    for (int d = 0; d < nd; ++d) {
      base += start[d] * in_strides_[d];
      stride[d] = step[d] * in_strides_[d];
    }
    const size_t es = es_;
    pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = base, rest = row;
        for (int d = nd - 2; d >= 0; --d) {
          offset += (rest % out_[d]) * stride[d];
          rest /= out_[d];
        }
        char* dst = result_ + row * inner * static_cast<int64_t>(es);
        const char* src = data_ + offset * static_cast<int64_t>(es);
        if (stride[nd - 1] == 1) {
          std::memcpy(dst, src, static_cast<size_t>(inner) * es);
        } else {
          const int64_t s = stride[nd - 1] * static_cast<int64_t>(es);
          for (int64_t k = 0; k < inner; ++k) copy_element(dst + k * es, src + k * s, es);
        }
      }
    });
  }

 private:
  bool read(const Source& src, IntValues* out, const char* what) {
    if (src.count < 0) return true;
    if (src.count > KITE_MAX_RANK) {
      set_error("%s has %lld entries", what, static_cast<long long>(src.count));
      return false;
    }
    out->count = src.count;
    if (src.data) {
      read_int64s(src.data, src.dtype, src.count, out->v);
    } else {
      std::copy(src.attr.begin(), src.attr.end(), out->v);
    }
    return true;
  }

  size_t es_;
  Shape in_, out_, in_strides_;
  const char* data_;
  char* result_;
  bool resolved_ = false;
  int64_t start_[KITE_MAX_RANK] = {};
  int64_t step_[KITE_MAX_RANK] = {};
};

// --------------------------------------------------------------- Gather --

class GatherKernel : public CheckedKernel {
 public:
  GatherKernel(const OpNode& op, int64_t outer, int64_t axis_dim, int64_t block_bytes,
               const char* data, const void* indices, kite_dtype index_dtype, int64_t count,
               char* out)
      : CheckedKernel(op), outer_(outer), axis_dim_(axis_dim), block_(block_bytes), data_(data),
        indices_(indices), index_dtype_(index_dtype), count_(count), out_(out) {}

  void run(ThreadPool& pool) override {
    clear_error();
    for (int64_t j = 0; j < count_; ++j) {
      const int64_t i = index(j);
      if (i < -axis_dim_ || i >= axis_dim_) {
        set_error("index %lld is out of range [%lld, %lld]", static_cast<long long>(i),
                  static_cast<long long>(-axis_dim_), static_cast<long long>(axis_dim_ - 1));
        return;
      }
    }
    if (block_ == 0) return;
    pool.parallel_for(outer_ * count_, std::max<int64_t>(1, 65536 / block_),
                      [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / count_, j = t % count_;
        int64_t i = index(j);
        if (i < 0) i += axis_dim_;
        std::memcpy(out_ + t * block_, data_ + (o * axis_dim_ + i) * block_,
                    static_cast<size_t>(block_));
      }
    });
  }

 private:
  int64_t index(int64_t j) const {
    return index_dtype_ == KITE_DTYPE_INT32 ? static_cast<const int32_t*>(indices_)[j]
                                            : static_cast<const int64_t*>(indices_)[j];
  }

  int64_t outer_, axis_dim_, block_;
  const char* data_;
  const void* indices_;
  kite_dtype index_dtype_;
  int64_t count_;
  char* out_;
};

// ------------------------------------------------------- Expand / Tile --

template <typename T>
void broadcast_copy(const BroadcastPlan& plan, const T* in, T* out, ThreadPool& pool) {
  const int64_t n = plan.inner, s = plan.inner_stride[0];
  pool.parallel_for(plan.rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](const int64_t* off, int64_t o) {
      const T* src = in + off[0];
      T* dst = out + o;
      if (s == 0) {
        const T v = src[0];
        for (int64_t i = 0; i < n; ++i) dst[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
      }
    });
  });
}

class ExpandKernel : public CheckedKernel {
 public:
  ExpandKernel(const OpNode& op, size_t es, BroadcastPlan plan, Shape in, Shape out,
               const void* data, void* result)
      : CheckedKernel(op), es_(es), plan_(std::move(plan)), in_(std::move(in)),
        out_(std::move(out)), data_(data), result_(result) {}

  void check_shape_input(const void* shape, kite_dtype dtype, int64_t count) {
    shape_ = shape;
    shape_dtype_ = dtype;
    shape_count_ = count;
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (shape_ && !shape_matches()) return;
    if (plan_.numel == 0) return;
    switch (es_) {
      case 1: broadcast_copy(plan_, static_cast<const uint8_t*>(data_), static_cast<uint8_t*>(result_), pool); break;
      case 2: broadcast_copy(plan_, static_cast<const uint16_t*>(data_), static_cast<uint16_t*>(result_), pool); break;
      case 4: broadcast_copy(plan_, static_cast<const uint32_t*>(data_), static_cast<uint32_t*>(result_), pool); break;
      default: broadcast_copy(plan_, static_cast<const uint64_t*>(data_), static_cast<uint64_t*>(result_), pool); break;
    }
  }

 private:
  // Output = numpy broadcast of the input shape and the shape value.
  bool shape_matches() {
    const int64_t out_rank = static_cast<int64_t>(out_.size());
    if (shape_count_ > KITE_MAX_RANK ||
        std::max<int64_t>(shape_count_, static_cast<int64_t>(in_.size())) != out_rank) {
      set_error("shape value does not give the declared output rank");
      return false;
    }
    int64_t v[KITE_MAX_RANK];
    read_int64s(shape_, shape_dtype_, shape_count_, v);
    for (int64_t d = 0; d < out_rank; ++d) {
      const int64_t si = d - (out_rank - shape_count_);
      const int64_t ii = d - (out_rank - static_cast<int64_t>(in_.size()));
      const int64_t a = si >= 0 ? v[si] : 1;
      const int64_t b = ii >= 0 ? in_[ii] : 1;
      const int64_t dim = a == 1 ? b : a;
      if ((a != 1 && b != 1 && a != b) || dim != out_[d]) {
        set_error("shape value gives dim %lld = %lld, the declared output has %lld",
                  static_cast<long long>(d), static_cast<long long>(dim),
                  static_cast<long long>(out_[d]));
        return false;
      }
    }
    return true;
  }

  size_t es_;
  BroadcastPlan plan_;
  Shape in_, out_;
  const void* data_;
  void* result_;
  const void* shape_ = nullptr;
  kite_dtype shape_dtype_ = KITE_DTYPE_INT64;
  int64_t shape_count_ = 0;
};

class TileKernel : public CheckedKernel {
 public:
  TileKernel(const OpNode& op, size_t es, Shape in, Shape out, const char* data, char* result,
             const void* repeats, kite_dtype repeats_dtype)
      : CheckedKernel(op), es_(es), in_(std::move(in)), out_(std::move(out)), data_(data),
        result_(result), repeats_(repeats), repeats_dtype_(repeats_dtype) {
    in_strides_ = contiguous_strides(in_);
  }

  void run(ThreadPool& pool) override {
    clear_error();
    const int nd = static_cast<int>(in_.size());
    int64_t r[KITE_MAX_RANK];
    read_int64s(repeats_, repeats_dtype_, nd, r);
    for (int d = 0; d < nd; ++d) {
      if (r[d] < 0 || in_[d] * r[d] != out_[d]) {
        set_error("repeats[%d] = %lld does not give the declared output dim %lld", d,
                  static_cast<long long>(r[d]), static_cast<long long>(out_[d]));
        return;
      }
    }
    const int64_t numel = shape_numel(out_);
    if (numel == 0) return;
    if (nd == 0) {
      copy_element(result_, data_, es_);
      return;
    }
    const int64_t in_inner = in_[nd - 1];
    const int64_t inner = out_[nd - 1];
    const int64_t rows = numel / inner;
    const size_t es = es_;
    const size_t row_bytes = static_cast<size_t>(in_inner) * es;
    pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = 0, rest = row;
        for (int d = nd - 2; d >= 0; --d) {
          offset += (rest % out_[d]) % in_[d] * in_strides_[d];
          rest /= out_[d];
        }
        char* dst = result_ + row * inner * static_cast<int64_t>(es);
        const char* src = data_ + offset * static_cast<int64_t>(es);
        for (int64_t k = 0; k < inner; k += in_inner, dst += row_bytes) {
          std::memcpy(dst, src, row_bytes);
        }
      }
    });
  }

 private:
  size_t es_;
  Shape in_, out_, in_strides_;
  const char* data_;
  char* result_;
  const void* repeats_;
  kite_dtype repeats_dtype_;
};

// ------------------------------------------------------------------ Pad --

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Input index for output position o (already shifted by the begin pad);
// -1 for the constant.
inline int64_t pad_source(int64_t i, int64_t n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::kConstant || n == 0) return -1;
  if (mode == PadMode::kEdge) return i < 0 ? 0 : n - 1;
  if (mode == PadMode::kWrap) return ((i % n) + n) % n;
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t m = ((i % period) + period) % period;
  return m >= n ? period - m : m;
}

class PadKernel : public CheckedKernel {
 public:
  PadKernel(const OpNode& op, PadMode mode, size_t es, Shape in, Shape out, const char* data,
            char* result)
      : CheckedKernel(op), mode_(mode), es_(es), in_(std::move(in)), out_(std::move(out)),
        data_(data), result_(result) {
    in_strides_ = contiguous_strides(in_);
  }

  // Pads from an input (read at run) or an attribute; axes likewise.
  const void* pads_data = nullptr;
  kite_dtype pads_dtype = KITE_DTYPE_INT64;
  int64_t pads_count = 0;
  Shape pads_attr;
  const void* axes_data = nullptr;
  kite_dtype axes_dtype = KITE_DTYPE_INT64;
  int64_t axes_count = -1;  // -1: all axes
  const char* value_data = nullptr;  // constant_value input (same dtype as data)
  char value_bytes[8] = {};          // from the attribute or zero

  void run(ThreadPool& pool) override {
    clear_error();
    const int nd = static_cast<int>(in_.size());
    int64_t begin_pad[KITE_MAX_RANK] = {};
    if (!resolve(begin_pad)) return;
    const int64_t numel = shape_numel(out_);
    if (numel == 0) return;
    char value[8];
    std::memcpy(value, value_data ? value_data : value_bytes, es_);
    if (nd == 0) {
      copy_element(result_, data_, es_);
      return;
    }
    const int64_t inner = out_[nd - 1];
    const int64_t rows = numel / inner;
    const size_t es = es_;
    pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = 0, rest = row;
        bool constant = false;
        for (int d = nd - 2; d >= 0; --d) {
          const int64_t o = rest % out_[d];
          rest /= out_[d];
          const int64_t i = pad_source(o - begin_pad[d], in_[d], mode_);
          if (i < 0) constant = true;
          offset += i * in_strides_[d];
        }
        char* dst = result_ + row * inner * static_cast<int64_t>(es);
        if (constant) {
          for (int64_t k = 0; k < inner; ++k) copy_element(dst + k * es, value, es);
          continue;
        }
        const char* src = data_ + offset * static_cast<int64_t>(es);
        const int64_t n = in_[nd - 1], b = begin_pad[nd - 1];
        for (int64_t k = 0; k < inner; ++k) {
          const int64_t i = pad_source(k - b, n, mode_);
          copy_element(dst + k * es, i < 0 ? value : src + i * static_cast<int64_t>(es), es);
        }
      }
    });
  }

 private:
  bool resolve(int64_t* begin_pad) {
    const int64_t rank = static_cast<int64_t>(in_.size());
    int64_t axes[KITE_MAX_RANK];
    int64_t naxes = rank;
    if (axes_count >= 0) {
      if (axes_count > rank) {
        set_error("axes has %lld entries", static_cast<long long>(axes_count));
        return false;
      }
      naxes = axes_count;
      read_int64s(axes_data, axes_dtype, axes_count, axes);
    } else {
      for (int64_t d = 0; d < rank; ++d) axes[d] = d;
    }
    if (pads_count != 2 * naxes) {
      set_error("pads has %lld entries, expected %lld", static_cast<long long>(pads_count),
                static_cast<long long>(2 * naxes));
      return false;
    }
    int64_t pads[KITE_MAX_RANK * 2];
    if (pads_data) {
      read_int64s(pads_data, pads_dtype, pads_count, pads);
    } else {
      std::copy(pads_attr.begin(), pads_attr.end(), pads);
    }
    int64_t end_pad[KITE_MAX_RANK] = {};
    for (int64_t k = 0; k < naxes; ++k) {
      const int64_t a = normalize_axis(axes[k], rank);
      if (a < 0) {
        set_error("axes entry %lld is out of range", static_cast<long long>(axes[k]));
        return false;
      }
      begin_pad[a] = pads[k];
      end_pad[a] = pads[k + naxes];
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (in_[d] + begin_pad[d] + end_pad[d] != out_[d]) {
        set_error("pads give %lld elements along axis %lld, the declared output has %lld",
                  static_cast<long long>(in_[d] + begin_pad[d] + end_pad[d]),
                  static_cast<long long>(d), static_cast<long long>(out_[d]));
        return false;
      }
    }
    return true;
  }

  PadMode mode_;
  size_t es_;
  Shape in_, out_, in_strides_;
  const char* data_;
  char* result_;
};

// Writes value (given as double or int64) as one element of dtype d.
bool encode_value(kite_dtype d, double f, int64_t i, bool is_int, char* out) {
  switch (d) {
    case KITE_DTYPE_FLOAT32: {
      const float v = is_int ? static_cast<float>(i) : static_cast<float>(f);
      std::memcpy(out, &v, 4);
      return true;
    }
    case KITE_DTYPE_FLOAT16: {
      const uint16_t v = float_to_half(is_int ? static_cast<float>(i) : static_cast<float>(f));
      std::memcpy(out, &v, 2);
      return true;
    }
    case KITE_DTYPE_INT64: {
      const int64_t v = is_int ? i : static_cast<int64_t>(f);
      std::memcpy(out, &v, 8);
      return true;
    }
    case KITE_DTYPE_INT32: {
      const int32_t v = static_cast<int32_t>(is_int ? i : static_cast<int64_t>(f));
      std::memcpy(out, &v, 4);
      return true;
    }
    case KITE_DTYPE_INT8:
    case KITE_DTYPE_UINT8:
      out[0] = static_cast<char>(is_int ? i : static_cast<int64_t>(f));
      return true;
    case KITE_DTYPE_BOOL:
      out[0] = static_cast<char>(is_int ? i != 0 : f != 0.0);
      return true;
    default:
      return false;
  }
}

// ------------------------------------------------------ ConstantOfShape --

class FillKernel : public CheckedKernel {
 public:
  FillKernel(const OpNode& op, size_t es, const char* value, int64_t n, char* out, Shape shape)
      : CheckedKernel(op), es_(es), n_(n), out_(out), shape_(std::move(shape)) {
    std::memcpy(value_, value, es);
  }
  void check_shape_input(const void* data, kite_dtype dtype) {
    shape_data_ = data;
    shape_dtype_ = dtype;
  }
  void run(ThreadPool& pool) override {
    clear_error();
    if (shape_data_) {
      int64_t v[KITE_MAX_RANK];
      read_int64s(shape_data_, shape_dtype_, static_cast<int64_t>(shape_.size()), v);
      for (size_t d = 0; d < shape_.size(); ++d) {
        if (v[d] != shape_[d]) {
          set_error("shape value %lld differs from the declared output dim %lld",
                    static_cast<long long>(v[d]), static_cast<long long>(shape_[d]));
          return;
        }
      }
    }
    const size_t es = es_;
    pool.parallel_for(n_, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) copy_element(out_ + i * static_cast<int64_t>(es), value_, es);
    });
  }

 private:
  size_t es_;
  char value_[8] = {};
  int64_t n_;
  char* out_;
  Shape shape_;
  const void* shape_data_ = nullptr;
  kite_dtype shape_dtype_ = KITE_DTYPE_INT64;
};

// ---------------------------------------------------------------- Range --

template <typename T>
class RangeKernel : public CheckedKernel {
 public:
  RangeKernel(const OpNode& op, const T* start, const T* limit, const T* delta, T* out, int64_t n)
      : CheckedKernel(op), start_(start), limit_(limit), delta_(delta), out_(out), n_(n) {}

  void run(ThreadPool&) override {
    clear_error();
    const T start = *start_, limit = *limit_, delta = *delta_;
    if (delta == T(0)) {
      set_error("delta is 0");
      return;
    }
    if (check_count_) {
      // ONNX: max(ceil((limit - start) / delta), 0), in the inputs' type
      // for floats (as shape inference computes it).
      double count;
      if constexpr (std::is_integral_v<T>) {
        count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                          static_cast<double>(delta));
      } else {
        count = std::ceil(static_cast<double>((limit - start) / delta));
      }
      if (!(std::max(count, 0.0) == static_cast<double>(n_))) {
        set_error("start, limit and delta give %.0f elements, the declared output has %lld",
                  std::max(count, 0.0), static_cast<long long>(n_));
        return;
      }
    }
    for (int64_t i = 0; i < n_; ++i) {
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        out_[i] = static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
      } else {
        out_[i] = start + static_cast<T>(i) * delta;
      }
    }
  }

  bool check_count_ = true;

 private:
  const T *start_, *limit_, *delta_;
  T* out_;
  int64_t n_;
};

}  // namespace

// ------------------------------------------------------------ prepares --

std::string check_slice(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  if (op.inputs[0].rank() > KITE_MAX_RANK) return "rank is too large";
  for (size_t i = 1; i < 5; ++i) {
    std::string why = expect_dtype(op, i, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
    if (!why.empty()) return why;
  }
  return "";
}

std::unique_ptr<Kernel> prepare_slice(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const Shape out = output_shape(args, 0);
  if (out.size() != in.size()) return prepare_error(err, op, "output rank differs from the input");
  auto kernel = std::make_unique<SliceKernel>(op, kite::ops::dtype_size(op.inputs[0].dtype), in,
                                              out, static_cast<const char*>(args.input_data(0)),
                                              static_cast<char*>(args.output_data(0)));
  SliceKernel::Source* sources[4] = {&kernel->starts, &kernel->ends, &kernel->axes, &kernel->steps};
  const char* names[4] = {"starts", "ends", "axes", "steps"};
  bool all_constant = true;
  if (op.inputs.size() >= 3) {
    for (size_t i = 1; i < 5; ++i) {
      if (!op.has_input(i)) continue;
      SliceKernel::Source& s = *sources[i - 1];
      s.data = args.input_data(static_cast<int>(i));
      s.dtype = op.inputs[i].dtype;
      s.count = shape_numel(op.inputs[i].shape);
      all_constant = all_constant && op.inputs[i].data != nullptr;
    }
  } else {  // opset 1: attributes
    for (int k = 0; k < 4; ++k) {
      if (k == 3 || !op.find_attr(names[k])) continue;
      sources[k]->attr = op.attr_ints(names[k], {});
      sources[k]->count = static_cast<int64_t>(sources[k]->attr.size());
    }
  }
  if (kernel->starts.count < 0 || kernel->ends.count < 0) {
    return prepare_error(err, op, "starts and ends are required");
  }
  if (all_constant && !kernel->prepare_constant()) {
    *err = kernel->run_error();
    return nullptr;
  }
  return kernel;
}

std::string check_gather(const OpNode& op) {
  if (op.inputs.size() < 2 || !op.has_input(0) || !op.has_input(1)) return "needs data and indices";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  return expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
}

std::unique_ptr<Kernel> prepare_gather(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& data = op.inputs[0].shape;
  const Shape& indices = op.inputs[1].shape;
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), static_cast<int64_t>(data.size()));
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  Shape expected(data.begin(), data.begin() + axis);
  expected.insert(expected.end(), indices.begin(), indices.end());
  expected.insert(expected.end(), data.begin() + axis + 1, data.end());
  if (!has_output(args, 0) || output_shape(args, 0) != expected) {
    return prepare_error(err, op, "output shape is not " + kite::ops::shape_string(expected));
  }
  const int64_t es = static_cast<int64_t>(kite::ops::dtype_size(op.inputs[0].dtype));
  return std::make_unique<GatherKernel>(
      op, product(data, 0, a), data[a], product(data, a + 1, data.size()) * es,
      static_cast<const char*>(args.input_data(0)), args.input_data(1), op.inputs[1].dtype,
      shape_numel(indices), static_cast<char*>(args.output_data(0)));
}

std::string check_expand(const OpNode& op) {
  if (op.inputs.size() < 2 || !op.has_input(0) || !op.has_input(1)) return "needs input and shape";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  return expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
}

std::unique_ptr<Kernel> prepare_expand(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const Shape out = output_shape(args, 0);
  Shape joined;
  if (!kite::ops::broadcast_shapes(in, out, &joined) || joined != out) {
    return prepare_error(err, op, "input does not broadcast to the output shape");
  }
  auto kernel = std::make_unique<ExpandKernel>(op, kite::ops::dtype_size(op.inputs[0].dtype),
                                               make_broadcast_plan(out, {&in}), in, out,
                                               args.input_data(0), args.output_data(0));
  if (op.inputs[1].data == nullptr) {
    kernel->check_shape_input(args.input_data(1), op.inputs[1].dtype,
                              shape_numel(op.inputs[1].shape));
  }
  return kernel;
}

std::string check_tile(const OpNode& op) {
  if (op.inputs.size() < 2 || !op.has_input(0) || !op.has_input(1)) return "needs input and repeats";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  return expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
}

std::unique_ptr<Kernel> prepare_tile(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const Shape out = output_shape(args, 0);
  if (out.size() != in.size() || shape_numel(op.inputs[1].shape) != static_cast<int64_t>(in.size())) {
    return prepare_error(err, op, "repeats must have one entry per input dim");
  }
  return std::make_unique<TileKernel>(op, kite::ops::dtype_size(op.inputs[0].dtype), in, out,
                                      static_cast<const char*>(args.input_data(0)),
                                      static_cast<char*>(args.output_data(0)), args.input_data(1),
                                      op.inputs[1].dtype);
}

std::string check_pad(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (!element_size_ok(op.inputs[0].dtype)) return "dtype is not supported";
  const std::string mode = op.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return "mode '" + mode + "' is not supported";
  }
  std::string why = expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
  if (why.empty()) why = expect_dtype(op, 3, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
  if (why.empty() && op.has_input(2) && op.inputs[2].dtype != op.inputs[0].dtype) {
    why = "constant_value must have the data's dtype";
  }
  return why;
}

std::unique_ptr<Kernel> prepare_pad(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const Shape out = output_shape(args, 0);
  if (out.size() != in.size()) return prepare_error(err, op, "output rank differs from the input");
  const std::string m = op.attr_string("mode", "constant");
  const PadMode mode = m == "reflect" ? PadMode::kReflect
                       : m == "edge"  ? PadMode::kEdge
                       : m == "wrap"  ? PadMode::kWrap
                                      : PadMode::kConstant;
  const kite_dtype dtype = op.inputs[0].dtype;
  auto kernel = std::make_unique<PadKernel>(op, mode, kite::ops::dtype_size(dtype), in, out,
                                            static_cast<const char*>(args.input_data(0)),
                                            static_cast<char*>(args.output_data(0)));
  if (op.has_input(1)) {
    kernel->pads_data = args.input_data(1);
    kernel->pads_dtype = op.inputs[1].dtype;
    kernel->pads_count = shape_numel(op.inputs[1].shape);
  } else {
    kernel->pads_attr = op.attr_ints("pads", {});
    kernel->pads_count = static_cast<int64_t>(kernel->pads_attr.size());
  }
  if (kernel->pads_count > 2 * KITE_MAX_RANK) return prepare_error(err, op, "pads is too long");
  if (op.has_input(2)) {
    if (shape_numel(op.inputs[2].shape) != 1) {
      return prepare_error(err, op, "constant_value must hold one value");
    }
    kernel->value_data = static_cast<const char*>(args.input_data(2));
  } else {
    encode_value(dtype, op.attr_float("value", 0.0f), 0, false, kernel->value_bytes);
  }
  if (op.has_input(3)) {
    kernel->axes_data = args.input_data(3);
    kernel->axes_dtype = op.inputs[3].dtype;
    kernel->axes_count = shape_numel(op.inputs[3].shape);
  }
  return kernel;
}

std::string check_constant_of_shape(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs a shape input";
  return expect_dtype(op, 0, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
}

std::unique_ptr<Kernel> prepare_constant_of_shape(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  const Shape out = output_shape(args, 0);
  const kite_dtype dtype = output_dtype(args, 0);
  if (shape_numel(op.inputs[0].shape) != static_cast<int64_t>(out.size())) {
    return prepare_error(err, op, "shape input length differs from the output rank");
  }
  // value: a one-element tensor attribute, carried as a FLOAT or INT
  // attribute (or a one-element FLOATS/INTS); absent means 0.
  char bytes[8] = {};
  const kite::ops::Attr* a = op.find_attr("value");
  bool ok = true;
  if (a && a->type == KITE_ATTR_INT) ok = encode_value(dtype, 0, a->i, true, bytes);
  else if (a && a->type == KITE_ATTR_FLOAT) ok = encode_value(dtype, a->f, 0, false, bytes);
  else if (a && a->type == KITE_ATTR_INTS && a->ints.size() == 1) ok = encode_value(dtype, 0, a->ints[0], true, bytes);
  else if (a && a->type == KITE_ATTR_FLOATS && a->floats.size() == 1) ok = encode_value(dtype, a->floats[0], 0, false, bytes);
  else if (a) return prepare_error(err, op, "attribute 'value' must hold one number");
  else ok = encode_value(dtype, 0.0, 0, false, bytes);
  if (!ok) return prepare_error(err, op, std::string("output dtype ") + kite::ops::dtype_name(dtype) + " is not supported");
  auto kernel = std::make_unique<FillKernel>(op, kite::ops::dtype_size(dtype), bytes,
                                             shape_numel(out),
                                             static_cast<char*>(args.output_data(0)), out);
  if (op.inputs[0].data == nullptr) kernel->check_shape_input(args.input_data(0), op.inputs[0].dtype);
  return kernel;
}

std::string check_range(const OpNode& op) {
  if (op.inputs.size() < 3) return "needs start, limit and delta";
  for (size_t i = 0; i < 3; ++i) {
    if (!op.has_input(i)) return "needs start, limit and delta";
    std::string why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32, KITE_DTYPE_INT32, KITE_DTYPE_INT64});
    if (!why.empty()) return why;
    if (op.inputs[i].dtype != op.inputs[0].dtype) return "inputs must have one dtype";
  }
  return "";
}

std::unique_ptr<Kernel> prepare_range(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  for (size_t i = 0; i < 3; ++i) {
    if (shape_numel(op.inputs[i].shape) != 1) return prepare_error(err, op, input_label(op, i) + " must be a scalar");
  }
  const Shape out = output_shape(args, 0);
  if (out.size() != 1) return prepare_error(err, op, "output must be 1-D");
  const bool computed = op.inputs[0].data == nullptr || op.inputs[1].data == nullptr ||
                        op.inputs[2].data == nullptr;
  auto finish = [&](auto kernel) -> std::unique_ptr<Kernel> {
    kernel->check_count_ = computed;
    return kernel;
  };
  switch (op.inputs[0].dtype) {
    case KITE_DTYPE_INT32:
      return finish(std::make_unique<RangeKernel<int32_t>>(
          op, static_cast<const int32_t*>(args.input_data(0)), static_cast<const int32_t*>(args.input_data(1)),
          static_cast<const int32_t*>(args.input_data(2)), static_cast<int32_t*>(args.output_data(0)), out[0]));
    case KITE_DTYPE_INT64:
      return finish(std::make_unique<RangeKernel<int64_t>>(
          op, static_cast<const int64_t*>(args.input_data(0)), static_cast<const int64_t*>(args.input_data(1)),
          static_cast<const int64_t*>(args.input_data(2)), static_cast<int64_t*>(args.output_data(0)), out[0]));
    default:
      return finish(std::make_unique<RangeKernel<float>>(
          op, static_cast<const float*>(args.input_data(0)), static_cast<const float*>(args.input_data(1)),
          static_cast<const float*>(args.input_data(2)), static_cast<float*>(args.output_data(0)), out[0]));
  }
}

}  // namespace kite::cpu
