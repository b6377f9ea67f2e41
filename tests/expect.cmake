# Helpers of the CMake-script tests (tests/cli, tests/bench): run a command and fail the test
# unless it succeeds (expect_ok: its stdout in `last_out`, its stderr in `last_err`), or unless it fails with `needle` in its
# error output (expect_error).
function(expect_ok)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()

function(expect_error needle)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected an error from: ${ARGN}")
  endif()
  string(FIND "${err}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "error of ${ARGN} does not mention '${needle}':\n${err}")
  endif()
endfunction()
