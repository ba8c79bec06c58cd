// A v2 node as a device backend's plan functions see it (Vulkan, CUDA): the
// shared op rules' view of it (shapes, attributes, constants' host bytes)
// next to the ABI tensors the kernels bind. Building it runs the checks every
// device backend makes before it looks for a kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "kite/ops/op_node.h"

namespace kite::abi {

struct NodeView {
  const kite_backend_node2* node = nullptr;
  kite::ops::OpNode op;                        // shapes, attributes; constants' host bytes
  std::vector<kite::ops::TensorType> outputs;  // declared outputs
  std::string pattern;                         // fused_pattern ("" for primitives)

  const kite_backend_tensor2* in(size_t i) const {
    return i < static_cast<size_t>(node->num_inputs) ? node->inputs[i] : nullptr;
  }
  const kite_backend_tensor2* out(size_t i) const {
    return i < static_cast<size_t>(node->num_outputs) ? node->outputs[i] : nullptr;
  }
  const std::vector<int64_t>& in_shape(size_t i) const { return op.inputs[i].shape; }
  const std::vector<int64_t>& out_shape(size_t i) const { return outputs[i].shape; }
  bool fused() const { return !pattern.empty(); }
};

// "" and *view, or why the node cannot be planned: malformed arrays, a
// tensor with an old struct_size, what the op rules reject
// (kite::ops::from_backend_node over the node's v1 view), no op type, a
// fused pattern outside domain "kite" or a primitive outside ai.onnx.
// *label is the node's label once the op rules have read it.
std::string view_node(const kite_backend_node2& node, NodeView* view, std::string* label);

// For a primitive node, once a backend has a kernel for it: its op has shape
// rules and the declared outputs are what they give, so a hostile file
// cannot make a kernel write outside its tensors. "" or why not.
std::string check_declared_outputs(const NodeView& view);

// Checks the plan functions make, worded alike on every device backend;
// `backend` names it in the message ("Vulkan", "CUDA").
std::string input_label(const NodeView& n, size_t i);  // "input 1 'w'"
// "" when input i is present with one of the dtypes.
std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes, const char* backend);
// "" when input i is a constant whose host bytes are readable.
std::string expect_constant(const NodeView& n, size_t i, const char* what, const char* backend);
// fp16 storage: the storage of the node's float tensors, the present inputs
// `inputs` and every float output, all float32 (*half false) or all float16
// (*half true). An input of another dtype, or float16 mixed with float32,
// is why not.
std::string float_storage(const NodeView& n, const std::vector<size_t>& inputs, const char* backend, bool* half);
// A constant int32/int64 input's values (empty when it has no host bytes).
std::vector<int64_t> constant_ints(const kite::ops::TensorType& t);
// A reduction's axes: input 1 (opset 18; it must be a constant) or else the
// attribute `axes`. "" and *axes (as given: not normalized), or why not.
std::string reduce_axes_of(const NodeView& n, std::vector<int64_t>* axes, const char* backend);
// Element strides that read a tensor of `shape` broadcast (numpy rules,
// aligned at the last dim) to `out`: 0 on broadcast dims.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& out);

}  // namespace kite::abi
