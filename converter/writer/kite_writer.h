// Serialises an ir::Model into the .kite format (schemas/kite.fbs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::writer {

constexpr uint64_t kBlobAlignment = 64;

// The whole file in memory.
bool serialize(const ir::Model& model, std::vector<uint8_t>* out, std::string* err);

// Writes atomically: a temporary file next to path, renamed over it only when
// complete, so a failure never leaves a half-written model behind.
bool write_file(const ir::Model& model, const std::string& path, std::string* err);
bool write_bytes(const std::vector<uint8_t>& bytes, const std::string& path, std::string* err);

}  // namespace kite::writer
