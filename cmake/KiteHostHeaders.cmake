# Header-only dependencies of a cross build, taken from the build machine when
# the target's sysroot lacks them (included by the top-level CMakeLists.txt
# when CMAKE_CROSSCOMPILING).
#
# FlatBuffers' runtime is header-only, and the GPU plugins need only their
# API's headers since they open their libraries at run time (ABI v2's rule),
# so the host's copies (Debian: libflatbuffers-dev, libvulkan-dev) serve any
# target: the headers are architecture-independent. They cannot come from
# the host's /usr/include as a whole, whose C library headers would shadow
# the target's, so each header folder is linked into
# <build>/host-headers/ and only that folder goes on the include path. The
# host's flatc writes the schema code; its version matches these headers.
set(KITE_HOST_INCLUDE_DIR "/usr/include" CACHE PATH
    "Where a cross build takes header-only dependencies its sysroot lacks")

# kite_host_header(VAR PROBE DIR...): VAR (a cache variable, as find_path
# sets it) names a folder holding PROBE: the sysroot's when it has PROBE,
# else <build>/host-headers with DIR... linked from KITE_HOST_INCLUDE_DIR.
function(kite_host_header var probe)
  find_path(${var} ${probe})
  if(${var})
    return()
  endif()
  set(dest ${CMAKE_BINARY_DIR}/host-headers)
  foreach(dir ${ARGN})
    if(NOT EXISTS ${KITE_HOST_INCLUDE_DIR}/${dir})
      message(STATUS "Cross build: no ${dir}/ in the sysroot nor in ${KITE_HOST_INCLUDE_DIR}")
      return()
    endif()
    file(MAKE_DIRECTORY ${dest})
    if(NOT EXISTS ${dest}/${dir})
      file(CREATE_LINK ${KITE_HOST_INCLUDE_DIR}/${dir} ${dest}/${dir} SYMBOLIC)
    endif()
  endforeach()
  set(${var} ${dest} CACHE PATH "header-only dependency (linked from ${KITE_HOST_INCLUDE_DIR})" FORCE)
  message(STATUS "Cross build: ${probe} from ${KITE_HOST_INCLUDE_DIR} (header-only)")
endfunction()

kite_host_header(FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h flatbuffers)
if(NOT KITE_BACKEND_VULKAN STREQUAL "OFF")
  kite_host_header(KITE_VULKAN_INCLUDE_DIR vulkan/vulkan.h vulkan vk_video)
endif()
