// Helpers the passes share: who reads and writes each tensor, constant
// values, new constants, rewiring, ordering, and building a fused node.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kite/converter/ir.h"
#include "passes/pass.h"

namespace kite::passes {

// Readers and writers of every tensor, for the main graph. A snapshot: any
// rewrite makes it stale, so passes rebuild it after changing the graph.
class UseMap {
 public:
  explicit UseMap(const ir::Model& model);

  // Main-graph node that writes t, or -1 (constant, graph input, subgraph).
  int producer(int t) const { return valid(t) ? producer_[static_cast<size_t>(t)] : -1; }
  // Main-graph nodes reading t, one entry per input slot (a node reading t
  // twice is listed twice).
  const std::vector<int>& readers(int t) const;
  // Reads outside the main graph's node inputs: an output of any graph, or a
  // read from inside an If branch.
  bool escapes(int t) const { return valid(t) && escapes_[static_cast<size_t>(t)]; }
  // True if t is read only by main-graph nodes in `nodes` (at least once).
  bool only_read_by(int t, const std::set<int>& nodes) const;
  // The single main-graph node reading t when t has exactly one reader slot
  // and does not escape; else -1.
  int sole_reader(int t) const;

 private:
  bool valid(int t) const { return t >= 0 && static_cast<size_t>(t) < producer_.size(); }
  std::vector<int> producer_;
  std::vector<std::vector<int>> readers_;
  std::vector<bool> escapes_;
};

// ---- tensors and constants -------------------------------------------------

const ir::Tensor& tensor_at(const ir::Model& model, int t);
bool is_constant(const ir::Model& model, int t);
bool is_float32(const ir::Model& model, int t);
int64_t numel_of(const ir::Model& model, int t);
// The float32 values of a constant (empty if t is not a float32 constant).
std::vector<float> float_values(const ir::Model& model, int t);
// The single value of a one-element float32 constant.
bool scalar_float(const ir::Model& model, int t, float* value);
// The values of an int64/int32 constant (false if not one).
bool int_values(const ir::Model& model, int t, std::vector<int64_t>* values);
// |a - b| <= tol * |b|.
bool near(float a, double b, double tol = 1e-4);

// A name no tensor has yet ("base", "base_1", ...).
std::string unique_tensor_name(const ir::Model& model, const std::string& base);
int add_float_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<float>& values);
int add_int64_constant(ir::Model* model, const std::string& base, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& values);
// A new activation tensor with the dtype and shape of `like`.
int add_activation_like(ir::Model* model, const std::string& base, int like);

// Every tensor graph g's nodes read (fused bodies and nested branches
// included) and its outputs, appended to *out.
void collect_graph_reads(const ir::Model& model, int g, std::vector<int>* out);

// Ops whose result must not be computed once and reused (folding, CSE).
bool is_nondeterministic(const std::string& op);

// ---- rewiring --------------------------------------------------------------

// Every node input (all graphs, fused bodies included) reading `from` reads
// `to` instead. Graph outputs are not touched.
void replace_reads(ir::Model* model, int from, int to);
// Removes the main-graph nodes whose flag is set.
void erase_nodes(ir::Model* model, const std::vector<bool>& dead);
// Reorders the main graph topologically, keeping the current order wherever
// the dependencies allow. False if the graph has a cycle (nothing changed).
bool stable_topo_sort(ir::Model* model);

// Attribute helpers.
ir::Attr int_attr(const std::string& name, int64_t v);
ir::Attr float_attr(const std::string& name, float v);
ir::Attr string_attr(const std::string& name, const std::string& v);
ir::Attr ints_attr(const std::string& name, const std::vector<int64_t>& v);
int64_t attr_int(const ir::Node& node, const std::string& name, int64_t fallback);
float attr_float(const ir::Node& node, const std::string& name, float fallback);
std::string attr_string(const ir::Node& node, const std::string& name, const std::string& fallback);
std::vector<int64_t> attr_ints(const ir::Node& node, const std::string& name,
                               const std::vector<int64_t>& fallback);
bool has_graph_attr(const ir::Node& node);
bool same_attrs(const std::vector<ir::Attr>& a, const std::vector<ir::Attr>& b);

// An ONNX primitive (domain "", not fused) of this op type.
bool is_op(const ir::Node& node, const char* op);

// ---- folding into weights ---------------------------------------------------

// Scales the output channels of main-graph node node_index (Conv,
// ConvTranspose or Gemm with float32 constant weights and bias) by `scale`,
// then adds `shift` (per channel; empty: 1 and 0), through new weight and
// bias constants; a Gemm's beta becomes 1. False (graph untouched, *why set)
// when the node does not fit. Shared by fold_batch_norm and
// fold_scale_into_weights.
bool rescale_output_channels(PassContext& ctx, int node_index, const std::vector<double>& scale,
                             const std::vector<double>& shift, std::string* why);

// ---- fusion ----------------------------------------------------------------

struct FusionSpec {
  std::string pattern;       // "Conv+Relu": the fused_pattern, also the report's key
  std::string op;            // "FusedConv": the fused op (domain "kite")
  std::vector<int> nodes;    // main-graph node indices replaced
  std::vector<int> inputs;   // the fused node's inputs (-1: absent optional)
  std::vector<int> outputs;  // the fused node's outputs
  std::vector<ir::Attr> attrs;
};

// Replaces spec.nodes by one fused node (domain "kite") whose body is those
// nodes in graph order (bodies of fused nodes among them are inlined: bodies
// do not nest). Refuses (false, *why set, graph untouched) when a tensor the
// nodes produce other than spec.outputs is read elsewhere or is a graph
// output, when an output is not produced by the nodes, when the body reads a
// non-constant tensor that is neither a fused input nor produced inside, or
// when fusing would create a cycle. On success the intermediates become
// Scratch tensors and the graph is
// re-sorted.
bool apply_fusion(PassContext& ctx, const FusionSpec& spec, std::string* why);

// An activation applied to tensor t: the node(s) computing it, found from t's
// reader. Kinds: Relu, Clip (alpha=min, beta=max), Sigmoid, SiLU (x*Sigmoid(x)),
// HardSigmoid (alpha, beta), HardSwish (x*HardSigmoid(x) with alpha 1/6,
// beta 1/2, or the HardSwish op), LeakyRelu (alpha), Tanh, Gelu (erf) and
// GeluTanh (primitive Gelu, or a fused Gelu node).
struct Activation {
  std::string kind;
  float alpha = 0.0f;
  float beta = 0.0f;
  std::vector<int> nodes;  // main-graph nodes of the activation
  int output = -1;         // its result
};
// Finds the activation reading t (t must have no other reader). False if none.
bool match_activation(const ir::Model& model, const UseMap& uses, int t, Activation* out);
// The attributes a fused kernel reads for an activation.
void add_activation_attrs(const Activation& act, std::vector<ir::Attr>* attrs);

}  // namespace kite::passes
