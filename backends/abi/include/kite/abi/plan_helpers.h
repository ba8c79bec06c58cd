// What the plan functions of every device backend (Vulkan, CUDA) use
// beyond their own kernels: the names they share, shape arithmetic, the
// fused-op helpers of the op rules. A backend's plan_util.h brings them
// into its namespace with `using namespace kite::abi::plan;` and binds its
// name to the checks of kite/abi/device_node.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kite/abi/device_node.h"
#include "kite/ops/op_node.h"
#include "kite/ops/resolve.h"

namespace kite::abi::plan {

using Shape = std::vector<int64_t>;
using kite::abi::broadcast_strides;
using kite::abi::constant_ints;
using kite::abi::input_label;
using kite::abi::NodeView;
using kite::ops::normalize_axis;  // -1 when out of range
using kite::ops::OpNode;
using kite::ops::TensorType;

// Elements of a shape (1 for a scalar).
int64_t numel(const Shape& s);
// Row-major element strides of a shape.
Shape strides_of(const Shape& s);

// The fused node as the primitive op it extends: the first num_inputs
// inputs, its attributes without the activation ones, one output.
OpNode primitive(const NodeView& n, const char* op_type, size_t num_inputs);
// "" when the primitive op's rules give declared output k.
std::string check_primitive_output(const NodeView& n, const OpNode& primitive_op, size_t k);
// "" when declared output k exists with this dtype and shape.
std::string expect_output(const NodeView& n, size_t k, kite_dtype dtype, const Shape& shape);

// A 1-D or 2-D window (Conv, pooling) as the 2-D one the GPU kernels take:
// a 1-D window is one of height 1 (input, output, kernel, stride and
// dilation 1, no pads).
struct Window2d {
  int64_t h = 1, w = 1;    // input
  int64_t oh = 1, ow = 1;  // output
  int64_t kh = 1, kw = 1;  // kernel
  int64_t sh = 1, sw = 1;  // strides
  int64_t dh = 1, dw = 1;  // dilations
  int64_t ph = 0, pw = 0;  // pads at the start
  int64_t ph_end = 0, pw_end = 0;
};
// False when g has neither 1 nor 2 spatial dims.
bool window_2d(const kite::ops::WindowGeometry& g, Window2d* out);

}  // namespace kite::abi::plan
