// The skip helpers of kite_test_skip.h, which future GPU tests rely on. The
// parsing is tested here; what a skip looks like from outside (exit status,
// output) is checked by check_skip_mechanism.cmake on skip_probe.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kite_test_skip.h"

namespace {

class RequireDeviceEnv {
 public:
  explicit RequireDeviceEnv(const char* value) {
    const char* old = std::getenv("KITE_REQUIRE_DEVICE");
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv("KITE_REQUIRE_DEVICE", value, 1);
    else unsetenv("KITE_REQUIRE_DEVICE");
  }
  ~RequireDeviceEnv() {
    if (had_) setenv("KITE_REQUIRE_DEVICE", old_.c_str(), 1);
    else unsetenv("KITE_REQUIRE_DEVICE");
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(SkipMechanism, DeviceRequiredReadsTheList) {
  {
    RequireDeviceEnv env(nullptr);
    EXPECT_FALSE(kite::test::device_required("vulkan"));
  }
  {
    RequireDeviceEnv env("");
    EXPECT_FALSE(kite::test::device_required("vulkan"));
    EXPECT_FALSE(kite::test::device_required(""));
  }
  {
    RequireDeviceEnv env("cuda,vulkan");
    EXPECT_TRUE(kite::test::device_required("vulkan"));
    EXPECT_TRUE(kite::test::device_required("cuda"));
    EXPECT_FALSE(kite::test::device_required("vulk"));
    EXPECT_FALSE(kite::test::device_required("metal"));
  }
  {
    RequireDeviceEnv env("all");
    EXPECT_TRUE(kite::test::device_required("vulkan"));
  }
  EXPECT_EQ(kite::test::kSkipExitCode, 77);
}

}  // namespace
