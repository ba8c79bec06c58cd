#include "harness.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <utility>

#include "cpu_backend.h"
#include "kite/abi/node.h"
#include "kite/ops/half.h"
#include "kite_test_bytes.h"

namespace kite::vktest {

namespace {

using kite::test::bytes_of;

size_t dtype_size(kite_dtype d) { return kite::ops::dtype_size(d); }

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

uint32_t seed_of(const std::string& name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}

std::vector<uint8_t> random_floats(const std::string& name, const Shape& shape, float lo, float hi) {
  std::mt19937 gen(seed_of(name));
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (float& x : v) x = dist(gen);
  return bytes_of(v);
}

// The values of float32 or float16 bytes, as floats.
std::vector<float> floats_of(kite_dtype dtype, const std::vector<uint8_t>& bytes) {
  if (dtype == KITE_DTYPE_FLOAT16) {
    std::vector<float> f(bytes.size() / 2);
    for (size_t i = 0; i < f.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      f[i] = kite::half_to_float(h);
    }
    return f;
  }
  std::vector<float> f(bytes.size() / 4);
  if (!f.empty()) std::memcpy(f.data(), bytes.data(), f.size() * 4);
  return f;
}

Tensor make_tensor(const std::string& name, const Shape& shape, kite_dtype dtype, Tensor::Kind kind,
                   std::vector<uint8_t> data = {}) {
  Tensor t;
  t.name = name;
  t.shape = shape;
  t.dtype = dtype;
  t.kind = kind;
  t.data = std::move(data);
  return t;
}

// Node k of a graph in backend ABI v2 form, over the graph's ABI tensors.
// node points into ins, outs and attrs: a NodeAbi stays where it is built.
struct NodeAbi {
  std::vector<const kite_backend_tensor2*> ins, outs;
  std::unique_ptr<kite::abi::AttrTable> attrs;
  kite_backend_node2 node{};
};

void fill_node_abi(const Node& n, size_t k, const std::vector<kite_backend_tensor2>& abi, NodeAbi* na) {
  for (int i : n.inputs) na->ins.push_back(i < 0 ? nullptr : &abi[static_cast<size_t>(i)]);
  for (int o : n.outputs) na->outs.push_back(o < 0 ? nullptr : &abi[static_cast<size_t>(o)]);
  na->attrs = std::make_unique<kite::abi::AttrTable>(n.attrs);
  kite_backend_node2& node = na->node;
  node.struct_size = sizeof(node);
  node.index = static_cast<int32_t>(k);
  node.name = n.name.c_str();
  node.op = n.op.c_str();
  node.domain = n.domain.c_str();
  node.fused_pattern = n.pattern.c_str();
  node.num_inputs = static_cast<int32_t>(na->ins.size());
  node.inputs = na->ins.data();
  node.num_outputs = static_cast<int32_t>(na->outs.size());
  node.outputs = na->outs.data();
  node.num_attrs = na->attrs->count();
  node.attrs = na->attrs->data();
}

std::mutex g_log_mutex;
std::vector<std::string> g_log;

void on_log(void*, int32_t level, const char*, const char* message) {
  if (level > KITE_LOG_WARNING) return;
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log.emplace_back(message ? message : "");
}

}  // namespace

uint64_t Tensor::bytes() const { return static_cast<uint64_t>(numel(shape)) * dtype_size(dtype); }

int Graph::add(Tensor t) {
  tensors.push_back(std::move(t));
  return static_cast<int>(tensors.size()) - 1;
}

int Graph::input(const std::string& name, const Shape& shape, float lo, float hi) {
  return add(make_tensor(name, shape, KITE_DTYPE_FLOAT32, Tensor::kInput, random_floats(name, shape, lo, hi)));
}

int Graph::constant(const std::string& name, const Shape& shape, float lo, float hi) {
  return add(make_tensor(name, shape, KITE_DTYPE_FLOAT32, Tensor::kConstant, random_floats(name, shape, lo, hi)));
}

int Graph::constant_i64(const std::string& name, const Shape& shape, const std::vector<int64_t>& values) {
  return add(make_tensor(name, shape, KITE_DTYPE_INT64, Tensor::kConstant, bytes_of(values)));
}

int Graph::constant_f32(const std::string& name, const Shape& shape, const std::vector<float>& values) {
  return add(make_tensor(name, shape, KITE_DTYPE_FLOAT32, Tensor::kConstant, bytes_of(values)));
}

int Graph::input_i64(const std::string& name, const Shape& shape, const std::vector<int64_t>& values) {
  return add(make_tensor(name, shape, KITE_DTYPE_INT64, Tensor::kInput, bytes_of(values)));
}

int Graph::tensor(const std::string& name, const Shape& shape, kite_dtype dtype) {
  return add(make_tensor(name, shape, dtype, Tensor::kIntermediate));
}

std::vector<int> Graph::node(const std::string& op, const std::vector<int>& inputs,
                             std::vector<kite::ops::Attr> attrs, int num_outputs,
                             const std::vector<Shape>& shapes, const std::string& domain,
                             const std::string& pattern) {
  Node n;
  n.name = op + "_" + std::to_string(nodes.size());
  n.op = op;
  n.domain = domain;
  n.pattern = pattern;
  n.inputs = inputs;
  n.attrs = std::move(attrs);
  std::vector<kite::ops::TensorType> inferred;
  if (shapes.empty()) {
    kite::ops::OpNode on;
    on.name = n.name;
    on.op = op;
    for (int i : inputs) {
      kite::ops::TensorType t;
      if (i < 0) {
        t.present = false;
      } else {
        const Tensor& src = tensors[static_cast<size_t>(i)];
        t.name = src.name;
        t.dtype = src.dtype;
        t.shape = src.shape;
        t.data = src.kind == Tensor::kConstant ? src.data.data() : nullptr;
      }
      on.inputs.push_back(t);
    }
    on.attrs = n.attrs;
    on.num_outputs = num_outputs;
    std::string err;
    if (!kite::ops::infer_types(on, &inferred, &err)) {
      throw std::runtime_error("test graph: " + err);
    }
  }
  for (int k = 0; k < num_outputs; ++k) {
    Tensor t;
    t.name = n.name + "_out" + std::to_string(k);
    if (shapes.empty()) {
      t.dtype = inferred[static_cast<size_t>(k)].dtype;
      t.shape = inferred[static_cast<size_t>(k)].shape;
    } else {
      t.shape = shapes[static_cast<size_t>(k)];
    }
    t.kind = Tensor::kIntermediate;
    n.outputs.push_back(add(std::move(t)));
  }
  nodes.push_back(n);
  return n.outputs;
}

std::vector<int> Graph::outputs() const {
  std::vector<int> out = output_order;
  if (out.empty() && !nodes.empty()) {
    for (int t : nodes.back().outputs) {
      if (t >= 0) out.push_back(t);
    }
  }
  return out;
}

bool run_cpu(const Graph& g, Values* out, std::string* err) {
  // The CPU backend through its ABI v2 table (a host backend: tensors carry
  // host addresses).
  const kite_backend_api* api = kite_cpu_backend_api();
  void* backend = nullptr;
  char msg[1024] = {0};
  kite_backend_create_info info{};
  info.struct_size = sizeof(info);
  info.threads = 1;
  if (api->create2(nullptr, &info, &backend, msg, sizeof(msg)) != KITE_OK) {
    *err = std::string("CPU create2: ") + msg;
    return false;
  }
  std::vector<std::vector<uint8_t>> memory(g.tensors.size());
  std::vector<kite_backend_tensor2> abi(g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    memory[i] = t.data;
    memory[i].resize(std::max<uint64_t>(t.bytes(), 1));
    abi[i].struct_size = sizeof(abi[i]);
    abi[i].name = t.name.c_str();
    abi[i].dtype = t.dtype;
    abi[i].rank = static_cast<int32_t>(t.shape.size());
    abi[i].shape = t.shape.data();
    abi[i].byte_size = t.bytes();
    abi[i].data = memory[i].data();
    abi[i].is_constant = t.kind == Tensor::kConstant;
    abi[i].host_data = abi[i].is_constant ? memory[i].data() : nullptr;
  }
  // Prepare every node, then one workspace and one bind, then run in order.
  bool ok = true;
  std::vector<NodeAbi> nodes(g.nodes.size());
  std::vector<void*> kernels;
  for (size_t k = 0; k < g.nodes.size() && ok; ++k) {
    fill_node_abi(g.nodes[k], k, abi, &nodes[k]);
    void* kernel = nullptr;
    if (api->prepare2(backend, &nodes[k].node, &kernel, msg, sizeof(msg)) != KITE_OK) {
      *err = std::string("CPU prepare2: ") + msg;
      ok = false;
      break;
    }
    kernels.push_back(kernel);
  }
  std::vector<uint8_t> scratch;
  if (ok) {
    uint64_t workspace = 0;
    if (api->workspace_size && api->workspace_size(backend, &workspace, msg, sizeof(msg)) == KITE_OK) {
      scratch.resize(workspace);
    }
    kite_backend_bindings b{};
    b.struct_size = sizeof(b);
    b.workspace_host = scratch.empty() ? nullptr : scratch.data();
    b.workspace_size = scratch.size();
    if (api->bind && api->bind(backend, &b, msg, sizeof(msg)) != KITE_OK) {
      *err = std::string("CPU bind: ") + msg;
      ok = false;
    }
  }
  for (size_t k = 0; k < kernels.size() && ok; ++k) {
    if (api->execute(backend, kernels[k], msg, sizeof(msg)) != KITE_OK) {
      *err = std::string("CPU execute: ") + msg;
      ok = false;
    }
  }
  for (void* kernel : kernels) api->release(backend, kernel);
  api->destroy(backend);
  if (!ok) return false;
  out->clear();
  for (int o : g.outputs()) {
    std::vector<uint8_t> v = memory[static_cast<size_t>(o)];
    v.resize(g.tensors[static_cast<size_t>(o)].bytes());
    out->push_back(std::move(v));
  }
  return true;
}

Plugin& Plugin::get() {
  static Plugin p = [] {
    Plugin q;
    q.handle = dlopen(KITE_VULKAN_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!q.handle) {
      const char* e = dlerror();
      q.error = std::string("cannot load ") + KITE_VULKAN_PLUGIN_PATH + ": " + (e ? e : "?");
      return q;
    }
    auto entry = reinterpret_cast<kite_backend_entry_fn>(dlsym(q.handle, KITE_BACKEND_ENTRY_SYMBOL));
    if (!entry) {
      q.error = "the plugin has no entry point";
      return q;
    }
    q.api = entry();
    char msg[1024] = {0};
    int32_t count = 0;
    if (q.api->device_count(&count, msg, sizeof(msg)) != KITE_OK) {
      q.error = msg;
      return q;
    }
    if (count == 0) {
      q.error = "the Vulkan backend reports no device";
      return q;
    }
    q.info.struct_size = sizeof(q.info);
    if (q.api->device_info(0, &q.info, msg, sizeof(msg)) != KITE_OK) {
      q.error = msg;
      return q;
    }
    kite_backend_device_options options{};
    options.struct_size = sizeof(options);
    options.device_index = 0;
    options.log = on_log;
    if (q.api->device_open(&options, &q.device, msg, sizeof(msg)) != KITE_OK) {
      q.error = msg;
      q.device = nullptr;
    }
    return q;
  }();
  return p;
}

void Plugin::close() {
  if (device) api->device_close(device);
  device = nullptr;
  if (handle) dlclose(handle);
  handle = nullptr;
  api = nullptr;
}

std::vector<std::string> take_log_messages() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::vector<std::string> out;
  out.swap(g_log);
  return out;
}

