// libFuzzer target: a .kite file from untrusted bytes, loaded, verified, and
// (when it verifies) run once on the CPU backend. See fuzz_harness.h.
#include <cstddef>
#include <cstdint>

#include "fuzz_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kite::fuzz::run_loader_input(data, size);
}
