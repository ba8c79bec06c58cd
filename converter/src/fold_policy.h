// The one constant-folding policy. Shape inference (src/infer_shapes.cpp)
// and the fold_constants pass (passes/fold_constants.cpp) both ask it, so a
// constant that one would compute and the other refuse cannot arise. The
// policy, in order (docs/FUSIONS.md states it for users):
//
//  1. Never folded: a node without outputs or without a present input; a
//     random op (kite::ops::is_nondeterministic_op); an If or any node with
//     subgraphs; a fused node or one outside ai.onnx; a node with an unused
//     optional output or an output of unknown shape; a node writing a graph
//     output, except Shape and Size writing a main-graph output (their value
//     is known and no backend runs them).
//  2. Shape and Size of a tensor with a static shape: folded from the shape,
//     whatever computes the tensor.
//  3. Otherwise every present input must be a constant, and then:
//     - size cap: results over kMaxFoldBytes together are left to run time;
//     - the CPU backend must run the node as given (its kernels compute the
//       value, so the converter and the runtime cannot disagree), or, when
//       it does not, the converter's reference evaluator (src/ref_eval.h)
//       must compute the op: the node then never reaches a backend;
//     - bloat: results larger than kBloatRatio x the constant inputs +
//       kBloatSlack (a broadcast Expand or Tile, a big ConstantOfShape) are
//       folded only when every reader of them folds too, so the large value
//       never reaches the file. Shape inference walks forward and cannot
//       know that, so it leaves such a node to fold_constants, which decides
//       over the whole graph;
//     - dtype rule, on the computed values: a node that moves values between
//       dtypes (Cast, CastLike, Pow with an exponent of another dtype) folds
//       only when no value changes on the way (every Cast result converts
//       back to its source value; every exponent is exactly representable in
//       the base's dtype). All other ops take one dtype for their value
//       inputs and the kernels compute in it, so they fold exactly.
//     An op without op rules that the reference evaluator computes (Mod,
//     Trilu, NonZero, ...) folds under rules 1 and 3 too, its result shape
//     coming from the evaluation (reference_fold below); when it cannot
//     fold, it is an unsupported op (infer_shapes lists every such node).
//  4. A node the policy lets fold whose evaluation fails anyway is an error
//     naming the node: it would fail on every run. (The op rules check
//     constant values, a Gather index say, before that and report them.)
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "src/const_eval.h"
#include "src/ref_eval.h"

namespace kite::converter {

constexpr uint64_t kMaxFoldBytes = 256ull << 20;  // all results of one node together
constexpr uint64_t kBloatRatio = 2;               // results may be this much larger than
constexpr uint64_t kBloatSlack = 4096;            // the constant inputs, plus this

enum class FoldVerdict {
  kNever,              // rule 1, or some present input is computed at run time
  kRefused,            // constant inputs, but too large or no CPU kernel (reason, counter)
  kFold,               // compute it now (compute_fold)
  kFoldIfReadersFold,  // bloat: fold only if every reader of the results folds too
};

struct FoldDecision {
  FoldVerdict verdict = FoldVerdict::kNever;
  bool constant_inputs = false;  // every present input is a constant (at least one)
  std::string reason;            // kRefused, kFoldIfReadersFold: why not (now)
  const char* counter = "";      // kRefused: the pass counter ("skipped_too_large", ...)
  uint64_t input_bytes = 0;      // bytes of the constant inputs
  uint64_t output_bytes = 0;     // bytes of all results
};

class FoldPolicy {
 public:
  // Graph outputs are read from model now; they must not change while the
  // policy is in use (neither shape inference nor a pass changes them).
  FoldPolicy(const ir::Model& model, CpuEvaluator* evaluator);

  // For an op without op rules that the reference evaluator computes: rule
  // 1 (but for output shapes, which the evaluation gives) and every present
  // input a constant. False with *why when not.
  bool can_reference_fold(const ir::Model& model, const ir::Node& node, std::string* why) const;
  // Computes such a node; false with *err naming the node (an evaluation
  // error, or results over kMaxFoldBytes).
  bool reference_fold(const ir::Model& model, const ir::Node& node, std::vector<RefValue>* values,
                      std::string* err) const;

  // Rules 1-3 up to the CPU check; computes nothing.
  FoldDecision decide(const ir::Model& model, const ir::Node& node) const;

  // Computes a node decide() let fold (kFold or kFoldIfReadersFold), then
  // applies the dtype rule. True with one byte vector per output in *values;
  // true with *values empty and *refusal set when the dtype rule refuses;
  // false with *err naming the node when evaluation fails.
  bool compute(const ir::Model& model, const ir::Node& node,
               std::vector<std::vector<uint8_t>>* values, std::string* refusal,
               std::string* err) const;

 private:
  std::set<int> graph_outputs_;  // outputs of any graph
  std::set<int> main_outputs_;
  CpuEvaluator* evaluator_;
};

// True for Shape and Size (ai.onnx): rule 2 folds them from a static shape.
bool is_shape_query(const ir::Node& node);

}  // namespace kite::converter
