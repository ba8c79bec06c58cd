#include "src/infer_shapes.h"

#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "kite/ops/op_node.h"
#include "onnx/onnx_legacy.h"
#include "src/const_eval.h"
#include "src/fold_policy.h"
#include "src/ref_eval.h"

namespace kite::converter {

namespace {

class ShapeInference {
 public:
  explicit ShapeInference(ir::Model* model) : model_(model), policy_(*model, &evaluator_) {}

  bool run() {
    if (model_->graphs.empty()) return fail("the model has no graph");
    if (!infer_graph(0)) return false;
    if (unsupported_.empty()) return true;
    std::string text = std::to_string(unsupported_.size()) +
                       " node(s) use operators Kite does not support (they remain after "
                       "constant folding):";
    for (const std::string& line : unsupported_) text += "\n" + line;
    return fail(text);
  }
  const std::string& error() const { return err_; }

 private:
  bool fail(const std::string& message) {
    err_ = message;
    return false;
  }

  ir::Tensor& tensor(int index) { return model_->tensors[static_cast<size_t>(index)]; }

  bool valid_index(int index) const {
    return index >= 0 && static_cast<size_t>(index) < model_->tensors.size();
  }

  bool infer_graph(int graph_index) {
    if (graph_index < 0 || static_cast<size_t>(graph_index) >= model_->graphs.size()) {
      return fail("graph index " + std::to_string(graph_index) + " is invalid");
    }
    if (!visiting_.insert(graph_index).second) {
      return fail("graph '" + model_->graphs[static_cast<size_t>(graph_index)].name +
                  "' is used by more than one node or contains itself");
    }
    // Graphs are never added here, so indexing stays valid while If nodes
    // recurse into other graphs. The nodes are taken out and put back as
    // they end up: legacy nodes replaced, folded nodes dropped; on failure
    // the rest are put back untouched.
    std::vector<ir::Node> pending = std::move(graph_nodes(graph_index));
    graph_nodes(graph_index).clear();
    std::vector<ir::Node> done;
    done.reserve(pending.size());
    bool ok = true;
    size_t i = 0;
    for (; ok && i < pending.size(); ++i) {
      std::vector<ir::Node> expanded;
      if (blocked(pending[i])) {
        // Downstream of an unsupported op that remains: nothing to infer;
        // run() reports the unsupported nodes.
        done.push_back(std::move(pending[i]));
        continue;
      }
      if (!check_io(pending[i]) ||
          !legalize_legacy_node(model_, pending[i], &expanded, &err_)) {
        ok = false;
        break;
      }
      if (expanded.empty()) expanded.push_back(std::move(pending[i]));
      for (ir::Node& node : expanded) {
        bool folded = false;
        if (ok) ok = infer_node(node, &folded);
        if (!folded) done.push_back(std::move(node));
      }
    }
    for (; i < pending.size(); ++i) done.push_back(std::move(pending[i]));
    graph_nodes(graph_index) = std::move(done);
    return ok;
  }

  std::vector<ir::Node>& graph_nodes(int graph_index) {
    return model_->graphs[static_cast<size_t>(graph_index)].nodes;
  }

  bool check_io(const ir::Node& node) {
    for (int index : node.inputs) {
      if (index < 0) continue;
      if (!valid_index(index)) {
        return fail(node.label() + ": input tensor index " + std::to_string(index) +
                    " is invalid");
      }
      const ir::Tensor& t = tensor(index);
      if (!t.shape_known) {
        return fail(node.label() + ": input '" + t.name +
                    "' has no known shape (is it produced after this node, or a subgraph "
                    "input without a declared shape?)");
      }
    }
    for (int index : node.outputs) {
      if (index >= 0 && !valid_index(index)) {
        return fail(node.label() + ": output tensor index " + std::to_string(index) +
                    " is invalid");
      }
    }
    return true;
  }

  // Records what was inferred for a node output, after checking it against
  // what the model declared.
  bool set_inferred(const ir::Node& node, int index, kite_dtype dtype,
                    const std::vector<int64_t>& shape) {
    ir::Tensor& t = tensor(index);
    const std::string where = "tensor '" + t.name + "' (output of " + node.label() + ")";
    if (t.dtype != KITE_DTYPE_UNDEFINED && t.dtype != dtype) {
      return fail("inconsistent dtypes for " + where + ": the model declares " +
                  kite::ops::dtype_name(t.dtype) + ", Kite infers " +
                  kite::ops::dtype_name(dtype));
    }
    // A fully known shape (shape_known) must match exactly; a declared one
    // may leave dims unknown (-1); an empty undeclared shape says nothing.
    bool consistent = true;
    if (t.shape_known || !t.shape.empty()) {
      if (t.shape.size() != shape.size()) {
        consistent = false;
      } else {
        for (size_t i = 0; i < shape.size(); ++i) {
          if (t.shape[i] >= 0 ? t.shape[i] != shape[i] : t.shape_known) consistent = false;
        }
      }
    }
    if (!consistent) {
      return fail("inconsistent shapes for " + where + ": the model declares " +
                  ir::declared_shape_string(t.shape) + ", Kite infers " + kite::ops::shape_string(shape));
    }
    t.dtype = dtype;
    t.shape = shape;
    t.shape_known = true;
    return true;
  }

