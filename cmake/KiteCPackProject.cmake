# Read by cpack after CPackConfig.cmake (CPACK_PROJECT_CONFIG_FILE): adds the
# packages of test-only backend plugins when the package test asks for them.
if("$ENV{KITE_CPACK_TEST_BACKENDS}" STREQUAL "1")
  list(APPEND CPACK_COMPONENTS_ALL ${CPACK_KITE_TEST_COMPONENTS})
endif()
