// Data movement that keeps element values: Identity, Reshape, Flatten,
// Squeeze, Unsqueeze, Dropout (a copy unless in place), Concat, Transpose,
// Split, Shape and Size. Any dtype: these move bytes.
#include <algorithm>
#include <string>
#include <vector>

#include "common.h"
#include "fused_kernels.h"
#include "kernels.h"
#include "transpose_tiles.h"

namespace kite::cpu {
namespace {

constexpr int64_t kCopyChunkBytes = 1 << 16;

// Concat and Split move one block per (outer index, part) between a whole
// tensor (whole_block bytes per outer index) and its parts along an axis:
// copy(o, k) for every pair, in parallel chunks of about kCopyChunkBytes.
template <typename F>
void for_each_block(ThreadPool& pool, int64_t outer, int64_t nparts, int64_t whole_block, F&& copy) {
  const int64_t tasks = outer * nparts;
  if (tasks == 0 || whole_block == 0) return;
  const int64_t avg = std::max<int64_t>(1, whole_block / nparts);
  pool.parallel_for(tasks, std::max<int64_t>(1, kCopyChunkBytes / avg),
                    [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) copy(t / nparts, t % nparts);
  });
}

// Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout. When Reshape's
// shape (or Squeeze/Unsqueeze's axes) is computed, run checks that its value
// gives the declared output shape.
class CopyKernel : public CheckedKernel {
 public:
  CopyKernel(const OpNode& op, const void* in, void* out, size_t bytes)
      : CheckedKernel(op), op_(op.op), in_(in), out_(out), bytes_(bytes) {}

  void set_mask(uint8_t* mask, int64_t n) {
    mask_ = mask;
    mask_n_ = n;
  }
  // A value input (Reshape's shape, Squeeze/Unsqueeze's axes) computed at
  // run: run resolves it with the op rule's function and checks it gives
  // the declared output shape.
  void check_value(IntSource value, Shape in_shape, Shape out_shape, bool allow_zero) {
    value_ = std::move(value);
    in_shape_ = std::move(in_shape);
    out_shape_ = std::move(out_shape);
    allow_zero_ = allow_zero;
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (value_.present() && !value_matches()) return;
    if (in_ != out_ && bytes_ > 0) {
      const char* src = static_cast<const char*>(in_);
      char* dst = static_cast<char*>(out_);
      const int64_t bytes = static_cast<int64_t>(bytes_);
      pool.parallel_for(bytes, 1 << 20, [&](int64_t b, int64_t e) {
        std::memcpy(dst + b, src + b, static_cast<size_t>(e - b));
      });
    }
    if (mask_) std::memset(mask_, 1, static_cast<size_t>(mask_n_));
  }

 private:
  bool value_matches() {
    IntValues v;
    if (!v.read(value_)) {
      set_error("value input has %lld entries", static_cast<long long>(value_.count));
      return false;
    }
    const int64_t in_rank = static_cast<int64_t>(in_shape_.size());
    int64_t dims[KITE_MAX_RANK * 2];
    int64_t rank = v.count;
    kite::ops::RuleError err;
    bool ok = false;
    if (op_ == "Reshape") {
      ok = kite::ops::resolve_reshape(in_shape_.data(), in_rank, v.v, v.count, allow_zero_, dims, &err);
    } else if (op_ == "Squeeze") {
      ok = kite::ops::resolve_squeeze(in_shape_.data(), in_rank, v.v, v.count, true, dims, &rank, &err);
    } else {
      ok = kite::ops::resolve_unsqueeze(in_shape_.data(), in_rank, v.v, v.count, dims, &rank, &err);
    }
    if (!ok) return rule_failed(err);
    return gives_declared(op_ == "Reshape" ? "shape" : "axes", dims, rank, out_shape_);
  }

  std::string op_;
  const void* in_;
  void* out_;
  size_t bytes_;
  uint8_t* mask_ = nullptr;
  int64_t mask_n_ = 0;
  IntSource value_;
  Shape in_shape_, out_shape_;
  bool allow_zero_ = false;
};

class ConcatKernel : public Kernel {
 public:
  struct Part {
    const char* data;
    int64_t block;   // bytes per outer index
    int64_t offset;  // byte offset inside the output's block
  };
  ConcatKernel(std::vector<Part> parts, int64_t outer, int64_t out_block, char* out)
      : parts_(std::move(parts)), outer_(outer), out_block_(out_block), out_(out) {}

