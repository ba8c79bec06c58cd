// Tiny models built directly in the converter's IR, for tests that need a
// .kite file without going through ONNX.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kite/converter/ir.h"
#include "kite/kite.h"
#include "memory/planner.h"
#include "writer/kite_writer.h"

namespace kite::test {

inline ir::Tensor make_tensor(const std::string& name, kite_dtype dtype,
                              std::vector<int64_t> shape, ir::TensorKind kind) {
  ir::Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.shape_known = true;
  t.kind = kind;
  return t;
}

inline ir::Tensor make_const(const std::string& name, std::vector<int64_t> shape,
                             const std::vector<float>& values) {
  ir::Tensor t = make_tensor(name, KITE_DTYPE_FLOAT32, std::move(shape), ir::TensorKind::Constant);
  t.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

inline ir::Node make_node(const std::string& name, const std::string& op, std::vector<int> inputs,
                          std::vector<int> outputs, std::vector<ir::Attr> attrs = {}) {
  ir::Node n;
  n.name = name;
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attrs = std::move(attrs);
  return n;
}

// y = Relu(x + bias), x: 2x3 input, bias: 3 constant {-1, 0, 1}.
inline ir::Model add_relu_model() {
  ir::Model m;
  m.source_opset = 13;
  m.producer = "kite-test";
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {2, 3}, ir::TensorKind::Input));
  const int bias = m.add_tensor(make_const("bias", {3}, {-1.0f, 0.0f, 1.0f}));
  const int sum = m.add_tensor(make_tensor("sum", KITE_DTYPE_FLOAT32, {2, 3}, ir::TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {2, 3}, ir::TensorKind::Output));
  ir::Graph g;
  g.name = "main";
  g.inputs = {x};
  g.outputs = {y};
  g.nodes = {make_node("add0", "Add", {x, bias}, {sum}), make_node("relu0", "Relu", {sum}, {y})};
  m.graphs.push_back(g);
  std::string err;
  kite::memory::plan_memory(&m, 256, &err);
  return m;
}

// y = Relu(Conv(x, w, b)) + x with x: 1x4x5x5, 3x3 kernel, pads 1. With
// fused=true the Conv and Relu become one fused node 'conv_relu' whose body
// holds them (the Conv result a Scratch tensor), as the optimizer writes it.
inline ir::Model conv_relu_add_model(bool fused) {
  ir::Model m;
  m.source_opset = 13;
  m.producer = "kite-test";
  std::vector<float> w(4 * 4 * 3 * 3), b(4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 17) / 17.0f - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(i) - 0.15f;
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {1, 4, 5, 5}, ir::TensorKind::Input));
  const int wt = m.add_tensor(make_const("w", {4, 4, 3, 3}, w));
  const int bt = m.add_tensor(make_const("b", {4}, b));
  const int conv = m.add_tensor(make_tensor("conv", KITE_DTYPE_FLOAT32, {1, 4, 5, 5},
                                            fused ? ir::TensorKind::Scratch : ir::TensorKind::Activation));
  const int relu = m.add_tensor(make_tensor("relu", KITE_DTYPE_FLOAT32, {1, 4, 5, 5}, ir::TensorKind::Activation));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {1, 4, 5, 5}, ir::TensorKind::Output));
  const ir::Attr pads = ops::ints_attr("pads", {1, 1, 1, 1});
  const ir::Node c = make_node("conv0", "Conv", {x, wt, bt}, {conv}, {pads});
  const ir::Node r = make_node("relu0", "Relu", {conv}, {relu});
  const ir::Node a = make_node("add0", "Add", {relu, x}, {y});
  ir::Graph g;
  g.name = "main";
  g.inputs = {x};
  g.outputs = {y};
  if (fused) {
    ir::Node f = make_node("conv0+relu0", "FusedConv", {x, wt, bt}, {relu}, {pads});
    f.domain = "kite";
    f.fused_pattern = "conv_relu";
    f.body = {c, r};
    g.nodes = {f, a};
  } else {
    g.nodes = {c, r, a};
  }
  m.graphs.push_back(g);
  std::string err;
  kite::memory::plan_memory(&m, 256, &err);
  return m;
}

inline std::vector<uint8_t> serialize_or_die(const ir::Model& m) {
  std::vector<uint8_t> bytes;
  std::string err;
  if (!kite::writer::serialize(m, &bytes, &err)) bytes.clear();
  return bytes;
}

// How run_on_cpu runs: fused_kernels = false sets the CPU backend's option
// fused=0, so the session runs each fused node's body, never the fused
// kernel; fused / decomposed (when given) receive how many fused nodes ran
// as a fused kernel and as their body.
struct CpuRunOptions {
  bool fused_kernels = true;
  int* fused = nullptr;
  int* decomposed = nullptr;
};

// Plans, writes and runs a copy of m on the CPU backend (stale arena bytes
// poisoned to NaN): float32 inputs in graph-input order, the float32
// outputs in graph-output order (empty, with a test failure, on an error).
inline std::vector<std::vector<float>> run_on_cpu(const ir::Model& in,
                                                  const std::vector<std::vector<float>>& inputs,
                                                  const CpuRunOptions& run = {}) {
  ir::Model m = in;
  std::string err;
  std::vector<std::vector<float>> outputs;
  EXPECT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  const std::vector<uint8_t> bytes = serialize_or_die(m);
  kite_model* model = nullptr;
  kite_session_options* options = nullptr;
  kite_session* session = nullptr;
  EXPECT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &model), KITE_OK) << kite_last_error();
  kite_session_options_create(&options);
  kite_session_options_set_backends(options, "cpu");
  if (!run.fused_kernels) kite_session_options_set_backend_option(options, "cpu", "fused", "0");
  kite_session_options_set_poison(options, 1);
  const kite_status created = kite_session_create(model, options, &session);
  EXPECT_EQ(created, KITE_OK) << kite_last_error();
  if (created == KITE_OK) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(kite_session_set_input(session, static_cast<int32_t>(i), inputs[i].data(), inputs[i].size() * 4),
                KITE_OK);
    }
    EXPECT_EQ(kite_session_run(session), KITE_OK) << kite_last_error();
    for (size_t k = 0; k < m.main().outputs.size(); ++k) {
      const ir::Tensor& t = m.tensors[static_cast<size_t>(m.main().outputs[k])];
      std::vector<float> out(static_cast<size_t>(t.byte_size() / 4));
      EXPECT_EQ(kite_session_get_output(session, static_cast<int32_t>(k), out.data(), out.size() * 4), KITE_OK);
      outputs.push_back(std::move(out));
    }
    int32_t count = 0;
    kite_session_get_node_count(session, &count);
    for (int32_t i = 0; i < count; ++i) {
      kite_node_placement p;
      kite_session_get_node_placement(session, i, &p);
      if (run.fused) *run.fused += p.fused && !p.decomposed;
      if (run.decomposed) *run.decomposed += p.decomposed != 0;
    }
  }
  kite_session_destroy(session);
  kite_session_options_destroy(options);
  kite_model_destroy(model);
  return outputs;
}

}  // namespace kite::test
