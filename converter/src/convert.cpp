#include "kite/converter/convert.h"

#include "src/infer_shapes.h"
#include "memory/planner.h"
#include "onnx/onnx_import.h"

namespace kite::converter {

void materialize_outputs(ir::Model* model) {
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

bool convert_onnx_file(const std::string& onnx_path, const ConvertOptions& options,
                       ir::Model* model, ConvertReport* report, std::string* err) {
  ImportOptions import_options;
  import_options.input_shapes = options.input_shapes;
  if (!import_onnx_file(onnx_path, import_options, model, err)) return false;
  report->onnx_nodes = model->graphs.empty() ? 0 : model->main().nodes.size();
  if (!infer_shapes(model, err)) return false;
  materialize_outputs(model);
  if (!kite::memory::plan_memory(model, options.arena_alignment, err)) return false;

  report->nodes = model->main().nodes.size();
  report->tensors = model->tensors.size();
  for (const ir::Tensor& t : model->tensors) {
    if (t.is_constant()) {
      ++report->constants;
      report->weight_bytes += t.data.size();
    }
  }
  for (const ir::Node& n : model->main().nodes) ++report->op_counts[n.op];
  return true;
}

}  // namespace kite::converter
