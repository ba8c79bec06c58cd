// Loads the Vulkan plugin and asks it for devices; prints the status and
// the backend's message. ctest runs it in environments without a loader or
// without a driver and checks the message (the plugin must say what is
// missing, and never crash).
#include <dlfcn.h>

#include <cstdio>

#include "kite/backend.h"

int main() {
  void* handle = dlopen(KITE_VULKAN_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::printf("cannot load the plugin: %s\n", dlerror());
    return 1;
  }
  auto entry = reinterpret_cast<kite_backend_entry_fn>(dlsym(handle, KITE_BACKEND_ENTRY_SYMBOL));
  if (!entry) return 1;
  const kite_backend_api* api = entry();
  char msg[1024] = {0};
  int32_t count = -1;
  const kite_status s = api->device_count(&count, msg, sizeof(msg));
  std::printf("device_count: status %d, count %d, message: %s\n", static_cast<int>(s), count, msg);
  dlclose(handle);
  return 0;
}
