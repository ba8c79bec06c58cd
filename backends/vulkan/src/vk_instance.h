// The Vulkan loader and the one VkInstance of the process.
//
// The loader (libvulkan.so.1, or KITE_VULKAN_LOADER) is opened with dlopen the
// first time anything asks for it; the instance is created on demand and
// shared by every device of the process (reference-counted: the last user
// destroys it and closes the loader). With KITE_VULKAN_VALIDATION=1 the
// instance enables VK_LAYER_KHRONOS_validation and a debug messenger that
// counts the layer's messages; sessions fail when one arrives (vk_backend.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "vk_functions.h"

namespace kite::vk {

// What the backend needs to know about one physical device, read once.
struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  uint32_t enumeration_index = 0;  // position in vkEnumeratePhysicalDevices
  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory{};
  uint32_t queue_family = 0;       // a family with compute
  uint32_t timestamp_valid_bits = 0;
  uint32_t subgroup_size = 0;
  bool storage_16bit = false;      // storageBuffer16BitAccess
  bool float16 = false;            // shaderFloat16
  bool host_import = false;        // VK_EXT_external_memory_host
  bool unified = false;            // every device-local type is host-visible too (or a host-visible device-local type exists and is the only device-local heap)
  uint64_t device_local_bytes = 0; // size of the largest device-local heap
  std::string name;
};

// The validation layer's messages since the instance was created.
struct ValidationLog {
  std::atomic<uint64_t> count{0};
  std::mutex mutex;
  std::string last;      // the latest message
  kite_log_fn log = nullptr;  // forwarded to, when set (the first device's)
  void* log_user = nullptr;
};

class Instance {
 public:
  // The process's instance, created on first use. Fails with a message that
  // says what is missing (loader, driver, validation layer).
  static std::shared_ptr<Instance> acquire(std::string* err);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const Functions& fn() const { return fn_; }
  VkInstance handle() const { return instance_; }
  uint32_t api_version() const { return api_version_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  ValidationLog& validation_log() { return log_; }

  // Devices in the order the backend exposes them: the one KITE_VULKAN_DEVICE
  // names first, then discrete, integrated, virtual, CPU, other (stable).
  // Fails when KITE_VULKAN_DEVICE matches nothing or no device has compute.
  bool devices(std::vector<const PhysicalDevice*>* out, std::string* err) const;

 private:
  Instance() = default;
  bool init(std::string* err);

  void* library_ = nullptr;
  Functions fn_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t api_version_ = 0;
  std::vector<PhysicalDevice> physical_;
  ValidationLog log_;
};

// True when KITE_VULKAN_VALIDATION is set to something other than 0/empty.
bool validation_requested();

}  // namespace kite::vk
