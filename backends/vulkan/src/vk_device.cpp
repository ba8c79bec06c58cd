#include "vk_device.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace kite::vk {

namespace {

// Our own header in front of the driver's cache data, so that a truncated or
// foreign file is never handed to the driver (some drivers trust it).
struct CacheFileHeader {
  char magic[8];        // "KITEVKPC"
  uint32_t version;     // 1
  uint32_t vendor_id;
  uint32_t device_id;
  uint32_t driver_version;
  uint8_t uuid[VK_UUID_SIZE];
  uint64_t data_size;
  uint64_t checksum;    // FNV-1a of the data
};

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

}  // namespace

Device* Device::open(const kite_backend_device_options& options, std::string* err) {
  std::unique_ptr<Device> d(new Device());
  if (!d->init(options, err)) return nullptr;
  return d.release();
}

bool Device::init(const kite_backend_device_options& options, std::string* err) {
  instance_ = Instance::acquire(err);
  if (!instance_) return false;
  log_ = options.log;
  log_user_ = options.log_user;
  if (instance_->validation() && options.log) {
    ValidationLog& vlog = instance_->validation_log();
    std::lock_guard<std::mutex> lock(vlog.mutex);
    if (!vlog.log) {
      vlog.log = options.log;
      vlog.log_user = options.log_user;
    }
  }
  std::vector<const PhysicalDevice*> list;
  if (!instance_->devices(&list, err)) return false;
  if (options.device_index < 0 || static_cast<size_t>(options.device_index) >= list.size()) {
    *err = "Vulkan device index " + std::to_string(options.device_index) + " is out of range (" +
           std::to_string(list.size()) + " device" + (list.size() == 1 ? "" : "s") + ")";
    return false;
  }
  physical_ = list[static_cast<size_t>(options.device_index)];
  fn_ = instance_->fn();

  const VkPhysicalDeviceLimits& l = physical_->properties.limits;
  limits_.min_storage_offset_alignment = std::max<uint64_t>(l.minStorageBufferOffsetAlignment, 4);
  limits_.max_storage_buffer_range = l.maxStorageBufferRange;
  limits_.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    limits_.max_workgroup_count[i] = l.maxComputeWorkGroupCount[i];
    limits_.max_workgroup_size[i] = l.maxComputeWorkGroupSize[i];
  }
  limits_.max_shared_memory = l.maxComputeSharedMemorySize;
  limits_.timestamp_valid_bits = physical_->timestamp_valid_bits;
  limits_.timestamp_period_ns =
      physical_->timestamp_valid_bits > 0 && l.timestampComputeAndGraphics ? l.timestampPeriod : 0.0f;
  {
    VkPhysicalDeviceMaintenance3Properties m3 = vk_struct<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    VkPhysicalDeviceProperties2 p2 = vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    p2.pNext = &m3;
    fn_.vkGetPhysicalDeviceProperties2(physical_->handle, &p2);
    limits_.max_memory_allocation = m3.maxMemoryAllocationSize;
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queue_info.queueFamilyIndex = physical_->queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo info = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  // 16-bit storage buffers (core in Vulkan 1.1) for the float16 shaders,
  // where the device has them; plan functions decline float16 otherwise.
  VkPhysicalDevice16BitStorageFeatures storage16 =
      vk_struct<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
  if (physical_->storage_16bit) {
    storage16.storageBuffer16BitAccess = VK_TRUE;
    info.pNext = &storage16;
  }
  VkResult r = fn_.vkCreateDevice(physical_->handle, &info, nullptr, &device_);
  if (r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    *err = "vkCreateDevice on '" + physical_->name + "' failed: " + result_name(r);
    return false;
  }
#define KITE_VK_LOAD_DEVICE(f) \
  fn_.f = reinterpret_cast<PFN_##f>(fn_.vkGetDeviceProcAddr(device_, #f));
  KITE_VK_DEVICE_FUNCTIONS(KITE_VK_LOAD_DEVICE)
#undef KITE_VK_LOAD_DEVICE
#define KITE_VK_CHECK_DEVICE(f)                                              \
  if (!fn_.f) {                                                              \
    *err = "the Vulkan driver of '" + physical_->name + "' lacks " #f;       \
    return false;                                                            \
  }
  KITE_VK_DEVICE_FUNCTIONS(KITE_VK_CHECK_DEVICE)
#undef KITE_VK_CHECK_DEVICE
  fn_.vkGetDeviceQueue(device_, physical_->queue_family, 0, &queue_);

  // One descriptor-set layout and pipeline layout per binding count: every
  // binding a storage buffer, one push-constant range for all shaders.
  for (uint32_t n = 0; n <= kMaxBindings; ++n) {
    std::vector<VkDescriptorSetLayoutBinding> bindings(n);
    for (uint32_t b = 0; b < n; ++b) {
      bindings[b] = {};
      bindings[b].binding = b;
      bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[b].descriptorCount = 1;
      bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set_info = vk_struct<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    set_info.bindingCount = n;
    set_info.pBindings = bindings.data();
    r = fn_.vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &set_layouts_[n]);
    if (r != VK_SUCCESS) {
      *err = std::string("vkCreateDescriptorSetLayout failed: ") + result_name(r);
      return false;
    }
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
    VkPipelineLayoutCreateInfo layout_info = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layouts_[n];
    layout_info.pushConstantRangeCount = 1;
    layout_info.pPushConstantRanges = &range;
    r = fn_.vkCreatePipelineLayout(device_, &layout_info, nullptr, &layouts_[n]);
    if (r != VK_SUCCESS) {
      *err = std::string("vkCreatePipelineLayout failed: ") + result_name(r);
      return false;
    }
  }

  if (options.cache_dir && *options.cache_dir) {
    const VkPhysicalDeviceProperties& p = physical_->properties;
    std::string uuid;
    for (uint8_t b : p.pipelineCacheUUID) {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%02x", b);
      uuid += buf;
    }
    cache_path_ = std::string(options.cache_dir) + "/kite_vulkan_" + hex(p.vendorID) + "_" +
                  hex(p.deviceID) + "_" + uuid + ".bin";
  }
  load_pipeline_cache();
  return true;
}

