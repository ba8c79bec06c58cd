// Drives the Vulkan plugin through the backend ABI v2 directly (dlopen of
// libkite_backend_vulkan.so), the way the runtime does, and the CPU backend
// through its ABI on the same graph, so that every op and fused pattern can
// be compared before (and independently of) the runtime's v2 scheduler.
//
// A test Graph is tensors (inputs with values, constants, intermediates,
// outputs) and nodes in order. run_cpu() computes it with the CPU backend;
// VulkanRun lays the non-constant tensors out in one arena (offsets at an
// alignment of choice, so unaligned tensors are exercised too), the
// constants in one weights buffer, poisons the arena, uploads (or writes
// through the mapping, unified mode), binds, runs per node or as one
// recorded segment, and downloads the outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "kite/ops/attr.h"
#include "kite/ops/op_node.h"

namespace kite::vktest {

using Shape = std::vector<int64_t>;

struct Tensor {
  std::string name;
  kite_dtype dtype = KITE_DTYPE_FLOAT32;
  Shape shape;
  enum Kind { kInput, kConstant, kIntermediate, kOutput } kind = kIntermediate;
  std::vector<uint8_t> data;  // inputs and constants
  // Vulkan layout only: this tensor lives inside tensor `alias` at
  // alias_offset bytes (in place, or a Concat input written into its slice).
  int alias = -1;
  uint64_t alias_offset = 0;
  // Vulkan layout only: the arena (or weights) offset a memory plan chose.
  int64_t fixed_offset = -1;
  uint64_t bytes() const;
};

struct Node {
  std::string name, op, domain, pattern;
  std::vector<int> inputs;    // tensor indices, -1: absent
  std::vector<int> outputs;   // tensor indices, -1: unused optional output
  std::vector<kite::ops::Attr> attrs;
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  std::vector<int> output_order;  // mark_output order

  int add(Tensor t);
  // Random values uniform in [lo, hi) (seeded by name), float32.
  int input(const std::string& name, const Shape& shape, float lo = -1.0f, float hi = 1.0f);
  int constant(const std::string& name, const Shape& shape, float lo = -1.0f, float hi = 1.0f);
  int constant_i64(const std::string& name, const Shape& shape, const std::vector<int64_t>& values);
  int constant_f32(const std::string& name, const Shape& shape, const std::vector<float>& values);
  int input_i64(const std::string& name, const Shape& shape, const std::vector<int64_t>& values);
  int tensor(const std::string& name, const Shape& shape, kite_dtype dtype = KITE_DTYPE_FLOAT32);
  // Adds a node whose outputs (new tensors named <name>_out<k>) get the
  // shapes kite::ops infers, or `shapes` when given (fused ops). The last
  // node's outputs become graph outputs unless marked otherwise.
  std::vector<int> node(const std::string& op, const std::vector<int>& inputs,
                        std::vector<kite::ops::Attr> attrs = {}, int num_outputs = 1,
                        const std::vector<Shape>& shapes = {}, const std::string& domain = "",
                        const std::string& pattern = "");
  void mark_output(int t) {
    tensors[static_cast<size_t>(t)].kind = Tensor::kOutput;
    output_order.push_back(t);
  }
  void place_in(int t, int host, uint64_t byte_offset = 0) {
    tensors[static_cast<size_t>(t)].alias = host;
    tensors[static_cast<size_t>(t)].alias_offset = byte_offset;
  }
  // Marked outputs in marking order; else the last node's outputs.
  std::vector<int> outputs() const;
};

inline kite::ops::Attr attr_i(const std::string& name, int64_t v) { return kite::ops::int_attr(name, v); }
inline kite::ops::Attr attr_f(const std::string& name, float v) { return kite::ops::float_attr(name, v); }
inline kite::ops::Attr attr_s(const std::string& name, const std::string& v) { return kite::ops::string_attr(name, v); }
inline kite::ops::Attr attr_ints(const std::string& name, const std::vector<int64_t>& v) {
  return kite::ops::ints_attr(name, v);
}

// Values of the graph's outputs, in Graph::outputs() order.
using Values = std::vector<std::vector<uint8_t>>;

// The CPU backend's results; false with a message.
bool run_cpu(const Graph& g, Values* out, std::string* err);

// The main graph of a .kite file (converted by kite-convert): its tensors
// with the memory plan's arena offsets, constants' bytes, random inputs
// (float32 in [-1, 1); integer inputs in [0, int_range)), and nodes.
bool load_kite_graph(const std::string& path, Graph* g, std::string* err, int64_t int_range = 100);

struct VulkanOptions {
  bool unified = true;          // false: unified=0 (staging copies)
  bool segment = true;          // false: per-node execute
  uint64_t alignment = 0;       // arena/weights offsets; 0: the device's
  int runs = 2;                 // runs (the outputs of the last are compared)
  bool profile = false;
  std::vector<std::pair<std::string, std::string>> options;  // extra backend options
  bool allow_declined = false;  // run the graph only if every node is accepted; else report
};

struct RunReport {
  std::vector<std::string> declined;  // "op 'name': reason" per node the backend declined
  double prepare_ms = 0.0;            // create2 .. prepare_segment
  std::vector<double> run_ms;         // per run: begin_run .. synchronize
  std::vector<double> run_cpu_ms;     // the same, in CPU time of the process (lavapipe's threads included)
};

// The plugin and one open device, for the whole test program.
struct Plugin {
  void* handle = nullptr;
  const kite_backend_api* api = nullptr;
  void* device = nullptr;
  kite_backend_device_info info{};
  std::string error;            // why there is no device
  static Plugin& get();
  bool available() const { return device != nullptr; }
  // Closes the device and the plugin (end of the program, so that leak
  // checkers see everything released).
  void close();
};

// Messages the backend logged at error/warning level (validation layer).
std::vector<std::string> take_log_messages();

// Runs g on the Vulkan plugin. Nodes the backend declines are an error
// naming the node and the reason. times_ns: per node, when profiling.
bool run_vulkan(const Graph& g, const VulkanOptions& o, Values* out, std::string* err,
                std::vector<uint64_t>* times_ns = nullptr, RunReport* report = nullptr);

// The graph with every float32 tensor made float16 (constants and inputs
// rounded to half, ties to even), as kite-convert --precision fp16 leaves an
// fp16 node; Resize's roi and scales stay float32, as the converter keeps
// them.
Graph to_half(const Graph& g);

// max |a - b| / max(max |ref|, floor) over float32 and float16 outputs;
// exact compare of integer outputs (returns 0 or 1).
double normalized_error(const Graph& g, const Values& ref, const Values& got, std::string* where);

}  // namespace kite::vktest