bool run_vulkan(const Graph& g, const VulkanOptions& o, Values* out, std::string* err,
                std::vector<uint64_t>* times_ns, RunReport* report) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  Plugin& p = Plugin::get();
  if (!p.available()) {
    *err = "no Vulkan device: " + p.error;
    return false;
  }
  const kite_backend_api* api = p.api;
  char msg[2048] = {0};
  std::vector<std::string> keys, values;
  if (!o.unified) {
    keys.push_back("unified");
    values.push_back("0");
  }
  for (const auto& kv : o.options) {
    keys.push_back(kv.first);
    values.push_back(kv.second);
  }
  std::vector<const char*> key_ptrs, value_ptrs;
  for (size_t i = 0; i < keys.size(); ++i) {
    key_ptrs.push_back(keys[i].c_str());
    value_ptrs.push_back(values[i].c_str());
  }
  kite_backend_create_info info{};
  info.struct_size = sizeof(info);
  info.profile = o.profile ? 1 : 0;
  info.num_options = static_cast<int32_t>(keys.size());
  info.option_keys = key_ptrs.data();
  info.option_values = value_ptrs.data();
  void* backend = nullptr;
  if (api->create2(p.device, &info, &backend, msg, sizeof(msg)) != KITE_OK) {
    *err = std::string("create2: ") + msg;
    return false;
  }
  std::vector<kite_backend_buffer> buffers;
  std::vector<void*> kernels;
  void* segment = nullptr;
  auto cleanup = [&]() {
    if (segment) api->release_segment(backend, segment);
    for (void* k : kernels) api->release(backend, k);
    for (kite_backend_buffer b : buffers) api->buffer_free(backend, b);
    api->destroy(backend);
  };
  auto failed = [&](const std::string& what) {
    *err = what + ": " + msg;
    cleanup();
    return false;
  };

  // Layout: non-constant tensors in the arena, constants in the weights buffer.
  const uint64_t align = o.alignment ? o.alignment : p.info.min_offset_alignment;
  std::vector<kite_backend_tensor2> abi(g.tensors.size());
  uint64_t arena = 0, weights = 0;
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    kite_backend_tensor2& a = abi[i];
    a.struct_size = sizeof(a);
    a.name = t.name.c_str();
    a.dtype = t.dtype;
    a.rank = static_cast<int32_t>(t.shape.size());
    a.shape = t.shape.data();
    a.byte_size = t.bytes();
    a.is_constant = t.kind == Tensor::kConstant;
    a.host_data = a.is_constant ? t.data.data() : nullptr;
    if (t.alias >= 0) continue;
    if (t.fixed_offset >= 0 && !a.is_constant) {
      a.offset = static_cast<uint64_t>(t.fixed_offset);
      arena = std::max(arena, a.offset + std::max<uint64_t>(t.bytes(), 4));
      continue;
    }
    uint64_t& cursor = a.is_constant ? weights : arena;
    cursor = (cursor + align - 1) / align * align;
    a.offset = cursor;
    cursor += std::max<uint64_t>(t.bytes(), 4);
  }
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    if (t.alias >= 0) abi[i].offset = abi[static_cast<size_t>(t.alias)].offset + t.alias_offset;
  }
  std::vector<NodeAbi> nodes(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    fill_node_abi(n, k, abi, &nodes[k]);
    if (!api->supports2(backend, &nodes[k].node, msg, sizeof(msg))) {
      if (report) report->declined.push_back(n.op + " '" + n.name + "': " + msg);
      if (!o.allow_declined) return failed(n.op + " '" + n.name + "' declined");
    }
  }
  if (report && !report->declined.empty()) {
    *err = std::to_string(report->declined.size()) + " nodes declined";
    cleanup();
    return false;
  }
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    kite_backend_node2& node = nodes[k].node;
    void* kernel = nullptr;
    if (api->prepare2(backend, &node, &kernel, msg, sizeof(msg)) != KITE_OK) return failed("prepare2");
    kernels.push_back(kernel);
  }
  uint64_t workspace = 0;
  if (api->workspace_size(backend, &workspace, msg, sizeof(msg)) != KITE_OK) return failed("workspace_size");
  kite_backend_buffer arena_buf = nullptr, weights_buf = nullptr, workspace_buf = nullptr;
  if (api->buffer_alloc(backend, std::max<uint64_t>(arena, 4), KITE_BUFFER_ARENA, &arena_buf, msg, sizeof(msg)) != KITE_OK) {
    return failed("buffer_alloc arena");
  }
  buffers.push_back(arena_buf);
  if (weights > 0) {
    if (api->buffer_alloc(backend, weights, KITE_BUFFER_WEIGHTS, &weights_buf, msg, sizeof(msg)) != KITE_OK) {
      return failed("buffer_alloc weights");
    }
    buffers.push_back(weights_buf);
  }
  if (workspace > 0) {
    if (api->buffer_alloc(backend, workspace, KITE_BUFFER_WORKSPACE, &workspace_buf, msg, sizeof(msg)) != KITE_OK) {
      return failed("buffer_alloc workspace");
    }
    buffers.push_back(workspace_buf);
  }
  for (kite_backend_tensor2& a : abi) a.buffer = a.is_constant ? weights_buf : arena_buf;
  // Poison the arena (NaN everywhere): a stale or missing write shows.
  void* arena_host = nullptr;
  if (o.unified) {
    if (api->buffer_map(backend, arena_buf, &arena_host, msg, sizeof(msg)) != KITE_OK) return failed("buffer_map");
    std::memset(arena_host, 0xff, std::max<uint64_t>(arena, 4));
  } else {
    void* ignored = nullptr;
    if (api->buffer_map(backend, arena_buf, &ignored, msg, sizeof(msg)) == KITE_OK) {
      *err = "buffer_map worked with unified=0";
      cleanup();
      return false;
    }
    std::vector<uint8_t> poison(std::max<uint64_t>(arena, 4), 0xff);
    kite_backend_tensor2 whole{};
    whole.struct_size = sizeof(whole);
    whole.name = "arena";
    whole.byte_size = poison.size();
    whole.buffer = arena_buf;
    if (api->upload(backend, &whole, poison.data(), msg, sizeof(msg)) != KITE_OK) return failed("upload poison");
  }
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    if (t.kind == Tensor::kConstant && t.bytes() > 0) {
      if (api->upload(backend, &abi[i], t.data.data(), msg, sizeof(msg)) != KITE_OK) return failed("upload weights");
    }
  }
  kite_backend_bindings bindings{};
  bindings.struct_size = sizeof(bindings);
  bindings.arena = arena_buf;
  bindings.weights = weights_buf;
  bindings.workspace = workspace_buf;
  bindings.workspace_size = workspace;
  if (api->bind(backend, &bindings, msg, sizeof(msg)) != KITE_OK) return failed("bind");
  if (o.segment) {
    std::vector<const kite_backend_node2*> node_ptrs;
    for (const NodeAbi& na : nodes) node_ptrs.push_back(&na.node);
    kite_backend_segment seg{};
    seg.struct_size = sizeof(seg);
    seg.num_kernels = static_cast<int32_t>(kernels.size());
    seg.kernels = kernels.data();
    seg.nodes = node_ptrs.data();
    if (api->prepare_segment(backend, &seg, &segment, msg, sizeof(msg)) != KITE_OK) return failed("prepare_segment");
  }
  if (report) report->prepare_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();
  for (int run = 0; run < o.runs; ++run) {
    const auto t_run = Clock::now();
    timespec cpu0{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    if (api->begin_run(backend, msg, sizeof(msg)) != KITE_OK) return failed("begin_run");
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      const Tensor& t = g.tensors[i];
      if (t.kind != Tensor::kInput || t.bytes() == 0) continue;
      if (o.unified) {
        std::memcpy(static_cast<char*>(arena_host) + abi[i].offset, t.data.data(), t.bytes());
      } else if (api->upload(backend, &abi[i], t.data.data(), msg, sizeof(msg)) != KITE_OK) {
        return failed("upload input");
      }
    }
    if (o.segment) {
      if (api->execute_segment(backend, segment, msg, sizeof(msg)) != KITE_OK) return failed("execute_segment");
    } else {
      for (void* k : kernels) {
        if (api->execute(backend, k, msg, sizeof(msg)) != KITE_OK) return failed("execute");
      }
    }
    if (api->end_run(backend, msg, sizeof(msg)) != KITE_OK) return failed("end_run");
    if (api->synchronize2(backend, msg, sizeof(msg)) != KITE_OK) return failed("synchronize2");
    if (report) {
      report->run_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t_run).count());
      timespec cpu1{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
      report->run_cpu_ms.push_back((cpu1.tv_sec - cpu0.tv_sec) * 1e3 + (cpu1.tv_nsec - cpu0.tv_nsec) / 1e6);
    }
  }
  out->clear();
  for (int t : g.outputs()) {
    std::vector<uint8_t> v(g.tensors[static_cast<size_t>(t)].bytes());
    if (o.unified) {
      if (!v.empty()) std::memcpy(v.data(), static_cast<char*>(arena_host) + abi[static_cast<size_t>(t)].offset, v.size());
    } else if (api->download(backend, v.data(), &abi[static_cast<size_t>(t)], msg, sizeof(msg)) != KITE_OK) {
      return failed("download");
    }
    out->push_back(std::move(v));
  }
  if (times_ns) {
    times_ns->clear();
    for (void* k : kernels) {
      uint64_t ns = 0;
      const kite_status s = api->kernel_time(backend, k, &ns);
      times_ns->push_back(s == KITE_OK ? ns : UINT64_MAX);
    }
  }
  cleanup();
  return true;
}