void Device::load_pipeline_cache() {
  std::vector<uint8_t> data;
  if (!cache_path_.empty()) {
    std::ifstream in(cache_path_, std::ios::binary);
    CacheFileHeader h{};
    if (in && !in.read(reinterpret_cast<char*>(&h), sizeof(h))) {
      log(KITE_LOG_WARNING, "ignoring the damaged pipeline cache " + cache_path_ + " (shorter than its header)");
    } else if (in) {
      const VkPhysicalDeviceProperties& p = physical_->properties;
      const bool ours = std::memcmp(h.magic, "KITEVKPC", 8) == 0 && h.version == 1 &&
                        h.vendor_id == p.vendorID && h.device_id == p.deviceID &&
                        h.driver_version == p.driverVersion &&
                        std::memcmp(h.uuid, p.pipelineCacheUUID, VK_UUID_SIZE) == 0 &&
                        h.data_size > 0 && h.data_size < (1ull << 31);
      if (ours) {
        data.resize(h.data_size);
        if (!in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size())) ||
            fnv1a(data.data(), data.size()) != h.checksum) {
          data.clear();
          log(KITE_LOG_WARNING, "ignoring the damaged pipeline cache " + cache_path_);
        }
      } else {
        log(KITE_LOG_INFO, "ignoring the pipeline cache " + cache_path_ + " of another device or driver");
      }
    }
  }
  VkPipelineCacheCreateInfo info = vk_struct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
  info.initialDataSize = data.size();
  info.pInitialData = data.empty() ? nullptr : data.data();
  if (fn_.vkCreatePipelineCache(device_, &info, nullptr, &cache_) != VK_SUCCESS) {
    cache_ = VK_NULL_HANDLE;  // pipelines are then built without a cache
  }
}

