// A program that has no device, for check_skip_mechanism.cmake (not a ctest
// test itself): with --exit-without-device it takes the plain-program path
// (kite::test::exit_without_device), otherwise it runs one googletest test
// that calls KITE_SKIP_WITHOUT_DEVICE.
#include <gtest/gtest.h>

#include <cstring>

#include "kite_test_skip.h"

namespace {

TEST(SkipProbe, SkipsWithoutDevice) {
  KITE_SKIP_WITHOUT_DEVICE("selftest", "this device never exists");
  FAIL() << "KITE_SKIP_WITHOUT_DEVICE did not leave the test";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--exit-without-device") == 0) {
    kite::test::exit_without_device("selftest", "this device never exists");
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
