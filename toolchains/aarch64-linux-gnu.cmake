# Cross-compiles Kite's runtime and tools for 64-bit ARM Linux (Jetson).
# Sysroot from -DKITE_SYSROOT=... or the KITE_SYSROOT environment variable;
# without one, Debian's multiarch cross toolchain paths are used.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
if(NOT KITE_SYSROOT AND DEFINED ENV{KITE_SYSROOT})
  set(KITE_SYSROOT $ENV{KITE_SYSROOT})
endif()
if(KITE_SYSROOT)
  set(CMAKE_SYSROOT ${KITE_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH ${KITE_SYSROOT})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
