// Backends linked statically into this build (KITE_STATIC_BACKENDS), defined
// in a file CMake generates per library target.
#pragma once

#include <vector>

#include "kite/backend.h"

namespace kite::rt {
std::vector<const kite_backend_api*> static_backends();
}
