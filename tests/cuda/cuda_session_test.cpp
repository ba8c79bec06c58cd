// The CUDA backend as a session uses it: one CUDA graph per segment, copies
// only at segment edges (none with unified memory), profiling through CUDA
// events, options, the memory report, sessions sharing one device, and the
// ABI's workspace sizing.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "cuda_graphs.h"
#include "kite/backend.h"

namespace kite::cudatest {
namespace {

// x -> Conv+Relu -> MaxPool -> Gemm-ready Flatten -> Softmax: four kernels.
Graph small_cnn() {
  Graph g;
  const int x = g.input({1, 3, 12, 12});
  const int w = g.weight({8, 3, 3, 3}), b = g.weight({8});
  g.begin_body();
  const int c = g.op("Relu", {g.op("Conv", {x, w, b}, {aints("pads", {1, 1, 1, 1})})});
  g.fuse("FusedConv", "Conv+Relu", {x, w, b}, {aints("pads", {1, 1, 1, 1}), as("activation", "Relu")}, {c});
  const int p = g.op("MaxPool", {c}, {aints("kernel_shape", {2, 2}), aints("strides", {2, 2})});
  const int f = g.op("Flatten", {p});
  g.op("Softmax", {f});
  return g;
}

// The suite may run with other options (KITE_CUDA_TEST_OPTIONS, the device
// script): with unified=1 there are no copies and the weights are imported.
bool unified_by_env() {
  const char* env = std::getenv("KITE_CUDA_TEST_OPTIONS");
  return env && std::string(env).find("unified=1") != std::string::npos;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(CudaSession, OneSegmentCopiesOnlyInputsAndOutputs) {
  Graph g = small_cnn();
  const Result ref = run(g, "cpu");
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  const Result r = run(g, backend());
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  EXPECT_EQ(r.stats.segments, 1);
  EXPECT_EQ(r.stats.uploads, unified_by_env() ? 0 : 1);
  EXPECT_EQ(r.stats.downloads, unified_by_env() ? 0 : 1);
  std::string where;
  EXPECT_LE(normalized_error(ref, r, &where), 1e-4) << where;
}

TEST(CudaSession, GraphsOffAndUnifiedGiveTheSameValues) {
  Graph g = small_cnn();
  const Result ref = run(g, backend());
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  for (const Options& o : {Options{{"graphs", "0"}}, Options{{"unified", "1"}}, Options{{"lean", "1"}},
                           Options{{"unified", "1"}, {"graphs", "0"}}}) {
    SCOPED_TRACE(o[0].first + "=" + o[0].second);
    const Result r = run(g, backend(), o);
    ASSERT_EQ(r.status, KITE_OK) << r.error;
    std::string where;
    EXPECT_EQ(normalized_error(ref, r, &where), 0.0) << where;
    if (o[0].first == "unified") {
      EXPECT_EQ(r.stats.transfers, 0);
    }
  }
}

TEST(CudaSession, DeclinedNodeSplitsTheSegments) {
  // LayerNormalization's Mean output is not supported on CUDA: that node
  // runs on the CPU, the ones around it on CUDA in two segments.
  Graph g;
  const int x = g.input({4, 32});
  const int a = g.op("Relu", {x});
  const auto ln = g.node("LayerNormalization", {a, g.weight({32})}, {ai("axis", -1)}, 2);
  g.op("Sigmoid", {ln[0]});
  const Result r = run(g, backend() + ",cpu", {}, false);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  ASSERT_EQ(r.placement.size(), 3u);
  EXPECT_EQ(r.placement[0], backend());
  EXPECT_EQ(r.placement[1], "cpu");
  EXPECT_NE(r.reasons[1].find("Mean and InvStdDev"), std::string::npos) << r.reasons[1];
  EXPECT_EQ(r.placement[2], backend());
  EXPECT_EQ(r.stats.segments, 3);
  const Result ref = run(g, "cpu");
  std::string where;
  EXPECT_LE(normalized_error(ref, r, &where), 1e-4) << where;
}

TEST(CudaSession, ProfileMeasuresEveryKernel) {
  Graph g = small_cnn();
  const Result r = run(g, backend(), {}, true, 3, true);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  ASSERT_EQ(r.node_ns.size(), r.placement.size());
  for (size_t i = 0; i < r.node_ns.size(); ++i) EXPECT_GT(r.node_ns[i], 0u) << "node " << i;
}

TEST(CudaSession, OptionsAreCheckedAndNamed) {
  Graph g = small_cnn();
  Result r = run(g, backend(), {{"nosuch", "1"}});
  EXPECT_EQ(r.status, KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("unknown CUDA backend option 'nosuch'"), std::string::npos) << r.error;
  r = run(g, backend(), {{"conv", "fast"}});
  EXPECT_NE(r.error.find("conv=fast: expected auto, cudnn or own"), std::string::npos) << r.error;
  r = run(g, backend(), {{"lean", "1"}, {"conv", "cudnn"}});
  EXPECT_NE(r.error.find("contradict"), std::string::npos) << r.error;
}

TEST(CudaSession, MemoryReportCountsTheBuffers) {
  Graph g = small_cnn();
  const std::string path = "/tmp/kite_cuda_memory_" + std::to_string(::getpid()) + ".json";
  const Result r = run(g, backend(), {{"memory_report", path}});
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  const std::string text = read_file(path);
  std::remove(path.c_str());
  for (const char* key : {"\"arena_bytes\"", "\"weights_bytes\"", "\"workspace_bytes\"", "\"module_bytes\"",
                          "\"cudnn_handle_bytes\"", "\"cublaslt_handle_bytes\""}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " in " << text;
  }
  // The weights of this graph: 8x3x3x3 floats (864 bytes), then the 8 bias
  // floats at the next 64-byte boundary (896): 928 bytes; with unified
  // memory, none: the file's page holding them is imported.
  if (unified_by_env()) {
    EXPECT_NE(text.find("\"weights_bytes\": 0,"), std::string::npos) << text;
    EXPECT_EQ(text.find("\"imported_weights_bytes\": 0,"), std::string::npos) << text;
  } else {
    EXPECT_NE(text.find("\"weights_bytes\": 928,"), std::string::npos) << text;
  }
}

TEST(CudaSession, SessionsOnThreadsShareTheDevice) {
  Graph g = small_cnn();
  const Result ref = run(g, backend());
  ASSERT_EQ(ref.status, KITE_OK) << ref.error;
  std::vector<Result> results(3);
  std::vector<std::thread> threads;
  std::vector<Graph> graphs(3, small_cnn());
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = run(graphs[i], backend()); });
  }
  for (auto& t : threads) t.join();
  for (const Result& r : results) {
    ASSERT_EQ(r.status, KITE_OK) << r.error;
    std::string where;
    EXPECT_EQ(normalized_error(ref, r, &where), 0.0) << where;
  }
}

