// Gather: blocks of the data picked by an index tensor. Constant indices
// were checked by the op rule; computed ones are checked at run.
#include <algorithm>
#include <string>

#include "common.h"
#include "kernels.h"

namespace kite::cpu {
namespace {

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

}  // namespace

std::string check_gather(const OpNode& op) {
  if (op.inputs.size() < 2 || !op.has_input(0) || !op.has_input(1)) return "needs data and indices";
  std::string why = expect_movable(op, 0);
  return why.empty() ? expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32}) : why;
}

// The output shape (data[:axis] + indices + data[axis+1:]) is the op rule's,
// which the backend checked against the declared output before prepare.
std::unique_ptr<Kernel> prepare_gather(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& data = op.inputs[0].shape;
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), static_cast<int64_t>(data.size()));
  if (axis < 0 || !has_output(args, 0)) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t es = static_cast<int64_t>(movable_element_size(op.inputs[0].dtype));
  return std::make_unique<GatherKernel>(
      op, product(data, 0, a), data[a], product(data, a + 1, data.size()) * es,
      static_cast<const char*>(args.input_data(0)), args.input_data(1), op.inputs[1].dtype,
      shape_numel(op.inputs[1].shape), static_cast<char*>(args.output_data(0)));
}

}  // namespace kite::cpu
