// kite-inspect: prints a .kite model's graph (nodes with op, fused pattern,
// input and output shapes, arena offsets; fused bodies indented) and the
// memory plan; --dot FILE writes it as a Graphviz graph. The file is read
// through the runtime's own loader, so it is verified exactly as an
// application would load it.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kite/kite.h"
#include "model.h"

namespace {

using kite::rt::GraphRec;
using kite::rt::Model;
using kite::rt::NodeRec;
using kite::rt::TensorKind;
using kite::rt::TensorRec;

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: kite-inspect MODEL.kite [--dot FILE.dot] [--no-body] [--quiet]\n"
               "\n"
               "Prints the graph of a Kite model: each node with its op, fused pattern,\n"
               "inputs and outputs (dtype, shape, arena offset or 'const'), the bodies of\n"
               "fused nodes indented, then op counts and the memory plan.\n"
               "  --dot FILE   also write a Graphviz graph (dot -Tsvg FILE > graph.svg)\n"
               "  --no-body    do not list the bodies of fused nodes\n"
               "  --quiet      print only the summary\n");
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

const char* kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::Input: return "input";
    case TensorKind::Output: return "output";
    case TensorKind::Constant: return "const";
    case TensorKind::Scratch: return "scratch";
    default: return "";
  }
}

// "x f32 1x3x224x224 @0" / "w f32 64x3x7x7 const".
std::string tensor_text(const Model& m, int t) {
  if (t < 0) return "(absent)";
  const TensorRec& r = m.tensors[static_cast<size_t>(t)];
  std::string s = "'" + r.name + "' " + kite_dtype_name(r.dtype) + " " + kite::ops::shape_string(r.shape);
  if (r.is_constant()) return s + " const";
  s += " @" + std::to_string(r.arena_offset);
  const char* kind = kind_name(r.kind);
  if (kind[0] != '\0') s += std::string(" ") + kind;
  return s;
}

std::string node_title(const NodeRec& n) {
  std::string s = (n.domain.empty() ? "" : n.domain + ".") + n.op;
  if (!n.fused_pattern.empty()) s += " [" + n.fused_pattern + "]";
  return s;
}