  void run(ThreadPool& pool) override {
    for_each_block(pool, outer_, static_cast<int64_t>(parts_.size()), out_block_,
                   [&](int64_t o, int64_t k) {
      const Part& p = parts_[k];
      char* dst = out_ + o * out_block_ + p.offset;
      const char* src = p.data + o * p.block;
      // The memory plan may have had the producer write straight into the
      // output (a Concat view): then there is nothing to copy.
      if (p.block > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(p.block));
    });
  }

 private:
  std::vector<Part> parts_;
  int64_t outer_, out_block_;
  char* out_;
};

// Output-order iteration over a permuted input, dims collapsed.
template <typename T>
void transpose(const T* in, T* out, const Shape& dims, const Shape& in_strides,
               ThreadPool& pool) {
  const int nd = static_cast<int>(dims.size());
  const int64_t inner = dims[nd - 1];
  const int64_t inner_stride = in_strides[nd - 1];
  // The last two output dims a 2-D transpose of the input (rows contiguous
  // in it), under at most one batch dim: tiles.
  if (nd >= 2 && nd <= 3 && in_strides[nd - 2] == 1 && inner_stride > 1 && dims[nd - 2] >= 8 &&
      inner >= 8) {
    const int64_t batch = nd == 3 ? dims[0] : 1;
    const int64_t batch_stride = nd == 3 ? in_strides[0] : 0;
    if (transpose_tiles(in, out, sizeof(T), batch, batch_stride, dims[nd - 2], inner, inner_stride,
                        pool)) {
      return;
    }
  }
  const int64_t rows = product(dims, 0, static_cast<size_t>(nd - 1));
  pool.parallel_for(rows, rows_per_chunk(inner, 8192), [&](int64_t begin, int64_t end) {
    int64_t index[KITE_MAX_RANK] = {};
    int64_t offset = 0;
    int64_t rest = begin;
    for (int d = nd - 2; d >= 0; --d) {
      index[d] = rest % dims[d];
      rest /= dims[d];
      offset += index[d] * in_strides[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* o = out + row * inner;
      const T* i = in + offset;
      if (inner_stride == 1) {
        std::memcpy(o, i, static_cast<size_t>(inner) * sizeof(T));
      } else {
        for (int64_t k = 0; k < inner; ++k) o[k] = i[k * inner_stride];
      }
      for (int d = nd - 2; d >= 0; --d) {
        offset += in_strides[d];
        if (++index[d] < dims[d]) break;
        offset -= index[d] * in_strides[d];
        index[d] = 0;
      }
    }
  });
}

class TransposeKernel : public Kernel {
 public:
  TransposeKernel(size_t element_size, Shape dims, Shape in_strides, const void* in, void* out,
                  int64_t numel)
      : element_size_(element_size), dims_(std::move(dims)), in_strides_(std::move(in_strides)),
        in_(in), out_(out), numel_(numel) {}

  void run(ThreadPool& pool) override {
    if (numel_ == 0) return;
    with_element_type(element_size_, [&](auto t) {
      using T = decltype(t);
      transpose(static_cast<const T*>(in_), static_cast<T*>(out_), dims_, in_strides_, pool);
    });
  }

 private:
  size_t element_size_;
  Shape dims_, in_strides_;
  const void* in_;
  void* out_;
  int64_t numel_;
};

class SplitKernel : public CheckedKernel {
 public:
  struct Part {
    char* data;
    int64_t block;   // bytes per outer index
    int64_t offset;  // byte offset inside the input's block
    int64_t size;    // dim along the axis (for the run-time check)
  };
  SplitKernel(const OpNode& op, std::vector<Part> parts, int64_t outer, int64_t in_block,
              const char* in)
      : CheckedKernel(op), parts_(std::move(parts)), outer_(outer), in_block_(in_block), in_(in) {}

  // A computed split input: run resolves it with the op rule's function and
  // checks it against the declared outputs' sizes.
  void check_split(IntSource split, int64_t dim) {
    split_ = std::move(split);
    dim_ = dim;
    sizes_.resize(parts_.size());
    resolved_.resize(parts_.size());
  }

  void run(ThreadPool& pool) override {
    clear_error();
    if (split_.present() && !split_matches()) return;
    for_each_block(pool, outer_, static_cast<int64_t>(parts_.size()), in_block_,
                   [&](int64_t o, int64_t k) {
      const Part& p = parts_[k];
      if (p.block > 0) {
        std::memcpy(p.data + o * p.block, in_ + o * in_block_ + p.offset,
                    static_cast<size_t>(p.block));
      }
    });
  }

 private:
  bool split_matches() {
    const int64_t n = static_cast<int64_t>(parts_.size());
    kite::ops::RuleError err;
    if (split_.count != n || !split_.read(sizes_.data(), n)) {
      set_error("split has %lld values for %lld outputs", static_cast<long long>(split_.count),
                static_cast<long long>(n));
      return false;
    }
    if (!kite::ops::resolve_split(dim_, n, sizes_.data(), false, resolved_.data(), &err)) {
      return rule_failed(err);
    }
    for (int64_t k = 0; k < n; ++k) {
      if (resolved_[k] != parts_[k].size) {
        set_error("split entry %lld is %lld, the declared output has %lld", static_cast<long long>(k),
                  static_cast<long long>(resolved_[k]), static_cast<long long>(parts_[k].size));
        return false;
      }
    }
    return true;
  }

  std::vector<Part> parts_;
  int64_t outer_, in_block_;
  const char* in_;
  IntSource split_;
  int64_t dim_ = 0;
  std::vector<int64_t> sizes_, resolved_;  // allocated at prepare, filled at run
};

class ShapeKernel : public Kernel {
 public:
  ShapeKernel(Shape values, int64_t* out) : values_(std::move(values)), out_(out) {}
  void run(ThreadPool&) override {
    if (!values_.empty()) std::memcpy(out_, values_.data(), values_.size() * sizeof(int64_t));
  }

 private:
  Shape values_;
  int64_t* out_;
};

// ChannelShuffle (fused, docs/FUSIONS.md): every output plane is one plane
// of the inputs, copied once. The copies go in contiguous ranges of the
// output planes, so each thread writes whole channels of the outputs (and
// the convolutions after them, which split 14x14 and 7x7 planes by
// channels, read them where they were written).
class ChannelShuffleKernel : public Kernel {
 public:
  ChannelShuffleKernel(std::vector<const char*> src, std::vector<char*> dst, int64_t plane_bytes)
      : src_(std::move(src)), dst_(std::move(dst)), plane_bytes_(plane_bytes) {}

  void run(ThreadPool& pool) override {
    const int64_t planes = static_cast<int64_t>(dst_.size());
    if (planes == 0 || plane_bytes_ == 0) return;
    // Chunks of 16 KiB at least (shufflenet_v2_x1_0 at 2 threads, Zen 4:
    // 1.3% faster than 64 KiB ones, which gave a thread two or three
    // chunks to balance with; all on the caller was 4% slower).
    constexpr int64_t kChunkBytes = 16 * 1024;
    pool.parallel_for(planes, std::max<int64_t>(1, kChunkBytes / plane_bytes_), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) std::memcpy(dst_[i], src_[i], static_cast<size_t>(plane_bytes_));
    });
  }

