#include "infer_shapes.h"

#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "const_eval.h"
#include "kite/ops/op_node.h"
#include "onnx/onnx_legacy.h"

namespace kite::converter {

namespace {

std::string node_label(const ir::Node& node) { return node.op + " '" + node.name + "'"; }

// "1x?x4" for a declared shape with unknown (-1) dims.
std::string declared_text(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += "x";
    out += shape[i] < 0 ? "?" : std::to_string(shape[i]);
  }
  return out;
}

// Ops whose result must not be baked into the file even with constant inputs.
bool is_nondeterministic(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Multinomial" || op == "Bernoulli";
}

class ShapeInference {
 public:
  explicit ShapeInference(ir::Model* model) : model_(model) {
    for (const ir::Graph& g : model->graphs) {
      graph_outputs_.insert(g.outputs.begin(), g.outputs.end());
    }
    if (!model->graphs.empty()) {
      main_outputs_.insert(model->graphs[0].outputs.begin(), model->graphs[0].outputs.end());
    }
  }

  bool run() {
    if (model_->graphs.empty()) return fail("the model has no graph");
    return infer_graph(0);
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
        return fail(node_label(node) + ": input tensor index " + std::to_string(index) +
                    " is invalid");
      }
      const ir::Tensor& t = tensor(index);
      if (!t.shape_known) {
        return fail(node_label(node) + ": input '" + t.name +
                    "' has no known shape (is it produced after this node, or a subgraph "
                    "input without a declared shape?)");
      }
    }
    for (int index : node.outputs) {
      if (index >= 0 && !valid_index(index)) {
        return fail(node_label(node) + ": output tensor index " + std::to_string(index) +
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
    const std::string where = "tensor '" + t.name + "' (output of " + node_label(node) + ")";
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
                  declared_text(t.shape) + ", Kite infers " + kite::ops::shape_string(shape));
    }
    t.dtype = dtype;
    t.shape = shape;
    t.shape_known = true;
    return true;
  }

