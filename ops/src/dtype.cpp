// Element types and overflow-checked sizes of tensors.
#include <algorithm>
#include <limits>

#include "kite/ops/op_node.h"
#include "kite/ops/resolve.h"

namespace kite::ops {

size_t dtype_size(kite_dtype dtype) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32: return 4;
    case KITE_DTYPE_INT64: return 8;
    case KITE_DTYPE_INT32: return 4;
    case KITE_DTYPE_BOOL: return 1;
    case KITE_DTYPE_FLOAT16: return 2;
    case KITE_DTYPE_INT8: return 1;
    case KITE_DTYPE_UINT8: return 1;
    case KITE_DTYPE_UNDEFINED: break;
  }
  return 0;
}

const char* dtype_name(kite_dtype dtype) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32: return "float32";
    case KITE_DTYPE_INT64: return "int64";
    case KITE_DTYPE_INT32: return "int32";
    case KITE_DTYPE_BOOL: return "bool";
    case KITE_DTYPE_FLOAT16: return "float16";
    case KITE_DTYPE_INT8: return "int8";
    case KITE_DTYPE_UINT8: return "uint8";
    case KITE_DTYPE_UNDEFINED: return "undefined";
  }
  return "invalid";
}

// ONNX TensorProto.DataType values (onnx.proto).
kite_dtype dtype_from_onnx(int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return KITE_DTYPE_FLOAT32;
    case 2: return KITE_DTYPE_UINT8;
    case 3: return KITE_DTYPE_INT8;
    case 6: return KITE_DTYPE_INT32;
    case 7: return KITE_DTYPE_INT64;
    case 9: return KITE_DTYPE_BOOL;
    case 10: return KITE_DTYPE_FLOAT16;
    default: return KITE_DTYPE_UNDEFINED;
  }
}

int64_t dtype_to_onnx(kite_dtype dtype) {
  switch (dtype) {
    case KITE_DTYPE_FLOAT32: return 1;
    case KITE_DTYPE_UINT8: return 2;
    case KITE_DTYPE_INT8: return 3;
    case KITE_DTYPE_INT32: return 6;
    case KITE_DTYPE_INT64: return 7;
    case KITE_DTYPE_BOOL: return 9;
    case KITE_DTYPE_FLOAT16: return 10;
    case KITE_DTYPE_UNDEFINED: break;
  }
  return 0;
}

bool checked_numel(const std::vector<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

bool checked_byte_size(kite_dtype dtype, const std::vector<int64_t>& shape, uint64_t* out) {
  int64_t numel = 0;
  int64_t bytes = 0;
  const size_t elem = dtype_size(dtype);
  if (elem == 0 || !checked_numel(shape, &numel)) return false;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(elem), &bytes)) return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

bool broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                      std::vector<int64_t>* out) {
  std::vector<int64_t> result(std::max(a.size(), b.size()));
  int64_t rank = 0;
  if (!broadcast_dims(a.data(), static_cast<int64_t>(a.size()), b.data(),
                      static_cast<int64_t>(b.size()), result.data(), &rank)) {
    return false;
  }
  *out = std::move(result);
  return true;
}

int64_t broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                        int64_t flat) {
  int64_t index = 0, stride = 1;
  const size_t offset = out.size() - in.size();
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t coord = flat % out[d];
    flat /= out[d];
    if (d >= offset) {
      const int64_t dim = in[d - offset];
      if (dim != 1) index += coord * stride;
      stride *= dim;
    }
  }
  return index;
}

}  // namespace kite::ops