 private:
  std::vector<const char*> src_;  // per output plane, its source plane
  std::vector<char*> dst_;
  int64_t plane_bytes_;
};

}  // namespace

std::string check_copy(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  if (op.op == "Reshape" || op.op == "Squeeze" || op.op == "Unsqueeze") {
    std::string why = expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32});
    if (!why.empty()) return why;
  }
  return "";
}

std::unique_ptr<Kernel> prepare_copy(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  const Shape out = output_shape(args, 0);
  if (shape_numel(in) != shape_numel(out) || output_dtype(args, 0) != op.inputs[0].dtype) {
    return prepare_error(err, op, "output must hold the input's elements");
  }
  const size_t bytes = static_cast<size_t>(shape_numel(in)) * kite::ops::dtype_size(op.inputs[0].dtype);
  auto kernel = std::make_unique<CopyKernel>(op, args.input_data(0), args.output_data(0), bytes);
  if (op.op == "Dropout" && has_output(args, 1)) {
    if (output_dtype(args, 1) != KITE_DTYPE_BOOL || output_shape(args, 1) != in) {
      return prepare_error(err, op, "mask output must be bool of the input's shape");
    }
    kernel->set_mask(static_cast<uint8_t*>(args.output_data(1)), shape_numel(in));
  }
  const bool value_op = op.op == "Reshape" || op.op == "Squeeze" || op.op == "Unsqueeze";
  if (value_op && op.has_input(1) && op.inputs[1].data == nullptr) {
    kernel->check_value(IntSource::input(args, 1), in, out, op.attr_int("allowzero", 0) != 0);
  }
  return kernel;
}

