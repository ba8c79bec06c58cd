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

bool window_2d(const kite::ops::WindowGeometry& g, Window2d* out) {
  const size_t r = g.input.size();
  if (r != 1 && r != 2) return false;
  Window2d w;
  if (r == 2) {
    w.h = g.input[0];
    w.oh = g.output[0];
    w.kh = g.kernel[0];
    w.sh = g.strides[0];
    w.dh = g.dilations[0];
    w.ph = g.pads_begin[0];
    w.ph_end = g.pads_end[0];
  }
  w.w = g.input[r - 1];
  w.ow = g.output[r - 1];
  w.kw = g.kernel[r - 1];
  w.sw = g.strides[r - 1];
  w.dw = g.dilations[r - 1];
  w.pw = g.pads_begin[r - 1];
  w.pw_end = g.pads_end[r - 1];
  *out = w;
  return true;
}

}  // namespace kite::abi::plan
