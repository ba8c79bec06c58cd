// One home for building the nodes and tensors a backend is handed through
// the ABI (kite/backend.h), for everyone who hands them: the runtime's
// session, the converter's constant evaluation (the CPU backend computing
// folded constants) and the tests. Also the v1 view of a v2 node, which the
// runtime gives v1 plugins and the CPU backend gives its kernels.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "kite/ops/op_node.h"

namespace kite::abi {

// What a tensor is, independent of where it lives.
struct TensorDesc {
  const char* name = "";
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  int32_t rank = 0;
  const int64_t* shape = nullptr;   // must outlive the table
  uint64_t byte_size = 0;
  bool is_constant = false;
  const void* host_data = nullptr;  // constants: their bytes (the mapped file)
  // Constants: the file's pre-packed forms (must outlive the table).
  int32_t num_packed = 0;
  const kite_backend_packed_form* packed = nullptr;
};

// One kite_backend_tensor2 per tensor, at addresses that never move, so
// nodes can point at them and the host can fill in data or buffer/offset
// later. Tensors are referred to by index (the model's tensor index).
class TensorTable {
 public:
  TensorTable() = default;
  TensorTable(const TensorTable&) = delete;
  TensorTable& operator=(const TensorTable&) = delete;
  TensorTable(TensorTable&&) = default;  // a deque's elements stay where they are
  TensorTable& operator=(TensorTable&&) = default;

  // Replaces the table's contents. data starts as host_data for constants
  // (host backends read weights in place) and NULL otherwise.
  void assign(const std::vector<TensorDesc>& tensors);
  // Appends one tensor; returns its index.
  int add(const TensorDesc& tensor);
  size_t size() const { return v2_.size(); }
  kite_backend_tensor2& at(int index) { return v2_[static_cast<size_t>(index)]; }
  const kite_backend_tensor2& at(int index) const { return v2_[static_cast<size_t>(index)]; }

 private:
  std::deque<kite_backend_tensor2> v2_;
};

// The attributes of a node in ABI form, pointing into the Attr vector they
// were built from (which must stay put while this lives).
class AttrTable {
 public:
  AttrTable() = default;
  explicit AttrTable(const std::vector<kite::ops::Attr>& attrs) { assign(attrs); }
  AttrTable(const AttrTable&) = delete;
  AttrTable& operator=(const AttrTable&) = delete;
  AttrTable(AttrTable&&) = default;
  AttrTable& operator=(AttrTable&&) = default;
  void assign(const std::vector<kite::ops::Attr>& attrs);
  int32_t count() const { return static_cast<int32_t>(attrs_.size()); }
  const kite_backend_attr* data() const { return attrs_.data(); }
  const kite_backend_attr& operator[](size_t i) const { return attrs_[i]; }

 private:
  std::vector<kite_backend_attr> attrs_;
  std::vector<std::vector<const char*>> strings_;
};

// A v1 kite_backend_node (and its v1 tensors) describing a v2 node. data of
// each tensor comes from `data_of` (default: the v2 tensor's data). The v2
// node and its tensors must outlive the view; the view's own addresses never
// change after build.
class V1Node {
 public:
  using DataFn = void* (*)(const kite_backend_tensor2& tensor);
  V1Node() = default;
  V1Node(const V1Node&) = delete;
  V1Node& operator=(const V1Node&) = delete;
  // false (with a message naming the node) for a malformed v2 node: NULL
  // arrays with a non-zero count, negative counts.
  bool build(const kite_backend_node2& node, DataFn data_of, std::string* err);
  // Re-reads every tensor's data (after the host filled in buffers).
  void refresh();
  const kite_backend_node* get() const { return &node_; }
  // The v2 tensor that t (one of this view's tensors) describes, or null
  // when t is not one of them.
  const kite_backend_tensor2* source_of(const kite_backend_tensor* t) const;

 private:
  const kite_backend_node2* source_ = nullptr;
  DataFn data_of_ = nullptr;
  std::vector<kite_backend_tensor> tensors_;  // inputs then outputs; sized once
  std::vector<const kite_backend_tensor*> inputs_, outputs_;
  kite_backend_node node_{};
};

// A node handed to a backend: a kite_backend_node2 whose tensors point into
// a TensorTable, with its v1 view on request.
class Node {
 public:
  struct Spec {
    const char* name = "";
    const char* op = "";
    const char* domain = "";
    const char* fused_pattern = "";
    int32_t index = 0;                // position in the host's schedule
    std::vector<int> inputs;          // table indices; -1: absent optional input
    std::vector<int> outputs;         // table indices; -1: unused optional output
    const AttrTable* attrs = nullptr;
    // Or, when attrs is null, attributes already in ABI form (they must
    // outlive the node): a backend re-describing a node it was handed.
    int32_t num_raw_attrs = 0;
    const kite_backend_attr* raw_attrs = nullptr;
  };
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  void build(const Spec& spec, TensorTable* table);
  const kite_backend_node2* v2() const { return &node_; }
  // The v1 view; built on first use (data_of as in V1Node).
  const kite_backend_node* v1(V1Node::DataFn data_of = nullptr);

 private:
  std::vector<const kite_backend_tensor2*> inputs_, outputs_;
  kite_backend_node2 node_{};
  V1Node v1_;
  bool v1_built_ = false;
};

}  // namespace kite::abi
