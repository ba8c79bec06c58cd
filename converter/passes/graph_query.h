// Read-only questions the passes ask about a model: who reads and writes
// each tensor, what a constant holds, what kind of node this is.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

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
  // True if an output of node other than the first is read or escapes
  // (BatchNormalization's training outputs, LayerNormalization's mean and
  // inverse deviation): a rewrite that keeps only the first must not apply.
  bool reads_extra_outputs(const ir::Node& node) const;

 private:
  bool valid(int t) const { return t >= 0 && static_cast<size_t>(t) < producer_.size(); }
  std::vector<int> producer_;
  std::vector<std::vector<int>> readers_;
  std::vector<bool> escapes_;
};

// Every tensor graph g's nodes read (fused bodies and nested branches
// included) and its outputs, appended to *out.
void collect_graph_reads(const ir::Model& model, int g, std::vector<int>* out);
// Every tensor a node depends on: its present inputs and what its subgraphs
// read (collect_graph_reads), appended to *out.
void collect_node_reads(const ir::Model& model, const ir::Node& node, std::vector<int>* out);

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

// ---- nodes -----------------------------------------------------------------

// An ONNX primitive (domain "", not fused) of this op type.
bool is_op(const ir::Node& node, const char* op);
// The other input of a two-input node that reads t (the first when it reads
// t twice); -1 when the node does not have two inputs.
int other_operand(const ir::Node& node, int t);
// Same attributes (names, types, values bit for bit), in any order.
bool same_attrs(const std::vector<ir::Attr>& a, const std::vector<ir::Attr>& b);

}  // namespace kite::passes
