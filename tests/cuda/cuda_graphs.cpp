#include "cuda_graphs.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "kite/backend.h"
#include "kite/ops/attr.h"
#include "kite/ops/half.h"
#include "kite_test_bytes.h"
#include "memory/planner.h"
#include "writer/kite_writer.h"

namespace kite::cudatest {

using kite::ir::TensorKind;

kite::ops::Attr ai(const std::string& name, int64_t v) { return kite::ops::int_attr(name, v); }
kite::ops::Attr af(const std::string& name, float v) { return kite::ops::float_attr(name, v); }
kite::ops::Attr as(const std::string& name, const std::string& v) { return kite::ops::string_attr(name, v); }
kite::ops::Attr aints(const std::string& name, const std::vector<int64_t>& v) { return kite::ops::ints_attr(name, v); }

Graph::Graph() {
  m_.source_opset = 17;
  m_.producer = "kite-cuda-test";
  kite::ir::Graph g;
  g.name = "main";
  m_.graphs.push_back(g);
}

int Graph::add(const std::string& name, kite_dtype dtype, const Shape& shape, TensorKind kind) {
  kite::ir::Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.shape_known = true;
  t.kind = kind;
  return m_.add_tensor(t);
}

namespace {
std::vector<float> uniform(size_t count, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = d(rng);
  return v;
}
size_t count_of(const Shape& s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}
}  // namespace

std::vector<uint8_t> Graph::float_bytes(const std::vector<float>& values) const {
  if (float_dtype_ != KITE_DTYPE_FLOAT16) return kite::test::bytes_of(values);
  std::vector<uint16_t> halves(values.size());
  for (size_t i = 0; i < values.size(); ++i) halves[i] = kite::float_to_half(values[i]);
  return kite::test::bytes_of(halves);
}

int Graph::input(const Shape& shape, float lo, float hi) {
  const int t = add("x" + std::to_string(counter_++), float_dtype_, shape, TensorKind::Input);
  m_.main().inputs.push_back(t);
  values_.push_back(float_bytes(uniform(count_of(shape), lo, hi, 1000u + static_cast<uint32_t>(t))));
  return t;
}

int Graph::input_i64(const Shape& shape, const std::vector<int64_t>& values) {
  const int t = add("i" + std::to_string(counter_++), KITE_DTYPE_INT64, shape, TensorKind::Input);
  m_.main().inputs.push_back(t);
  values_.push_back(kite::test::bytes_of(values));
  return t;
}

int Graph::weight(const Shape& shape, float lo, float hi) {
  return const_float(shape, uniform(count_of(shape), lo, hi, 77u + static_cast<uint32_t>(counter_)));
}

int Graph::const_float(const Shape& shape, const std::vector<float>& values) {
  const int t = add("w" + std::to_string(counter_++), float_dtype_, shape, TensorKind::Constant);
  m_.tensors[static_cast<size_t>(t)].data = float_bytes(values);
  return t;
}

int Graph::const_f32(const Shape& shape, const std::vector<float>& values) {
  const int t = add("w" + std::to_string(counter_++), KITE_DTYPE_FLOAT32, shape, TensorKind::Constant);
  m_.tensors[static_cast<size_t>(t)].data = kite::test::bytes_of(values);
  return t;
}

int Graph::const_i64(const Shape& shape, const std::vector<int64_t>& values) {
  const int t = add("c" + std::to_string(counter_++), KITE_DTYPE_INT64, shape, TensorKind::Constant);
  m_.tensors[static_cast<size_t>(t)].data = kite::test::bytes_of(values);
  return t;
}

std::vector<int> Graph::node(const std::string& op, const std::vector<int>& inputs,
                             const std::vector<kite::ops::Attr>& attrs, int outputs, const std::vector<Shape>& shapes,
                             const std::string& pattern) {
  kite::ir::Node n;
  n.name = op + "_" + std::to_string(counter_++);
  n.op = op;
  n.inputs = inputs;
  n.attrs = attrs;
  if (!pattern.empty()) {
    n.domain = "kite";
    n.fused_pattern = pattern;
  }
  std::vector<kite::ops::TensorType> types;
  if (shapes.empty()) {
    std::string err;
    n.outputs.assign(static_cast<size_t>(outputs), -1);  // the count, for the rules
    kite::ops::OpNode op = kite::ir::to_op_node(m_, n);
    n.outputs.clear();
    if (!kite::ops::infer_types(op, &types, &err)) {
      std::fprintf(stderr, "test graph: %s\n", err.c_str());
      std::abort();
    }
  } else {
    for (const Shape& s : shapes) {
      kite::ops::TensorType t;
      t.dtype = float_dtype_;
      t.shape = s;
      types.push_back(t);
    }
  }
  std::vector<int> out;
  for (int k = 0; k < outputs; ++k) {
    const int t = add(n.name + "_out" + std::to_string(k), types[static_cast<size_t>(k)].dtype,
                      types[static_cast<size_t>(k)].shape, TensorKind::Activation);
    n.outputs.push_back(t);
    out.push_back(t);
  }
  m_.main().nodes.push_back(n);
  return out;
}

void Graph::begin_body() {
  body_start_ = m_.main().nodes.size();
  recording_ = true;
}

std::vector<int> Graph::fuse(const std::string& op, const std::string& pattern, const std::vector<int>& inputs,
                             const std::vector<kite::ops::Attr>& attrs, const std::vector<int>& outputs) {
  auto& nodes = m_.main().nodes;
  kite::ir::Node f;
  f.name = op + "_" + std::to_string(counter_++);
  f.op = op;
  f.domain = "kite";
  f.fused_pattern = pattern;
  f.inputs = inputs;
  f.outputs = outputs;
  f.attrs = attrs;
  f.body.assign(nodes.begin() + static_cast<std::ptrdiff_t>(body_start_), nodes.end());
  nodes.resize(body_start_);
  for (const kite::ir::Node& b : f.body) {
    for (int t : b.outputs) {
      bool is_output = false;
      for (int o : outputs) is_output = is_output || o == t;
      if (!is_output) m_.tensors[static_cast<size_t>(t)].kind = TensorKind::Scratch;
    }
  }
  nodes.push_back(f);
  recording_ = false;
  return outputs;
}

void Graph::output(int t) {
  m_.tensors[static_cast<size_t>(t)].kind = TensorKind::Output;
  m_.main().outputs.push_back(t);
}

std::vector<uint8_t> Graph::bytes() {
  if (m_.main().outputs.empty()) {
    for (int t : m_.main().nodes.back().outputs) output(t);
  }
  std::string err;
  if (!kite::memory::plan_memory(&m_, 256, &err)) {
    std::fprintf(stderr, "test graph: plan: %s\n", err.c_str());
    std::abort();
  }
  std::vector<uint8_t> b;
  if (!kite::writer::serialize(m_, &b, &err)) {
    std::fprintf(stderr, "test graph: write: %s\n", err.c_str());
    std::abort();
  }
  return b;
}

int activation(Graph& g, int x, const std::string& act) {
  if (act == "Clip") return g.op("Clip", {x, g.const_float({}, {0.0f}), g.const_float({}, {6.0f})});
  if (act == "SiLU") return g.op("Mul", {x, g.op("Sigmoid", {x})});
  if (act == "LeakyRelu") return g.op("LeakyRelu", {x}, {af("alpha", 0.01f)});
  if (act == "Gelu") return g.op("Gelu", {x}, {as("approximate", "none")});
  if (act == "GeluTanh") return g.op("Gelu", {x}, {as("approximate", "tanh")});
  return g.op(act, {x});  // Relu, Sigmoid, Tanh, HardSigmoid, HardSwish
}

std::vector<kite::ops::Attr> activation_attrs(const std::string& act) {
  std::vector<kite::ops::Attr> a = {as("activation", act)};
  if (act == "Clip") {
    a.push_back(af("activation_alpha", 0.0f));
    a.push_back(af("activation_beta", 6.0f));
  }
  if (act == "LeakyRelu") a.push_back(af("activation_alpha", 0.01f));
  if (act == "HardSigmoid") {
    a.push_back(af("activation_alpha", 0.2f));
    a.push_back(af("activation_beta", 0.5f));
  }
  return a;
}

const std::string& backend() {
  static const std::string name = [] {
    const char* env = std::getenv("KITE_CUDA_TEST_BACKEND");
    return std::string(env && env[0] ? env : "cudaemu");
  }();
  return name;
}

const char* plugin_dir() {
  // The device script runs these programs far from their build folder.
  const char* env = std::getenv("KITE_CUDA_PLUGIN_DIR");
  return env && env[0] ? env : KITE_CUDA_PLUGIN_DIR;
}

std::string unavailable_reason() {
  const std::string path = std::string(plugin_dir()) + "/libkite_backend_" + backend() + ".so";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return "cannot load " + path;
  auto entry = reinterpret_cast<kite_backend_entry_fn>(dlsym(h, KITE_BACKEND_ENTRY_SYMBOL));
  std::string why;
  if (!entry) {
    why = path + " has no entry point";
  } else {
    int32_t count = 0;
    char err[512] = {0};
    if (entry()->device_count(&count, err, sizeof err) != KITE_OK || count == 0) why = err[0] ? err : "no device";
  }
  dlclose(h);
  return why;
}

Result run(Graph& g, const std::string& backends, const Options& options, bool strict, int runs, bool profile,
           void* external_queue) {
  Result r;
  const std::vector<uint8_t> bytes = g.bytes();
  kite_model* m = nullptr;
  kite_session_options* o = nullptr;
  kite_session* s = nullptr;
  r.status = kite_model_load_memory(bytes.data(), bytes.size(), &m);
  if (r.status != KITE_OK) {
    r.error = kite_last_error();
    return r;
  }
  kite_session_options_create(&o);
  kite_session_options_set_backends(o, backends.c_str());
  kite_session_options_set_backend_path(o, plugin_dir());
  kite_session_options_set_strict(o, strict ? 1 : 0);
  kite_session_options_set_poison(o, 1);
  kite_session_options_set_threads(o, 1);
  if (profile) kite_session_options_set_profiling(o, 1);
  if (external_queue) kite_session_options_set_external_queue(o, backend().c_str(), external_queue);
  // KITE_CUDA_TEST_OPTIONS=k=v,k=v: options for every session of the run
  // (the device script runs the suite again with Kite's own kernels only).
  Options all;
  if (const char* env = std::getenv("KITE_CUDA_TEST_OPTIONS")) {
    std::string list = env;
    size_t start = 0;
    while (start < list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      const std::string kv = list.substr(start, comma - start);
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) all.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
      start = comma + 1;
    }
  }
  for (const auto& kv : options) all.push_back(kv);
  if (backends.find(backend()) != std::string::npos) {
    for (const auto& kv : all) kite_session_options_set_backend_option(o, backend().c_str(), kv.first.c_str(), kv.second.c_str());
  }
  r.status = kite_session_create(m, o, &s);
  r.error = r.status == KITE_OK ? "" : kite_last_error();
  if (r.status == KITE_OK) {
    const auto& values = g.input_values();
    for (size_t i = 0; i < values.size(); ++i) kite_session_set_input(s, static_cast<int32_t>(i), values[i].data(), values[i].size());
    for (int i = 0; i < runs && r.status == KITE_OK; ++i) {
      r.status = kite_session_run(s);
      if (r.status != KITE_OK) r.error = kite_last_error();
    }
    int32_t n = 0;
    kite_session_get_output_count(s, &n);
    for (int32_t i = 0; r.status == KITE_OK && i < n; ++i) {
      kite_tensor_info info{};
      kite_session_get_output_info(s, i, &info);
      std::vector<uint8_t> v(info.byte_size);
      kite_session_get_output(s, i, v.data(), v.size());
      r.outputs.push_back(v);
      r.dtypes.push_back(info.dtype);
    }
    kite_session_get_node_count(s, &n);
    for (int32_t i = 0; i < n; ++i) {
      kite_node_placement p{};
      kite_session_get_node_placement(s, i, &p);
      r.placement.push_back(p.backend ? p.backend : "");
      r.reasons.push_back(p.reason ? p.reason : "");
      r.decomposed.push_back(p.decomposed);
      if (profile) {
        kite_node_profile np{};
        const bool ok = kite_session_get_node_profile(s, i, &np) == KITE_OK && np.measured;
        r.node_ns.push_back(ok ? np.total_ns : 0);
      }
    }
    r.stats.struct_size = sizeof r.stats;
    kite_session_get_run_stats(s, &r.stats);
  }
  kite_session_destroy(s);
  kite_session_options_destroy(o);
  kite_model_destroy(m);
  return r;
}

