// The plugin's entry point (libkite_backend_vulkan.so); embedded builds call
// kite_backend_entry_vulkan() instead.
#include "kite/backend.h"

extern "C" const kite_backend_api* kite_backend_entry_vulkan(void);

extern "C" __attribute__((visibility("default"))) const kite_backend_api* kite_backend_entry(void) {
  return kite_backend_entry_vulkan();
}
