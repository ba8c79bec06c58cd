// The converter's in-memory graph: static shapes and dtypes, constants with
// their bytes, fused nodes with their bodies, subgraphs for If. It mirrors
// schemas/kite.fbs so that writing a file is a direct translation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/kite.h"
#include "kite/ops/attr.h"
#include "kite/ops/op_node.h"
#include "kite/ops/tensor_kind.h"

namespace kite::ir {

using TensorKind = kite::ops::TensorKind;

struct Tensor {
  std::string name;
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  bool shape_known = false;
  TensorKind kind = TensorKind::Activation;
  std::vector<uint8_t> data;  // Constant: little-endian element bytes (bool: 1 byte)

  bool is_constant() const { return kind == TensorKind::Constant; }
  uint64_t byte_size() const;  // from dtype and shape
};

using Attr = kite::ops::Attr;

struct Node {
  std::string name;
  std::string op;
  std::string domain;        // "" for ai.onnx
  std::vector<int> inputs;   // tensor indices, -1 for an absent optional input
  std::vector<int> outputs;
  std::vector<Attr> attrs;
  std::string fused_pattern;  // non-empty for fused nodes
  std::vector<Node> body;     // primitive nodes a fused node replaced

  // Attribute readers (kite/ops/attr.h): the fallback when the attribute is
  // absent or has another type.
  const Attr* find_attr(const std::string& attr_name) const;
  int64_t attr_int(const std::string& attr_name, int64_t fallback) const;
  float attr_float(const std::string& attr_name, float fallback) const;
  std::string attr_string(const std::string& attr_name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& attr_name,
                                 const std::vector<int64_t>& fallback) const;
  // True if an attribute holds a subgraph (If's branches).
  bool has_subgraph() const;
  // "Conv 'layer1.0.conv1'" for messages (kite::ops::node_label).
  std::string label() const { return kite::ops::node_label(op, name); }
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;   // execution order
  std::vector<int> inputs;
  std::vector<int> outputs;
};

struct MemoryPlan {
  uint64_t arena_size = 0;
  uint64_t alignment = 256;
  uint64_t lower_bound = 0;
  uint64_t naive_size = 0;
  std::string strategy;
  std::vector<uint64_t> offsets;  // per tensor; unused for constants
};

// A backend's pre-packed form of a constant (format 1.1, Model.packed in
// schemas/kite.fbs): one blob, stored under the key of every ISA level whose
// kernels read that layout.
struct PackedForm {
  int tensor = -1;                 // a Constant
  std::vector<std::string> keys;   // "cpu/x86-avx512/conv-a6-g1", ...
  std::vector<uint8_t> data;
};

struct Model {
  int64_t source_opset = 0;
  std::string producer;
  std::vector<Tensor> tensors;
  std::vector<Graph> graphs;  // graphs[0] is the main graph
  MemoryPlan plan;
  std::vector<PackedForm> packed;  // written last (converter/src/pack_weights.cpp)

  int add_tensor(Tensor t);
  int find_tensor(const std::string& name) const;  // -1 if none
  // A name no tensor has yet: base, else base_1, base_2, ...
  std::string unused_tensor_name(const std::string& base) const;
  Graph& main() { return graphs.at(0); }
  const Graph& main() const { return graphs.at(0); }
};

// "1x?x224": a shape whose unknown dims are -1 (a declared shape before
// inference); "scalar" for rank 0.
std::string declared_shape_string(const std::vector<int64_t>& dims);

// Builds the shared op description of a node (for shape inference and for
// evaluating it with the CPU kernels).
kite::ops::OpNode to_op_node(const Model& model, const Node& node);

}  // namespace kite::ir
