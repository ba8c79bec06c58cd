#include "kite/abi/plan_helpers.h"

#include "kite/ops/fused.h"

namespace kite::abi::plan {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

OpNode primitive(const NodeView& n, const char* op_type, size_t num_inputs) {
  return kite::ops::fused_primitive(n.op, op_type, num_inputs);
}

std::string check_primitive_output(const NodeView& n, const OpNode& primitive_op, size_t k) {
  return kite::ops::check_primitive_output(primitive_op, n.outputs, k);
}

std::string expect_output(const NodeView& n, size_t k, kite_dtype dtype, const Shape& shape) {
  return kite::ops::expect_declared_output(n.outputs, k, dtype, shape);
}

}  // namespace kite::abi::plan
