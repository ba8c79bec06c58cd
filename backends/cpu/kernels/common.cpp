#include "common.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace kite::cpu {

std::unique_ptr<Kernel> prepare_error(std::string* err, const OpNode& op,
                                      const std::string& what) {
  if (err) *err = op.label() + ": " + what;
  return nullptr;
}

int64_t shape_numel(const Shape& shape) { return product(shape, 0, shape.size()); }

int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

bool has_output(const KernelArgs& args, int i) {
  return i < args.node->num_outputs && args.node->outputs[i] != nullptr;
}

Shape output_shape(const KernelArgs& args, int i) {
  const kite_backend_tensor* t = args.node->outputs[i];
  return Shape(t->shape, t->shape + t->rank);
}

kite_dtype output_dtype(const KernelArgs& args, int i) { return args.node->outputs[i]->dtype; }

std::string input_label(const OpNode& op, size_t i) {
  if (i < op.inputs.size() && !op.inputs[i].name.empty()) {
    return "input '" + op.inputs[i].name + "'";
  }
  return "input " + std::to_string(i);
}

std::string expect_dtype(const OpNode& op, size_t i, std::initializer_list<kite_dtype> allowed) {
  if (!op.has_input(i)) return "";
  const kite_dtype d = op.inputs[i].dtype;
  std::string names;
  for (kite_dtype a : allowed) {
    if (a == d) return "";
    names += names.empty() ? "" : ", ";
    names += kite::ops::dtype_name(a);
  }
  return input_label(op, i) + " has dtype " + kite::ops::dtype_name(d) +
         ", the CPU kernel takes " + names;
}

std::string expect_dtypes(const OpNode& op, size_t first, size_t end,
                          std::initializer_list<kite_dtype> allowed) {
  for (size_t i = first; i < end && i < op.inputs.size(); ++i) {
    std::string why = expect_dtype(op, i, allowed);
    if (!why.empty()) return why;
  }
  return "";
}

std::string expect_constant(const OpNode& op, size_t i, const char* role) {
  if (!op.has_input(i) || op.inputs[i].data != nullptr) return "";
  return std::string(role) + " " + input_label(op, i) + " must be a constant";
}

size_t movable_element_size(kite_dtype d) {
  const size_t s = kite::ops::dtype_size(d);
  return s == 1 || s == 2 || s == 4 || s == 8 ? s : 0;
}

std::string expect_movable(const OpNode& op, size_t i) {
  if (!op.has_input(i) || movable_element_size(op.inputs[i].dtype) != 0) return "";
  return input_label(op, i) + " has dtype " + kite::ops::dtype_name(op.inputs[i].dtype) +
         ", which the CPU kernel cannot move";
}

void read_int64s(const void* data, kite_dtype dtype, int64_t n, int64_t* out) {
  if (dtype == KITE_DTYPE_INT32) {
    const int32_t* p = static_cast<const int32_t*>(data);
    for (int64_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    std::memcpy(out, data, static_cast<size_t>(n) * sizeof(int64_t));
  }
}

double read_scalar(const void* data, kite_dtype dtype) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32: return *static_cast<const float*>(data);
    case KITE_DTYPE_INT32: return *static_cast<const int32_t*>(data);
    case KITE_DTYPE_INT64: return static_cast<double>(*static_cast<const int64_t*>(data));
    case KITE_DTYPE_FLOAT16: return half_to_float(*static_cast<const uint16_t*>(data));
    case KITE_DTYPE_INT8: return *static_cast<const int8_t*>(data);
    case KITE_DTYPE_UINT8:
    case KITE_DTYPE_BOOL: return *static_cast<const uint8_t*>(data);
    default: return 0.0;
  }
}

IntSource IntSource::input(const KernelArgs& args, size_t i) {
  IntSource s;
  const OpNode& op = *args.op;
  if (!op.has_input(i)) return s;
  s.data = args.input_data(static_cast<int>(i));
  s.dtype = op.inputs[i].dtype;
  s.count = shape_numel(op.inputs[i].shape);
  s.constant = op.inputs[i].data != nullptr;
  return s;
}

