// One VkDevice per process and device index (the ABI's device object),
// shared by every session on it: the queue (submissions are serialised by a
// mutex), the compute pipelines (built on first use, shared by sessions, kept
// in a VkPipelineCache that persists in the cache directory) and the limits
// that drive kernel choices.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "kite/backend.h"
#include "shaders.h"
#include "vk_instance.h"

namespace kite::vk {

// Bytes of push constants every pipeline declares (the guaranteed minimum of
// maxPushConstantsSize); each shader uses a prefix of it.
constexpr uint32_t kPushConstantBytes = 128;
constexpr uint32_t kMaxBindings = 8;

struct Limits {
  uint64_t min_storage_offset_alignment = 256;
  uint64_t max_storage_buffer_range = 0;
  uint64_t max_memory_allocation = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_shared_memory = 0;
  float timestamp_period_ns = 0.0f;  // 0: no timestamps on the compute queue
  uint32_t timestamp_valid_bits = 0;
};

class Device {
 public:
  // Opens options->device_index of the ordered device list.
  static Device* open(const kite_backend_device_options& options, std::string* err);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Functions& fn() const { return fn_; }
  VkDevice handle() const { return device_; }
  const PhysicalDevice& physical() const { return *physical_; }
  const Limits& limits() const { return limits_; }
  Instance& instance() { return *instance_; }

  // The compute pipeline of a shader and its layout, built on first use.
  // Thread-safe; null with a message when building fails.
  VkPipeline pipeline(ShaderId shader, std::string* err);
  VkPipelineLayout pipeline_layout(uint32_t bindings) const { return layouts_[bindings]; }
  VkDescriptorSetLayout set_layout(uint32_t bindings) const { return set_layouts_[bindings]; }

  // A memory type with all of `required` (and as many of `preferred` as any
  // type offers) among type_bits; UINT32_MAX when none.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred) const;

  // Submits under the queue mutex. A lost device is remembered: every later
  // submit fails at once.
  VkResult submit(const VkSubmitInfo& info, VkFence fence);
  bool lost() const { return lost_.load(); }
  void mark_lost() { lost_.store(true); }

  void log(int32_t level, const std::string& message) const;

  // Writes the pipeline cache to the cache directory (when one was given and
  // new pipelines were built). Called on close.
  void save_pipeline_cache();

 private:
  Device() = default;
  bool init(const kite_backend_device_options& options, std::string* err);
  void load_pipeline_cache();

  std::shared_ptr<Instance> instance_;
  const PhysicalDevice* physical_ = nullptr;
  Functions fn_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::mutex queue_mutex_;
  std::atomic<bool> lost_{false};
  Limits limits_;
  kite_log_fn log_ = nullptr;
  void* log_user_ = nullptr;

  std::string cache_path_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool cache_dirty_ = false;
  std::mutex pipeline_mutex_;
  std::array<VkPipeline, kShaderCount> pipelines_{};
  std::array<VkDescriptorSetLayout, kMaxBindings + 1> set_layouts_{};
  std::array<VkPipelineLayout, kMaxBindings + 1> layouts_{};
};

}  // namespace kite::vk
