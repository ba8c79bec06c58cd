// How a test says "this machine cannot run me": a GPU test on a machine
// without that GPU skips, visibly, with the reason; it never passes.
//
//  - googletest: KITE_SKIP_WITHOUT_DEVICE("vulkan", "no Vulkan 1.2 device")
//    in the TEST body (gtest_discover_tests shows a GTEST_SKIP as Skipped).
//  - a plain test program (registered with kite_device_test() in
//    tests/cmake/KiteTesting.cmake): kite::test::exit_without_device(...),
//    which exits with kSkipExitCode, ctest's SKIP_RETURN_CODE for it.
//
// KITE_REQUIRE_DEVICE (comma-separated devices, or "all") turns either into
// a failure: set it on machines that are meant to have the device, so a
// broken driver cannot make the GPU tests skip there unnoticed.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kite::test {

// = KITE_TEST_SKIP_CODE (tests/cmake/KiteTesting.cmake).
constexpr int kSkipExitCode = 77;

// True when KITE_REQUIRE_DEVICE names `device` (or is "all").
inline bool device_required(const std::string& device) {
  const char* env = std::getenv("KITE_REQUIRE_DEVICE");
  if (env == nullptr) return false;
  const std::string list = env;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(begin, end - begin);
    if (!item.empty() && (item == device || item == "all")) return true;
    begin = end + 1;
  }
  return false;
}

// For test programs that are not googletest: prints why and exits with
// kSkipExitCode, or with 1 when KITE_REQUIRE_DEVICE names the device.
[[noreturn]] inline void exit_without_device(const std::string& device, const std::string& why) {
  if (device_required(device)) {
    std::printf("FAIL: no %s device: %s (KITE_REQUIRE_DEVICE requires one)\n", device.c_str(),
                why.c_str());
    std::fflush(stdout);
    std::exit(1);
  }
  std::printf("SKIP: no %s device: %s\n", device.c_str(), why.c_str());
  std::fflush(stdout);
  std::exit(kSkipExitCode);
}

}  // namespace kite::test

// In a googletest TEST body: skips the test with the reason, or fails it
// when KITE_REQUIRE_DEVICE names the device. Include <gtest/gtest.h> first.
#define KITE_SKIP_WITHOUT_DEVICE(device, why)                                              \
  do {                                                                                     \
    if (::kite::test::device_required(device)) {                                           \
      FAIL() << "no " << (device) << " device: " << (why)                                  \
             << " (KITE_REQUIRE_DEVICE requires one)";                                    \
    }                                                                                      \
    GTEST_SKIP() << "no " << (device) << " device: " << (why);                             \
  } while (0)
