#include "vk_instance.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace kite::vk {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::mutex g_instance_mutex;
std::weak_ptr<Instance> g_instance;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT types,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                void* user) {
  // Errors of any kind, and warnings about the API's rules, fail the session;
  // informational messages (loader chatter) are ignored.
  const bool error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
  const bool warning = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) != 0 &&
                       (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) != 0;
  if (!error && !warning) return VK_FALSE;
  ValidationLog* log = static_cast<ValidationLog*>(user);
  const std::string message = data && data->pMessage ? data->pMessage : "(no message)";
  kite_log_fn fn = nullptr;
  void* fn_user = nullptr;
  {
    std::lock_guard<std::mutex> lock(log->mutex);
    log->last = message;
    fn = log->log;
    fn_user = log->log_user;
  }
  log->count.fetch_add(1);
  if (fn) fn(fn_user, error ? KITE_LOG_ERROR : KITE_LOG_WARNING, "vulkan", message.c_str());
  return VK_FALSE;
}

}  // namespace

bool validation_requested() {
  const char* v = env("KITE_VULKAN_VALIDATION");
  return v && std::strcmp(v, "0") != 0;
}

std::shared_ptr<Instance> Instance::acquire(std::string* err) {
  std::lock_guard<std::mutex> lock(g_instance_mutex);
  std::shared_ptr<Instance> existing = g_instance.lock();
  if (existing) return existing;
  std::shared_ptr<Instance> created(new Instance());
  if (!created->init(err)) return nullptr;
  g_instance = created;
  return created;
}

bool Instance::init(std::string* err) {
  const char* loader = env("KITE_VULKAN_LOADER");
  const char* name = loader ? loader : "libvulkan.so.1";
  library_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    const char* e = dlerror();
    *err = std::string("cannot open the Vulkan loader ") + name + ": " + (e ? e : "unknown error") +
           (loader ? "" : " (install libvulkan1, or set KITE_VULKAN_LOADER to its path)");
    return false;
  }
  void* sym = dlsym(library_, "vkGetInstanceProcAddr");
  if (!sym) {
    *err = std::string("the Vulkan loader ") + name + " does not export vkGetInstanceProcAddr";
    return false;
  }
  std::memcpy(&fn_.vkGetInstanceProcAddr, &sym, sizeof(sym));
#define KITE_VK_LOAD_GLOBAL(f) \
  fn_.f = reinterpret_cast<PFN_##f>(fn_.vkGetInstanceProcAddr(VK_NULL_HANDLE, #f));
  KITE_VK_GLOBAL_FUNCTIONS(KITE_VK_LOAD_GLOBAL)
#undef KITE_VK_LOAD_GLOBAL
  if (!fn_.vkCreateInstance || !fn_.vkEnumerateInstanceLayerProperties ||
      !fn_.vkEnumerateInstanceExtensionProperties) {
    *err = std::string("the Vulkan loader ") + name + " lacks vkCreateInstance";
    return false;
  }
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (fn_.vkEnumerateInstanceVersion) fn_.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1) {
    *err = "the Vulkan loader supports only Vulkan 1.0; the backend needs 1.1";
    return false;
  }
  api_version_ = VK_API_VERSION_1_1;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  const bool validation = validation_requested();
  if (validation) {
    uint32_t count = 0;
    fn_.vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> available(count);
    fn_.vkEnumerateInstanceLayerProperties(&count, available.data());
    bool found = false;
    for (const VkLayerProperties& l : available) found |= std::strcmp(l.layerName, kValidationLayer) == 0;
    if (!found) {
      *err = std::string("KITE_VULKAN_VALIDATION is set but the layer ") + kValidationLayer +
             " is not installed (Debian: apt-get install vulkan-validationlayers)";
      return false;
    }
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  }

  VkApplicationInfo app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "kite";
  app.pEngineName = "kite";
  app.apiVersion = api_version_;
  VkInstanceCreateInfo info = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VkDebugUtilsMessengerCreateInfoEXT messenger_info = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_debug_message;
  messenger_info.pUserData = &log_;
  // Synchronization validation too: a missing barrier between a dispatch
  // that writes bytes and one that reads them is reported as a hazard.
  const VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features = vk_struct<VkValidationFeaturesEXT>(VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT);
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  features.pNext = &messenger_info;
  if (validation) info.pNext = &features;  // the messenger also covers vkCreate/DestroyInstance
  VkResult r = fn_.vkCreateInstance(&info, nullptr, &instance_);
  if (r != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;
    *err = std::string("vkCreateInstance failed: ") + result_name(r) +
           (r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver is installed)" : "");
    return false;
  }
