// The graph optimizer's pass interface and pipeline.
//
// A pass is one small unit in its own file (converter/passes/<name>.cpp): a
// name, the optimization level it belongs to, and a run function that
// rewrites the main graph of an ir::Model, says whether it changed anything
// and counts what it did. pipeline.cpp lists the passes in order, in groups
// that repeat until the graph stops changing (with a bound on rounds).
//
// Every pass keeps the model valid: nodes stay topologically ordered, every
// tensor keeps its inferred dtype and shape, graph inputs and outputs keep
// their tensors. Removed nodes may leave unused tensors behind; the pipeline
// compacts the tensor list once at the end (compact_model).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/convert.h"
#include "kite/converter/ir.h"
#include "src/const_eval.h"

namespace kite::passes {

// Shared state of one pipeline run: the model, one CPU evaluator for
// constant folding, and the first error.
struct PassContext {
  ir::Model* model = nullptr;
  converter::CpuEvaluator* evaluator = nullptr;
  std::string error;

  bool fail(const std::string& message) {
    if (error.empty()) error = message;
    return false;
  }
};

// What one run of a pass did.
struct PassResult {
  bool changed = false;
  std::map<std::string, int64_t> counters;  // "folded", "fused", "skipped_bloat", ...
  void count(const std::string& key, int64_t n = 1) { counters[key] += n; }
};

using PassFn = bool (*)(PassContext& ctx, PassResult* result);  // false: ctx.error

struct Pass {
  const char* name;
  int level;  // 1: part of -O1 (folding and elimination), 2: -O2 only (fusion)
  PassFn run;
};

using converter::PassStats;  // totals of one pass over the pipeline run

struct PipelineOptions {
  int level = 2;                      // 0: no passes, 1: -O1, 2: -O2
  std::vector<std::string> disabled;  // pass names to skip
  int max_rounds = 8;                 // per group, and for the outer loop
};

struct PipelineReport {
  std::vector<PassStats> passes;      // in pipeline order, disabled ones left out
  std::map<std::string, int> fusions;  // fused pattern -> nodes in the final graph
  uint64_t folded_weight_bytes = 0;   // bytes of final constants the optimizer computed
  int outer_rounds = 0;
  bool hit_round_limit = false;       // a group still changed in its last round
};

// The pass list, in pipeline order (each name once).
const std::vector<Pass>& all_passes();
// True if name is a pass of all_passes().
bool is_pass_name(const std::string& name);

// Runs the pipeline on model (shapes inferred), then compacts it. On
// failure err names the pass and the problem.
bool run_pipeline(ir::Model* model, const PipelineOptions& options, PipelineReport* report,
                  std::string* err);

// One launch per executed kernel: a node (fused or not) is one launch, an If
// costs the launches of the branch it takes (a run-time condition: the
// larger branch).
int64_t count_kernel_launches(const ir::Model& model);

// Drops tensors no graph references and graphs no node references, and
// renumbers what is left (graph inputs and outputs are always kept).
void compact_model(ir::Model* model);

// The passes, one per file.
bool fold_constants(PassContext& ctx, PassResult* result);
bool inline_constant_if(PassContext& ctx, PassResult* result);
bool eliminate_identity(PassContext& ctx, PassResult* result);
bool eliminate_common_subexpressions(PassContext& ctx, PassResult* result);
bool eliminate_dead_code(PassContext& ctx, PassResult* result);
bool lower_einsum(PassContext& ctx, PassResult* result);
bool fold_batch_norm(PassContext& ctx, PassResult* result);
bool fold_scale_into_weights(PassContext& ctx, PassResult* result);
bool merge_transpose_reshape(PassContext& ctx, PassResult* result);
bool fuse_gelu(PassContext& ctx, PassResult* result);
bool fuse_layer_norm(PassContext& ctx, PassResult* result);
bool fuse_attention(PassContext& ctx, PassResult* result);
bool fuse_skip_layer_norm(PassContext& ctx, PassResult* result);
bool fuse_matmul_bias(PassContext& ctx, PassResult* result);
bool fuse_conv_residual(PassContext& ctx, PassResult* result);
bool fuse_conv_activation(PassContext& ctx, PassResult* result);
bool fuse_channel_shuffle(PassContext& ctx, PassResult* result);

}  // namespace kite::passes