  // True (and its outputs marked blocked) when an input comes from a node
  // that could not be inferred because its op is unsupported.
  bool blocked(const ir::Node& node) {
    bool any = false;
    for (int index : node.inputs) {
      if (index >= 0 && blocked_.count(index)) any = true;
    }
    if (any) {
      for (int index : node.outputs) {
        if (index >= 0) blocked_.insert(index);
      }
    }
    return any;
  }

  // An op without op rules that the reference evaluator computes: folded
  // when its inputs are constants, else listed as unsupported.
  bool infer_by_reference(const ir::Node& node, bool* folded) {
    std::string why;
    if (!policy_.can_reference_fold(*model_, node, &why)) {
      unsupported_.push_back("node '" + node.name + "': op '" + node.op +
                             "' (domain 'ai.onnx', opset " + std::to_string(model_->source_opset) +
                             ") is not supported; Kite computes it only at convert time, from "
                             "constants, but " + why);
      for (int index : node.outputs) {
        if (index >= 0) blocked_.insert(index);
      }
      return true;
    }
    std::vector<RefValue> values;
    if (!policy_.reference_fold(*model_, node, &values, &err_)) return false;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (!set_inferred(node, node.outputs[k], values[k].dtype, values[k].shape)) return false;
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      make_constant(node.outputs[k], std::move(values[k].data));
    }
    *folded = true;
    return true;
  }

