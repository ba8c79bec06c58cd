// Backends a session can use: those linked into this library (the CPU
// backend, and any others of an embedded build, all registered the same way
// through the generated static_backends table), plus plugins found at run
// time (plugin_loader.h). Sessions resolve a preference list against this
// registry; nothing here treats the CPU differently except that it is the
// fallback of last resort when it is linked in.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "plugin_loader.h"
#include "status.h"

namespace kite::rt {

// Backends linked into this library, checked once.
std::vector<const kite_backend_api*> linked_backends();

struct ResolvedBackend {
  const kite_backend_api* api = nullptr;
  std::shared_ptr<Plugin> plugin;  // null for linked backends
};

struct Resolution {
  std::vector<ResolvedBackend> backends;  // in preference order, CPU last if not named
  std::vector<std::string> unavailable;   // "vulkan: not found ..." for skipped names
  std::vector<std::string> unavailable_names;
};

// Resolves "vulkan,cpu". A name that is neither linked nor found as a plugin
// is skipped with a note (an error when strict); a plugin file that exists but
// cannot be used is always an error naming the file. The CPU backend is
// appended as the fallback of last resort.
Status resolve_backends(const std::string& preference, const std::string& plugin_path,
                        bool strict, Resolution* out);

// Splits a comma-separated preference list (names trimmed, empty ones and
// repeats dropped).
std::vector<std::string> split_backend_list(const std::string& preference);

// Checks a backend table before use (kite::abi::check_table); errors name
// `origin`.
Status validate_backend_api(const kite_backend_api* api, const std::string& origin);

}  // namespace kite::rt
