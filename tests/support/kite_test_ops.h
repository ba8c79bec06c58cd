// The inputs and outputs of a kite::ops::OpNode under test, built in one
// call: a typed tensor (with its constant value, if any) or an absent
// optional one.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kite/ops/op_node.h"

namespace kite::test {

inline ops::TensorType tensor(const std::string& name, std::vector<int64_t> shape,
                              kite_dtype dtype = KITE_DTYPE_FLOAT32, const void* data = nullptr) {
  ops::TensorType t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = data;
  return t;
}

inline ops::TensorType absent() {
  ops::TensorType t;
  t.present = false;
  return t;
}

}  // namespace kite::test
