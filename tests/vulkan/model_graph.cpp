// load_kite_graph: a .kite file's main graph as a harness Graph, through
// the runtime's own loader (kite::rt::Model: verified, mmapped).
#include <cstring>
#include <random>

#include "harness.h"
#include "model.h"

namespace kite::vktest {

bool load_kite_graph(const std::string& path, Graph* g, std::string* err, int64_t int_range) {
  std::shared_ptr<kite::rt::Model> model;
  kite::rt::Status s = kite::rt::Model::load_file(path, &model);
  if (!s.is_ok()) {
    *err = s.message();
    return false;
  }
  const kite::rt::GraphRec& main = model->main_graph();
  *g = Graph();
  std::mt19937 gen(1234);
  for (size_t i = 0; i < model->tensors.size(); ++i) {
    const kite::rt::TensorRec& r = model->tensors[i];
    Tensor t;
    t.name = r.name;
    t.dtype = r.dtype;
    t.shape = r.shape;
    switch (r.kind) {
      case kite::rt::TensorKind::Constant:
        t.kind = Tensor::kConstant;
        t.data.assign(r.const_data, r.const_data + r.byte_size);
        break;
      case kite::rt::TensorKind::Input: {
        t.kind = Tensor::kInput;
        t.data.resize(r.byte_size);
        const uint64_t n = t.bytes() / std::max<size_t>(kite::ops::dtype_size(r.dtype), 1);
        for (uint64_t k = 0; k < n; ++k) {
          if (r.dtype == KITE_DTYPE_FLOAT32) {
            const float v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen);
            std::memcpy(t.data.data() + k * 4, &v, 4);
          } else if (r.dtype == KITE_DTYPE_INT64) {
            const int64_t v = std::uniform_int_distribution<int64_t>(0, int_range - 1)(gen);
            std::memcpy(t.data.data() + k * 8, &v, 8);
          } else if (r.dtype == KITE_DTYPE_INT32) {
            const int32_t v = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, int_range - 1)(gen));
            std::memcpy(t.data.data() + k * 4, &v, 4);
          }
        }
        t.fixed_offset = static_cast<int64_t>(r.arena_offset);
        break;
      }
      default:
        t.kind = Tensor::kIntermediate;
        t.fixed_offset = static_cast<int64_t>(r.arena_offset);
        break;
    }
    g->add(std::move(t));
  }
  for (const kite::rt::NodeRec& n : main.nodes) {
    Node node;
    node.name = n.name;
    node.op = n.op;
    node.domain = n.domain;
    node.pattern = n.fused_pattern;
    node.inputs = n.inputs;
    node.outputs = n.outputs;
    node.attrs = n.attrs;
    g->nodes.push_back(std::move(node));
  }
  for (int o : main.outputs) g->mark_output(o);
  return true;
}

}  // namespace kite::vktest
