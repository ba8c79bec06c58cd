# Read by cpack after CPackConfig.cmake (CPACK_PROJECT_CONFIG_FILE): adds the
# packages of test-only backend plugins when the package test asks for them,
# and in cross builds gives libkite0's Depends their lower bounds.
if("$ENV{KITE_CPACK_TEST_BACKENDS}" STREQUAL "1")
  list(APPEND CPACK_COMPONENTS_ALL ${CPACK_KITE_TEST_COMPONENTS})
endif()

# kite_newest_symbol_version(VAR PREFIX READELF_V_OUTPUT): the greatest
# version after PREFIX (a regex) among the needed symbol versions, or "".
function(kite_newest_symbol_version var prefix text)
  set(newest "")
  string(REGEX MATCHALL "Name: ${prefix}[0-9.]+" needs "${text}")
  foreach(n IN LISTS needs)
    string(REGEX REPLACE "Name: ${prefix}" "" n "${n}")
    if(n VERSION_GREATER newest)
      set(newest ${n})
    endif()
  endforeach()
  set(${var} "${newest}" PARENT_SCOPE)
endfunction()

# Cross builds (KiteCPack.cmake): dpkg-shlibdeps is off, so the versions of
# libc6, libgcc-s1 and libstdc++6 come from the newest GLIBC_2.x, GCC_x and
# GLIBCXX_3.4.x symbol versions the packaged binaries (built by now) ask for,
# mapped the way Debian's symbols files map them (libc6, libgcc-s1: the same
# number; libstdc++6: the GCC release that added it, from libstdc++6's
# symbols file). A native build's dpkg-shlibdeps lists the same three.
if(CPACK_KITE_PACKAGED_BINARIES)
  file(STRINGS ${CPACK_KITE_PACKAGED_BINARIES} binaries)
  foreach(f IN LISTS binaries)
    if(NOT EXISTS ${f})
      message(FATAL_ERROR "cpack: ${f} is not built yet (build the project first)")
    endif()
  endforeach()
  execute_process(COMMAND ${CPACK_KITE_READELF} -V --wide ${binaries}
                  OUTPUT_VARIABLE versions RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cpack: ${CPACK_KITE_READELF} -V failed on the packaged binaries")
  endif()
  kite_newest_symbol_version(glibc "GLIBC_" "${versions}")
  kite_newest_symbol_version(gcc_s "GCC_" "${versions}")
  kite_newest_symbol_version(glibcxx "GLIBCXX_3\\.4\\." "${versions}")
  # GLIBCXX_3.4.<n> -> libstdc++6 version (older than 3.4.21: any libstdc++6).
  set(gcc_of_21 5.2)
  set(gcc_of_22 6)
  set(gcc_of_23 7)
  set(gcc_of_24 7)
  set(gcc_of_25 8)
  set(gcc_of_26 9)
  set(gcc_of_27 9.1)
  set(gcc_of_28 10.2)
  set(gcc_of_29 11)
  set(gcc_of_30 12)
  set(gcc_of_31 13)
  set(gcc_of_32 13.2)
  set(gcc_of_33 14)
  if(glibcxx AND glibcxx GREATER 33)
    message(FATAL_ERROR "cpack: GLIBCXX_3.4.${glibcxx} needed: add its GCC release to "
                        "cmake/KiteCPackProject.cmake")
  endif()
  set(libc6 libc6)
  if(glibc)
    set(libc6 "libc6 (>= ${glibc})")
  endif()
  set(libgcc libgcc-s1)
  if(gcc_s)
    set(libgcc "libgcc-s1 (>= ${gcc_s})")
  endif()
  set(libstdcxx libstdc++6)
  if(glibcxx AND glibcxx GREATER_EQUAL 21)
    set(libstdcxx "libstdc++6 (>= ${gcc_of_${glibcxx}})")
  endif()
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${libc6}, ${libgcc}, ${libstdcxx}")
endif()