double normalized_error(const Result& ref, const Result& got, std::string* where) {
  if (ref.outputs.size() != got.outputs.size()) {
    *where = "output count differs";
    return 1.0;
  }
  double worst = 0.0;
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    if (ref.outputs[k].size() != got.outputs[k].size()) {
      *where = "output " + std::to_string(k) + " size differs";
      return 1.0;
    }
    if (ref.dtypes[k] != KITE_DTYPE_FLOAT32) {
      if (ref.outputs[k] != got.outputs[k]) {
        *where = "integer output " + std::to_string(k) + " differs";
        return 1.0;
      }
      continue;
    }
    const size_t n = ref.outputs[k].size() / 4;
    const float* a = reinterpret_cast<const float*>(ref.outputs[k].data());
    const float* b = reinterpret_cast<const float*>(got.outputs[k].data());
    double max_ref = 0.0, max_diff = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(a[i]) != std::isnan(b[i])) {
        *where = "output " + std::to_string(k) + " element " + std::to_string(i) + ": NaN on one side only";
        return 1.0;
      }
      if (std::isnan(a[i])) continue;
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(a[i])));
      const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      if (d > max_diff) {
        max_diff = d;
        at = i;
      }
    }
    const double e = max_diff / std::max(max_ref, 1e-6);
    if (e >= worst) {
      worst = e;
      *where = "output " + std::to_string(k) + " element " + std::to_string(at) + ": " + std::to_string(a[at]) +
               " vs " + std::to_string(b[at]);
    }
  }
  return worst;
}

}  // namespace kite::cudatest
