// libFuzzer target: ONNX bytes through the converter pipeline (import, shape
// inference with constant folding, memory plan, writer). See fuzz_harness.h.
#include <cstddef>
#include <cstdint>

#include "fuzz_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kite::fuzz::run_onnx_input(data, size);
}
