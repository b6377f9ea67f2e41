# The command's own limits: --max-wall ends a long run on time with what finished written, and a
# run whose records would not fit --max-memory is refused before it starts, with what it needs.
# Inputs: CONCORD, WORK.
file(MAKE_DIRECTORY ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/isolate.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../expect.cmake)

# A million launches: about 10 s on the simulator.
file(WRITE ${WORK}/long.yaml "tenants:
  - name: a
    requests: 1000
    kernels:
      - {kernel: stream_triad, size: 4096, count: 500}
  - name: b
    requests: 1000
    kernels:
      - {kernel: fma_loop, size: 4096, count: 500}
")
execute_process(COMMAND ${CONCORD} validate ${WORK}/long.yaml OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "1000000 launches; `run` needs about [0-9]+ MiB for its records")
  message(FATAL_ERROR "validate does not report the launches and the memory:\n${out}")
endif()

string(TIMESTAMP t0 "%s")
expect_exit(1 "the wall-clock limit (--max-wall 2 s) was reached"
            ${CONCORD} run ${WORK}/long.yaml --no-serial --max-wall 2 --out ${WORK}/long.json)
string(TIMESTAMP t1 "%s")
math(EXPR elapsed "${t1} - ${t0}")
if(elapsed GREATER 4)
  message(FATAL_ERROR "--max-wall 2 took ${elapsed} s")
endif()
file(READ ${WORK}/long.json results)
string(JSON complete GET "${results}" status complete)
string(JSON reason GET "${results}" status reason)
string(JSON finished LENGTH "${results}" launches)
if(complete OR NOT reason MATCHES "--max-wall" OR finished EQUAL 0)
  message(FATAL_ERROR "--max-wall: results not written as a partial run (complete ${complete}, ${finished} launches): ${reason}")
endif()

# Refused up front, naming what it needs; nothing is written.
expect_error("the run needs about" ${CONCORD} run ${WORK}/long.yaml --max-memory 10 --out ${WORK}/refused.json)
if(EXISTS ${WORK}/refused.json)
  message(FATAL_ERROR "a refused run left its --out file")
endif()

# Validate and run agree: a workload a policy cannot run is refused by run up front with the
# reason, and validate names that policy.
set(many "tenants:\n")
foreach(i RANGE 139)
  string(APPEND many "  - {name: t${i}, kernels: [{kernel: stream_triad, size: 4096}]}\n")
endforeach()
file(WRITE ${WORK}/many.yaml "${many}")
execute_process(COMMAND ${CONCORD} validate ${WORK}/many.yaml RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0 OR NOT err MATCHES "refused up front by [a-z, -]*pbs")
  message(FATAL_ERROR "validate of 140 tenants does not name the policies that refuse them:\n${err}")
endif()
expect_exit(1 "140 tenants do not fit the 132 SMs" ${CONCORD} run ${WORK}/many.yaml --policy pbs --no-serial --out ${WORK}/many.json)
if(EXISTS ${WORK}/many.json)
  message(FATAL_ERROR "a refused run left its --out file")
endif()
expect_ok(${CONCORD} run ${WORK}/many.yaml --policy pbs --param sms=shared --no-serial)

# The process's own limits count too: under an address-space or a data limit (prlimit), a run
# whose records would not fit is refused up front naming the limit, never ended by std::bad_alloc.
find_program(PRLIMIT prlimit)
if(PRLIMIT)
  # About 10 GB of records: less than the machine's memory, more than the limits below.
  file(WRITE ${WORK}/huge.yaml "tenants:
  - name: a
    requests: 40000
    kernels:
      - {kernel: stream_triad, size: 4096, count: 100}
")
  expect_exit(1 "RLIMIT_AS" ${PRLIMIT} --as=4000000000 ${CONCORD} run ${WORK}/huge.yaml --out ${WORK}/huge.json)
  if(EXISTS ${WORK}/huge.json)
    message(FATAL_ERROR "a refused run left its --out file")
  endif()
  expect_exit(1 "RLIMIT_DATA" ${PRLIMIT} --data=3000000000 ${CONCORD} run ${WORK}/huge.yaml --no-serial)
else()
  message(STATUS "prlimit not found: the process-limit checks are skipped")
endif()

# Control characters of input are written out in messages: a key holding an escape sequence
# reaches the terminal as the text \x1b, never as the byte.
string(ASCII 27 esc)
file(WRITE ${WORK}/escape.yaml "tenants:
  - name: a
    \"\\e[2Jkey\": 1
    kernels:
      - {kernel: stream_triad, size: 4096}
")
foreach(command run validate)
  execute_process(COMMAND ${CONCORD} ${command} ${WORK}/escape.yaml RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${err}${out}" "${esc}" raw)
  string(FIND "${err}" "\\x1b[2Jkey" written)
  if(rc EQUAL 0 OR NOT raw EQUAL -1 OR written EQUAL -1)
    message(FATAL_ERROR "concord ${command} of a key holding ESC (exit ${rc}): the byte reached the terminal or was not written out:\n${err}")
  endif()
endforeach()
