#include "kite/converter/convert.h"

#include "src/const_eval.h"
#include "src/infer_shapes.h"
#include "memory/budget.h"
#include "memory/planner.h"
#include "passes/pass.h"
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
  // Refuse now, listing every node at once, what no backend could run.
  if (!check_cpu_support(*model, err)) return false;

  // The optimizer (converter/passes/pipeline.cpp).
  report->nodes_before = model->main().nodes.size();
  report->kernel_launches_before = passes::count_kernel_launches(*model);
  passes::PipelineOptions pipeline;
  pipeline.level = options.opt_level;
  pipeline.disabled = options.disabled_passes;
  passes::PipelineReport optimized;
  if (!passes::run_pipeline(model, pipeline, &optimized, err)) return false;
  report->passes = optimized.passes;
  report->fusions = optimized.fusions;
  report->folded_weight_bytes = optimized.folded_weight_bytes;

  materialize_outputs(model);
  report->kernel_launches_after = passes::count_kernel_launches(*model);
  kite::memory::PlanOptions plan_options;
  plan_options.alignment = options.arena_alignment;
  plan_options.allow_aliasing = options.allow_aliasing;
  if (options.memory_budget > 0) {
    if (!kite::memory::apply_memory_budget(model, options.memory_budget, plan_options,
                                           &report->budget, err)) {
      return false;
    }
  }
  if (!kite::memory::plan_memory(model, plan_options, &report->memory, err)) return false;

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
