// A loaded, verified .kite model. Immutable after loading, so any number of
// sessions on any threads may share it (weights are not copied).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kite/abi/node.h"
#include "kite/backend.h"
#include "kite/ops/op_node.h"
#include "kite/ops/tensor_kind.h"
#include "status.h"

namespace kite::rt {

using TensorKind = kite::ops::TensorKind;

// A backend's pre-packed form of a constant (format 1.1), in the mapping.
struct PackedRec {
  std::string key;  // "cpu/x86-avx512/conv-a6-g1"
  const uint8_t* data = nullptr;
  uint64_t byte_size = 0;
};

struct TensorRec {
  std::string name;
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  TensorKind kind = TensorKind::Activation;
  const uint8_t* const_data = nullptr;  // Constant: inside the mapped file
  uint64_t arena_offset = 0;            // others: offset in the session arena
  std::vector<PackedRec> packed;        // Constant: packed forms the file carries
  // The same in ABI form (kite_backend_tensor2::packed), keys pointing into
  // packed; built once at load.
  std::vector<kite_backend_packed_form> packed_abi;

  bool is_constant() const { return kind == TensorKind::Constant; }
};

struct NodeRec {
  std::string name;
  std::string op;
  std::string domain;
  std::string fused_pattern;
  std::vector<int> inputs;   // -1: absent optional input
  std::vector<int> outputs;
  std::vector<kite::ops::Attr> attrs;
  std::vector<NodeRec> body;
  // The attributes in ABI form, pointing into attrs (built once at load;
  // moving a NodeRec keeps the vectors' buffers, so the pointers stay valid).
  kite::abi::AttrTable abi_attrs;
};

struct GraphRec {
  std::string name;
  std::vector<NodeRec> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;
};

struct PlanRec {
  uint64_t arena_size = 0;
  uint64_t alignment = 0;
  uint64_t lower_bound = 0;
  uint64_t naive_size = 0;
  std::string strategy;
};

// Owns the file bytes: an mmap of the file, or a heap copy of caller memory.
class FileBytes {
 public:
  virtual ~FileBytes() = default;
  virtual const uint8_t* data() const = 0;
  virtual uint64_t size() const = 0;
};

class Model {
 public:
  static Status load_file(const std::string& path, std::shared_ptr<Model>* out);
  static Status load_memory(const void* data, size_t size, std::shared_ptr<Model>* out);

  int format_major = 0;
  int format_minor = 0;
  std::string producer;
  int64_t source_opset = 0;
  std::vector<TensorRec> tensors;
  std::vector<GraphRec> graphs;
  PlanRec plan;

  const GraphRec& main_graph() const { return graphs.front(); }
  // The file's bytes (page-aligned: an mmap, or a page-aligned heap copy), so
  // device backends can import the weights (constants' const_data) as they are.
  const uint8_t* file_data() const;
  uint64_t file_size() const;

 private:
  friend Status decode_and_verify(std::unique_ptr<FileBytes> bytes, const std::string& origin,
                                  std::shared_ptr<Model>* out);
  std::unique_ptr<FileBytes> bytes_;
};

// Verifies everything (FlatBuffers verifier, version, every index, shape, byte
// size, blob range and arena offset) and decodes into a Model. origin names
// the file in messages.
Status decode_and_verify(std::unique_ptr<FileBytes> bytes, const std::string& origin,
                         std::shared_ptr<Model>* out);

}  // namespace kite::rt
