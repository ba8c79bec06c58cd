# Install rules (cmake --install BUILD --prefix PREFIX), docs/INSTALL.md:
#
#   include/kite/kite.h kite.hpp backend.h version.h    component dev
#   include/kite/converter.h                            component converter_dev
#   lib/libkite.so.0.1.0, libkite.so.0                  component runtime
#   lib/libkite.so                                      component dev
#   lib/libkite_converter.so.0.1.0, .so.0               component converter
#   lib/libkite_converter.so                            component converter_dev
#   lib/kite/backends/libkite_backend_<name>.so         component backend_<name>
#   lib/cmake/Kite/KiteConfig*.cmake, KiteTargets*      component dev
#   lib/cmake/Kite/KiteConverterTargets*                component converter_dev
#   lib/pkgconfig/kite.pc                               component dev
#   lib/pkgconfig/kite-converter.pc                     component converter_dev
#   bin/kite-run kite-inspect kite-convert kite-plan-check   component tools
#   share/doc/kite/ (README, docs, examples)            component dev
#
# Everything is relocatable: the CMake package and the .pc files compute the
# prefix from their own location, the tools find libkite through
# RUNPATH $ORIGIN/../lib, and libkite finds its plugins next to itself.
include(CMakePackageConfigHelpers)

# Relative paths from bin/ and from lib/pkgconfig/ back to lib/ and the prefix.
file(RELATIVE_PATH kite_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}"
     "/prefix/${CMAKE_INSTALL_LIBDIR}")
file(RELATIVE_PATH KITE_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" KITE_PC_TO_PREFIX "${KITE_PC_TO_PREFIX}")

# ---- runtime and its headers -------------------------------------------------
install(TARGETS kite EXPORT KiteTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The plugin folder exists even without plugins, so that KITE_BACKEND_DIR is
# a real folder for consumers that look.
install(DIRECTORY DESTINATION ${KITE_INSTALL_BACKENDDIR} COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/sdk/include/kite/kite.h
              ${PROJECT_SOURCE_DIR}/sdk/include/kite/kite.hpp
              ${PROJECT_SOURCE_DIR}/sdk/include/kite/backend.h
              ${PROJECT_BINARY_DIR}/include/kite/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kite COMPONENT dev)
install(EXPORT KiteTargets NAMESPACE Kite:: DESTINATION ${KITE_INSTALL_CMAKEDIR}
        COMPONENT dev)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/KiteConfig.cmake.in
  ${PROJECT_BINARY_DIR}/packaging/KiteConfig.cmake
  INSTALL_DESTINATION ${KITE_INSTALL_CMAKEDIR}
  PATH_VARS KITE_INSTALL_BACKENDDIR)
# One ABI per major version: libkite.so.<major>, and a consumer asking for
# 0.1 accepts any 0.x >= 0.1.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/packaging/KiteConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/packaging/KiteConfig.cmake
              ${PROJECT_BINARY_DIR}/packaging/KiteConfigVersion.cmake
        DESTINATION ${KITE_INSTALL_CMAKEDIR} COMPONENT dev)

set(KITE_PC_NAME kite)
set(KITE_PC_DESCRIPTION "Kite inference runtime for edge devices")
set(KITE_PC_LIB kite)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kite.pc.in ${PROJECT_BINARY_DIR}/packaging/kite.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/kite.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
file(GLOB kite_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${kite_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/apps/examples/classify.c
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev)

# ---- tools -------------------------------------------------------------------
set(kite_tools kite-run kite-inspect)
if(TARGET kite-convert)
  list(APPEND kite_tools kite-convert kite-plan-check)
endif()
set_target_properties(${kite_tools} PROPERTIES INSTALL_RPATH "$ORIGIN/${kite_bin_to_lib}")
install(TARGETS ${kite_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)

# ---- the converter's C API (where the converter is built) ---------------------
if(TARGET kite_converter)
  install(TARGETS kite_converter EXPORT KiteConverterTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT converter
                  NAMELINK_COMPONENT converter_dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/converter/include/kite/converter.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kite COMPONENT converter_dev)
  install(EXPORT KiteConverterTargets NAMESPACE Kite:: DESTINATION ${KITE_INSTALL_CMAKEDIR}
          COMPONENT converter_dev)
  set(KITE_PC_NAME kite-converter)
  set(KITE_PC_DESCRIPTION "Kite converter (ONNX to .kite), C API")
  set(KITE_PC_LIB kite_converter)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/kite.pc.in
                 ${PROJECT_BINARY_DIR}/packaging/kite-converter.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/packaging/kite-converter.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT converter_dev)
endif()

include(${PROJECT_SOURCE_DIR}/cmake/KiteCPack.cmake)
