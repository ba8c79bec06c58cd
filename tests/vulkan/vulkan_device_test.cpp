// The Vulkan backend's device-level behaviour through the ABI v2: the
// validation layer is really active (a deliberate misuse is reported, and a
// missing barrier is caught by synchronization validation), per-kernel GPU
// timestamps, out-of-memory and lost-device errors, device selection, the
// persistent pipeline cache, and declines with reasons.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "harness.h"

namespace kite::vktest {
namespace {

bool validation_on() {
  const char* v = std::getenv("KITE_VULKAN_VALIDATION");
  return v && std::strcmp(v, "0") != 0;
}

// A small chain: conv -> relu -> conv, each reading what the previous wrote.
Graph chain() {
  Graph g;
  const int x = g.input("x", {1, 4, 8, 8});
  const int w1 = g.constant("w1", {4, 4, 3, 3}, -0.3f, 0.3f);
  const int w2 = g.constant("w2", {4, 4, 3, 3}, -0.3f, 0.3f);
  int y = g.node("Conv", {x, w1}, {attr_ints("pads", {1, 1, 1, 1})})[0];
  y = g.node("Relu", {y})[0];
  const int shape = g.constant_i64("shape", {2}, {4, 64});
  const int r = g.node("Reshape", {y, shape})[0];
  g.place_in(r, y);  // in place: no copy, no dispatch
  const int s = g.constant_i64("back", {4}, {1, 4, 8, 8});
  const int r2 = g.node("Reshape", {r, s})[0];
  g.place_in(r2, y);
  g.mark_output(g.node("Conv", {r2, w2}, {attr_ints("pads", {1, 1, 1, 1})})[0]);
  return g;
}

struct Instance {
  const kite_backend_api* api;
  void* backend = nullptr;
  char msg[2048] = {0};
  Instance(void* device, std::vector<std::pair<const char*, const char*>> options = {}) {
    api = Plugin::get().api;
    std::vector<const char*> keys, values;
    for (auto& kv : options) {
      keys.push_back(kv.first);
      values.push_back(kv.second);
    }
    kite_backend_create_info info{};
    info.struct_size = sizeof(info);
    info.num_options = static_cast<int32_t>(keys.size());
    info.option_keys = keys.data();
    info.option_values = values.data();
    status = api->create2(device, &info, &backend, msg, sizeof(msg));
  }
  ~Instance() {
    if (backend) api->destroy(backend);
  }
  kite_status status;
};

TEST(VulkanValidation, LayerIsActive) {
  if (!validation_on()) GTEST_SKIP() << "KITE_VULKAN_VALIDATION is not set (ctest sets it)";
  take_log_messages();
  Instance inst(Plugin::get().device, {{"validation_selftest", "1"}});
  ASSERT_EQ(inst.status, KITE_OK) << inst.msg;
  // The misuse (a buffer without usage flags) is reported by the layer, and
  // the backend turns it into an error at the next synchronize.
  const kite_status s = inst.api->synchronize2(inst.backend, inst.msg, sizeof(inst.msg));
  EXPECT_EQ(s, KITE_ERROR_BACKEND);
  EXPECT_NE(std::string(inst.msg).find("VkBufferCreateInfo-usage"), std::string::npos) << inst.msg;
  const std::vector<std::string> log = take_log_messages();
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.front().find("usage"), std::string::npos) << log.front();
  // Reported once: the next synchronize is clean.
  EXPECT_EQ(inst.api->synchronize2(inst.backend, inst.msg, sizeof(inst.msg)), KITE_OK) << inst.msg;
}

TEST(VulkanValidation, MissingBarriersAreCaught) {
  if (!validation_on()) GTEST_SKIP() << "KITE_VULKAN_VALIDATION is not set (ctest sets it)";
  take_log_messages();
  const Graph g = chain();
  Values out;
  std::string err;
  VulkanOptions o;
  ASSERT_TRUE(run_vulkan(g, o, &out, &err)) << err;
  EXPECT_TRUE(take_log_messages().empty());
  // The same graph with the barriers removed (a test-only mutation).
  o.options = {{"debug_skip_barriers", "1"}};
  EXPECT_FALSE(run_vulkan(g, o, &out, &err));
  EXPECT_NE(err.find("SYNC-HAZARD-READ-AFTER-WRITE"), std::string::npos) << err;
  EXPECT_FALSE(take_log_messages().empty());
}

TEST(VulkanProfile, EveryKernelHasATimestamp) {
  const Graph g = chain();
  for (bool segment : {true, false}) {
    SCOPED_TRACE(segment ? "segment" : "per node");
    VulkanOptions o;
    o.profile = true;
    o.segment = segment;
    Values out, ref;
    std::vector<uint64_t> times;
    std::string err;
    ASSERT_TRUE(run_vulkan(g, o, &out, &err, &times)) << err;
    ASSERT_EQ(times.size(), g.nodes.size());
    uint64_t total = 0;
    for (size_t i = 0; i < times.size(); ++i) {
      EXPECT_NE(times[i], UINT64_MAX) << "node " << i << " (" << g.nodes[i].op << ") has no time";
      if (times[i] != UINT64_MAX) total += times[i];
    }
    EXPECT_GT(total, 0u);
    // Profiling does not change the results.
    ASSERT_TRUE(run_cpu(g, &ref, &err)) << err;
    std::string where;
    EXPECT_LE(normalized_error(g, ref, out, &where), 1e-4) << where;
  }
  EXPECT_TRUE(take_log_messages().empty());
}

TEST(VulkanErrors, OutOfDeviceMemory) {
  Instance inst(Plugin::get().device);
  ASSERT_EQ(inst.status, KITE_OK) << inst.msg;
  kite_backend_buffer b = nullptr;
  const kite_status s = inst.api->buffer_alloc(inst.backend, 1ull << 50, KITE_BUFFER_ARENA, &b, inst.msg, sizeof(inst.msg));
  EXPECT_EQ(s, KITE_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::string(inst.msg).find("1125899906842624 bytes"), std::string::npos) << inst.msg;
  // The instance still works.
  ASSERT_EQ(inst.api->buffer_alloc(inst.backend, 4096, KITE_BUFFER_ARENA, &b, inst.msg, sizeof(inst.msg)), KITE_OK);
  inst.api->buffer_free(inst.backend, b);
  EXPECT_TRUE(take_log_messages().empty());
}

TEST(VulkanErrors, LostDeviceIsAnErrorNotACrash) {
  // On a device of its own: a lost device stays lost.
  Plugin& p = Plugin::get();
  kite_backend_device_options options{};
  options.struct_size = sizeof(options);
  void* device = nullptr;
  char msg[1024];
  ASSERT_EQ(p.api->device_open(&options, &device, msg, sizeof(msg)), KITE_OK) << msg;
  {
    Instance inst(device, {{"simulate_device_lost", "1"}});
    ASSERT_EQ(inst.status, KITE_OK) << inst.msg;
    kite_backend_buffer b = nullptr;
    ASSERT_EQ(inst.api->buffer_alloc(inst.backend, 256, KITE_BUFFER_ARENA, &b, inst.msg, sizeof(inst.msg)), KITE_OK);
    kite_backend_tensor2 t{};
    t.struct_size = sizeof(t);
    t.name = "t";
    t.byte_size = 64;
    t.buffer = b;
    std::vector<uint8_t> host(64, 1);
    // unified=1 on lavapipe: download waits for queued work, which is where
    // the (simulated) loss is seen; either call may be the first to fail.
    kite_status s = inst.api->copy_buffer(inst.backend, b, 0, b, 128, 64, inst.msg, sizeof(inst.msg));
    if (s == KITE_OK) s = inst.api->synchronize2(inst.backend, inst.msg, sizeof(inst.msg));
    EXPECT_NE(s, KITE_OK);
    EXPECT_NE(std::string(inst.msg).find("was lost"), std::string::npos) << inst.msg;
    // Every later call says so too, and nothing crashes.
    EXPECT_NE(inst.api->download(inst.backend, host.data(), &t, inst.msg, sizeof(inst.msg)), KITE_OK);
    EXPECT_NE(std::string(inst.msg).find("lost"), std::string::npos) << inst.msg;
    inst.api->buffer_free(inst.backend, b);
  }
  p.api->device_close(device);
}

TEST(VulkanDevices, SelectionByEnvironment) {
  Plugin& p = Plugin::get();
  char msg[1024];
  int32_t count = 0;
  ASSERT_EQ(p.api->device_count(&count, msg, sizeof(msg)), KITE_OK) << msg;
  ASSERT_GE(count, 1);
  const std::string name = p.info.name;
  // A name substring (any case) and an enumeration index select a device.
  const std::string word = name.substr(0, std::min<size_t>(name.size(), 4));
  std::string upper = word;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  setenv("KITE_VULKAN_DEVICE", upper.c_str(), 1);
  kite_backend_device_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(p.api->device_info(0, &info, msg, sizeof(msg)), KITE_OK) << msg;
  EXPECT_NE(std::string(info.name).find(word), std::string::npos);
  setenv("KITE_VULKAN_DEVICE", "no-such-gpu", 1);
  int32_t none = 0;
  EXPECT_EQ(p.api->device_count(&none, msg, sizeof(msg)), KITE_ERROR_BACKEND);
  EXPECT_NE(std::string(msg).find("no-such-gpu"), std::string::npos) << msg;
  EXPECT_NE(std::string(msg).find(name), std::string::npos) << "the message lists the devices: " << msg;
  unsetenv("KITE_VULKAN_DEVICE");
  // The ABI's device index is checked.
  EXPECT_EQ(p.api->device_info(count, &info, msg, sizeof(msg)), KITE_ERROR_INVALID_ARGUMENT);
  kite_backend_device_options options{};
  options.struct_size = sizeof(options);
  options.device_index = count;
  void* device = nullptr;
  EXPECT_NE(p.api->device_open(&options, &device, msg, sizeof(msg)), KITE_OK);
  EXPECT_NE(std::string(msg).find("out of range"), std::string::npos) << msg;
}

TEST(VulkanDevices, InfoDescribesTheDevice) {
  const kite_backend_device_info& info = Plugin::get().info;
  EXPECT_GT(std::strlen(info.name), 0u);
  EXPECT_GT(info.memory_bytes, 0u);
  EXPECT_GE(info.min_offset_alignment, 4u);
  EXPECT_EQ(info.min_offset_alignment & (info.min_offset_alignment - 1), 0u);
  EXPECT_GT(info.max_buffer_size, 0u);
  if (std::string(info.name).find("llvmpipe") != std::string::npos) {
    // lavapipe: memory shared with the host, timestamps available.
    EXPECT_TRUE(info.flags & KITE_DEVICE_UNIFIED);
    EXPECT_TRUE(info.flags & KITE_DEVICE_TIMESTAMPS);
  }
}

TEST(VulkanPipelineCache, PersistsAndSurvivesDamage) {
  char dir_template[] = "/tmp/kite_vk_cacheXXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  Plugin& p = Plugin::get();
  std::vector<std::string> warnings;
  auto cycle = [&](bool expect_file) {
    kite_backend_device_options options{};
    options.struct_size = sizeof(options);
    options.cache_dir = dir.c_str();
    options.log = [](void* user, int32_t level, const char*, const char* m) {
      if (level <= KITE_LOG_WARNING) static_cast<std::vector<std::string>*>(user)->push_back(m);
    };
    options.log_user = &warnings;
    void* device = nullptr;
    char msg[1024];
    ASSERT_EQ(p.api->device_open(&options, &device, msg, sizeof(msg)), KITE_OK) << msg;
    {
      kite_backend_create_info info{};
      info.struct_size = sizeof(info);
      void* backend = nullptr;
      ASSERT_EQ(p.api->create2(device, &info, &backend, msg, sizeof(msg)), KITE_OK) << msg;
      p.api->destroy(backend);
    }
    p.api->device_close(device);
    (void)expect_file;
  };
  // Pipelines are built by prepare2; run a graph on a device with the cache.
  {
    kite_backend_device_options options{};
    options.struct_size = sizeof(options);
    options.cache_dir = dir.c_str();
    void* device = nullptr;
    char msg[1024];
    ASSERT_EQ(p.api->device_open(&options, &device, msg, sizeof(msg)), KITE_OK) << msg;
    kite_backend_create_info info{};
    info.struct_size = sizeof(info);
    void* backend = nullptr;
    ASSERT_EQ(p.api->create2(device, &info, &backend, msg, sizeof(msg)), KITE_OK) << msg;
    // One Conv node prepared on this device builds the conv pipeline.
    const int64_t xs[] = {1, 2, 4, 4}, ws[] = {2, 2, 3, 3}, ys[] = {1, 2, 2, 2};
    std::vector<float> wdata(36, 0.5f);
    kite_backend_tensor2 x{}, w{}, y{};
    for (auto* t : {&x, &w, &y}) {
      t->struct_size = sizeof(*t);
      t->dtype = KITE_DTYPE_FLOAT32;
      t->rank = 4;
    }
    x.name = "x";
    x.shape = xs;
    x.byte_size = 128;
    w.name = "w";
    w.shape = ws;
    w.byte_size = 144;
    w.is_constant = 1;
    w.host_data = wdata.data();
    y.name = "y";
    y.shape = ys;
    y.byte_size = 32;
    const kite_backend_tensor2* ins[] = {&x, &w};
    const kite_backend_tensor2* outs[] = {&y};
    kite_backend_node2 node{};
    node.struct_size = sizeof(node);
    node.name = "c";
    node.op = "Conv";
    node.domain = "";
    node.fused_pattern = "";
    node.num_inputs = 2;
    node.inputs = ins;
    node.num_outputs = 1;
    node.outputs = outs;
    void* kernel = nullptr;
    ASSERT_EQ(p.api->prepare2(backend, &node, &kernel, msg, sizeof(msg)), KITE_OK) << msg;
    p.api->release(backend, kernel);
    p.api->destroy(backend);
    p.api->device_close(device);
  }
  // The cache file exists, starts with Kite's header, and names the device.
  std::string file;
  {
    const std::string cmd = "ls " + dir;
    FILE* ls = popen(cmd.c_str(), "r");
    char line[512];
    while (ls && std::fgets(line, sizeof(line), ls)) file = line;
    if (ls) pclose(ls);
    while (!file.empty() && (file.back() == '\n')) file.pop_back();
  }
  ASSERT_EQ(file.rfind("kite_vulkan_", 0), 0u) << "no cache file in " << dir;
  const std::string path = dir + "/" + file;
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {0};
  in.read(magic, 8);
  EXPECT_EQ(std::string(magic, 8), "KITEVKPC");
  in.close();
  // Reopening reads it without complaint.
  warnings.clear();
  cycle(true);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  // A damaged file (truncated) is ignored with a warning, never handed to the driver.
  ASSERT_EQ(truncate(path.c_str(), 40), 0);
  warnings.clear();
  cycle(true);
  bool warned = false;
  for (const std::string& w : warnings) warned |= w.find("damaged") != std::string::npos;
  EXPECT_TRUE(warned);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(VulkanSupports, DeclinesWithReasons) {
  Instance inst(Plugin::get().device);
  ASSERT_EQ(inst.status, KITE_OK) << inst.msg;
  auto reason_for = [&](const char* op, const char* domain, const char* pattern, kite_dtype dtype,
                        std::vector<int64_t> in_shape, std::vector<int64_t> out_shape) {
    kite_backend_tensor2 x{}, y{};
    x.struct_size = y.struct_size = sizeof(x);
    x.name = "x";
    y.name = "y";
    x.dtype = y.dtype = dtype;
    x.rank = static_cast<int32_t>(in_shape.size());
    x.shape = in_shape.data();
    y.rank = static_cast<int32_t>(out_shape.size());
    y.shape = out_shape.data();
    x.byte_size = y.byte_size = 4;
    for (int64_t d : in_shape) x.byte_size *= static_cast<uint64_t>(d);
    for (int64_t d : out_shape) y.byte_size *= static_cast<uint64_t>(d);
    const kite_backend_tensor2* ins[] = {&x};
    const kite_backend_tensor2* outs[] = {&y};
    kite_backend_node2 node{};
    node.struct_size = sizeof(node);
    node.name = "n";
    node.op = op;
    node.domain = domain;
    node.fused_pattern = pattern;
    node.num_inputs = 1;
    node.inputs = ins;
    node.num_outputs = 1;
    node.outputs = outs;
    char reason[512] = {0};
    const int ok = inst.api->supports2(inst.backend, &node, reason, sizeof(reason));
    return ok ? std::string("ACCEPTED") : std::string(reason);
  };
  EXPECT_EQ(reason_for("Relu", "", "", KITE_DTYPE_FLOAT32, {2, 3}, {2, 3}), "ACCEPTED");
  EXPECT_NE(reason_for("Hardmax", "", "", KITE_DTYPE_FLOAT32, {2, 3}, {2, 3}).find("Hardmax"), std::string::npos);
  EXPECT_NE(reason_for("Relu", "", "", KITE_DTYPE_INT64, {2, 3}, {2, 3}).find("int64"), std::string::npos);
  EXPECT_NE(reason_for("NonMaxSuppression", "", "", KITE_DTYPE_FLOAT32, {2, 3}, {2, 3}).find("no Vulkan kernel"),
            std::string::npos);
  EXPECT_NE(reason_for("Relu", "com.example", "", KITE_DTYPE_FLOAT32, {2, 3}, {2, 3}).find("domain"),
            std::string::npos);
  EXPECT_NE(reason_for("Mystery", "kite", "Mystery+Relu", KITE_DTYPE_FLOAT32, {2, 3}, {2, 3}).find("fused"),
            std::string::npos);
  // A declared output that is not what the op produces (a hostile file).
  const std::string bad = reason_for("Relu", "", "", KITE_DTYPE_FLOAT32, {2, 3}, {3, 3});
  EXPECT_NE(bad.find("'y'"), std::string::npos) << bad;
  // Malformed nodes are refused, never read out of bounds.
  kite_backend_node2 node{};
  node.struct_size = sizeof(node);
  node.op = "Relu";
  node.num_inputs = -1;
  char reason[256];
  EXPECT_EQ(inst.api->supports2(inst.backend, &node, reason, sizeof(reason)), 0);
  EXPECT_EQ(inst.api->supports2(inst.backend, nullptr, reason, sizeof(reason)), 0);
  // Unknown options are refused by name.
  Instance bad_option(Plugin::get().device, {{"fast", "1"}});
  EXPECT_EQ(bad_option.status, KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bad_option.msg).find("'fast'"), std::string::npos) << bad_option.msg;
}

}  // namespace
}  // namespace kite::vktest
