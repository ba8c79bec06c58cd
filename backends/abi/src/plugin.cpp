#include "kite/abi/plugin.h"

#include <cstdio>

namespace kite::abi {

void write_message(char* buffer, size_t size, const std::string& message) {
  if (!buffer || size == 0) return;
  std::snprintf(buffer, size, "%s", message.c_str());
}

kite_status fail(char* err, size_t err_size, kite_status status, const std::string& message) {
  write_message(err, err_size, message);
  return status;
}

kite_backend_api backend_api(const char* name, kite_backend_memory memory) {
  kite_backend_api api{};
  api.abi_version = KITE_BACKEND_ABI_VERSION;
  api.struct_size = sizeof(kite_backend_api);
  api.name = name;
  api.memory = memory;
  return api;
}

}  // namespace kite::abi
