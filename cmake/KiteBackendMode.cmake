# The ON/AUTO/OFF policy every optional backend plugin (Vulkan, CUDA) follows:
# AUTO builds it when what it needs is found, ON makes a missing piece a
# configure error, OFF skips it.

# kite_backend_mode(<option> <doc> <out>): the cache option <option>
# (default AUTO), checked and upper-cased into <out>.
function(kite_backend_mode option doc out)
  set(${option} AUTO CACHE STRING "${doc}")
  set_property(CACHE ${option} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${option}}" mode)
  if(NOT mode MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${option} is '${${option}}', expected AUTO, ON or OFF")
  endif()
  set(${out} ${mode} PARENT_SCOPE)
endfunction()

# kite_backend_missing(<option> <mode> <name> <missing> <separator> <hint>):
# with <missing> (a list of what was not found) not empty, a configure error
# "<option>=ON but <missing> not found (<hint>)" under mode ON, else the
# status line "<name> backend: not built (<missing> not found)". The caller
# then skips the backend.
function(kite_backend_missing option mode name missing separator hint)
  if(NOT missing)
    return()
  endif()
  string(REPLACE ";" "${separator}" missing "${missing}")
  if(mode STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${missing} not found (${hint})")
  endif()
  message(STATUS "${name} backend: not built (${missing} not found)")
endfunction()
