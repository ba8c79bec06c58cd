# Checks that the test-skipping machinery does what tests/cmake/KiteTesting.cmake
# promises, by running it on cases whose answer is known:
#   run_with_prereqs.sh: missing module -> 77 + "SKIP" outside CI, 1 + "FAIL"
#   under CI=true; missing interpreter and missing fixture file likewise;
#   everything present -> the command runs and its exit status is the test's.
#   kite_test_skip.h / .py: no device -> 77 + "SKIP", or 1 + "FAIL" with
#   KITE_REQUIRE_DEVICE; the googletest macro -> "[  SKIPPED ]" / failure.
# Usage: cmake -DWRAPPER=run_with_prereqs.sh -DPYTHON=python3 -DSKIP_TEST=skip_probe
#              -DSKIP_PY=kite_test_skip.py -P check_skip_mechanism.cmake
set(failures 0)

function(expect label expected_rc pattern)
  # ARGN: the command, run with CI and KITE_REQUIRE_DEVICE cleared unless the
  # command sets them through `cmake -E env`.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=CI --unset=KITE_REQUIRE_DEVICE ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected_rc}" OR NOT "${out}${err}" MATCHES "${pattern}")
    message(SEND_ERROR "${label}: exit ${rc} (expected ${expected_rc}); the output should "
                       "match '${pattern}':\n${out}${err}")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
  else()
    message(STATUS "ok: ${label}")
  endif()
endfunction()

set(W sh ${WRAPPER})
expect("missing module skips" 77 "SKIP t: missing prerequisite: .*kite_no_such_module"
       ${W} t --python ${PYTHON} kite_no_such_module -- ${CMAKE_COMMAND} -E true)
expect("missing module fails under CI=true" 1 "FAIL t: missing prerequisite"
       ${CMAKE_COMMAND} -E env CI=true ${W} t --python ${PYTHON} kite_no_such_module
       -- ${CMAKE_COMMAND} -E true)
expect("CI=false is not CI" 77 "SKIP t"
       ${CMAKE_COMMAND} -E env CI=false ${W} t --python ${PYTHON} kite_no_such_module
       -- ${CMAKE_COMMAND} -E true)
expect("missing interpreter skips" 77 "no Python interpreter"
       ${W} t --python PYTHON-NOTFOUND os -- ${CMAKE_COMMAND} -E true)
expect("missing interpreter fails under CI" 1 "FAIL t: .*no Python interpreter"
       ${CMAKE_COMMAND} -E env CI=1 ${W} t --python PYTHON-NOTFOUND os -- ${CMAKE_COMMAND} -E true)
expect("missing fixture file skips" 77 "kite_no_such_file does not exist \\(written by x\\)"
       ${W} t --file ${CMAKE_CURRENT_LIST_DIR}/kite_no_such_file "written by x"
       -- ${CMAKE_COMMAND} -E true)
expect("all present runs the command" 0 "^ran\n$"
       ${W} t --python ${PYTHON} os,sys --file ${WRAPPER} "the wrapper"
       -- ${CMAKE_COMMAND} -E echo ran)
expect("the command's failure is the test's" 1 ""
       ${W} t --python ${PYTHON} os -- ${CMAKE_COMMAND} -E false)

expect("C++: no device skips" 77 "SKIP: no selftest device"
       ${SKIP_TEST} --exit-without-device)
expect("C++: no device fails when required" 1 "FAIL: no selftest device"
       ${CMAKE_COMMAND} -E env KITE_REQUIRE_DEVICE=cuda,selftest ${SKIP_TEST} --exit-without-device)
expect("gtest: no device is SKIPPED" 0 "\\[  SKIPPED \\] SkipProbe.SkipsWithoutDevice"
       ${SKIP_TEST})
expect("gtest: no device fails when required" 1 "FAILED.*SkipProbe.SkipsWithoutDevice"
       ${CMAKE_COMMAND} -E env KITE_REQUIRE_DEVICE=all ${SKIP_TEST})
# (registered with kite_python_test(), so it skips when PYTHON is missing)
expect("Python: no device skips" 77 "SKIP: no selftest device: why"
       ${PYTHON} ${SKIP_PY} selftest why)
expect("Python: no device fails when required" 1 "FAIL: no selftest device"
       ${CMAKE_COMMAND} -E env KITE_REQUIRE_DEVICE=selftest ${PYTHON} ${SKIP_PY} selftest why)

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} check(s) of the skip mechanism failed")
endif()
