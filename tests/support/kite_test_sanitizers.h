// Which sanitizers a test binary was built with, for tests whose behaviour
// depends on it: KITE_TEST_ASAN is defined under AddressSanitizer (gcc says
// so with __SANITIZE_ADDRESS__, clang through __has_feature).
#ifndef KITE_TEST_SANITIZERS_H
#define KITE_TEST_SANITIZERS_H

#if defined(__SANITIZE_ADDRESS__)
#define KITE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KITE_TEST_ASAN 1
#endif
#endif

#endif  // KITE_TEST_SANITIZERS_H
