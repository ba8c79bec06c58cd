#include "kite/converter/convert.h"

#include "src/const_eval.h"
#include "src/pack_weights.h"
#include "src/infer_shapes.h"
#include "memory/budget.h"
#include "memory/planner.h"
#include "passes/pass.h"
#include "onnx/onnx_import.h"

namespace kite::converter {

bool convert_onnx_file(const std::string& onnx_path, const ConvertOptions& options,
                       ir::Model* model, ConvertReport* report, std::string* err) {
  ImportOptions import_options;
  import_options.input_shapes = options.input_shapes;
  if (!import_onnx_file(onnx_path, import_options, model, err)) {
    // The importer words every refusal of a valid construct it cannot
    // represent (unknown op, dtype, attribute type) "... Kite does not
    // support ..."; anything else is a malformed or unreadable model.
    report->failed_step =
        err->find("Kite does not support") != std::string::npos ? "support" : "import";
    return false;
  }
  report->onnx_nodes = model->graphs.empty() ? 0 : model->main().nodes.size();
  if (!infer_shapes(model, err)) {
    // Ops without op rules that did not fold away are listed as unsupported.
    report->failed_step =
        err->find("use operators Kite does not support") != std::string::npos ? "support" : "shapes";
    return false;
  }
  // Refuse now, listing every node at once, what no backend could run.
  if (!check_cpu_support(*model, err)) {
    report->failed_step = "support";
    return false;
  }

  // The optimizer (converter/passes/pipeline.cpp).
  report->nodes_before = model->main().nodes.size();
  report->kernel_launches_before = passes::count_kernel_launches(*model);
  passes::PipelineOptions pipeline;
  pipeline.level = options.opt_level;
  pipeline.disabled = options.disabled_passes;
  // Half-precision files are for the GPU backends, whose FusedConv takes no
  // residual (docs/FUSIONS.md): there the Conv and the Add stay two nodes
  // they run, rather than a fused node they would decompose.
  if (options.precision.precision != Precision::kFp32) pipeline.disabled.push_back("fuse_conv_residual");
  passes::PipelineReport optimized;
  if (!passes::run_pipeline(model, pipeline, &optimized, err)) {
    report->failed_step = "optimize";
    return false;
  }
  report->passes = optimized.passes;
  report->fusions = optimized.fusions;
  report->folded_weight_bytes = optimized.folded_weight_bytes;

  materialize_outputs(model);
  report->kernel_launches_after = passes::count_kernel_launches(*model);
  kite::memory::PlanOptions plan_options;
  plan_options.alignment = options.arena_alignment;
  plan_options.allow_aliasing = options.allow_aliasing;
  if (options.memory_budget > 0 || options.memory_budget_ratio > 0) {
    if (!kite::memory::apply_memory_budget(model, options.memory_budget,
                                           options.memory_budget_ratio, plan_options,
                                           &report->budget, err)) {
      report->failed_step = "memory";
      return false;
    }
  }
  // Precision after the budget, whose patching and recomputation reason
  // about float32 activations: the budget is met in fp32 and float16 only
  // shrinks the arena further. Its casts are kernel launches too.
  if (!apply_precision(model, options.precision, &report->precision, err)) {
    report->failed_step = "precision";
    return false;
  }
  report->kernel_launches_after += report->precision.casts;
  if (!kite::memory::plan_memory(model, plan_options, &report->memory, err)) {
    report->failed_step = "memory";
    return false;
  }

  std::vector<std::string> levels;
  if (!resolve_pack_for(options.pack_for, &levels, err) ||
      !add_packed_forms(model, levels, err)) {
    report->failed_step = "pack";
    return false;
  }
  report->packed_for = levels;
  report->packed_forms = static_cast<int>(model->packed.size());
  std::vector<bool> has_form(model->tensors.size(), false);
  for (const ir::PackedForm& f : model->packed) {
    report->packed_bytes += f.data.size();
    if (!has_form[static_cast<size_t>(f.tensor)]) {
      has_form[static_cast<size_t>(f.tensor)] = true;
      report->packed_source_bytes += model->tensors[static_cast<size_t>(f.tensor)].data.size();
    }
  }

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