std::string check_concat(const OpNode& op) {
  if (op.inputs.empty()) return "needs inputs";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.has_input(i)) return "inputs must all be present";
    if (op.inputs[i].dtype != op.inputs[0].dtype) return "inputs must have one dtype";
  }
  return expect_movable(op, 0);
}

// The inputs fit the output along every other axis: the op rule checked
// that before prepare (as for the outputs of Split, Transpose and Shape).
std::unique_ptr<Kernel> prepare_concat(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape out = output_shape(args, 0);
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), static_cast<int64_t>(out.size()));
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t es = static_cast<int64_t>(movable_element_size(op.inputs[0].dtype));
  const int64_t inner = product(out, a + 1, out.size()) * es;
  std::vector<ConcatKernel::Part> parts;
  int64_t offset = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int64_t block = op.inputs[i].shape[a] * inner;
    parts.push_back({static_cast<const char*>(args.input_data(static_cast<int>(i))), block, offset});
    offset += block;
  }
  return std::make_unique<ConcatKernel>(std::move(parts), product(out, 0, a), offset,
                                        static_cast<char*>(args.output_data(0)));
}

std::string check_transpose(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  return expect_movable(op, 0);
}

std::unique_ptr<Kernel> prepare_transpose(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const kite::ops::Attr* attr = op.find_attr("perm");
  int64_t perm[KITE_MAX_RANK];
  kite::ops::RuleError rule_err;
  if (!kite::ops::resolve_perm(rank, attr ? attr->ints.data() : nullptr,
                               attr ? static_cast<int64_t>(attr->ints.size()) : rank, perm,
                               &rule_err)) {
    return prepare_error(err, op, rule_err.message);
  }
  // Output dims with their input strides; drop size-1 dims and merge
  // neighbours that are also neighbours (in order) in the input.
  const Shape in_strides = contiguous_strides(in);
  Shape dims, strides;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = in[perm[i]];
    const int64_t s = in_strides[perm[i]];
    if (d == 1) continue;
    if (!dims.empty() && strides.back() == s * d) {
      dims.back() *= d;
      strides.back() = s;
    } else {
      dims.push_back(d);
      strides.push_back(s);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    strides.push_back(1);
  }
  return std::make_unique<TransposeKernel>(movable_element_size(op.inputs[0].dtype),
                                           std::move(dims), std::move(strides),
                                           args.input_data(0), args.output_data(0),
                                           shape_numel(in));
}

std::string check_split(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  std::string why = expect_movable(op, 0);
  return why.empty() ? expect_dtype(op, 1, {KITE_DTYPE_INT64, KITE_DTYPE_INT32}) : why;
}

