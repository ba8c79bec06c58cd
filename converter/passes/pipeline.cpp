// The optimizer's pipeline: which passes run, in which order, how often.
//
//   1. simplify (-O1)          fold constants, inline constant Ifs, drop
//                              Identity/Dropout, merge duplicates, drop dead code
//   2. lower (-O2)             Einsums that are batched matrix products
//                              become Transpose/Reshape/MatMul (which the
//                              next groups merge, fold and fuse)
//   3. fold into weights (-O1) BatchNorm and constant Mul/Add into Conv/Gemm
//                              weights, Transpose/Reshape chains merged
//   4. fuse (-O2)              GELU, LayerNorm and attention from their
//                              primitives first, then the chains that end in
//                              them: skip-LayerNorm, MatMul+bias(+act),
//                              Conv(+bias)+act
//
// Each group repeats until none of its passes changes the graph (at most
// max_rounds rounds); the sequence of groups repeats until a whole sweep
// changes nothing (fusion leaves dead tensors, folding can expose new
// fusions), again at most max_rounds times.
#include <algorithm>
#include <unordered_set>

#include "passes/graph_query.h"
#include "passes/pass.h"

namespace kite::passes {

namespace {

struct Group {
  const char* name;
  std::vector<Pass> passes;
};

const std::vector<Group>& groups() {
  static const std::vector<Group> kGroups = {
      {"simplify",
       {
           {"fold_constants", 1, fold_constants},
           {"inline_constant_if", 1, inline_constant_if},
           {"eliminate_identity", 1, eliminate_identity},
           {"eliminate_common_subexpressions", 1, eliminate_common_subexpressions},
           {"eliminate_dead_code", 1, eliminate_dead_code},
       }},
      {"lower",
       {
           {"lower_einsum", 2, lower_einsum},
       }},
      {"fold_into_weights",
       {
           {"fold_batch_norm", 1, fold_batch_norm},
           {"fold_scale_into_weights", 1, fold_scale_into_weights},
           {"merge_transpose_reshape", 1, merge_transpose_reshape},
       }},
      {"fuse",
       {
           {"fuse_gelu", 2, fuse_gelu},
           {"fuse_layer_norm", 2, fuse_layer_norm},
           {"fuse_attention", 2, fuse_attention},
           {"fuse_skip_layer_norm", 2, fuse_skip_layer_norm},
           {"fuse_matmul_bias", 2, fuse_matmul_bias},
           {"fuse_conv_residual", 2, fuse_conv_residual},
           {"fuse_conv_activation", 2, fuse_conv_activation},
           {"fuse_channel_shuffle", 2, fuse_channel_shuffle},
       }},
  };
  return kGroups;
}

}  // namespace

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> kAll = [] {
    std::vector<Pass> all;
    for (const Group& g : groups()) all.insert(all.end(), g.passes.begin(), g.passes.end());
    return all;
  }();
  return kAll;
}

bool is_pass_name(const std::string& name) {
  for (const Pass& p : all_passes()) {
    if (name == p.name) return true;
  }
  return false;
}