  bool infer_node(ir::Node& node, bool* folded) {
    if (node.op == "If" && node.domain.empty()) return infer_if(node);
    if (!check_io(node)) return false;
    if (node.domain.empty() && !kite::ops::is_known_op(node.op) &&
        has_reference_evaluator(node.op)) {
      return infer_by_reference(node, folded);
    }
    const kite::ops::OpNode op = ir::to_op_node(*model_, node);
    std::vector<kite::ops::TensorType> outputs;
    std::string why;
    if (!kite::ops::infer_types(op, &outputs, &why)) {
      // Say why an input that looked computable was not computed: the op
      // rules may have needed its value (Reshape's shape, Slice's starts...).
      for (int index : node.inputs) {
        auto it = not_folded_.find(index);
        if (index >= 0 && it != not_folded_.end()) {
          why += "\n  note: input '" + tensor(index).name +
                 "' is computed from constants only, but was not computed at convert time: " +
                 it->second;
        }
      }
      return fail(why);
    }
    if (outputs.size() != node.outputs.size()) {
      return fail(node.label() + ": internal error: " + std::to_string(outputs.size()) +
                  " outputs inferred for " + std::to_string(node.outputs.size()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (node.outputs[k] < 0) continue;
      if (!set_inferred(node, node.outputs[k], outputs[k].dtype, outputs[k].shape)) return false;
    }
    return maybe_fold(node, folded);
  }

  void make_constant(int index, std::vector<uint8_t> data) {
    ir::Tensor& t = tensor(index);
    t.kind = ir::TensorKind::Constant;
    t.data = std::move(data);
  }

  // Folds the node when the folding policy (src/fold_policy.h) lets it; a
  // node with constant inputs that stays gets the reason noted, so a later
  // "value must be known" error can name it.
  bool maybe_fold(const ir::Node& node, bool* folded) {
    *folded = false;
    const FoldDecision decision = policy_.decide(*model_, node);
    switch (decision.verdict) {
      case FoldVerdict::kNever:
        if (!decision.constant_inputs) note_constant_expression(node);
        return true;
      case FoldVerdict::kRefused:
      case FoldVerdict::kFoldIfReadersFold:
        // It runs at run time, or fold_constants folds it with its readers.
        for (int index : node.outputs) not_folded_[index] = decision.reason;
        return true;
      case FoldVerdict::kFold:
        break;
    }
    std::vector<std::vector<uint8_t>> values;
    std::string refusal;
    if (!policy_.compute(*model_, node, &values, &refusal, &err_)) return false;
    if (!refusal.empty()) {
      for (int index : node.outputs) not_folded_[index] = refusal;
      return true;
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      make_constant(node.outputs[k], std::move(values[k]));
    }
    *folded = true;
    return true;
  }

  // When every input that is not a constant is itself a constant expression
  // left unfolded, so are this node's outputs: they keep the root reason.
  void note_constant_expression(const ir::Node& node) {
    std::string root;
    bool any = false;
    for (int index : node.inputs) {
      if (index < 0 || !valid_index(index) || tensor(index).is_constant()) continue;
      auto it = not_folded_.find(index);
      if (it == not_folded_.end()) return;
      if (!any) root = it->second;
      any = true;
    }
    if (!any) return;
    for (int index : node.outputs) {
      if (index >= 0) not_folded_[index] = root;
    }
  }

  bool infer_if(const ir::Node& node) {
    const std::string label = node.label();
    if (!check_io(node)) return false;
    if (node.inputs.size() != 1 || node.inputs[0] < 0) {
      return fail(label + ": expected exactly one input (the condition)");
    }
    const ir::Tensor& cond = tensor(node.inputs[0]);
    int64_t cond_numel = 0;
    if (cond.dtype != KITE_DTYPE_BOOL || !kite::ops::checked_numel(cond.shape, &cond_numel) ||
        cond_numel != 1) {
      return fail(label + ": condition '" + cond.name + "' must be a bool with one element, it " +
                  "is " + kite::ops::dtype_name(cond.dtype) + " " +
                  kite::ops::shape_string(cond.shape));
    }
    const ir::Attr* then_attr = node.find_attr("then_branch");
    const ir::Attr* else_attr = node.find_attr("else_branch");
    if (!then_attr || then_attr->type != KITE_ATTR_GRAPH || !else_attr ||
        else_attr->type != KITE_ATTR_GRAPH) {
      return fail(label + ": needs graph attributes 'then_branch' and 'else_branch'");
    }
    const int then_index = static_cast<int>(then_attr->i);
    const int else_index = static_cast<int>(else_attr->i);
    // With a constant condition only the taken branch must be valid: the
    // other may not fit these input shapes (exporters trace both sides of
    // `if x.shape[0] == 1`), and dead-code elimination drops it. It is
    // still inferred where possible; its failure is not an error.
    const bool cond_known = cond.is_constant() && cond.data.size() == 1;
    const bool cond_value = cond_known && cond.data[0] != 0;
    if (cond_known) {
      const int taken_index = cond_value ? then_index : else_index;
      const int dead_index = cond_value ? else_index : then_index;
      if (!infer_graph(taken_index)) return false;
      const std::string saved = err_;
      if (!infer_graph(dead_index)) err_ = saved;
    } else if (!infer_graph(then_index) || !infer_graph(else_index)) {
      return false;
    }
    const ir::Graph& then_graph = model_->graphs[static_cast<size_t>(then_index)];
    const ir::Graph& else_graph = model_->graphs[static_cast<size_t>(else_index)];
    if (then_graph.outputs.size() != node.outputs.size() ||
        else_graph.outputs.size() != node.outputs.size()) {
      return fail(label + ": has " + std::to_string(node.outputs.size()) +
                  " outputs, but then_branch gives " + std::to_string(then_graph.outputs.size()) +
                  " and else_branch " + std::to_string(else_graph.outputs.size()));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k] < 0) continue;
      const ir::Tensor& a = tensor(then_graph.outputs[k]);
      const ir::Tensor& b = tensor(else_graph.outputs[k]);
      const ir::Tensor& taken = cond_known ? (cond_value ? a : b) : a;
      if (!taken.shape_known || (!cond_known && !b.shape_known)) {
        return fail(label + ": output " + std::to_string(k) + " of a branch has no known shape");
      }
      if (!cond_known && (a.dtype != b.dtype || a.shape != b.shape)) {
        return fail(label + ": output " + std::to_string(k) + " ('" +
                    tensor(node.outputs[k]).name + "') is " + kite::ops::dtype_name(a.dtype) +
                    " " + kite::ops::shape_string(a.shape) + " in then_branch but " +
                    kite::ops::dtype_name(b.dtype) + " " + kite::ops::shape_string(b.shape) +
                    " in else_branch; Kite needs one static type, so the branches must agree "
                    "or the condition must be a constant");
      }
      const kite_dtype dtype = taken.dtype;
      const std::vector<int64_t> shape = taken.shape;
      if (!set_inferred(node, node.outputs[k], dtype, shape)) return false;
    }
    return true;
  }

  ir::Model* model_;
  std::string err_;
  std::set<int> visiting_;
  std::map<int, std::string> not_folded_;  // outputs of constant-input nodes left unfolded
  std::vector<std::string> unsupported_;   // unsupported ops that remain, one line each
  std::set<int> blocked_;                  // outputs of those and of the nodes reading them
  CpuEvaluator evaluator_;
  FoldPolicy policy_;  // after evaluator_, which it uses
};

}  // namespace

bool infer_shapes(ir::Model* model, std::string* err) {
  if (!model) {
    if (err) *err = "infer_shapes: model is null";
    return false;
  }
  ShapeInference inference(model);
  if (!inference.run()) {
    if (err) *err = inference.error();
    return false;
  }
  return true;
}

}  // namespace kite::converter
