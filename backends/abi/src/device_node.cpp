#include "kite/abi/device_node.h"

#include <algorithm>
#include <cstring>

#include "kite/abi/node.h"

namespace kite::abi {
namespace {

std::string tensor_name(const kite_backend_tensor2* t) { return t && t->name ? t->name : ""; }

// Constants carry their host bytes; everything else is on the device.
void* constant_host_data(const kite_backend_tensor2& t) {
  return t.is_constant ? const_cast<void*>(t.host_data) : nullptr;
}

}  // namespace

std::string view_node(const kite_backend_node2& node, NodeView* view, std::string* label) {
  if (node.num_inputs < 0 || node.num_outputs < 0 || node.num_attrs < 0 ||
      (node.num_inputs > 0 && !node.inputs) || (node.num_outputs > 0 && !node.outputs) ||
      (node.num_attrs > 0 && !node.attrs)) {
    return "the node's input, output or attribute arrays are malformed";
  }
  for (int32_t i = 0; i < node.num_inputs + node.num_outputs; ++i) {
    const kite_backend_tensor2* t = i < node.num_inputs ? node.inputs[i] : node.outputs[i - node.num_inputs];
    if (t && t->struct_size < sizeof(kite_backend_tensor2)) {
      return "tensor '" + tensor_name(t) + "' has an old struct_size";
    }
  }
  // The node as a v1 node over the same tensors, so the shared op rules
  // (kite::ops::from_backend_node) validate counts, ranks and constants.
  V1Node v1;
  std::string why;
  if (!v1.build(node, constant_host_data, &why)) return why;
  view->node = &node;
  view->pattern = node.fused_pattern ? node.fused_pattern : "";
  if (!kite::ops::from_backend_node(*v1.get(), &view->op, &why, true)) return why;
  view->outputs = kite::ops::outputs_from_backend_node(*v1.get());
  *label = view->op.label();
  if (!node.op) return "node has no op type";
  const std::string domain = node.domain ? node.domain : "";
  if (view->fused() && domain != "kite") return "fused pattern " + view->pattern + " in domain '" + domain + "'";
  if (!view->fused() && !domain.empty()) return "domain '" + domain + "' is not supported (only ai.onnx)";
  return "";
}

std::string check_declared_outputs(const NodeView& view) {
  if (!kite::ops::is_known_op(view.op.op)) return "op " + view.op.op + " has no shape rules";
  std::string why;
  if (!kite::ops::check_declared_outputs(view.op, view.outputs, &why)) return why;
  return "";
}

std::string input_label(const NodeView& n, size_t i) {
  const std::string name = i < n.op.inputs.size() ? n.op.inputs[i].name : "";
  return "input " + std::to_string(i) + " '" + name + "'";
}

std::string expect_dtype(const NodeView& n, size_t i, std::initializer_list<kite_dtype> dtypes, const char* backend) {
  if (!n.op.has_input(i)) return "input " + std::to_string(i) + " is missing";
  const kite_dtype d = n.op.inputs[i].dtype;
  for (kite_dtype want : dtypes) {
    if (d == want) return "";
  }
  return input_label(n, i) + " has dtype " + kite::ops::dtype_name(d) + ", which the " + backend +
         " kernel does not take";
}

std::string expect_constant(const NodeView& n, size_t i, const char* what, const char* backend) {
  if (!n.op.has_input(i)) return std::string(what) + " is missing";
  if (!n.op.inputs[i].data) return std::string(what) + " (" + input_label(n, i) + ") must be a constant on " + backend;
  return "";
}

std::string float_storage(const NodeView& n, const std::vector<size_t>& inputs, const char* backend, bool* half) {
  *half = false;
  bool first = true;
  for (size_t i : inputs) {
    if (!n.op.has_input(i)) continue;
    if (first) {
      *half = n.op.inputs[i].dtype == KITE_DTYPE_FLOAT16;
      first = false;
    }
    const kite_dtype want = *half ? KITE_DTYPE_FLOAT16 : KITE_DTYPE_FLOAT32;
    if (n.op.inputs[i].dtype == want) continue;
    const kite_dtype d = n.op.inputs[i].dtype;
    if (d == KITE_DTYPE_FLOAT16 || d == KITE_DTYPE_FLOAT32) {
      return input_label(n, i) + " is " + kite::ops::dtype_name(d) + " in a node of " + kite::ops::dtype_name(want) +
             " tensors (" + backend + " runs a node's float tensors all float32 or all float16)";
    }
    return expect_dtype(n, i, {want}, backend);
  }
  for (const kite::ops::TensorType& o : n.outputs) {
    if (!o.present || (o.dtype != KITE_DTYPE_FLOAT16 && o.dtype != KITE_DTYPE_FLOAT32)) continue;
    if ((o.dtype == KITE_DTYPE_FLOAT16) != *half) {
      return "output '" + o.name + "' is " + kite::ops::dtype_name(o.dtype) + " in a node of " +
             kite::ops::dtype_name(*half ? KITE_DTYPE_FLOAT16 : KITE_DTYPE_FLOAT32) +
             " inputs (" + backend + " runs a node's float tensors all float32 or all float16)";
    }
  }
  return "";
}

std::vector<int64_t> constant_ints(const kite::ops::TensorType& t) {
  std::vector<int64_t> v;
  if (!t.data) return v;
  int64_t count = 1;
  for (int64_t d : t.shape) count *= d;
  v.resize(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == KITE_DTYPE_INT64) {
      int64_t x;
      std::memcpy(&x, static_cast<const char*>(t.data) + i * 8, 8);
      v[i] = x;
    } else {
      int32_t x;
      std::memcpy(&x, static_cast<const char*>(t.data) + i * 4, 4);
      v[i] = x;
    }
  }
  return v;
}

std::string reduce_axes_of(const NodeView& n, std::vector<int64_t>* axes, const char* backend) {
  if (!n.op.has_input(1)) {
    *axes = n.op.attr_ints("axes", {});
    return "";
  }
  const std::string why = expect_constant(n, 1, "axes", backend);
  if (why.empty()) *axes = constant_ints(n.op.inputs[1]);
  return why;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    const size_t d = shape.size() - 1 - k, o = out.size() - 1 - k;
    strides[o] = shape[d] == 1 ? 0 : stride;
    stride *= shape[d];
  }
  return strides;
}

}  // namespace kite::abi