TEST(CudaSession, RunsOnTheApplicationsStream) {
  if (backend() != "cudaemu") GTEST_SKIP() << "needs the emulator's test hook to make a stream";
  void* h = dlopen((std::string(plugin_dir()) + "/libkite_backend_cudaemu.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto create = reinterpret_cast<void* (*)()>(dlsym(h, "kite_cudaemu_stream_create"));
  auto pending = reinterpret_cast<int (*)(void*)>(dlsym(h, "kite_cudaemu_stream_pending"));
  auto destroy = reinterpret_cast<void (*)(void*)>(dlsym(h, "kite_cudaemu_stream_destroy"));
  auto enqueued = reinterpret_cast<long long (*)(void*)>(dlsym(h, "kite_cudaemu_stream_enqueued"));
  ASSERT_TRUE(create && pending && destroy && enqueued);
  void* stream = create();
  ASSERT_NE(stream, nullptr);
  Graph g = small_cnn();
  const Result ref = run(g, backend());
  const Result r = run(g, backend(), {}, true, 2, false, stream);
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  std::string where;
  EXPECT_EQ(normalized_error(ref, r, &where), 0.0) << where;
  // Two runs, each at least an upload, the graph's kernels and a download,
  // went to the application's stream, and were waited for.
  EXPECT_GE(enqueued(stream), 2 * 3);
  EXPECT_EQ(pending(stream), 0);
  destroy(stream);
  dlclose(h);
}

// ---- the ABI directly: workspace sizing and supports ------------------------

class Abi : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = std::string(plugin_dir()) + "/libkite_backend_" + backend() + ".so";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    api_ = reinterpret_cast<kite_backend_entry_fn>(dlsym(handle_, KITE_BACKEND_ENTRY_SYMBOL))();
    kite_backend_device_options o{};
    o.struct_size = sizeof o;
    char err[512] = {0};
    ASSERT_EQ(api_->device_open(&o, &device_, err, sizeof err), KITE_OK) << err;
    kite_backend_create_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(api_->create2(device_, &info, &instance_, err, sizeof err), KITE_OK) << err;
  }
  void TearDown() override {
    if (api_) {
      for (void* k : kernels_) api_->release(instance_, k);
      if (instance_) api_->destroy(instance_);
      if (device_) api_->device_close(device_);
    }
    if (handle_) dlclose(handle_);
  }
  // A tensor description that outlives the test.
  kite_backend_tensor2* tensor(const char* name, std::vector<int64_t> shape, kite_dtype dtype = KITE_DTYPE_FLOAT32,
                               const void* constant = nullptr) {
    shapes_.push_back(std::move(shape));
    auto t = std::make_unique<kite_backend_tensor2>();
    t->struct_size = sizeof *t;
    t->name = name;
    t->dtype = dtype;
    t->rank = static_cast<int32_t>(shapes_.back().size());
    t->shape = shapes_.back().data();
    uint64_t n = kite_dtype_size(dtype);
    for (int64_t d : shapes_.back()) n *= static_cast<uint64_t>(d);
    t->byte_size = n;
    t->is_constant = constant != nullptr;
    t->host_data = constant;
    tensors_.push_back(std::move(t));
    return tensors_.back().get();
  }
  // Fake device placement for prepare2: one arena buffer of the backend.
  kite_backend_node2 node(const char* op, std::vector<const kite_backend_tensor2*> in,
                          std::vector<const kite_backend_tensor2*> out, const kite_backend_attr* attrs = nullptr,
                          int32_t num_attrs = 0) {
    lists_.push_back(in);
    lists_.push_back(out);
    kite_backend_node2 n{};
    n.struct_size = sizeof n;
    n.name = op;
    n.op = op;
    n.domain = "";
    n.fused_pattern = "";
    n.num_inputs = static_cast<int32_t>(in.size());
    n.inputs = lists_[lists_.size() - 2].data();
    n.num_outputs = static_cast<int32_t>(out.size());
    n.outputs = lists_.back().data();
    n.attrs = attrs;
    n.num_attrs = num_attrs;
    return n;
  }
  void place(kite_backend_buffer buffer) {
    uint64_t offset = 0;
    for (auto& t : tensors_) {
      t->buffer = buffer;
      t->offset = offset;
      offset += (t->byte_size + 255) / 256 * 256;
    }
  }

  void* handle_ = nullptr;
  const kite_backend_api* api_ = nullptr;
  void* device_ = nullptr;
  void* instance_ = nullptr;
  std::vector<void*> kernels_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<std::unique_ptr<kite_backend_tensor2>> tensors_;
  std::vector<std::vector<const kite_backend_tensor2*>> lists_;
};

