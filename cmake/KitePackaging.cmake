# Where an installed Kite keeps its files, and how a backend plugin declares
# its Debian package. Included early (before the subdirectories) so that
# backends can call kite_package_backend(); the install rules themselves are
# in KiteInstall.cmake and the packages in KiteCPack.cmake (docs/INSTALL.md).

# Plugins live in <libdir>/kite/backends: libkite looks there relative to its
# own location (sdk/src/plugin_loader.cpp), so no environment variable is
# needed, wherever the tree is installed or unpacked.
set(KITE_INSTALL_BACKENDDIR ${CMAKE_INSTALL_LIBDIR}/kite/backends)
set(KITE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kite)

# The Debian architecture of a cross build's packages (the target's, so the
# aarch64 preset packages arm64); empty in native builds, where cpack asks
# dpkg. KiteCPack.cmake and the package test (tests/install) read it.
set(KITE_DEB_ARCH "")
if(CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(KITE_DEB_ARCH arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|amd64)$")
    set(KITE_DEB_ARCH amd64)
  else()
    message(WARNING "cpack: no Debian architecture known for '${CMAKE_SYSTEM_PROCESSOR}'")
  endif()
endif()

# kite_package_backend(TARGET <plugin target> NAME <backend name>
#                      [RECOMMENDS <debian package>...] [DESCRIPTION <text>]
#                      [TEST_ONLY])
#
# Installs the plugin module into <libdir>/kite/backends as
# libkite_backend_<NAME>.so (install component backend_<NAME>) and makes cpack
# build the Debian package kite-backend-<NAME> from it: it Depends on the
# exact libkite0 it was built with (the plugin ABI travels with libkite) plus
# whatever dpkg-shlibdeps finds the module linked against, and Recommends the
# packages given, because GPU plugins dlopen their driver libraries at run
# time (libvulkan1, libcudart12, ...) and a missing driver only makes the
# backend unavailable, not the package broken. Example, for a Vulkan backend:
#
#   kite_package_backend(TARGET kite_backend_vulkan NAME vulkan
#                        RECOMMENDS libvulkan1 mesa-vulkan-drivers
#                        DESCRIPTION "Vulkan compute backend")
#
# TEST_ONLY: a plugin used by Kite's own tests. `cmake --install` skips it,
# the Python wheel does not bundle it, and cpack packages it only when run
# with KITE_CPACK_TEST_BACKENDS=1 in the environment (the package test does).
function(kite_package_backend)
  cmake_parse_arguments(arg "TEST_ONLY" "TARGET;NAME;DESCRIPTION" "RECOMMENDS" ${ARGN})
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kite_package_backend: unexpected arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGET OR NOT TARGET ${arg_TARGET})
    message(FATAL_ERROR "kite_package_backend: TARGET '${arg_TARGET}' is not a target")
  endif()
  if(NOT arg_NAME MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "kite_package_backend: NAME '${arg_NAME}' must be lowercase letters, "
                        "digits or '_' (it names the file libkite_backend_<NAME>.so)")
  endif()
  get_target_property(type ${arg_TARGET} TYPE)
  if(NOT type STREQUAL "MODULE_LIBRARY")
    message(FATAL_ERROR "kite_package_backend: ${arg_TARGET} is a ${type}; a backend plugin "
                        "is a MODULE library (add_library(... MODULE ...))")
  endif()
  set_target_properties(${arg_TARGET} PROPERTIES PREFIX "lib" SUFFIX ".so"
                                                  OUTPUT_NAME kite_backend_${arg_NAME})
  if(NOT arg_DESCRIPTION)
    set(arg_DESCRIPTION "the ${arg_NAME} backend")
  endif()
  set_property(GLOBAL APPEND PROPERTY KITE_PACKAGED_BACKENDS ${arg_NAME})
  set_property(GLOBAL PROPERTY KITE_BACKEND_${arg_NAME}_RECOMMENDS "${arg_RECOMMENDS}")
  set_property(GLOBAL PROPERTY KITE_BACKEND_${arg_NAME}_DESCRIPTION "${arg_DESCRIPTION}")
  set_property(GLOBAL PROPERTY KITE_BACKEND_${arg_NAME}_TEST_ONLY ${arg_TEST_ONLY})
  set_property(GLOBAL PROPERTY KITE_BACKEND_${arg_NAME}_TARGET ${arg_TARGET})
  if(NOT arg_TEST_ONLY)
    # What python/ bundles into the wheel.
    set_property(GLOBAL APPEND PROPERTY KITE_BACKEND_PLUGIN_TARGETS ${arg_TARGET})
  endif()
  if(KITE_INSTALL)
    set(exclude "")
    if(arg_TEST_ONLY)
      set(exclude EXCLUDE_FROM_ALL)
    endif()
    install(TARGETS ${arg_TARGET}
            LIBRARY DESTINATION ${KITE_INSTALL_BACKENDDIR} COMPONENT backend_${arg_NAME} ${exclude})
  endif()
endfunction()
