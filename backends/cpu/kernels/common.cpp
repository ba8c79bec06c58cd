#include "common.h"

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

std::string expect_constant(const OpNode& op, size_t i, const char* role) {
  if (!op.has_input(i) || op.inputs[i].data != nullptr) return "";
  return std::string(role) + " " + input_label(op, i) + " must be a constant";
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
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

void CheckedKernel::set_error(const char* format, ...) {
  int n = std::snprintf(error_, sizeof(error_), "%s: ", label_.c_str());
  if (n < 0) n = 0;
  if (static_cast<size_t>(n) >= sizeof(error_)) return;
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(error_ + n, sizeof(error_) - static_cast<size_t>(n), format, ap);
  va_end(ap);
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

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): round to nearest even
    if (abs < 0x33000000u) return sign;
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias exponent and round the mantissa to nearest even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t remainder = abs & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace kite::cpu
