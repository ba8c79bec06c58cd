// main() of the Vulkan test programs: where no Vulkan device exists (no
// loader, no driver) the program prints why and exits with the skip code,
// which ctest reports as skipped (SKIP_RETURN_CODE), never as passed; with
// KITE_REQUIRE_DEVICE=vulkan (CI, where lavapipe is installed) it fails.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "harness.h"
#include "kite_test_sanitizers.h"
#include "kite_test_skip.h"


namespace {

#ifdef KITE_TEST_ASAN
// Under LeakSanitizer: the Vulkan loader dlopens every installed driver (and
// layer) when an instance is made and dlcloses it when the instance goes.
// Mesa's drivers keep a few small buffers in their globals for the life of
// the library; once the library is unmapped nothing points at them and
// LeakSanitizer reports them, against an unknown module no suppression can
// name (seen in CI: 3 x 128 bytes from realloc in a driver). Opening each
// driver and layer once more with RTLD_NODELETE keeps them mapped until the
// process exits, so their globals stay roots; leaks in Kite's own code are
// still found.
std::string library_path_of(const std::string& manifest) {
  std::ifstream in(manifest);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t key = s.find("\"library_path\"");
  if (key == std::string::npos) return {};
  const size_t open = s.find('"', s.find(':', key) + 1);
  if (open == std::string::npos) return {};
  const size_t close = s.find('"', open + 1);
  if (close == std::string::npos) return {};
  return s.substr(open + 1, close - open - 1);
}

void pin_vulkan_libraries() {
  const char* dirs[] = {"/usr/share/vulkan/icd.d", "/usr/share/vulkan/explicit_layer.d",
                        "/usr/share/vulkan/implicit_layer.d", "/etc/vulkan/icd.d"};
  (void)dlopen("libvulkan.so.1", RTLD_LAZY | RTLD_NODELETE);
  for (const char* dir : dirs) {
    const std::string list = std::string("ls ") + dir + "/*.json 2>/dev/null";
    FILE* ls = popen(list.c_str(), "r");
    if (ls == nullptr) continue;
    char line[4096];
    while (std::fgets(line, sizeof line, ls) != nullptr) {
      std::string manifest(line);
      while (!manifest.empty() && (manifest.back() == '\n' || manifest.back() == '\r')) {
        manifest.pop_back();
      }
      const std::string lib = library_path_of(manifest);
      // A library that does not load here (wrong architecture, missing
      // dependency) is one the loader cannot keep either: nothing to pin.
      if (!lib.empty()) (void)dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    }
    pclose(ls);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
#ifdef KITE_TEST_ASAN
  pin_vulkan_libraries();
#endif
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strcmp(argv[i], "--gtest_list_tests") == 0;
  if (!listing) {
    kite::vktest::Plugin& p = kite::vktest::Plugin::get();
    if (!p.available()) {
      kite::test::exit_without_device("vulkan", p.error);
    }
    std::printf("Vulkan device: %s (validation layer %s)\n", p.info.name,
                std::getenv("KITE_VULKAN_VALIDATION") ? "requested" : "off");
  }
  const int result = RUN_ALL_TESTS();
  kite::vktest::Plugin::get().close();
  return result;
}
