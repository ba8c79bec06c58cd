// Backends the runtime knows. The CPU backend is linked in; the plugins issue
// adds shared modules found at run time. Nothing here assumes the CPU is the
// only backend: sessions resolve a preference list against this registry.
#pragma once

#include <string>
#include <vector>

#include "kite/backend.h"
#include "status.h"

namespace kite::rt {

// Backends available in this build, in registration order.
std::vector<const kite_backend_api*> available_backends();

// Resolves "vulkan,cpu" into backend tables. The CPU backend is appended as
// the fallback of last resort when the list does not name it.
Status resolve_backends(const std::string& preference, std::vector<const kite_backend_api*>* out);

// Checks an ABI table before use: known version, sane size, mandatory members.
Status validate_backend_api(const kite_backend_api* api, const std::string& origin);

}  // namespace kite::rt
