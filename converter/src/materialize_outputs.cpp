// materialize_outputs (kite/converter/convert.h), apart from convert.cpp so
// that the ONNX-free part of the converter (kite_converter_ir) holds it.
#include "kite/converter/convert.h"

namespace kite::converter {

namespace {

// A .kite node's outputs are real tensors, and only trailing ones may be
// left off. An unused output before a used one (LSTM's Y when only Y_h is
// read) gets a tensor of its own, which the kernel writes and nobody reads.
void materialize_unused_outputs(ir::Model* model, ir::Graph* g) {
  for (ir::Node& n : g->nodes) {
    size_t last_used = 0;
    bool any = false;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] >= 0) {
        last_used = k;
        any = true;
      }
    }
    bool interior = false;
    for (size_t k = 0; any && k < last_used; ++k) interior |= n.outputs[k] < 0;
    if (!interior) continue;
    kite::ops::OpNode op = ir::to_op_node(*model, n);
    op.outputs_used.clear();  // infer every output
    std::vector<kite::ops::TensorType> types;
    std::string why;
    if (!kite::ops::infer_types(op, &types, &why) || types.size() != n.outputs.size()) continue;
    for (size_t k = 0; k < last_used; ++k) {
      if (n.outputs[k] >= 0) continue;
      ir::Tensor t;
      t.name = model->unused_tensor_name(n.name + "__unused_output" + std::to_string(k));
      t.dtype = types[k].dtype;
      t.shape = types[k].shape;
      t.shape_known = true;
      n.outputs[k] = model->add_tensor(std::move(t));
    }
  }
}

}  // namespace

void materialize_outputs(ir::Model* model) {
  for (ir::Graph& graph : model->graphs) materialize_unused_outputs(model, &graph);
  ir::Graph& g = model->main();
  for (int& out : g.outputs) {
    ir::Tensor& t = model->tensors[static_cast<size_t>(out)];
    if (t.kind != ir::TensorKind::Constant && t.kind != ir::TensorKind::Input) {
      t.kind = ir::TensorKind::Output;
      continue;
    }
    ir::Tensor copy;
    copy.name = t.name;
    copy.dtype = t.dtype;
    copy.shape = t.shape;
    copy.shape_known = true;
    copy.kind = ir::TensorKind::Output;
    // Both keep the name the user knows: inputs and outputs are looked up in
    // separate lists.
    const int src = out;
    const int dst = model->add_tensor(std::move(copy));
    ir::Node n;
    n.name = model->tensors[static_cast<size_t>(dst)].name + "__copy";
    n.op = "Identity";
    n.inputs = {src};
    n.outputs = {dst};
    g.nodes.push_back(std::move(n));
    out = dst;
  }
}

}  // namespace kite::converter