Graph to_half(const Graph& g) {
  Graph h = g;
  std::vector<bool> keep(h.tensors.size(), false);
  for (const Node& n : h.nodes) {
    if (n.op != "Resize") continue;
    for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
      if (n.inputs[i] >= 0) keep[static_cast<size_t>(n.inputs[i])] = true;
    }
  }
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    Tensor& t = h.tensors[i];
    if (t.dtype != KITE_DTYPE_FLOAT32 || keep[i]) continue;
    t.dtype = KITE_DTYPE_FLOAT16;
    // A place inside another float tensor: the same element, half the bytes.
    if (t.alias >= 0 && g.tensors[static_cast<size_t>(t.alias)].dtype == KITE_DTYPE_FLOAT32) t.alias_offset /= 2;
    if (t.data.empty()) continue;
    const std::vector<float> f = floats_of(KITE_DTYPE_FLOAT32, t.data);
    std::vector<uint16_t> half(f.size());
    for (size_t k = 0; k < f.size(); ++k) half[k] = kite::float_to_half(f[k]);
    t.data.assign(reinterpret_cast<const uint8_t*>(half.data()),
                  reinterpret_cast<const uint8_t*>(half.data()) + half.size() * 2);
  }
  return h;
}

double normalized_error(const Graph& g, const Values& ref, const Values& got, std::string* where) {
  const std::vector<int> outs = g.outputs();
  double worst = 0.0;
  for (size_t k = 0; k < outs.size() && k < ref.size() && k < got.size(); ++k) {
    const Tensor& t = g.tensors[static_cast<size_t>(outs[k])];
    if (ref[k].size() != got[k].size()) {
      *where = t.name + ": sizes differ";
      return INFINITY;
    }
    if (t.dtype != KITE_DTYPE_FLOAT32 && t.dtype != KITE_DTYPE_FLOAT16) {
      if (ref[k] != got[k]) {
        *where = t.name + ": integer values differ";
        return 1.0;
      }
      continue;
    }
    const std::vector<float> a = floats_of(t.dtype, ref[k]), b = floats_of(t.dtype, got[k]);
    const size_t n = a.size();
    double max_ref = 0.0;
    for (float v : a) max_ref = std::max(max_ref, static_cast<double>(std::fabs(v)));
    const double scale = std::max(max_ref, 1e-6);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(a[i]) != std::isnan(b[i])) {
        *where = t.name + "[" + std::to_string(i) + "]: " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
        return INFINITY;
      }
      if (std::isnan(a[i])) continue;
      if (std::isinf(a[i]) || std::isinf(b[i])) {
        if (a[i] != b[i]) {
          *where = t.name + "[" + std::to_string(i) + "]: " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
          return INFINITY;
        }
        continue;
      }
      const double e = std::fabs(static_cast<double>(a[i]) - b[i]) / scale;
      if (e > worst) {
        worst = e;
        *where = t.name + "[" + std::to_string(i) + "]: cpu " + std::to_string(a[i]) + " vulkan " + std::to_string(b[i]);
      }
    }
  }
  return worst;
}

}  // namespace kite::vktest
