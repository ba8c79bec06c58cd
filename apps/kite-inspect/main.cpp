// kite-inspect: prints a .kite model's graph (nodes with op, fused pattern,
// input and output shapes, arena offsets; fused bodies indented) and the
// memory plan; --dot FILE writes it as a Graphviz graph. It reads the model
// through the public C API (kite_model_load_file and the introspection calls
// of kite.h), so the file is verified exactly as an application would load it.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kite/kite.h"

namespace {

constexpr int32_t kAttrGraph = 7;  // kite_model_attr.type of a subgraph

// The model as kite.h describes it, read once.
struct Tensor {
  kite_model_tensor info{};
  std::vector<int64_t> shape;
};
struct Node {
  kite_model_node info{};
  std::vector<kite_model_attr> attrs;
  std::vector<Node> body;
};
struct Graph {
  kite_model_graph info{};
  std::vector<Node> nodes;
};
struct Model {
  int32_t format_major = 0, format_minor = 0;
  int64_t source_opset = 0;
  std::string producer;
  std::vector<Tensor> tensors;
  std::vector<Graph> graphs;
  kite_model_plan plan{};
};

bool read_node(const kite_model* m, int32_t g, int32_t n, int32_t b, Node* out) {
  if (kite_model_get_node(m, g, n, b, &out->info) != KITE_OK) return false;
  for (int32_t a = 0; a < out->info.num_attrs; ++a) {
    kite_model_attr attr{};
    if (kite_model_get_node_attr(m, g, n, b, a, &attr) != KITE_OK) return false;
    out->attrs.push_back(attr);
  }
  if (b >= 0) return true;
  for (int32_t k = 0; k < out->info.num_body_nodes; ++k) {
    out->body.emplace_back();
    if (!read_node(m, g, n, k, &out->body.back())) return false;
  }
  return true;
}

bool read_model(const kite_model* m, Model* out) {
  if (kite_model_get_format_version(m, &out->format_major, &out->format_minor) != KITE_OK) return false;
  if (kite_model_get_source_opset(m, &out->source_opset) != KITE_OK) return false;
  out->producer = kite_model_get_producer(m);
  if (kite_model_get_plan(m, &out->plan) != KITE_OK) return false;
  int32_t count = 0;
  if (kite_model_get_tensor_count(m, &count) != KITE_OK) return false;
  out->tensors.resize(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    Tensor& t = out->tensors[static_cast<size_t>(i)];
    if (kite_model_get_tensor(m, i, &t.info) != KITE_OK) return false;
    t.shape.assign(t.info.shape, t.info.shape + t.info.rank);
  }
  if (kite_model_get_graph_count(m, &count) != KITE_OK) return false;
  out->graphs.resize(static_cast<size_t>(count));
  for (int32_t g = 0; g < count; ++g) {
    Graph& graph = out->graphs[static_cast<size_t>(g)];
    if (kite_model_get_graph(m, g, &graph.info) != KITE_OK) return false;
    graph.nodes.resize(static_cast<size_t>(graph.info.num_nodes));
    for (int32_t n = 0; n < graph.info.num_nodes; ++n) {
      if (!read_node(m, g, n, -1, &graph.nodes[static_cast<size_t>(n)])) return false;
    }
  }
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: kite-inspect MODEL.kite [--dot FILE.dot] [--no-body] [--quiet]\n"
               "\n"
               "Prints the graph of a Kite model: each node with its op, fused pattern,\n"
               "inputs and outputs (dtype, shape, arena offset or 'const'), the bodies of\n"
               "fused nodes indented, then op counts and the memory plan.\n"
               "  --dot FILE   also write a Graphviz graph (dot -Tsvg FILE > graph.svg)\n"
               "  --no-body    do not list the bodies of fused nodes\n"
               "  --quiet      print only the summary\n"
               "  --version    print the version\n");
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

const char* kind_name(kite_tensor_kind k) {
  switch (k) {
    case KITE_TENSOR_INPUT: return "input";
    case KITE_TENSOR_OUTPUT: return "output";
    case KITE_TENSOR_CONSTANT: return "const";
    case KITE_TENSOR_SCRATCH: return "scratch";
    default: return "";
  }
}

// "x f32 1x3x224x224 @0" / "w f32 64x3x7x7 const".
std::string tensor_text(const Model& m, int t) {
  if (t < 0) return "(absent)";
  const Tensor& r = m.tensors[static_cast<size_t>(t)];
  std::string s = "'" + std::string(r.info.name) + "' " + kite_dtype_name(r.info.dtype) + " " + shape_string(r.shape);
  if (r.info.kind == KITE_TENSOR_CONSTANT) return s + " const";
  s += " @" + std::to_string(r.info.arena_offset);
  const char* kind = kind_name(r.info.kind);
  if (kind[0] != '\0') s += std::string(" ") + kind;
  return s;
}

std::string node_title(const Node& n) {
  std::string s = (n.info.domain[0] == '\0' ? "" : std::string(n.info.domain) + ".") + n.info.op;
  if (n.info.fused_pattern[0] != '\0') s += " [" + std::string(n.info.fused_pattern) + "]";
  return s;
}

void print_node(const Model& m, const Node& n, const std::string& indent, size_t index,
                bool bodies) {
  std::printf("%s%3zu  %s  '%s'\n", indent.c_str(), index, node_title(n).c_str(), n.info.name);
  for (int32_t k = 0; k < n.info.num_inputs; ++k) {
    std::printf("%s       in  %s\n", indent.c_str(), tensor_text(m, n.info.inputs[k]).c_str());
  }
  for (int32_t k = 0; k < n.info.num_outputs; ++k) {
    std::printf("%s       out %s\n", indent.c_str(), tensor_text(m, n.info.outputs[k]).c_str());
  }
  for (const auto& a : n.attrs) {
    if (a.type == kAttrGraph) {
      std::printf("%s       %s -> graph %lld\n", indent.c_str(), a.name, static_cast<long long>(a.i));
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
    const Graph& graph = m.graphs[g];
    const std::string prefix = "g" + std::to_string(g) + "_";
    d += "  subgraph cluster_" + std::to_string(g) + " {\n    label=\"graph " + std::to_string(g) + " '" +
         dot_escape(graph.info.name) + "'\";\n";
    std::map<int, std::string> producer;
    for (int32_t k = 0; k < graph.info.num_inputs; ++k) {
      const int t = graph.info.inputs[k];
      const std::string id = prefix + "in" + std::to_string(t);
      d += "    " + id + " [shape=ellipse, label=\"" + dot_escape(m.tensors[static_cast<size_t>(t)].info.name) + "\"];\n";
      producer[t] = id;
    }
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const Node& n = graph.nodes[i];
      const bool fused = n.info.fused_pattern[0] != '\0';
      const std::string id = prefix + "n" + std::to_string(i);
      std::string label = dot_escape(node_title(n));
      if (fused) label += "\\n" + std::to_string(n.body.size()) + " body nodes";
      d += "    " + id + " [label=\"" + label + "\"" +
           (fused ? ", style=filled, fillcolor=\"#cfe2ff\"" : "") + "];\n";
      for (int32_t k = 0; k < n.info.num_inputs; ++k) {
        const int t = n.info.inputs[k];
        if (t < 0 || m.tensors[static_cast<size_t>(t)].info.kind == KITE_TENSOR_CONSTANT) continue;
        auto it = producer.find(t);
        if (it == producer.end()) continue;  // an outer-scope tensor of a branch
        d += "    " + it->second + " -> " + id + " [label=\"" + shape_string(m.tensors[static_cast<size_t>(t)].shape) +
             "\"];\n";
      }
      for (int32_t k = 0; k < n.info.num_outputs; ++k) producer[n.info.outputs[k]] = id;
    }
    for (int32_t k = 0; k < graph.info.num_outputs; ++k) {
      const int t = graph.info.outputs[k];
      const std::string id = prefix + "out" + std::to_string(t);
      d += "    " + id + " [shape=ellipse, label=\"" + dot_escape(m.tensors[static_cast<size_t>(t)].info.name) + "\"];\n";
      auto it = producer.find(t);
      if (it != producer.end()) d += "    " + it->second + " -> " + id + ";\n";
    }
    d += "  }\n";
  }
  // Control flow: If nodes point at their branches.
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    for (size_t i = 0; i < m.graphs[g].nodes.size(); ++i) {
      for (const auto& a : m.graphs[g].nodes[i].attrs) {
        if (a.type != kAttrGraph || a.i < 0 || static_cast<size_t>(a.i) >= m.graphs.size()) continue;
        const Graph& branch = m.graphs[static_cast<size_t>(a.i)];
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
    } else if (a == "--version") {
      std::printf("kite-inspect %s (format %d.%d)\n", KITE_VERSION_STRING, KITE_FORMAT_MAJOR,
                  KITE_FORMAT_MINOR);
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
  kite_model* handle = nullptr;
  const kite_status st = kite_model_load_file(path.c_str(), &handle);
  if (st != KITE_OK) {
    std::fprintf(stderr, "kite-inspect: %s\n", kite_last_error());
    return 1;
  }
  std::unique_ptr<kite_model, decltype(&kite_model_destroy)> owner(handle, &kite_model_destroy);
  Model model;
  if (!read_model(handle, &model)) {
    std::fprintf(stderr, "kite-inspect: %s\n", kite_last_error());
    return 1;
  }
  const Model& m = model;
  std::printf("%s: format %d.%d, producer '%s', source opset %lld\n", path.c_str(), m.format_major,
              m.format_minor, m.producer.c_str(), static_cast<long long>(m.source_opset));
  if (!quiet) {
    for (size_t g = 0; g < m.graphs.size(); ++g) {
      const Graph& graph = m.graphs[g];
      std::printf("\ngraph %zu '%s': %zu nodes\n", g, graph.info.name, graph.nodes.size());
      for (int32_t k = 0; k < graph.info.num_inputs; ++k) {
        std::printf("  input  %s\n", tensor_text(m, graph.info.inputs[k]).c_str());
      }
      for (int32_t k = 0; k < graph.info.num_outputs; ++k) {
        std::printf("  output %s\n", tensor_text(m, graph.info.outputs[k]).c_str());
      }
      for (size_t i = 0; i < graph.nodes.size(); ++i) print_node(m, graph.nodes[i], "  ", i, bodies);
    }
  }
  std::map<std::string, int> ops, patterns;
  size_t body_nodes = 0, fused_nodes = 0;
  for (const Node& n : m.graphs.front().nodes) {
    ++ops[n.info.op];
    if (n.info.fused_pattern[0] != '\0') {
      ++patterns[n.info.fused_pattern];
      ++fused_nodes;
    }
    body_nodes += n.body.size();
  }
  size_t constants = 0, scratch = 0;
  for (const Tensor& t : m.tensors) {
    if (t.info.kind == KITE_TENSOR_CONSTANT) ++constants;
    if (t.info.kind == KITE_TENSOR_SCRATCH) ++scratch;
  }
  std::string op_text, pattern_text;
  for (const auto& kv : ops) op_text += (op_text.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
  for (const auto& kv : patterns) {
    pattern_text += (pattern_text.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
  }
  std::printf("\nsummary: %zu main-graph nodes (%zu fused, %zu body nodes behind them), %zu graphs, "
              "%zu tensors (%zu constants, %zu scratch)\n",
              m.graphs.front().nodes.size(), fused_nodes, body_nodes, m.graphs.size(), m.tensors.size(), constants,
              scratch);
  std::printf("  ops: %s\n", op_text.c_str());
  std::printf("  fused patterns: %s\n", pattern_text.empty() ? "none" : pattern_text.c_str());
  std::printf("  weights: %s\n", human_bytes(m.plan.weights_bytes).c_str());
  std::printf("  memory plan (%s, %llu-byte aligned): arena %s, lower bound %s, naive %s\n",
              m.plan.strategy, static_cast<unsigned long long>(m.plan.alignment),
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
