# Cross-compiles Kite for NVIDIA Jetson AGX Orin / Orin NX / Orin Nano
# (JetPack 6: Ubuntu 22.04, glibc 2.35, CUDA 12.x; Cortex-A78AE cores,
# GPU sm_87). Builds on the generic toolchain file.
#
# Needs the JetPack sysroot: the Jetson's root file system (or
# JetPack's "Linux_for_Tegra/rootfs" with the CUDA, cuDNN and Vulkan
# packages for arm64 installed in it; docs/JETSON.md shows how), given as
# -DKITE_JETSON_SYSROOT=/path or the KITE_JETSON_SYSROOT environment
# variable. The CUDA plugin's kernels are compiled by the host's nvcc (an
# x86-64 CUDA toolkit of the same major version as the Jetson's) with the
# cross compiler as its host compiler; it dlopens libcuda, cuDNN and
# cuBLASLt on the device, so only their headers come from the sysroot.
#
# Jetson AGX Thor (JetPack 7, Neoverse-V3AE cores, sm_110, CUDA 13): the
# same file with KITE_JETSON_MODEL=thor (needs nvcc 13 on the host).
set(KITE_JETSON_MODEL "orin" CACHE STRING "Jetson generation: orin or thor")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KITE_JETSON_SYSROOT KITE_JETSON_MODEL)

if(NOT KITE_JETSON_SYSROOT AND DEFINED ENV{KITE_JETSON_SYSROOT})
  set(KITE_JETSON_SYSROOT "$ENV{KITE_JETSON_SYSROOT}")
endif()
if(NOT KITE_JETSON_SYSROOT OR NOT IS_DIRECTORY "${KITE_JETSON_SYSROOT}/usr/include")
  message(FATAL_ERROR
    "Jetson cross build: no JetPack sysroot. Set KITE_JETSON_SYSROOT (cache variable, "
    "-DKITE_JETSON_SYSROOT=/path, or environment variable) to the Jetson's root file "
    "system with CUDA, cuDNN and Vulkan headers for arm64 (docs/JETSON.md). "
    "Currently: '${KITE_JETSON_SYSROOT}'.")
endif()
set(KITE_JETSON_SYSROOT "${KITE_JETSON_SYSROOT}" CACHE PATH "JetPack sysroot (the Jetson's root file system)")
set(KITE_SYSROOT "${KITE_JETSON_SYSROOT}" CACHE PATH "Target root file system (sysroot)" FORCE)

include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake)

if(KITE_JETSON_MODEL STREQUAL "orin")
  set(kite_jetson_cpu_flags "-mcpu=cortex-a78ae")
  set(kite_jetson_cuda_arch "87")
elseif(KITE_JETSON_MODEL STREQUAL "thor")
  # GCC 12 knows no neoverse-v3ae: Armv9.2-A with SVE2, tuned for V2.
  set(kite_jetson_cpu_flags "-march=armv9-a+sve2 -mtune=neoverse-v2")
  set(kite_jetson_cuda_arch "110")
else()
  message(FATAL_ERROR "KITE_JETSON_MODEL is '${KITE_JETSON_MODEL}', expected orin or thor")
endif()
set(CMAKE_C_FLAGS_INIT "${kite_jetson_cpu_flags}")
set(CMAKE_CXX_FLAGS_INIT "${kite_jetson_cpu_flags}")

# CUDA: JetPack puts the toolkit in /usr/local/cuda of the sysroot (headers
# for the target); nvcc runs on the host and calls the cross compiler.
set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
set(KITE_CUDA_ARCHITECTURES "${kite_jetson_cuda_arch}" CACHE STRING "CUDA architectures of the kernels")
set(CMAKE_CUDA_ARCHITECTURES "${kite_jetson_cuda_arch}")
list(APPEND CMAKE_FIND_ROOT_PATH "${KITE_JETSON_SYSROOT}/usr/local/cuda")
