// The Vulkan backend behind the C ABI of kite/backend.h (v2). The entry
// points common to the device plugins (argument checks, exceptions turned
// into statuses, forwarding to Backend) are kite::abi::DevicePlugin's; this
// file has what only Vulkan does: counting and describing its devices.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend.h"
#include "kite/abi/plugin.h"

namespace kite::vk {
namespace {

using abi::fail;
using abi::guarded;

struct VulkanPlugin {
  using Device = vk::Device;
  using Backend = vk::Backend;
  using Kernel = vk::Kernel;
  using Segment = vk::Segment;
  using Buffer = vk::Buffer;
  static std::string check_tables() { return kernels().check(); }
  // Taken on half shaders: the note of kite/backend.h, worded as the CPU
  // backend's.
  static std::string unsupported(Backend& backend, const kite_backend_node2& node, std::string* note) {
    Kernel scratch;
    std::string label;
    const std::string why = backend.plan(node, &scratch, &label);
    for (const Dispatch& d : scratch.dispatches) {
      if (reads_halves(d.shader)) *note = "fp16 storage, fp32 arithmetic";
    }
    return why;
  }
};
using Plugin = abi::DevicePlugin<VulkanPlugin>;

kite_status vk_device_count(int32_t* out_count, char* err, size_t err_size) {
  if (!out_count) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_count is NULL");
  *out_count = 0;
  return guarded(err, err_size, "device_count", [&](std::string* message) {
    std::shared_ptr<Instance> instance = Instance::acquire(message);
    if (!instance) return KITE_ERROR_BACKEND;
    std::vector<const PhysicalDevice*> list;
    if (!instance->devices(&list, message)) return KITE_ERROR_BACKEND;
    *out_count = static_cast<int32_t>(list.size());
    return KITE_OK;
  });
}

kite_status vk_device_info(int32_t index, kite_backend_device_info* out, char* err, size_t err_size) {
  if (!out || out->struct_size < sizeof(kite_backend_device_info)) {
    return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "out_info is NULL or has an old struct_size");
  }
  return guarded(err, err_size, "device_info", [&](std::string* message) {
    std::shared_ptr<Instance> instance = Instance::acquire(message);
    if (!instance) return KITE_ERROR_BACKEND;
    std::vector<const PhysicalDevice*> list;
    if (!instance->devices(&list, message)) return KITE_ERROR_BACKEND;
    if (index < 0 || static_cast<size_t>(index) >= list.size()) {
      *message = "Vulkan device index " + std::to_string(index) + " is out of range (" +
                 std::to_string(list.size()) + " devices)";
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    const PhysicalDevice& pd = *list[static_cast<size_t>(index)];
    const uint32_t size = out->struct_size;
    std::memset(reinterpret_cast<char*>(out) + sizeof(uint32_t), 0, sizeof(*out) - sizeof(uint32_t));
    out->struct_size = size;
    std::snprintf(out->name, sizeof(out->name), "%s", pd.name.c_str());
    out->memory_bytes = pd.device_local_bytes;
    uint32_t flags = 0;
    if (pd.unified) flags |= KITE_DEVICE_UNIFIED;
    const VkPhysicalDeviceLimits& l = pd.properties.limits;
    if (pd.timestamp_valid_bits > 0 && l.timestampComputeAndGraphics) flags |= KITE_DEVICE_TIMESTAMPS;
    out->flags = flags;
    out->min_offset_alignment = std::max<uint64_t>(l.minStorageBufferOffsetAlignment, 4);
    VkPhysicalDeviceMaintenance3Properties m3 = vk_struct<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    VkPhysicalDeviceProperties2 p2 = vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    p2.pNext = &m3;
    instance->fn().vkGetPhysicalDeviceProperties2(pd.handle, &p2);
    out->max_buffer_size = m3.maxMemoryAllocationSize;
    return KITE_OK;
  });
}

// Work is submitted at end_run (and at downloads); nothing to start.
kite_status vk_begin_run(void* backend, char* err, size_t err_size) {
  if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
  return KITE_OK;
}

kite_backend_api make_api() {
  kite_backend_api api = Plugin::api("vulkan");
  api.device_count = vk_device_count;
  api.device_info = vk_device_info;
  api.begin_run = vk_begin_run;
  api.end_run = Plugin::end_run;
  return api;
}

}  // namespace
}  // namespace kite::vk

extern "C" const kite_backend_api* kite_backend_entry_vulkan(void) {
  static const kite_backend_api api = kite::vk::make_api();
  return &api;
}
