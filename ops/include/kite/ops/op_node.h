// Operator descriptions shared by the converter and the backends.
//
// One implementation of each op's shape and dtype rules serves both sides:
// the converter infers shapes with it, and a backend's prepare step checks
// that the shapes a file declares are the ones the op produces, so a hostile
// file cannot make a kernel read or write out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "kite/kite.h"
#include "kite/ops/attr.h"

namespace kite::ops {

// Bytes per element (0 for undefined).
size_t dtype_size(kite_dtype dtype);
const char* dtype_name(kite_dtype dtype);
// ONNX TensorProto.DataType <-> kite_dtype (Cast's 'to' attribute holds the
// ONNX value). UNDEFINED / 0 for types Kite does not have.
kite_dtype dtype_from_onnx(int64_t onnx_type);
int64_t dtype_to_onnx(kite_dtype dtype);

// Product of dims; false when a dim is negative or the product (or the byte
// size) overflows int64.
bool checked_numel(const std::vector<int64_t>& shape, int64_t* out);
bool checked_byte_size(kite_dtype dtype, const std::vector<int64_t>& shape, uint64_t* out);
std::string shape_string(const std::vector<int64_t>& shape);  // "1x3x224x224", "scalar"

// "Conv 'layer1.0.conv1'": how every message names a node (the converter,
// the runtime and the backends alike).
std::string node_label(const std::string& op, const std::string& name);

struct TensorType {
  bool present = true;        // false: absent optional input
  std::string name;
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // the value, when known (constants); else null

  int64_t numel() const;       // assumes a valid shape
  int rank() const { return static_cast<int>(shape.size()); }
};

struct OpNode {
  std::string name;
  std::string op;
  std::string domain;
  std::vector<TensorType> inputs;
  std::vector<Attr> attrs;
  int num_outputs = 1;
  // Which outputs the graph uses (ONNX "" output / ABI NULL entry: unused).
  // Empty means all num_outputs are used. Ops with an unsupported optional
  // output (MaxPool's Indices, BatchNormalization's training outputs) accept
  // the output slot when it is unused.
  std::vector<bool> outputs_used;

  const Attr* find_attr(const std::string& attr_name) const;
  int64_t attr_int(const std::string& attr_name, int64_t fallback) const;
  float attr_float(const std::string& attr_name, float fallback) const;
  std::string attr_string(const std::string& attr_name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& attr_name,
                                 const std::vector<int64_t>& fallback) const;
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].present; }
  bool uses_output(int k) const {
    return k >= 0 && k < num_outputs &&
           (outputs_used.empty() || (static_cast<size_t>(k) < outputs_used.size() && outputs_used[k]));
  }
  std::string label() const { return node_label(op, name); }
};

// Builds the OpNode the shape rules read from a graph node, for the
// converter's IR and the loaded model alike, so both see the same node:
// `node` has name, op, domain, attrs, inputs (tensor indices, negative =
// absent) and outputs; describe(index, &type) fills a present input's name,
// dtype, shape and, for a constant, data (through constant_value), and
// returns false for an absent one.
template <typename Node, typename Describe>
OpNode make_op_node(const Node& node, Describe describe) {
  OpNode op;
  op.name = node.name;
  op.op = node.op;
  op.domain = node.domain;
  op.attrs = node.attrs;
  op.num_outputs = static_cast<int>(node.outputs.size());
  op.inputs.reserve(node.inputs.size());
  for (int index : node.inputs) {
    TensorType type;
    if (index < 0 || !describe(index, &type)) {
      type = TensorType{};
      type.present = false;
    }
    op.inputs.push_back(std::move(type));
  }
  return op;
}

// A constant's value for TensorType::data: its bytes, or for a zero-element
// constant (no bytes) a non-null pointer, since its empty value is known.
inline const void* constant_value(const void* bytes) {
  static const uint8_t kEmpty[8] = {};
  return bytes ? bytes : static_cast<const void*>(kEmpty);
}

// Builds an OpNode from a backend ABI node (copies names, shapes, attrs; keeps
// data pointers of constant inputs).
OpNode from_backend_node(const kite_backend_node& node);
// Same, but fails (with a message naming the node and the field) on a
// malformed ABI node: negative counts, NULL arrays, a rank outside
// [0, KITE_MAX_RANK], or a constant whose byte_size disagrees with its dtype
// and shape. The one-argument form never fails: it marks such a tensor with
// shape {-1} and such an attribute with type UNDEFINED, which infer_types and
// check_declared_outputs then reject. keep_constant_data=false drops the data
// pointers (for backends whose constants live in device memory).
bool from_backend_node(const kite_backend_node& node, OpNode* out, std::string* err,
                       bool keep_constant_data = true);
// The ABI node's outputs as TensorTypes (NULL entry: present=false), for
// check_declared_outputs. Never keeps data pointers.
std::vector<TensorType> outputs_from_backend_node(const kite_backend_node& node);

// Computes the outputs' dtypes and shapes from the inputs and attributes.
// Returns false with a message naming the node, the tensor and the bad value
// (e.g. "Conv 'c1': input 'x' has 3 dims, expected 4"). outputs gets
// num_outputs entries; one the node does not use (see OpNode::outputs_used)
// comes back with present=false. Inputs whose value shapes the output
// (Reshape's shape, Slice's starts, ...) must have data; if not, the message
// names the input and says its value must be known at convert time.
// If is not inferred here: its outputs come from its branches.
bool infer_types(const OpNode& node, std::vector<TensorType>* outputs, std::string* err);

// True if infer_types knows this op (domain "" / ai.onnx).
bool is_known_op(const std::string& op);
// Ops whose result differs from run to run (random generators): never
// computed once and reused, so not folded into a constant and not merged
// with an equal node.
bool is_nondeterministic_op(const std::string& op);
std::vector<std::string> known_ops();

// Checks that declared outputs match what infer_types computes (dtype and
// shape). Used by backends at prepare time. declared must hold num_outputs
// entries; an entry with present=false (an unused optional output) is not
// checked. When inference fails only because an input's value is not known
// (Reshape's shape, Slice's starts, ... not constant), the declared outputs
// are instead checked to be self-consistent with what is known (dtype, rank,
// element count, ...); kernels of such nodes must check the runtime values.
bool check_declared_outputs(const OpNode& node, const std::vector<TensorType>& declared,
                            std::string* err);

// Numpy-style broadcast of two shapes; false if incompatible.
bool broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                      std::vector<int64_t>* out);
// The element of `in` that a numpy broadcast of it to `out` reads for
// element `flat` (row-major) of `out`. in has at most out's rank and each of
// its dims is 1 or out's (aligned right).
int64_t broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                        int64_t flat);

// Geometry of a sliding-window op (Conv, ConvTranspose, MaxPool,
// AveragePool) with auto_pad resolved into explicit pads, so kernels do not
// re-derive it. Sizes are per spatial axis.
struct WindowGeometry {
  std::vector<int64_t> input;        // spatial input dims
  std::vector<int64_t> output;       // spatial output dims
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output_padding;  // ConvTranspose only, else zeros
  int64_t group = 1;                    // Conv, ConvTranspose
};
// Validates the node like infer_types and fills the geometry.
bool window_geometry(const OpNode& node, WindowGeometry* out, std::string* err);

}  // namespace kite::ops
