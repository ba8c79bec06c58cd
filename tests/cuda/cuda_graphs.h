// Small graphs built directly in the converter's IR, run through the public
// C API on the CUDA backend under test and on the CPU backend, and compared.
// The backend under test is "cudaemu" (the plugin's code over the host
// emulator of the driver: every CI run) or "cuda" (a real GPU; the test
// programs exit 77, skipped, without one). KITE_CUDA_TEST_BACKEND names it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/kite.h"

namespace kite::cudatest {

using Shape = std::vector<int64_t>;
using Options = std::vector<std::pair<std::string, std::string>>;

kite::ops::Attr ai(const std::string& name, int64_t v);
kite::ops::Attr af(const std::string& name, float v);
kite::ops::Attr as(const std::string& name, const std::string& v);
kite::ops::Attr aints(const std::string& name, const std::vector<int64_t>& v);

class Graph {
 public:
  Graph();
  // From here on input, weight, const_float and the outputs of fused nodes
  // are float16 (values rounded to half), as in a file kite-convert
  // --precision fp16 wrote.
  void use_float16() { float_dtype_ = KITE_DTYPE_FLOAT16; }
  bool float16() const { return float_dtype_ == KITE_DTYPE_FLOAT16; }
  // A graph input with seeded values uniform in [lo, hi).
  int input(const Shape& shape, float lo = -1.0f, float hi = 1.0f);
  int input_i64(const Shape& shape, const std::vector<int64_t>& values);
  int weight(const Shape& shape, float lo = -1.0f, float hi = 1.0f);
  int const_f32(const Shape& shape, const std::vector<float>& values);
  // A constant of the graph's float dtype (float32, or float16 after use_float16).
  int const_float(const Shape& shape, const std::vector<float>& values);
  int const_i64(const Shape& shape, const std::vector<int64_t>& values);
  // A node whose outputs get the shapes kite::ops infers, or `shapes` (fused
  // nodes: the graph's float dtype). Returns the output tensors.
  std::vector<int> node(const std::string& op, const std::vector<int>& inputs,
                        const std::vector<kite::ops::Attr>& attrs = {}, int outputs = 1,
                        const std::vector<Shape>& shapes = {}, const std::string& pattern = "");
  int op(const std::string& op, const std::vector<int>& inputs, const std::vector<kite::ops::Attr>& attrs = {}) {
    return node(op, inputs, attrs)[0];
  }
  // Fused nodes as the optimizer writes them: begin_body(), the primitive
  // nodes of the pattern (op/node), then fuse() replaces them by one node
  // of domain "kite" whose body they become; their intermediate tensors
  // turn into scratch tensors. Returns the fused node's outputs.
  void begin_body();
  std::vector<int> fuse(const std::string& op, const std::string& pattern, const std::vector<int>& inputs,
                        const std::vector<kite::ops::Attr>& attrs, const std::vector<int>& outputs);
  void output(int t);
  // Plans memory and serialises; the values of the inputs in input order.
  std::vector<uint8_t> bytes();
  const std::vector<std::vector<uint8_t>>& input_values() const { return values_; }
  const kite::ir::Model& model() const { return m_; }

 private:
  int add(const std::string& name, kite_dtype dtype, const Shape& shape, kite::ir::TensorKind kind);
  std::vector<uint8_t> float_bytes(const std::vector<float>& values) const;
  kite::ir::Model m_;
  kite_dtype float_dtype_ = KITE_DTYPE_FLOAT32;
  std::vector<std::vector<uint8_t>> values_;
  int counter_ = 0;
  size_t body_start_ = 0;
  bool recording_ = false;
};

// y = act(x) as the primitive nodes the optimizer fuses (inside a body),
// and the fused node's attributes for it (docs/FUSIONS.md).
int activation(Graph& g, int x, const std::string& act);
std::vector<kite::ops::Attr> activation_attrs(const std::string& act);

struct Result {
  kite_status status = KITE_OK;
  std::string error;
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<kite_dtype> dtypes;
  std::vector<std::string> placement;   // backend per node
  std::vector<std::string> reasons;     // reason per node ("" when the first choice)
  std::vector<int> decomposed;          // 1: a fused node run as its body
  kite_run_stats stats{};
  std::vector<uint64_t> node_ns;        // with profile
};

// The backend under test and where its plugin is.
const std::string& backend();
const char* plugin_dir();
// "" when the backend has a device here; else why not (the programs skip).
std::string unavailable_reason();

// Runs the graph `runs` times on `backends` (strict: any fallback is an
// error) with options for the backend under test.
Result run(Graph& g, const std::string& backends, const Options& options = {}, bool strict = true, int runs = 2,
           bool profile = false, void* external_queue = nullptr);

// max |a - b| over float outputs divided by max(max |ref|, 1e-6); integer
// outputs must match exactly (else 1). where: the first worst output.
double normalized_error(const Result& ref, const Result& got, std::string* where);

}  // namespace kite::cudatest
