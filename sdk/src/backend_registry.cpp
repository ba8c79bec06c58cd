#include "backend_registry.h"

#include <cstring>

#include "cpu_backend.h"

namespace kite::rt {

std::vector<const kite_backend_api*> available_backends() {
  return {kite_cpu_backend_api()};
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
  return Status::ok();
}

Status resolve_backends(const std::string& preference, std::vector<const kite_backend_api*>* out) {
  const std::vector<const kite_backend_api*> available = available_backends();
  std::vector<const kite_backend_api*> chosen;
  size_t start = 0;
  while (start <= preference.size()) {
    size_t comma = preference.find(',', start);
    if (comma == std::string::npos) comma = preference.size();
    std::string name = preference.substr(start, comma - start);
    // trim spaces
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    start = comma + 1;
    if (name.empty()) continue;
    const kite_backend_api* found = nullptr;
    for (const kite_backend_api* api : available) {
      if (name == api->name) found = api;
    }
    if (found == nullptr) {
      std::string names;
      for (const kite_backend_api* api : available) {
        names += (names.empty() ? "" : ", ") + std::string(api->name);
      }
      return Status(KITE_ERROR_BACKEND, "backend '" + name +
                                            "' is not available in this build (available: " +
                                            names + ")");
    }
    bool duplicate = false;
    for (const kite_backend_api* api : chosen) duplicate = duplicate || api == found;
    if (!duplicate) chosen.push_back(found);
  }
  bool has_cpu = false;
  for (const kite_backend_api* api : chosen) has_cpu = has_cpu || std::strcmp(api->name, "cpu") == 0;
  if (!has_cpu) chosen.push_back(kite_cpu_backend_api());
  for (const kite_backend_api* api : chosen) {
    Status s = validate_backend_api(api, std::string("backend '") + api->name + "'");
    if (!s.is_ok()) return s;
  }
  *out = std::move(chosen);
  return Status::ok();
}

}  // namespace kite::rt
