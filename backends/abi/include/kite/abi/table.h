// One home for reading and checking a backend's function table
// (kite_backend_api), for every host of backends: the runtime (plugins and
// linked backends) and the converter (the CPU backend evaluating constants).
#pragma once

#include <string>

#include "kite/backend.h"

namespace kite::abi {

// A backend table as this build reads it: the plugin's table copied up to
// its struct_size, every member past it NULL (so a v1 table reads as one
// whose v2 members are all NULL). version() is the plugin's abi_version.
class Table {
 public:
  Table() = default;
  explicit Table(const kite_backend_api* api);

  const kite_backend_api& operator*() const { return api_; }
  const kite_backend_api* operator->() const { return &api_; }
  const kite_backend_api* original() const { return original_; }
  uint32_t version() const { return api_.abi_version; }
  bool v2() const { return api_.abi_version >= 2; }
  bool device_memory() const { return api_.memory == KITE_BACKEND_MEMORY_DEVICE; }
  const char* name() const { return api_.name ? api_.name : "?"; }

 private:
  kite_backend_api api_{};
  const kite_backend_api* original_ = nullptr;
};

// "" when the table is usable by this runtime, else what is wrong, naming
// the version or the missing member: an unknown abi_version, a struct_size
// too small for its version, a NULL mandatory member (the header lists them
// per version), a device-memory backend without its copy functions, a name
// that is empty or not a plain identifier.
std::string check_table(const kite_backend_api* api);

}  // namespace kite::abi
