# Link options every GPU backend plugin shares.
#
# --exclude-libs,ALL keeps the statically linked kite_abi and kite_ops inside
# the plugin, so they cannot interpose with the runtime's copies.
# --no-undefined proves at link time that the plugin needs nothing but what it
# names (libdl, the C++ runtime): no libvulkan or CUDA library sneaks in. The
# one exception is a clang sanitizer build: clang does not link the sanitizer
# runtime into shared objects (its symbols come from the executable), so
# there --no-undefined would refuse every instrumented plugin.
function(kite_plugin_link_options target)
  if(APPLE)
    return()
  endif()
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL)
  set(flags "${CMAKE_CXX_FLAGS} ${CMAKE_SHARED_LINKER_FLAGS} ${CMAKE_MODULE_LINKER_FLAGS}")
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND flags MATCHES "-fsanitize=")
    return()
  endif()
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
endfunction()