void Device::save_pipeline_cache() {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (cache_path_.empty() || cache_ == VK_NULL_HANDLE || !cache_dirty_) return;
  size_t size = 0;
  if (fn_.vkGetPipelineCacheData(device_, cache_, &size, nullptr) != VK_SUCCESS || size == 0) return;
  std::vector<uint8_t> data(size);
  if (fn_.vkGetPipelineCacheData(device_, cache_, &size, data.data()) != VK_SUCCESS) return;
  data.resize(size);
  CacheFileHeader h{};
  std::memcpy(h.magic, "KITEVKPC", 8);
  h.version = 1;
  const VkPhysicalDeviceProperties& p = physical_->properties;
  h.vendor_id = p.vendorID;
  h.device_id = p.deviceID;
  h.driver_version = p.driverVersion;
  std::memcpy(h.uuid, p.pipelineCacheUUID, VK_UUID_SIZE);
  h.data_size = data.size();
  h.checksum = fnv1a(data.data(), data.size());
  // Written next to the final name and renamed, so that a reader never sees
  // half a file.
  const std::string tmp = cache_path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      log(KITE_LOG_WARNING, "cannot write the pipeline cache " + tmp);
      return;
    }
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    if (!out) {
      log(KITE_LOG_WARNING, "cannot write the pipeline cache " + tmp);
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), cache_path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    log(KITE_LOG_WARNING, "cannot rename the pipeline cache to " + cache_path_);
    return;
  }
  cache_dirty_ = false;
}

VkPipeline Device::pipeline(ShaderId shader, std::string* err) {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (pipelines_[shader] != VK_NULL_HANDLE) return pipelines_[shader];
  const ShaderInfo& info = shader_info(shader);
  VkShaderModuleCreateInfo module_info = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  module_info.codeSize = info.words * sizeof(uint32_t);
  module_info.pCode = info.code;
  VkShaderModule module = VK_NULL_HANDLE;
  VkResult r = fn_.vkCreateShaderModule(device_, &module_info, nullptr, &module);
  if (r != VK_SUCCESS) {
    *err = std::string("vkCreateShaderModule(") + info.name + ") failed: " + result_name(r);
    return VK_NULL_HANDLE;
  }
  VkComputePipelineCreateInfo pipe_info = vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  pipe_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipe_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipe_info.stage.module = module;
  pipe_info.stage.pName = "main";
  pipe_info.layout = layouts_[info.bindings];
  VkPipeline pipeline = VK_NULL_HANDLE;
  r = fn_.vkCreateComputePipelines(device_, cache_, 1, &pipe_info, nullptr, &pipeline);
  fn_.vkDestroyShaderModule(device_, module, nullptr);
  if (r != VK_SUCCESS) {
    *err = std::string("building the compute pipeline '") + info.name + "' failed: " + result_name(r);
    return VK_NULL_HANDLE;
  }
  pipelines_[shader] = pipeline;
  cache_dirty_ = true;
  return pipeline;
}

uint32_t Device::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                             VkMemoryPropertyFlags preferred) const {
  const VkPhysicalDeviceMemoryProperties& m = physical_->memory;
  uint32_t best = UINT32_MAX;
  int best_score = -1;
  for (uint32_t t = 0; t < m.memoryTypeCount; ++t) {
    if (!(type_bits & (1u << t))) continue;
    const VkMemoryPropertyFlags flags = m.memoryTypes[t].propertyFlags;
    if ((flags & required) != required) continue;
    const int score = __builtin_popcount(flags & preferred);
    if (score > best_score) {
      best_score = score;
      best = t;
    }
  }
  return best;
}

VkResult Device::submit(const VkSubmitInfo& info, VkFence fence) {
  if (lost_.load()) return VK_ERROR_DEVICE_LOST;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  const VkResult r = fn_.vkQueueSubmit(queue_, 1, &info, fence);
  if (r == VK_ERROR_DEVICE_LOST) lost_.store(true);
  return r;
}

void Device::log(int32_t level, const std::string& message) const {
  if (log_) log_(log_user_, level, "vulkan", message.c_str());
}

Device::~Device() {
  if (device_ != VK_NULL_HANDLE) {
    fn_.vkDeviceWaitIdle(device_);
    save_pipeline_cache();
    for (VkPipeline p : pipelines_) {
      if (p != VK_NULL_HANDLE) fn_.vkDestroyPipeline(device_, p, nullptr);
    }
    if (cache_ != VK_NULL_HANDLE) fn_.vkDestroyPipelineCache(device_, cache_, nullptr);
    for (VkPipelineLayout l : layouts_) {
      if (l != VK_NULL_HANDLE) fn_.vkDestroyPipelineLayout(device_, l, nullptr);
    }
    for (VkDescriptorSetLayout l : set_layouts_) {
      if (l != VK_NULL_HANDLE) fn_.vkDestroyDescriptorSetLayout(device_, l, nullptr);
    }
    fn_.vkDestroyDevice(device_, nullptr);
  }
}

}  // namespace kite::vk