IntSource IntSource::attribute(const OpNode& op, const char* name) {
  IntSource s;
  if (!op.find_attr(name)) return s;
  s.attr = op.attr_ints(name, {});
  s.count = static_cast<int64_t>(s.attr.size());
  return s;
}

bool IntSource::read(int64_t* out, int64_t capacity) const {
  if (count > capacity) return false;
  if (count <= 0) return true;
  if (data) {
    read_int64s(data, dtype, count, out);
  } else {
    std::copy(attr.begin(), attr.begin() + count, out);
  }
  return true;
}

void CheckedKernel::set_error(const char* format, ...) {
  int n = std::snprintf(error_, sizeof(error_), "%s: ", label_.c_str());
  if (n < 0) n = 0;
  if (static_cast<size_t>(n) >= sizeof(error_)) return;
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(error_ + n, sizeof(error_) - static_cast<size_t>(n), format, ap);
  va_end(ap);
}

bool CheckedKernel::rule_failed(const kite::ops::RuleError& e) {
  set_error("%s", e.message);
  return false;
}

namespace {
// "2x3x4" (or "scalar") into a fixed buffer.
void format_shape(const int64_t* dims, int64_t rank, char* out, size_t size) {
  if (rank == 0) {
    std::snprintf(out, size, "scalar");
    return;
  }
  size_t used = 0;
  out[0] = '\0';
  for (int64_t d = 0; d < rank && used + 1 < size; ++d) {
    const int n = std::snprintf(out + used, size - used, "%s%lld", d ? "x" : "",
                                static_cast<long long>(dims[d]));
    if (n < 0) break;
    used += static_cast<size_t>(n);
  }
}
}  // namespace

bool CheckedKernel::gives_declared(const char* what, const int64_t* dims, int64_t rank,
                                   const Shape& declared) {
  if (rank == static_cast<int64_t>(declared.size()) && std::equal(dims, dims + rank, declared.begin())) {
    return true;
  }
  char got[96], want[96];
  format_shape(dims, rank, got, sizeof(got));
  format_shape(declared.data(), static_cast<int64_t>(declared.size()), want, sizeof(want));
  set_error("the %s value gives shape %s, the declared output is %s", what, got, want);
  return false;
}

BroadcastPlan make_broadcast_plan(const Shape& out, std::initializer_list<const Shape*> inputs) {
  BroadcastPlan plan;
  plan.num_inputs = static_cast<int>(inputs.size());
  const size_t rank = out.size();
  // Aligned strides per input (numpy: align trailing dims).
  std::vector<Shape> aligned;
  for (const Shape* in : inputs) {
    Shape s(rank, 0);
    const Shape cs = contiguous_strides(*in);
    const size_t lead = rank - in->size();
    for (size_t d = lead; d < rank; ++d) {
      const int64_t dim = (*in)[d - lead];
      s[d] = dim == 1 ? 0 : cs[d - lead];
    }
    aligned.push_back(std::move(s));
  }
  plan.numel = shape_numel(out);
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = !plan.dims.empty();
    for (int k = 0; merge && k < plan.num_inputs; ++k) {
      merge = plan.strides[k].back() == aligned[k][d] * out[d];
    }
    if (merge) {
      plan.dims.back() *= out[d];
      for (int k = 0; k < plan.num_inputs; ++k) plan.strides[k].back() = aligned[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (int k = 0; k < plan.num_inputs; ++k) plan.strides[k].push_back(aligned[k][d]);
    }
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    for (int k = 0; k < plan.num_inputs; ++k) plan.strides[k].push_back(0);
  }
  plan.inner = plan.dims.back();
  plan.rows = product(plan.dims, 0, plan.dims.size() - 1);
  for (int k = 0; k < plan.num_inputs; ++k) plan.inner_stride[k] = plan.strides[k].back();
  return plan;
}

}  // namespace kite::cpu
