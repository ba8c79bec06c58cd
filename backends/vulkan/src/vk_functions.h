// The Vulkan entry points the backend uses, in one X-macro list, and the
// table that holds them. The plugin never links libvulkan: the loader
// (libvulkan.so.1) is opened with dlopen and every function is fetched
// through vkGetInstanceProcAddr / vkGetDeviceProcAddr (see vk_loader.cpp).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

// Global functions (no instance).
#define KITE_VK_GLOBAL_FUNCTIONS(X)      \
  X(vkEnumerateInstanceVersion)          \
  X(vkEnumerateInstanceLayerProperties)  \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkCreateInstance)

// Instance-level functions.
#define KITE_VK_INSTANCE_FUNCTIONS(X)             \
  X(vkDestroyInstance)                            \
  X(vkEnumeratePhysicalDevices)                   \
  X(vkGetPhysicalDeviceProperties)                \
  X(vkGetPhysicalDeviceProperties2)               \
  X(vkGetPhysicalDeviceFeatures)                  \
  X(vkGetPhysicalDeviceFeatures2)                 \
  X(vkGetPhysicalDeviceMemoryProperties)          \
  X(vkGetPhysicalDeviceQueueFamilyProperties)     \
  X(vkEnumerateDeviceExtensionProperties)         \
  X(vkCreateDevice)                               \
  X(vkGetDeviceProcAddr)

// Optional instance-level functions (VK_EXT_debug_utils, with validation).
#define KITE_VK_DEBUG_FUNCTIONS(X)     \
  X(vkCreateDebugUtilsMessengerEXT)    \
  X(vkDestroyDebugUtilsMessengerEXT)

// Device-level functions.
#define KITE_VK_DEVICE_FUNCTIONS(X)          \
  X(vkDestroyDevice)                         \
  X(vkGetDeviceQueue)                        \
  X(vkDeviceWaitIdle)                        \
  X(vkQueueSubmit)                           \
  X(vkQueueWaitIdle)                         \
  X(vkCreateBuffer)                          \
  X(vkDestroyBuffer)                         \
  X(vkGetBufferMemoryRequirements)           \
  X(vkAllocateMemory)                        \
  X(vkFreeMemory)                            \
  X(vkBindBufferMemory)                      \
  X(vkMapMemory)                             \
  X(vkUnmapMemory)                           \
  X(vkCreateShaderModule)                    \
  X(vkDestroyShaderModule)                   \
  X(vkCreateDescriptorSetLayout)             \
  X(vkDestroyDescriptorSetLayout)            \
  X(vkCreatePipelineLayout)                  \
  X(vkDestroyPipelineLayout)                 \
  X(vkCreatePipelineCache)                   \
  X(vkDestroyPipelineCache)                  \
  X(vkGetPipelineCacheData)                  \
  X(vkCreateComputePipelines)                \
  X(vkDestroyPipeline)                       \
  X(vkCreateDescriptorPool)                  \
  X(vkDestroyDescriptorPool)                 \
  X(vkAllocateDescriptorSets)                \
  X(vkUpdateDescriptorSets)                  \
  X(vkCreateCommandPool)                     \
  X(vkDestroyCommandPool)                    \
  X(vkAllocateCommandBuffers)                \
  X(vkFreeCommandBuffers)                    \
  X(vkBeginCommandBuffer)                    \
  X(vkEndCommandBuffer)                      \
  X(vkResetCommandBuffer)                    \
  X(vkCmdBindPipeline)                       \
  X(vkCmdBindDescriptorSets)                 \
  X(vkCmdPushConstants)                      \
  X(vkCmdDispatch)                           \
  X(vkCmdPipelineBarrier)                    \
  X(vkCmdCopyBuffer)                         \
  X(vkCmdFillBuffer)                         \
  X(vkCmdWriteTimestamp)                     \
  X(vkCmdResetQueryPool)                     \
  X(vkCreateQueryPool)                       \
  X(vkDestroyQueryPool)                      \
  X(vkGetQueryPoolResults)                   \
  X(vkCreateFence)                           \
  X(vkDestroyFence)                          \
  X(vkResetFences)                           \
  X(vkWaitForFences)                         \
  X(vkGetFenceStatus)

namespace kite::vk {

// Function pointers of one loader, instance and device. Members are null
// until loaded; the optional debug functions may stay null.
struct Functions {
#define KITE_VK_MEMBER(name) PFN_##name name = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  KITE_VK_GLOBAL_FUNCTIONS(KITE_VK_MEMBER)
  KITE_VK_INSTANCE_FUNCTIONS(KITE_VK_MEMBER)
  KITE_VK_DEBUG_FUNCTIONS(KITE_VK_MEMBER)
  KITE_VK_DEVICE_FUNCTIONS(KITE_VK_MEMBER)
#undef KITE_VK_MEMBER
};

// A zeroed Vulkan struct with its sType set (brace-initialising only sType
// trips -Wmissing-field-initializers).
template <typename T>
T vk_struct(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult result);

}  // namespace kite::vk