TEST_F(Abi, WorkspaceHoldsStatusWordsAndTables) {
  char err[512] = {0};
  uint64_t bytes = 0;
  ASSERT_EQ(api_->workspace_size(instance_, &bytes, err, sizeof err), KITE_OK);
  EXPECT_EQ(bytes, 0u);  // no kernel, no workspace
  // BatchNormalization with C = 100 keeps 2 x 100 floats (800 bytes, 1024
  // rounded) in the workspace.
  static const float ones[100] = {1};
  kite_backend_tensor2* x = tensor("x", {1, 100, 2, 2});
  kite_backend_tensor2* y = tensor("y", {1, 100, 2, 2});
  std::vector<const kite_backend_tensor2*> in = {x};
  for (const char* name : {"scale", "b", "mean", "var"}) in.push_back(tensor(name, {100}, KITE_DTYPE_FLOAT32, ones));
  kite_backend_buffer arena = nullptr;
  ASSERT_EQ(api_->buffer_alloc(instance_, 1 << 20, KITE_BUFFER_ARENA, &arena, err, sizeof err), KITE_OK) << err;
  place(arena);
  kite_backend_node2 bn = node("BatchNormalization", in, {y});
  char reason[256] = {0};
  EXPECT_EQ(api_->supports2(instance_, &bn, reason, sizeof reason), 1) << reason;
  void* kernel = nullptr;
  ASSERT_EQ(api_->prepare2(instance_, &bn, &kernel, err, sizeof err), KITE_OK) << err;
  kernels_.push_back(kernel);
  ASSERT_EQ(api_->workspace_size(instance_, &bytes, err, sizeof err), KITE_OK);
  EXPECT_EQ(bytes, 256u + 1024u);  // the status words, then the table
  api_->buffer_free(instance_, arena);
}

TEST_F(Abi, SupportsNamesWhatItDeclines) {
  kite_backend_tensor2* x = tensor("x", {1, 2, 3});
  kite_backend_tensor2* y = tensor("y", {1, 2, 3}, KITE_DTYPE_FLOAT32);
  char reason[256] = {0};
  kite_backend_node2 n = node("NoSuchOp", {x}, {y});
  EXPECT_EQ(api_->supports2(instance_, &n, reason, sizeof reason), 0);
  EXPECT_NE(std::string(reason).find("no CUDA kernel for op NoSuchOp"), std::string::npos) << reason;
  kite_backend_tensor2* xi = tensor("xi", {4}, KITE_DTYPE_INT32);
  kite_backend_tensor2* yi = tensor("yi", {4}, KITE_DTYPE_INT32);
  kite_backend_node2 relu = node("Relu", {xi}, {yi});
  EXPECT_EQ(api_->supports2(instance_, &relu, reason, sizeof reason), 0);
  EXPECT_NE(std::string(reason).find("dtype int32"), std::string::npos) << reason;
  kite_backend_tensor2* bad = tensor("bad", {1, 2, 4});
  kite_backend_node2 wrong = node("Relu", {x}, {bad});
  EXPECT_EQ(api_->supports2(instance_, &wrong, reason, sizeof reason), 0);
}

}  // namespace
}  // namespace kite::cudatest
