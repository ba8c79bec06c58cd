// Tensor values as the little-endian element bytes a tensor's data holds.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace kite::test {

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace kite::test
