# Cross-compiles Kite for 64-bit Arm Linux (generic Armv8-A: any arm64
# board, Jetson included) with Debian's cross compiler
# (apt-get install g++-aarch64-linux-gnu).
#
# Sysroot: -DKITE_SYSROOT=/path (cache variable) or the KITE_SYSROOT
# environment variable, e.g. a Jetson's root file system copied or mounted
# on the workstation. Without one, the cross compiler's own target folder
# (/usr/aarch64-linux-gnu, Debian's libc6-dev-arm64-cross) is the search
# root: enough for the runtime and the CPU backend, which need only the C and
# C++ libraries.
#
# The compilers can be overridden with KITE_CROSS_PREFIX (default
# aarch64-linux-gnu-; e.g. a Linaro or Bootlin toolchain's prefix path).
# No -march=native (the build machine is not the target) and no
# *_COMPILER_FORCED: CMake checks the cross compiler like any other.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KITE_CROSS_PREFIX "aarch64-linux-gnu-" CACHE STRING "Prefix of the cross compilers")
set(CMAKE_C_COMPILER ${KITE_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${KITE_CROSS_PREFIX}g++)

# The toolchain file runs again in try_compile projects: pass these on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KITE_SYSROOT KITE_CROSS_PREFIX)

if(NOT KITE_SYSROOT AND DEFINED ENV{KITE_SYSROOT})
  set(KITE_SYSROOT "$ENV{KITE_SYSROOT}" CACHE PATH "Target root file system (sysroot)")
endif()
if(KITE_SYSROOT)
  if(NOT IS_DIRECTORY "${KITE_SYSROOT}")
    message(FATAL_ERROR "KITE_SYSROOT=${KITE_SYSROOT} is not a folder: set KITE_SYSROOT "
                        "(cache variable or environment) to the target's root file system")
  endif()
  set(CMAKE_SYSROOT "${KITE_SYSROOT}")
  set(CMAKE_FIND_ROOT_PATH "${KITE_SYSROOT}")
else()
  set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
endif()

# Programs (flatc, glslc, nvcc, python) run on the build machine; libraries,
# headers and packages come from the target's root only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