bool run_pipeline(ir::Model* model, const PipelineOptions& options, PipelineReport* report,
                  std::string* err) {
  PipelineReport local;
  PipelineReport& rep = report ? *report : local;
  rep = PipelineReport();
  for (const std::string& name : options.disabled) {
    if (!is_pass_name(name)) {
      std::string known;
      for (const Pass& p : all_passes()) known += std::string(known.empty() ? "" : ", ") + p.name;
      *err = "unknown pass '" + name + "' (passes: " + known + ")";
      return false;
    }
  }
  if (options.level <= 0) {
    compact_model(model);
    return true;
  }
  auto enabled = [&](const Pass& p) {
    return p.level <= options.level &&
           std::find(options.disabled.begin(), options.disabled.end(), p.name) ==
               options.disabled.end();
  };
  std::vector<size_t> stats_of;  // index in all_passes() -> index in rep.passes
  for (const Pass& p : all_passes()) {
    stats_of.push_back(rep.passes.size());
    if (enabled(p)) {
      PassStats s;
      s.name = p.name;
      rep.passes.push_back(s);
    }
  }

  // Constants the optimizer computes (folded values, folded weights) are
  // those not in the model it was given.
  std::unordered_set<std::string> original_constants;
  for (const ir::Tensor& t : model->tensors) {
    if (t.is_constant()) original_constants.insert(t.name);
  }
  converter::CpuEvaluator evaluator;
  PassContext ctx;
  ctx.model = model;
  ctx.evaluator = &evaluator;
  const int max_rounds = std::max(1, options.max_rounds);
  bool sweep_changed = true;
  for (int outer = 0; outer < max_rounds && sweep_changed; ++outer) {
    sweep_changed = false;
    ++rep.outer_rounds;
    size_t pass_index = 0;
    for (const Group& group : groups()) {
      const size_t first = pass_index;
      pass_index += group.passes.size();
      bool group_changed = true;
      int round = 0;
      for (; round < max_rounds && group_changed; ++round) {
        group_changed = false;
        for (size_t k = 0; k < group.passes.size(); ++k) {
          const Pass& pass = group.passes[k];
          if (!enabled(pass)) continue;
          PassStats& stats = rep.passes[stats_of[first + k]];
          const size_t before = model->main().nodes.size();
          if (stats.rounds == 0) stats.nodes_before = before;
          PassResult result;
          if (!pass.run(ctx, &result)) {
            *err = std::string("pass ") + pass.name + ": " +
                   (ctx.error.empty() ? "failed" : ctx.error);
            return false;
          }
          const size_t after = model->main().nodes.size();
          ++stats.rounds;
          stats.nodes_removed += static_cast<int64_t>(before) - static_cast<int64_t>(after);
          stats.nodes_after = static_cast<size_t>(static_cast<int64_t>(stats.nodes_before) - stats.nodes_removed);
          for (const auto& kv : result.counters) stats.counters[kv.first] += kv.second;
          if (result.changed) {
            ++stats.changed;
            group_changed = true;
            sweep_changed = true;
          }
        }
      }
      if (group_changed && round == max_rounds) rep.hit_round_limit = true;
    }
    if (sweep_changed && outer + 1 == max_rounds) rep.hit_round_limit = true;
  }
  compact_model(model);
  // Fused nodes in the final graph (fusions absorbed by a later fusion, a
  // GELU inside MatMul+Add+Gelu, count under the outer pattern only; the
  // fuse_* passes' counters say how many each created).
  for (const ir::Node& n : model->main().nodes) {
    if (!n.fused_pattern.empty()) ++rep.fusions[n.fused_pattern];
  }
  for (const ir::Tensor& t : model->tensors) {
    if (t.is_constant() && !original_constants.count(t.name)) rep.folded_weight_bytes += t.data.size();
  }
  return true;
}

namespace {

int64_t graph_launches(const ir::Model& model, int g, int depth) {
  if (g < 0 || static_cast<size_t>(g) >= model.graphs.size() || depth > 64) return 0;
  int64_t total = 0;
  for (const ir::Node& n : model.graphs[static_cast<size_t>(g)].nodes) {
    if (n.op == "If" && n.domain.empty()) {
      const ir::Attr* then_attr = n.find_attr("then_branch");
      const ir::Attr* else_attr = n.find_attr("else_branch");
      const int64_t a = then_attr ? graph_launches(model, static_cast<int>(then_attr->i), depth + 1) : 0;
      const int64_t b = else_attr ? graph_launches(model, static_cast<int>(else_attr->i), depth + 1) : 0;
      int64_t taken = std::max(a, b);
      if (!n.inputs.empty() && is_constant(model, n.inputs[0])) {
        const ir::Tensor& cond = tensor_at(model, n.inputs[0]);
        if (cond.data.size() == 1) taken = cond.data[0] ? a : b;
      }
      total += taken;
    } else {
      total += 1;
    }
  }
  return total;
}

}  // namespace

int64_t count_kernel_launches(const ir::Model& model) {
  return model.graphs.empty() ? 0 : graph_launches(model, 0, 0);
}

}  // namespace kite::passes
