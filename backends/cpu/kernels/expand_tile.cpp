// Expand and Tile: copies that repeat the input. A computed shape or
// repeats value is resolved at run with the op rule's function
// (kite::ops::resolve_expand / resolve_tile) and must give the declared
// output shape.
#include <algorithm>
#include <string>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

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
  ExpandKernel(const OpNode& op, size_t es, Shape in, Shape out, IntSource shape,
               const void* data, void* result)
      : CheckedKernel(op), es_(es), plan_(make_broadcast_plan(out, {&in})), in_(std::move(in)),
        out_(std::move(out)), shape_(std::move(shape)), data_(data), result_(result) {}

  void run(ThreadPool& pool) override {
    clear_error();
    if (!shape_.constant && !shape_matches()) return;
    if (plan_.numel == 0) return;
    with_element_type(es_, [&](auto t) {
      using T = decltype(t);
      broadcast_copy(plan_, static_cast<const T*>(data_), static_cast<T*>(result_), pool);
    });
  }

 private:
  bool shape_matches() {
    IntValues target;
    int64_t dims[KITE_MAX_RANK];
    int64_t rank = 0;
    kite::ops::RuleError err;
    if (!target.read(shape_)) {
      set_error("shape has %lld values", static_cast<long long>(shape_.count));
      return false;
    }
    if (!kite::ops::resolve_expand(in_.data(), static_cast<int64_t>(in_.size()), target.v,
                                   target.count, dims, &rank, &err)) {
      return rule_failed(err);
    }
    return gives_declared("shape", dims, rank, out_);
  }

  size_t es_;
  BroadcastPlan plan_;
  Shape in_, out_;
  IntSource shape_;
  const void* data_;
  void* result_;
};

class TileKernel : public CheckedKernel {
 public:
  TileKernel(const OpNode& op, size_t es, Shape in, Shape out, IntSource repeats,
             const char* data, char* result)
      : CheckedKernel(op), es_(es), in_(std::move(in)), out_(std::move(out)),
        repeats_(std::move(repeats)), data_(data), result_(result) {
    in_strides_ = contiguous_strides(in_);
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (!repeats_.constant && !repeats_match()) return;
    const int nd = static_cast<int>(in_.size());
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
  bool repeats_match() {
    IntValues repeats;
    int64_t dims[KITE_MAX_RANK];
    kite::ops::RuleError err;
    const int64_t rank = static_cast<int64_t>(in_.size());
    if (!repeats.read(repeats_) || repeats.count != rank) {
      set_error("repeats has %lld values, the input has %lld dims",
                static_cast<long long>(repeats_.count), static_cast<long long>(rank));
      return false;
    }
    if (!kite::ops::resolve_tile(in_.data(), rank, repeats.v, dims, &err)) return rule_failed(err);
    return gives_declared("repeats", dims, rank, out_);
  }

  size_t es_;
  Shape in_, out_, in_strides_;
  IntSource repeats_;
  const char* data_;
  char* result_;
};

std::string check_repeat(const OpNode& op, const char* what) {
  if (op.inputs.size() < 2 || !op.has_input(0) || !op.has_input(1)) {
    return std::string("needs input and ") + what;
  }
  std::string why = expect_movable(op, 0);
  return why.empty() ? expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32}) : why;
}

}  // namespace

std::string check_expand(const OpNode& op) { return check_repeat(op, "shape"); }

// The declared output is the op rule's broadcast when the shape value is a
// constant (checked before prepare); a computed one is checked at run.
std::unique_ptr<Kernel> prepare_expand(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  return std::make_unique<ExpandKernel>(op, movable_element_size(op.inputs[0].dtype),
                                        op.inputs[0].shape, output_shape(args, 0),
                                        IntSource::input(args, 1), args.input_data(0),
                                        args.output_data(0));
}

std::string check_tile(const OpNode& op) { return check_repeat(op, "repeats"); }

std::unique_ptr<Kernel> prepare_tile(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  return std::make_unique<TileKernel>(op, movable_element_size(op.inputs[0].dtype),
                                      op.inputs[0].shape, output_shape(args, 0),
                                      IntSource::input(args, 1),
                                      static_cast<const char*>(args.input_data(0)),
                                      static_cast<char*>(args.output_data(0)));
}

}  // namespace kite::cpu