#define KITE_VK_LOAD_INSTANCE(f) \
  fn_.f = reinterpret_cast<PFN_##f>(fn_.vkGetInstanceProcAddr(instance_, #f));
  KITE_VK_INSTANCE_FUNCTIONS(KITE_VK_LOAD_INSTANCE)
  if (validation) {
    KITE_VK_DEBUG_FUNCTIONS(KITE_VK_LOAD_INSTANCE)
  }
#undef KITE_VK_LOAD_INSTANCE
#define KITE_VK_CHECK_INSTANCE(f)                                            \
  if (!fn_.f) {                                                              \
    *err = "the Vulkan loader lacks " #f;                                    \
    return false;                                                            \
  }
  KITE_VK_INSTANCE_FUNCTIONS(KITE_VK_CHECK_INSTANCE)
#undef KITE_VK_CHECK_INSTANCE
  if (validation) {
    if (!fn_.vkCreateDebugUtilsMessengerEXT || !fn_.vkDestroyDebugUtilsMessengerEXT) {
      *err = "validation requested but VK_EXT_debug_utils is missing";
      return false;
    }
    r = fn_.vkCreateDebugUtilsMessengerEXT(instance_, &messenger_info, nullptr, &messenger_);
    if (r != VK_SUCCESS) {
      messenger_ = VK_NULL_HANDLE;
      *err = std::string("vkCreateDebugUtilsMessengerEXT failed: ") + result_name(r);
      return false;
    }
  }

  // Physical devices: properties, features and limits, read once.
  uint32_t count = 0;
  r = fn_.vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  if (r != VK_SUCCESS) {
    *err = std::string("vkEnumeratePhysicalDevices failed: ") + result_name(r);
    return false;
  }
  std::vector<VkPhysicalDevice> handles(count);
  if (count > 0) fn_.vkEnumeratePhysicalDevices(instance_, &count, handles.data());
  handles.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    PhysicalDevice pd;
    pd.handle = handles[i];
    pd.enumeration_index = i;
    fn_.vkGetPhysicalDeviceProperties(handles[i], &pd.properties);
    if (pd.properties.apiVersion < VK_API_VERSION_1_1) continue;
    pd.name = pd.properties.deviceName;
    fn_.vkGetPhysicalDeviceMemoryProperties(handles[i], &pd.memory);
    uint32_t families = 0;
    fn_.vkGetPhysicalDeviceQueueFamilyProperties(handles[i], &families, nullptr);
    std::vector<VkQueueFamilyProperties> family_props(families);
    fn_.vkGetPhysicalDeviceQueueFamilyProperties(handles[i], &families, family_props.data());
    bool found = false;
    // Prefer a compute family without graphics (a dedicated compute queue).
    for (int pass = 0; pass < 2 && !found; ++pass) {
      for (uint32_t f = 0; f < families && !found; ++f) {
        const VkQueueFlags flags = family_props[f].queueFlags;
        if (!(flags & VK_QUEUE_COMPUTE_BIT) || family_props[f].queueCount == 0) continue;
        if (pass == 0 && (flags & VK_QUEUE_GRAPHICS_BIT)) continue;
        pd.queue_family = f;
        pd.timestamp_valid_bits = family_props[f].timestampValidBits;
        found = true;
      }
    }
    if (!found) continue;

    VkPhysicalDeviceSubgroupProperties subgroup = vk_struct<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
    VkPhysicalDeviceProperties2 props2 = vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    props2.pNext = &subgroup;
    fn_.vkGetPhysicalDeviceProperties2(handles[i], &props2);
    pd.subgroup_size = subgroup.subgroupSize;
    VkPhysicalDevice16BitStorageFeatures storage16 = vk_struct<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
    VkPhysicalDeviceFeatures2 features2 = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    features2.pNext = &storage16;
    fn_.vkGetPhysicalDeviceFeatures2(handles[i], &features2);
    pd.storage_16bit = storage16.storageBuffer16BitAccess == VK_TRUE;

    uint32_t ext_count = 0;
    fn_.vkEnumerateDeviceExtensionProperties(handles[i], nullptr, &ext_count, nullptr);
    std::vector<VkExtensionProperties> exts(ext_count);
    fn_.vkEnumerateDeviceExtensionProperties(handles[i], nullptr, &ext_count, exts.data());
    for (const VkExtensionProperties& e : exts) {
      if (std::strcmp(e.extensionName, "VK_KHR_shader_float16_int8") == 0) pd.float16 = true;
      if (std::strcmp(e.extensionName, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) == 0) {
        pd.host_import = true;
      }
    }

    for (uint32_t h = 0; h < pd.memory.memoryHeapCount; ++h) {
      if (pd.memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
        pd.device_local_bytes = std::max<uint64_t>(pd.device_local_bytes, pd.memory.memoryHeaps[h].size);
      }
    }
    // Unified: the host addresses device memory at full speed, which holds
    // for integrated GPUs and CPU devices with a device-local host-visible,
    // coherent memory type (a discrete GPU's resizable BAR does not count:
    // host reads through it are slow).
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    bool shared_type = false;
    for (uint32_t t = 0; t < pd.memory.memoryTypeCount; ++t) {
      shared_type |= (pd.memory.memoryTypes[t].propertyFlags & want) == want;
    }
    const VkPhysicalDeviceType type = pd.properties.deviceType;
    pd.unified = shared_type && (type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                                 type == VK_PHYSICAL_DEVICE_TYPE_CPU);
    physical_.push_back(pd);
  }
  return true;
}

