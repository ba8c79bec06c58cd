# How Kite registers its tests, so that none can pass by accident:
#
#  - kite_gtest(NAME SOURCES...): a googletest program; a source that does not
#    exist is a configure error (add_executable refuses it), never a test
#    silently left out. kite_check_unit_tests_registered() at the end of
#    tests/CMakeLists.txt also refuses a tests/unit/*_test.cpp that no
#    kite_gtest names.
#  - kite_python_test(NAME ... COMMAND ...): a test that needs interpreters,
#    Python modules or files an earlier test writes. They are checked when the
#    test runs (tests/support/run_with_prereqs.sh): a missing one skips the
#    test (ctest: Skipped, with the reason printed) outside CI and fails it
#    under CI=true.
#  - kite_device_test(NAME ... DEVICE vulkan|cuda COMMAND ...): a test that
#    needs a GPU. A missing GPU is not a missing prerequisite: the test program
#    itself exits with KITE_TEST_SKIP_CODE and says why, through
#    tests/support/kite_test_skip.h (C++) or kite_test_skip.py (Python);
#    KITE_REQUIRE_DEVICE=vulkan,cuda (or "all") in the environment makes a
#    missing device a failure instead, for machines that are meant to have one.
#    googletest device tests use KITE_SKIP_WITHOUT_DEVICE() from the same
#    header in a kite_gtest program: gtest_discover_tests marks a GTEST_SKIP
#    as Skipped in ctest.

# The exit status ctest reads as "Skipped" (SKIP_RETURN_CODE) for every test
# registered here; the same value as kite::test::kSkipExitCode
# (tests/support/kite_test_skip.h), SKIP_EXIT_CODE (kite_test_skip.py) and
# SKIP_CODE (run_with_prereqs.sh). 77 is the Automake convention.
set(KITE_TEST_SKIP_CODE 77)
set(KITE_TEST_SUPPORT_DIR ${CMAKE_CURRENT_LIST_DIR}/../support)
get_filename_component(KITE_TEST_SUPPORT_DIR ${KITE_TEST_SUPPORT_DIR} ABSOLUTE)

function(kite_gtest name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE GTest::gtest_main kite_warnings)
  target_include_directories(${name} PRIVATE ${KITE_TEST_SUPPORT_DIR})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS unit)
  foreach(src ${ARGN})
    get_filename_component(abs ${src} ABSOLUTE)
    set_property(GLOBAL APPEND PROPERTY KITE_GTEST_SOURCES ${abs})
  endforeach()
endfunction()

# kite_gtest_not_built(SOURCE REASON): a test source this configuration leaves
# out on purpose (e.g. the converter's tests with KITE_BUILD_CONVERTER=OFF),
# so that kite_check_unit_tests_registered() does not call it an orphan.
function(kite_gtest_not_built src reason)
  get_filename_component(abs ${src} ABSOLUTE)
  if(NOT EXISTS ${abs})
    message(FATAL_ERROR "kite_gtest_not_built: ${src} does not exist")
  endif()
  message(STATUS "Test ${src}: not built (${reason})")
  set_property(GLOBAL APPEND PROPERTY KITE_GTEST_SOURCES ${abs})
endfunction()

# kite_python_test(NAME name
#   [REF_MODULES m...]     modules KITE_PYTHON (onnx, onnxruntime, numpy) must import
#   [TORCH_MODULES m...]   modules KITE_TORCH_PYTHON (Debian's torch) must import
#   [FIXTURE_FILES f...]   files an earlier (fixture) test writes
#   [FIXTURE_NOTE text]    what writes them and what that needs (for the message)
#   COMMAND cmd args...    run as is once everything is there
#   [LABELS l...] [ENVIRONMENT VAR=value...]
#   [PROPERTIES p v...])   more single-valued test properties (TIMEOUT, FIXTURES_*...)
function(kite_python_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;FIXTURE_NOTE"
                        "REF_MODULES;TORCH_MODULES;FIXTURE_FILES;COMMAND;LABELS;ENVIRONMENT;PROPERTIES")
  if(NOT ARG_NAME OR NOT ARG_COMMAND)
    message(FATAL_ERROR "kite_python_test: NAME and COMMAND are required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kite_python_test(${ARG_NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(checks)
  if(ARG_REF_MODULES)
    string(REPLACE ";" "," modules "${ARG_REF_MODULES}")
    list(APPEND checks --python "${KITE_PYTHON}" "${modules}")
  endif()
  if(ARG_TORCH_MODULES)
    string(REPLACE ";" "," modules "${ARG_TORCH_MODULES}")
    list(APPEND checks --python "${KITE_TORCH_PYTHON}" "${modules}")
  endif()
  if(ARG_FIXTURE_FILES AND NOT ARG_FIXTURE_NOTE)
    message(FATAL_ERROR "kite_python_test(${ARG_NAME}): FIXTURE_FILES needs a FIXTURE_NOTE")
  endif()
  foreach(f ${ARG_FIXTURE_FILES})
    list(APPEND checks --file "${f}" "${ARG_FIXTURE_NOTE}")
  endforeach()
  add_test(NAME ${ARG_NAME}
           COMMAND sh ${KITE_TEST_SUPPORT_DIR}/run_with_prereqs.sh ${ARG_NAME} ${checks}
                   -- ${ARG_COMMAND})
  set_tests_properties(${ARG_NAME} PROPERTIES SKIP_RETURN_CODE ${KITE_TEST_SKIP_CODE}
                       LABELS "${ARG_LABELS}" ${ARG_PROPERTIES})
  if(ARG_ENVIRONMENT)
    set_tests_properties(${ARG_NAME} PROPERTIES ENVIRONMENT "${ARG_ENVIRONMENT}")
  endif()
endfunction()

# kite_device_test(NAME name DEVICE vulkan|cuda COMMAND cmd args... [PROPERTIES p v...])
# (PROPERTIES: single-valued ones; LABELS are set here)
# The command must exit with KITE_TEST_SKIP_CODE (printing why) when the
# machine has no such device; labels: "device;<DEVICE>".
function(kite_device_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;DEVICE" "COMMAND;PROPERTIES")
  if(NOT ARG_NAME OR NOT ARG_DEVICE OR NOT ARG_COMMAND)
    message(FATAL_ERROR "kite_device_test: NAME, DEVICE and COMMAND are required")
  endif()
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_COMMAND})
  set_tests_properties(${ARG_NAME} PROPERTIES SKIP_RETURN_CODE ${KITE_TEST_SKIP_CODE}
                       LABELS "device;${ARG_DEVICE}" ${ARG_PROPERTIES})
endfunction()

# Every tests/unit/*_test.cpp must be a source of some kite_gtest: a test file
# nobody registers is a test that never runs.
function(kite_check_unit_tests_registered dir)
  file(GLOB present CONFIGURE_DEPENDS ${dir}/*_test.cpp)
  get_property(registered GLOBAL PROPERTY KITE_GTEST_SOURCES)
  set(orphans)
  foreach(f ${present})
    if(NOT f IN_LIST registered)
      list(APPEND orphans ${f})
    endif()
  endforeach()
  if(orphans)
    message(FATAL_ERROR "test sources that no kite_gtest() registers: ${orphans}")
  endif()
endfunction()
