// Model-level preparation and checks of an import: the opsets, unique node
// names, operators Kite knows, and names without NUL bytes.
#include <functional>

#include "kite/ops/op_node.h"
#include "onnx/onnx_importer.h"
#include "src/ref_eval.h"

namespace kite::converter::onnx_detail {

bool Importer::read_opsets(const onnx::ModelProto& proto) {
  for (const auto& opset : proto.opset_import()) {
    opsets_[normalized_domain(opset.domain())] = opset.version();
  }
  auto it = opsets_.find("");
  model_->source_opset = it == opsets_.end() ? 0 : it->second;
  if (model_->source_opset > 0) return true;
  std::function<bool(const onnx::GraphProto&)> uses_default = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      if (is_default_domain(node.domain())) return true;
      for (const auto& a : node.attribute()) {
        if (a.has_g() && uses_default(a.g())) return true;
      }
    }
    return false;
  };
  if (uses_default(proto.graph())) {
    return fail("the ONNX model declares no ai.onnx opset (opset_import), so its operators "
                "cannot be interpreted");
  }
  return true;
}

// Gives every node a unique, non-empty name, before anything reports nodes by
// name: explicit names are kept unless repeated; the rest get "<op>_<index>".
void Importer::name_nodes(onnx::GraphProto* main_graph) {
  std::unordered_set<std::string> explicit_names;
  std::function<void(const onnx::GraphProto&)> collect = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      if (!node.name().empty()) explicit_names.insert(node.name());
      for (const auto& a : node.attribute()) {
        if (a.has_g()) collect(a.g());
      }
    }
  };
  collect(*main_graph);

  std::unordered_set<std::string> taken;
  std::function<void(onnx::GraphProto*)> assign = [&](onnx::GraphProto* g) {
    for (int i = 0; i < g->node_size(); ++i) {
      onnx::NodeProto* node = g->mutable_node(i);
      const bool named = !node->name().empty();
      if (!named || taken.count(node->name())) {
        // A generated name must not take an explicit name a later node uses.
        auto free_name = [&](const std::string& c) {
          return !taken.count(c) && !explicit_names.count(c);
        };
        const std::string base = named ? node->name() : node->op_type() + "_" + std::to_string(i);
        std::string candidate = base;
        if (named || !free_name(candidate)) {
          for (int k = 1;; ++k) {
            candidate = base + "_" + std::to_string(k);
            if (free_name(candidate)) break;
          }
        }
        node->set_name(candidate);
      }
      taken.insert(node->name());
      for (int a = 0; a < node->attribute_size(); ++a) {
        if (node->attribute(a).has_g()) assign(node->mutable_attribute(a)->mutable_g());
      }
    }
  };
  assign(main_graph);
}

void Importer::collect_unsupported(const onnx::GraphProto& graph,
                                   std::vector<std::string>* lines) {
  for (const auto& node : graph.node()) {
    const std::string domain = normalized_domain(node.domain());
    // Constant is folded here and If is control flow the converter and the
    // runtime handle themselves; everything else needs the op rules, or the
    // reference evaluator when the node's inputs turn out constant (shape
    // inference folds it then, or lists it as unsupported).
    const bool known = domain.empty() &&
                       (node.op_type() == "Constant" || node.op_type() == "If" ||
                        kite::ops::is_known_op(node.op_type()) ||
                        has_reference_evaluator(node.op_type()));
    if (!known) {
      auto it = opsets_.find(domain);
      const int64_t opset = it == opsets_.end() ? 0 : it->second;
      lines->push_back("node '" + node.name() + "': op '" + node.op_type() + "' (domain '" +
                       (domain.empty() ? "ai.onnx" : domain) + "', opset " +
                       std::to_string(opset) + ") is not supported");
    }
    for (const auto& a : node.attribute()) {
      if (a.has_g()) collect_unsupported(a.g(), lines);
    }
  }
}

bool Importer::check_supported_ops(const onnx::GraphProto& graph) {
  std::vector<std::string> lines;
  collect_unsupported(graph, &lines);
  if (lines.empty()) return true;
  return fail(std::to_string(lines.size()) + " node(s) use operators Kite does not support:\n" +
              join(lines, "\n"));
}

bool Importer::check_no_nul_bytes() {
  // The runtime hands names, ops and attribute strings to applications and
  // backends as C strings and refuses files where they hold a NUL byte
  // (sdk/src/verify.cpp): refuse such a model here, with its name.
  auto nul = [](const std::string& text) { return text.find('\0') != std::string::npos; };
  for (const ir::Tensor& t : model_->tensors) {
    if (nul(t.name)) return fail("a tensor name contains a NUL byte");
  }
  std::function<bool(const ir::Node&)> node_ok = [&](const ir::Node& n) {
    if (nul(n.name) || nul(n.op) || nul(n.domain) || nul(n.fused_pattern)) return false;
    for (const ir::Attr& a : n.attrs) {
      if (nul(a.name) || nul(a.s)) return false;
      for (const std::string& str : a.strings) {
        if (nul(str)) return false;
      }
    }
    for (const ir::Node& b : n.body) {
      if (!node_ok(b)) return false;
    }
    return true;
  };
  for (const ir::Graph& g : model_->graphs) {
    for (const ir::Node& n : g.nodes) {
      if (!node_ok(n)) {
        return fail("node '" + std::string(n.name.c_str()) + "' (" + std::string(n.op.c_str()) +
                    ") has a name, op, domain or attribute string with a NUL byte");
      }
    }
  }
  return true;
}

}  // namespace kite::converter::onnx_detail