void print_node(const Model& m, const NodeRec& n, const std::string& indent, size_t index,
                bool bodies) {
  std::printf("%s%3zu  %s  '%s'\n", indent.c_str(), index, node_title(n).c_str(), n.name.c_str());
  for (int t : n.inputs) std::printf("%s       in  %s\n", indent.c_str(), tensor_text(m, t).c_str());
  for (int t : n.outputs) std::printf("%s       out %s\n", indent.c_str(), tensor_text(m, t).c_str());
  for (const auto& a : n.attrs) {
    if (a.type == KITE_ATTR_GRAPH) {
      std::printf("%s       %s -> graph %lld\n", indent.c_str(), a.name.c_str(), static_cast<long long>(a.i));
    }
  }
  if (!bodies || n.body.empty()) return;
  std::printf("%s       body (%zu nodes, run when no backend has the fused kernel):\n", indent.c_str(),
              n.body.size());
  for (size_t k = 0; k < n.body.size(); ++k) print_node(m, n.body[k], indent + "         ", k, false);
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// One cluster per graph; nodes are boxes (fused ones filled), graph inputs
// and outputs ellipses, constants left out; edges carry shapes.
std::string to_dot(const Model& m) {
  std::string d = "digraph kite {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
                  "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    const GraphRec& graph = m.graphs[g];
    const std::string prefix = "g" + std::to_string(g) + "_";
    d += "  subgraph cluster_" + std::to_string(g) + " {\n    label=\"graph " + std::to_string(g) + " '" +
         dot_escape(graph.name) + "'\";\n";
    std::map<int, std::string> producer;
    for (int t : graph.inputs) {
      const std::string id = prefix + "in" + std::to_string(t);
      d += "    " + id + " [shape=ellipse, label=\"" + dot_escape(m.tensors[static_cast<size_t>(t)].name) + "\"];\n";
      producer[t] = id;
    }
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const NodeRec& n = graph.nodes[i];
      const std::string id = prefix + "n" + std::to_string(i);
      std::string label = dot_escape(node_title(n));
      if (!n.fused_pattern.empty()) label += "\\n" + std::to_string(n.body.size()) + " body nodes";
      d += "    " + id + " [label=\"" + label + "\"" +
           (n.fused_pattern.empty() ? "" : ", style=filled, fillcolor=\"#cfe2ff\"") + "];\n";
      for (int t : n.inputs) {
        if (t < 0 || m.tensors[static_cast<size_t>(t)].is_constant()) continue;
        auto it = producer.find(t);
        const TensorRec& r = m.tensors[static_cast<size_t>(t)];
        if (it == producer.end()) continue;  // an outer-scope tensor of a branch
        d += "    " + it->second + " -> " + id + " [label=\"" + kite::ops::shape_string(r.shape) + "\"];\n";
      }
      for (int t : n.outputs) producer[t] = id;
    }
    for (int t : graph.outputs) {
      const std::string id = prefix + "out" + std::to_string(t);
      d += "    " + id + " [shape=ellipse, label=\"" + dot_escape(m.tensors[static_cast<size_t>(t)].name) + "\"];\n";
      auto it = producer.find(t);
      if (it != producer.end()) d += "    " + it->second + " -> " + id + ";\n";
    }
    d += "  }\n";
  }
  // Control flow: If nodes point at their branches.
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    for (size_t i = 0; i < m.graphs[g].nodes.size(); ++i) {
      for (const auto& a : m.graphs[g].nodes[i].attrs) {
        if (a.type != KITE_ATTR_GRAPH || a.i < 0 || static_cast<size_t>(a.i) >= m.graphs.size()) continue;
        const GraphRec& branch = m.graphs[static_cast<size_t>(a.i)];
        if (branch.nodes.empty()) continue;
        d += "  g" + std::to_string(g) + "_n" + std::to_string(i) + " -> g" + std::to_string(a.i) +
             "_n0 [style=dashed, label=\"" + dot_escape(a.name) + "\"];\n";
      }
    }
  }
  d += "}\n";
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, dot_path;
  bool bodies = true, quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--dot" && i + 1 < argc) {
      dot_path = argv[++i];
    } else if (a == "--no-body") {
      bodies = false;
    } else if (a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kite-inspect: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else if (path.empty()) {
      path = a;
    } else {
      std::fprintf(stderr, "kite-inspect: more than one model ('%s', '%s')\n", path.c_str(), a.c_str());
      return 2;
    }
  }
  if (path.empty()) {
    usage(stderr);
    return 2;
  }
  std::shared_ptr<Model> model;
  const kite::rt::Status st = Model::load_file(path, &model);
  if (!st.is_ok()) {
    std::fprintf(stderr, "kite-inspect: %s\n", st.message().c_str());
    return 1;
  }
  const Model& m = *model;
  std::printf("%s: format %d.%d, producer '%s', source opset %lld\n", path.c_str(), m.format_major,
              m.format_minor, m.producer.c_str(), static_cast<long long>(m.source_opset));
  if (!quiet) {
    for (size_t g = 0; g < m.graphs.size(); ++g) {
      const GraphRec& graph = m.graphs[g];
      std::printf("\ngraph %zu '%s': %zu nodes\n", g, graph.name.c_str(), graph.nodes.size());
      for (int t : graph.inputs) std::printf("  input  %s\n", tensor_text(m, t).c_str());
      for (int t : graph.outputs) std::printf("  output %s\n", tensor_text(m, t).c_str());
      for (size_t i = 0; i < graph.nodes.size(); ++i) print_node(m, graph.nodes[i], "  ", i, bodies);
    }
  }
  std::map<std::string, int> ops, patterns;
  size_t body_nodes = 0, fused_nodes = 0;
  for (const NodeRec& n : m.main_graph().nodes) {
    ++ops[n.op];
    if (!n.fused_pattern.empty()) {
      ++patterns[n.fused_pattern];
      ++fused_nodes;
    }
    body_nodes += n.body.size();
  }
  uint64_t weights = 0;
  size_t constants = 0, scratch = 0;
  for (const TensorRec& t : m.tensors) {
    if (t.is_constant()) {
      ++constants;
      weights += t.byte_size;
    }
    if (t.kind == TensorKind::Scratch) ++scratch;
  }
  std::string op_text, pattern_text;
  for (const auto& kv : ops) op_text += (op_text.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
  for (const auto& kv : patterns) {
    pattern_text += (pattern_text.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
  }
  std::printf("\nsummary: %zu main-graph nodes (%zu fused, %zu body nodes behind them), %zu graphs, "
              "%zu tensors (%zu constants, %zu scratch)\n",
              m.main_graph().nodes.size(), fused_nodes, body_nodes, m.graphs.size(), m.tensors.size(), constants, scratch);
  std::printf("  ops: %s\n", op_text.c_str());
  std::printf("  fused patterns: %s\n", pattern_text.empty() ? "none" : pattern_text.c_str());
  std::printf("  weights: %s\n", human_bytes(weights).c_str());
  std::printf("  memory plan (%s, %llu-byte aligned): arena %s, lower bound %s, naive %s\n",
              m.plan.strategy.c_str(), static_cast<unsigned long long>(m.plan.alignment),
              human_bytes(m.plan.arena_size).c_str(), human_bytes(m.plan.lower_bound).c_str(),
              human_bytes(m.plan.naive_size).c_str());
  if (!dot_path.empty()) {
    const std::string dot = to_dot(m);
    std::FILE* f = std::fopen(dot_path.c_str(), "wb");
    if (!f || std::fwrite(dot.data(), 1, dot.size(), f) != dot.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "kite-inspect: cannot write '%s': %s\n", dot_path.c_str(), std::strerror(errno));
      return 1;
    }
    std::printf("  graphviz: %s\n", dot_path.c_str());
  }
  return 0;
}