std::unique_ptr<Kernel> prepare_split(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  const int64_t axis = normalize_axis(op.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  if (axis < 0) return prepare_error(err, op, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t es = static_cast<int64_t>(movable_element_size(op.inputs[0].dtype));
  const int64_t inner = product(in, a + 1, in.size()) * es;
  std::vector<SplitKernel::Part> parts;
  int64_t offset = 0;
  for (int k = 0; k < args.node->num_outputs; ++k) {
    if (!has_output(args, k)) return prepare_error(err, op, "every output must be present");
    const int64_t size = args.node->outputs[k]->shape[a];
    const int64_t block = size * inner;
    parts.push_back({static_cast<char*>(args.output_data(k)), block, offset, size});
    offset += block;
  }
  auto kernel = std::make_unique<SplitKernel>(op, std::move(parts), product(in, 0, a), offset,
                                              static_cast<const char*>(args.input_data(0)));
  if (op.has_input(1) && op.inputs[1].data == nullptr) {
    kernel->check_split(IntSource::input(args, 1), in[a]);
  }
  return kernel;
}

std::string check_shape(const OpNode& op) {
  if (op.inputs.empty() || !op.has_input(0)) return "needs an input";
  return "";
}

std::unique_ptr<Kernel> prepare_shape(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& in = op.inputs[0].shape;
  if (!has_output(args, 0)) return prepare_error(err, op, "output is missing");
  if (op.op == "Size") {
    return std::make_unique<ShapeKernel>(Shape{shape_numel(in)},
                                         static_cast<int64_t*>(args.output_data(0)));
  }
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t begin = 0, end = 0;
  kite::ops::shape_op_range(rank, op.attr_int("start", 0), op.attr_int("end", rank), &begin, &end);
  return std::make_unique<ShapeKernel>(Shape(in.begin() + begin, in.begin() + end),
                                       static_cast<int64_t*>(args.output_data(0)));
}

// The shuffled tensor is the inputs concatenated along channels ([N, C,
// H, W]) with channel s = i * group + j taken from channel j * (C / group)
// + i; output k is its channels [channel_starts[k], + its own channels).
std::string check_fused_channel_shuffle(const OpNode& op, const std::string& pattern,
                                        const std::vector<TensorType>& outputs) {
  const bool concat = pattern == "Concat+ChannelShuffle" || pattern == "Concat+ChannelShuffle+Slice";
  const bool slices = pattern == "ChannelShuffle+Slice" || pattern == "Concat+ChannelShuffle+Slice";
  if (!concat && !slices && pattern != "ChannelShuffle") {
    return "pattern '" + pattern + "' is not [Concat+]ChannelShuffle[+Slice]";
  }
  if (op.inputs.empty() || (!concat && op.inputs.size() != 1)) return "expects one input, or a Concat's";
  if (outputs.empty() || (!slices && outputs.size() != 1)) return "expects one output, or a Slice's each";
  const Shape& first = op.inputs[0].shape;
  if (first.size() != 4) return input_label(op, 0) + " must be [N, C, H, W]";
  int64_t channels = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorType& t = op.inputs[i];
    if (!t.present) return "inputs must all be present";
    std::string why = expect_movable(op, i);
    if (!why.empty()) return why;
    if (t.dtype != op.inputs[0].dtype || t.shape.size() != 4 || t.shape[0] != first[0] ||
        t.shape[2] != first[2] || t.shape[3] != first[3]) {
      return input_label(op, i) + " must be [N, C, H, W] of input 0's N, H, W and dtype";
    }
    channels += t.shape[1];
  }
  const int64_t group = op.attr_int("group", 0);
  if (group < 1 || channels % group != 0) {
    return "group " + std::to_string(group) + " does not divide the " + std::to_string(channels) + " channels";
  }
  const std::vector<int64_t> starts = op.attr_ints("channel_starts", {});
  if (starts.size() != outputs.size()) return "channel_starts needs one entry per output";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorType& o = outputs[k];
    const std::string label = "output '" + o.name + "'";
    if (o.dtype != op.inputs[0].dtype || o.shape.size() != 4 || o.shape[0] != first[0] ||
        o.shape[2] != first[2] || o.shape[3] != first[3]) {
      return label + " must be [N, C, H, W] of the inputs' N, H, W and dtype";
    }
    if (starts[k] < 0 || o.shape[1] > channels - starts[k] || (!slices && (starts[k] != 0 || o.shape[1] != channels))) {
      return label + "'s channels from " + std::to_string(starts[k]) + " do not fit the " +
             std::to_string(channels) + " shuffled ones";
    }
  }
  return "";
}

std::unique_ptr<Kernel> prepare_fused_channel_shuffle(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& first = op.inputs[0].shape;
  const int64_t es = static_cast<int64_t>(movable_element_size(op.inputs[0].dtype));
  const int64_t plane_bytes = first[2] * first[3] * es;
  std::vector<int64_t> part_begin;  // each input's first channel in the concatenation
  int64_t channels = 0;
  for (const TensorType& t : op.inputs) {
    part_begin.push_back(channels);
    channels += t.shape[1];
  }
  const int64_t group = op.attr_int("group", 1), per_group = channels / group;
  const std::vector<int64_t> starts = op.attr_ints("channel_starts", {});
  std::vector<const char*> src;
  std::vector<char*> dst;
  for (int64_t n = 0; n < first[0]; ++n) {
    for (size_t k = 0; k < starts.size(); ++k) {
      if (!has_output(args, static_cast<int>(k))) return prepare_error(err, op, "every output must be present");
      const int64_t ck = output_shape(args, static_cast<int>(k))[1];
      char* out = static_cast<char*>(args.output_data(static_cast<int>(k)));
      for (int64_t c = 0; c < ck; ++c) {
        const int64_t s = starts[k] + c;
        const int64_t q = s % group * per_group + s / group;  // the concatenation's channel
        const size_t p = static_cast<size_t>(std::upper_bound(part_begin.begin(), part_begin.end(), q) -
                                             part_begin.begin() - 1);
        const char* in = static_cast<const char*>(args.input_data(static_cast<int>(p)));
        src.push_back(in + (n * op.inputs[p].shape[1] + q - part_begin[p]) * plane_bytes);
        dst.push_back(out + (n * ck + c) * plane_bytes);
      }
    }
  }
  return std::make_unique<ChannelShuffleKernel>(std::move(src), std::move(dst), plane_bytes);
}

}  // namespace kite::cpu