bool Instance::devices(std::vector<const PhysicalDevice*>* out, std::string* err) const {
  out->clear();
  if (physical_.empty()) {
    *err = "no Vulkan 1.1 device with a compute queue (is a Vulkan driver installed? "
           "Debian: mesa-vulkan-drivers)";
    return false;
  }
  std::vector<const PhysicalDevice*> list;
  for (const PhysicalDevice& pd : physical_) list.push_back(&pd);
  std::stable_sort(list.begin(), list.end(), [](const PhysicalDevice* a, const PhysicalDevice* b) {
    return type_rank(a->properties.deviceType) < type_rank(b->properties.deviceType);
  });
  if (const char* want = env("KITE_VULKAN_DEVICE")) {
    const std::string w = want;
    const bool numeric = std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
    auto match = list.end();
    for (auto it = list.begin(); it != list.end(); ++it) {
      const bool hit = numeric ? std::to_string((*it)->enumeration_index) == w
                               : lower((*it)->name).find(lower(w)) != std::string::npos;
      if (hit) {
        match = it;
        break;
      }
    }
    if (match == list.end()) {
      std::string names;
      for (const PhysicalDevice& pd : physical_) {
        names += (names.empty() ? "" : ", ") + std::to_string(pd.enumeration_index) + ": " + pd.name;
      }
      *err = "KITE_VULKAN_DEVICE='" + w + "' matches no Vulkan device (" + names + ")";
      return false;
    }
    const PhysicalDevice* chosen = *match;
    list.erase(match);
    list.insert(list.begin(), chosen);
  }
  *out = std::move(list);
  return true;
}

Instance::~Instance() {
  if (instance_ != VK_NULL_HANDLE) {
    if (messenger_ != VK_NULL_HANDLE) fn_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
    fn_.vkDestroyInstance(instance_, nullptr);
  }
  if (library_) dlclose(library_);
}

const char* result_name(VkResult result) {
  switch (result) {
#define KITE_VK_RESULT(r) \
  case r: return #r;
    KITE_VK_RESULT(VK_SUCCESS)
    KITE_VK_RESULT(VK_NOT_READY)
    KITE_VK_RESULT(VK_TIMEOUT)
    KITE_VK_RESULT(VK_INCOMPLETE)
    KITE_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    KITE_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KITE_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    KITE_VK_RESULT(VK_ERROR_DEVICE_LOST)
    KITE_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    KITE_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    KITE_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    KITE_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    KITE_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    KITE_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    KITE_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KITE_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    KITE_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    KITE_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
#undef KITE_VK_RESULT
    default: return "VkResult (unknown)";
  }
}

}  // namespace kite::vk
