#include "backend_registry.h"

#include <cstring>

#include "kite/abi/table.h"
#include "static_backends.h"

namespace kite::rt {

std::vector<const kite_backend_api*> linked_backends() { return static_backends(); }

Status validate_backend_api(const kite_backend_api* api, const std::string& origin) {
  const std::string problem = kite::abi::check_table(api);
  if (problem.empty()) return Status::ok();
  return Status(KITE_ERROR_BACKEND, origin + ": " + problem);
}

std::vector<std::string> split_backend_list(const std::string& preference) {
  std::vector<std::string> names;
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
    for (const std::string& n : names) duplicate = duplicate || n == name;
    if (!duplicate) names.push_back(name);
  }
  return names;
}

Status resolve_backends(const std::string& preference, const std::string& plugin_path,
                        bool strict, Resolution* out) {
  const std::vector<const kite_backend_api*> linked = linked_backends();
  Resolution r;
  auto find_linked = [&linked](const std::string& name) -> const kite_backend_api* {
    for (const kite_backend_api* api : linked) {
      if (api != nullptr && api->name != nullptr && name == api->name) return api;
    }
    return nullptr;
  };
  for (const std::string& name : split_backend_list(preference)) {
    ResolvedBackend rb;
    rb.api = find_linked(name);
    if (rb.api == nullptr) {
      Status s = find_plugin(name, plugin_path, &rb.plugin);
      if (s.code() == KITE_ERROR_NOT_FOUND) {
        if (strict) return Status(KITE_ERROR_BACKEND, "strict mode: " + s.message());
        r.unavailable.push_back(name + ": " + s.message());
        r.unavailable_names.push_back(name);
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
    if (const kite_backend_api* cpu = find_linked("cpu")) {
      Status s = validate_backend_api(cpu, "backend 'cpu'");
      if (!s.is_ok()) return s;
      ResolvedBackend rb;
      rb.api = cpu;
      r.backends.push_back(rb);
    }
  }
  if (r.backends.empty()) {
    return Status(KITE_ERROR_BACKEND, "no backend available for '" + preference + "'" +
                                          (r.unavailable.empty() ? "" : " (" + r.unavailable.front() + ")"));
  }
  *out = std::move(r);
  return Status::ok();
}

}  // namespace kite::rt