  bool infer_node(ir::Node& node, bool* folded) {
    if (node.op == "If" && node.domain.empty()) return infer_if(node);
    if (!check_io(node)) return false;
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
      return fail(node_label(node) + ": internal error: " + std::to_string(outputs.size()) +
                  " outputs inferred for " + std::to_string(node.outputs.size()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (node.outputs[k] < 0) continue;
      if (!set_inferred(node, node.outputs[k], outputs[k].dtype, outputs[k].shape)) return false;
    }
    return maybe_fold(node, folded);
  }

  bool foldable(const ir::Node& node) const {
    if (node.outputs.empty() || is_nondeterministic(node.op) || !node.fused_pattern.empty()) {
      return false;
    }
    for (const ir::Attr& a : node.attrs) {
      if (a.type == KITE_ATTR_GRAPH) return false;
    }
    // Shape and Size of a main-graph output are folded anyway: their value
    // is known, and no backend runs them (the converter copies a constant
    // graph output into the output tensor).
    const bool shape_query = (node.op == "Shape" || node.op == "Size") && node.domain.empty();
    for (int index : node.outputs) {
      if (index < 0) return false;
      if (graph_outputs_.count(index) && !(shape_query && main_outputs_.count(index))) return false;
    }
    return true;
  }

  bool all_inputs_constant(const ir::Node& node) const {
    bool any = false;
    for (int index : node.inputs) {
      if (index < 0) continue;
      if (!model_->tensors[static_cast<size_t>(index)].is_constant()) return false;
      any = true;
    }
    return any;
  }

  void make_constant(int index, std::vector<uint8_t> data) {
    ir::Tensor& t = tensor(index);
    t.kind = ir::TensorKind::Constant;
    t.data = std::move(data);
  }

  // Shape and Size only need their input's shape, which is known here.
  bool fold_shape_query(const ir::Node& node) {
    const ir::Tensor& input = tensor(node.inputs.at(0));
    const std::vector<int64_t>& dims = input.shape;
    std::vector<int64_t> value;
    if (node.op == "Size") {
      int64_t numel = 0;
      if (!kite::ops::checked_numel(dims, &numel)) {
        return fail(node_label(node) + ": input '" + input.name + "' has too many elements");
      }
      value.push_back(numel);
    } else {
      const int64_t rank = static_cast<int64_t>(dims.size());
      auto clamp = [rank](int64_t v) {
        if (v < 0) v += rank;
        return v < 0 ? 0 : (v > rank ? rank : v);
      };
      const ir::Attr* start_attr = node.find_attr("start");
      const ir::Attr* end_attr = node.find_attr("end");
      const int64_t start = clamp(start_attr ? start_attr->i : 0);
      const int64_t end = clamp(end_attr ? end_attr->i : rank);
      for (int64_t i = start; i < end; ++i) value.push_back(dims[static_cast<size_t>(i)]);
    }
    const ir::Tensor& out = tensor(node.outputs.at(0));
    if (out.dtype != KITE_DTYPE_INT64 ||
        static_cast<uint64_t>(value.size() * sizeof(int64_t)) != out.byte_size()) {
      return fail(node_label(node) + ": internal error: folded value disagrees with the " +
                  "inferred " + kite::ops::dtype_name(out.dtype) + " " +
                  kite::ops::shape_string(out.shape));
    }
    std::vector<uint8_t> bytes(value.size() * sizeof(int64_t));
    if (!value.empty()) std::memcpy(bytes.data(), value.data(), bytes.size());
    make_constant(node.outputs[0], std::move(bytes));
    return true;
  }

  bool maybe_fold(const ir::Node& node, bool* folded) {
    *folded = false;
    if (!foldable(node)) return true;
    if ((node.op == "Shape" || node.op == "Size") && node.domain.empty() &&
        node.outputs.size() == 1 && !node.inputs.empty() && node.inputs[0] >= 0) {
      if (!fold_shape_query(node)) return false;
      *folded = true;
      return true;
    }
    if (!all_inputs_constant(node)) {
      // When every input that is not a constant is itself a constant
      // expression left unfolded, so are this node's outputs: keep the root
      // reason, so a later "value must be known" error can name it.
      std::string root;
      bool any = false;
      for (int index : node.inputs) {
        if (index < 0 || tensor(index).is_constant()) continue;
        auto it = not_folded_.find(index);
        if (it == not_folded_.end()) return true;
        if (!any) root = it->second;
        any = true;
      }
      if (any) {
        for (int index : node.outputs) {
          if (index >= 0) not_folded_[index] = root;
        }
      }
      return true;
    }
    uint64_t total = 0;
    for (int index : node.outputs) total += tensor(index).byte_size();
    std::string reason;
    if (total > kMaxFoldedBytes) {
      reason = "its outputs are " + std::to_string(total) + " bytes, more than the " +
               std::to_string(kMaxFoldedBytes) + " folded here";
    } else if (!evaluator_.supports(*model_, node, &reason)) {
      reason = "the CPU backend does not run " + node_label(node) +
               (reason.empty() ? std::string() : ": " + reason);
    }
    if (!reason.empty()) {
      // It runs at run time instead.
      for (int index : node.outputs) not_folded_[index] = reason;
      return true;
    }
    std::vector<std::vector<uint8_t>> values;
    std::string why;
    if (!evaluator_.evaluate(*model_, node, &values, &why)) {
      return fail("cannot evaluate constant node " + node_label(node) + ": " + why);
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      make_constant(node.outputs[k], std::move(values[k]));
    }
    *folded = true;
    return true;
  }

  bool infer_if(const ir::Node& node) {
    const std::string label = node_label(node);
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
  std::set<int> graph_outputs_;
  std::set<int> main_outputs_;
  std::set<int> visiting_;
  std::map<int, std::string> not_folded_;  // outputs of constant-input nodes left unfolded
  CpuEvaluator evaluator_;
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
