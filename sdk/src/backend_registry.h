// Backends a session can use: the CPU backend and any backends linked in
// statically (embedded builds), plus plugins found at run time
// (plugin_loader.h). Nothing here assumes the CPU is the only backend:
// sessions resolve a preference list against this registry.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "plugin_loader.h"
#include "status.h"

namespace kite::rt {

// Backends compiled into this library (the CPU backend first).
std::vector<const kite_backend_api*> linked_backends();

struct ResolvedBackend {
  const kite_backend_api* api = nullptr;
  std::shared_ptr<Plugin> plugin;  // null for linked backends
};

struct Resolution {
  std::vector<ResolvedBackend> backends;  // in preference order, CPU last if not named
  std::vector<std::string> unavailable;   // "vulkan: not found ..." for skipped names
};

// Resolves "vulkan,cpu". A name that is neither linked nor found as a plugin
// is skipped with a note (an error when strict); a plugin file that exists but
// cannot be used is always an error naming the file. The CPU backend is
// appended as the fallback of last resort.
Status resolve_backends(const std::string& preference, const std::string& plugin_path,
                        bool strict, Resolution* out);

// Checks an ABI table before use: known version, sane size, mandatory members.
Status validate_backend_api(const kite_backend_api* api, const std::string& origin);

}  // namespace kite::rt
