# Debian packages from the install components (cpack -G DEB in the build
# folder, or scripts/package.sh). docs/INSTALL.md lists them:
#
#   libkite0                 runtime library (CPU backend built in)
#   libkite-dev              headers, libkite.so, CMake package, kite.pc, docs
#   libkite-converter0       converter C API library
#   libkite-converter-dev    kite/converter.h, its CMake targets and .pc
#   kite-tools               kite-run, kite-inspect, kite-convert, kite-plan-check
#   kite-backend-<name>      one per backend plugin (kite_package_backend())
#
# Packages of one build depend on each other at exactly that version;
# dpkg-shlibdeps adds what the binaries link against (libc6, libstdc++6,
# libonnx1/libprotobuf32 for the converter), so libkite0 carries no converter
# dependency.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kite)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Kite")
set(CPACK_PACKAGE_CONTACT "Kite maintainers <kite@invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# kite-run links libkite.so.0 of this very build: dpkg-shlibdeps finds it
# here instead of in an installed package (the version-exact Depends on
# libkite0 comes from the component dependency above).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/sdk)

# Architecture: the target's (KITE_DEB_ARCH, KitePackaging.cmake), so a cross
# build (toolchains/) packages arm64.
if(CMAKE_CROSSCOMPILING)
  if(KITE_DEB_ARCH)
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${KITE_DEB_ARCH})
  endif()
  # dpkg-shlibdeps cannot read foreign binaries without the target's dpkg
  # database (dpkg --add-architecture, which install_cross_tools.sh avoids);
  # cross packages list their dependencies by hand: libkite0 the C and C++
  # runtimes, every other package libkite0 at its exact version (the
  # CPACK_COMPONENT_<name>_DEPENDS below), which brings them along. The
  # lower bounds come from the newest GLIBC_, GCC_ and GLIBCXX_ symbol
  # versions the packaged binaries need, read by KiteCPackProject.cmake at
  # cpack time (a cross build from Debian 12 needs libc6 (>= 2.34),
  # libgcc-s1 (>= 3.0), libstdc++6 (>= 12): the package must not install
  # where it cannot load).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libc6, libgcc-s1, libstdc++6")
  set(kite_elf_files "$<TARGET_FILE:kite>")
  foreach(tool kite-run kite-inspect kite-convert kite-plan-check kite_converter)
    if(TARGET ${tool})
      string(APPEND kite_elf_files "\n$<TARGET_FILE:${tool}>")
    endif()
  endforeach()
  get_property(kite_backends GLOBAL PROPERTY KITE_PACKAGED_BACKENDS)
  foreach(name IN LISTS kite_backends)
    get_property(plugin GLOBAL PROPERTY KITE_BACKEND_${name}_TARGET)
    string(APPEND kite_elf_files "\n$<TARGET_FILE:${plugin}>")
  endforeach()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/packaging/packaged_binaries.txt
       CONTENT "${kite_elf_files}\n")
  set(CPACK_KITE_PACKAGED_BINARIES ${PROJECT_BINARY_DIR}/packaging/packaged_binaries.txt)
  set(CPACK_KITE_READELF ${CMAKE_READELF})
endif()

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libkite0)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Kite inference runtime\nlibkite loads .kite models and runs them on the CPU backend or on backend plugins.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libkite-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_DEBIAN_DEV_DESCRIPTION "Kite inference runtime: development files\nHeaders, the CMake package (find_package(Kite)), kite.pc and the documentation.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME kite-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "Kite command-line tools\nkite-run, kite-inspect, and (where built) kite-convert and kite-plan-check.")

set(CPACK_COMPONENTS_ALL runtime dev tools)
if(TARGET kite_converter)
  set(CPACK_DEBIAN_CONVERTER_PACKAGE_NAME libkite-converter0)
  set(CPACK_DEBIAN_CONVERTER_DESCRIPTION "Kite converter library\nConverts ONNX models into .kite files (C API).")
  set(CPACK_DEBIAN_CONVERTER_DEV_PACKAGE_NAME libkite-converter-dev)
  set(CPACK_DEBIAN_CONVERTER_DEV_PACKAGE_SECTION libdevel)
  set(CPACK_COMPONENT_CONVERTER_DEV_DEPENDS converter dev)
  set(CPACK_DEBIAN_CONVERTER_DEV_DESCRIPTION "Kite converter library: development files\nkite/converter.h, Kite::converter and kite-converter.pc.")
  list(APPEND CPACK_COMPONENTS_ALL converter converter_dev)
endif()

# One package per backend plugin, declared by kite_package_backend().
get_property(kite_backends GLOBAL PROPERTY KITE_PACKAGED_BACKENDS)
set(CPACK_KITE_TEST_COMPONENTS "")
foreach(name IN LISTS kite_backends)
  string(TOUPPER "backend_${name}" comp)
  string(REPLACE "_" "-" pkg "kite-backend-${name}")
  get_property(recommends GLOBAL PROPERTY KITE_BACKEND_${name}_RECOMMENDS)
  get_property(description GLOBAL PROPERTY KITE_BACKEND_${name}_DESCRIPTION)
  get_property(test_only GLOBAL PROPERTY KITE_BACKEND_${name}_TEST_ONLY)
  set(CPACK_DEBIAN_${comp}_PACKAGE_NAME ${pkg})
  set(CPACK_COMPONENT_${comp}_DEPENDS runtime)
  set(CPACK_DEBIAN_${comp}_DESCRIPTION "Kite backend plugin: ${description}\nInstalled into the plugin folder next to libkite, where sessions find it.")
  if(recommends)
    list(JOIN recommends ", " recommends)
    set(CPACK_DEBIAN_${comp}_PACKAGE_RECOMMENDS "${recommends}")
  endif()
  if(test_only)
    list(APPEND CPACK_KITE_TEST_COMPONENTS backend_${name})
  else()
    list(APPEND CPACK_COMPONENTS_ALL backend_${name})
  endif()
endforeach()
# Test-only plugins join when KITE_CPACK_TEST_BACKENDS=1 (read at cpack time).
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/KiteCPackProject.cmake)

include(CPack)
