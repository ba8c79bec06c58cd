#include "backend_registry.h"

#include <cstddef>
#include <cstring>

#include "cpu_backend.h"
#include "static_backends.h"

namespace kite::rt {

std::vector<const kite_backend_api*> linked_backends() {
  std::vector<const kite_backend_api*> all = {kite_cpu_backend_api()};
  for (const kite_backend_api* api : static_backends()) all.push_back(api);
  return all;
}

Status validate_backend_api(const kite_backend_api* api, const std::string& origin) {
  if (api == nullptr) return Status(KITE_ERROR_BACKEND, origin + ": backend table is NULL");
  if (api->abi_version != KITE_BACKEND_ABI_VERSION) {
    return Status(KITE_ERROR_BACKEND, origin + ": backend ABI version " +
                                          std::to_string(api->abi_version) +
                                          " is not supported (this runtime knows version " +
                                          std::to_string(KITE_BACKEND_ABI_VERSION) + ")");
  }
  // Members up to 'release' are mandatory.
  const size_t mandatory_end = offsetof(kite_backend_api, release) + sizeof(api->release);
  if (api->struct_size < mandatory_end) {
    return Status(KITE_ERROR_BACKEND, origin + ": backend table is " +
                                          std::to_string(api->struct_size) +
                                          " bytes, smaller than the mandatory " +
                                          std::to_string(mandatory_end));
  }
  if (api->name == nullptr || api->create == nullptr || api->destroy == nullptr ||
      api->supports == nullptr || api->prepare == nullptr || api->execute == nullptr ||
      api->release == nullptr) {
    return Status(KITE_ERROR_BACKEND, origin + ": backend table lacks a mandatory function");
  }
  if (api->memory == KITE_BACKEND_MEMORY_DEVICE) {
    const size_t device_end = offsetof(kite_backend_api, copy_to_host) + sizeof(api->copy_to_host);
    if (api->struct_size < device_end || api->alloc == nullptr || api->free == nullptr ||
        api->copy_to_device == nullptr || api->copy_to_host == nullptr) {
      return Status(KITE_ERROR_BACKEND, origin + ": a device-memory backend must provide "
                                                 "alloc, free, copy_to_device and copy_to_host");
    }
  }
  return Status::ok();
}

Status resolve_backends(const std::string& preference, const std::string& plugin_path,
                        bool strict, Resolution* out) {
  const std::vector<const kite_backend_api*> linked = linked_backends();
  Resolution r;
  size_t start = 0;
  while (start <= preference.size()) {
    size_t comma = preference.find(',', start);
    if (comma == std::string::npos) comma = preference.size();
    std::string name = preference.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    start = comma + 1;
    if (name.empty()) continue;
    bool duplicate = false;
    for (const ResolvedBackend& b : r.backends) duplicate = duplicate || name == b.api->name;
    if (duplicate) continue;

    ResolvedBackend rb;
    for (const kite_backend_api* api : linked) {
      if (name == api->name) rb.api = api;
    }
    if (rb.api == nullptr) {
      Status s = find_plugin(name, plugin_path, &rb.plugin);
      if (s.code() == KITE_ERROR_NOT_FOUND) {
        if (strict) return Status(KITE_ERROR_BACKEND, "strict mode: " + s.message());
        r.unavailable.push_back(name + ": " + s.message());
        continue;
      }
      if (!s.is_ok()) return s;
      rb.api = rb.plugin->api();
    } else {
      Status s = validate_backend_api(rb.api, "backend '" + name + "'");
      if (!s.is_ok()) return s;
    }
    r.backends.push_back(rb);
  }
  bool has_cpu = false;
  for (const ResolvedBackend& b : r.backends) has_cpu = has_cpu || std::strcmp(b.api->name, "cpu") == 0;
  if (!has_cpu) {
    ResolvedBackend cpu;
    cpu.api = kite_cpu_backend_api();
    r.backends.push_back(cpu);
  }
  *out = std::move(r);
  return Status::ok();
}

}  // namespace kite::rt
