# Typos and bad values on the command lines of `concord` and `concordd`: each names the mistake,
# suggests the nearest name where there is one, and exits 2 (a bad command line) or 1 (bad input
# that is not the command line: a spec, a results file). Inputs: CONCORD, CONCORDD, EXAMPLES, WORK.
file(MAKE_DIRECTORY ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/isolate.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../expect.cmake)


set(pair ${EXAMPLES}/pair.yaml)
# concord: flag, policy, parameter, device (the command line: 2).
expect_exit(2 "unknown flag '--polcy' of 'run' (did you mean '--policy'?)" ${CONCORD} run ${pair} --polcy serial)
expect_exit(2 "did you mean '--seed'?" ${CONCORD} run ${pair} --sed=3)
expect_exit(2 "did you mean 'orion'?" ${CONCORD} run ${pair} --policy orin)
expect_exit(2 "did you mean 'dur_fraction'?" ${CONCORD} run ${pair} --policy orion --param dur_fractoin=0.1)
expect_exit(2 "its parameters: sm_threshold, dur_fraction, ahead" ${CONCORD} run ${pair} --policy orion --param x=1)
expect_exit(2 "no built-in device 'h300'" ${CONCORD} run ${pair} --device h300)
expect_exit(2 "no built-in device 'h300'" ${CONCORD} validate ${pair} --device h300)
expect_exit(2 "--backend" ${CONCORD} run ${pair} --backend simm)
# A kernel misspelt in a spec is bad input, not a bad command line (1), with the suggestion.
file(WRITE ${WORK}/typo.yaml "tenants:\n  - name: a\n    kernels:\n      - {kernel: stream_triadd}\n")
expect_exit(1 "did you mean 'stream_triad'?" ${CONCORD} validate ${WORK}/typo.yaml)
expect_exit(1 "did you mean 'stream_triad'?" ${CONCORD} run ${WORK}/typo.yaml)
# A device file that is not one is bad input (1).
file(WRITE ${WORK}/dev.json "{")
expect_exit(1 "dev.json" ${CONCORD} run ${pair} --device ${WORK}/dev.json)

# concord compare: a file that is not results is bad input (1), named.
expect_exit(1 "dev.json: not JSON" ${CONCORD} compare ${WORK}/dev.json)
file(WRITE ${WORK}/other.json "{\"rows\": []}")
expect_exit(1 "other.json: not a `concord run` results file" ${CONCORD} compare ${WORK}/other.json)
expect_exit(2 "inputs is required" ${CONCORD} compare)

# concordd: the same mistakes, the same codes, before any socket is made.
set(sock ${WORK}/concordd.sock)
expect_exit(2 "unknown flag '--polcy' (did you mean '--policy'?)" ${CONCORDD} --socket ${sock} --polcy orion)
expect_exit(2 "did you mean 'orion'?" ${CONCORDD} --socket ${sock} --policy orin)
expect_exit(2 "no parameter 'x'" ${CONCORDD} --socket ${sock} --policy orion:x=1)
expect_exit(2 "device 'h300'" ${CONCORDD} --socket ${sock} --device-spec h300)
expect_exit(2 "--be-depth" ${CONCORDD} --socket ${sock} --be-depth -1)
expect_exit(2 "--log-level 'loud'" ${CONCORDD} --socket ${sock} --log-level loud)
expect_exit(2 "--be-memory-share: 1.5 is not a fraction in (0, 1]" ${CONCORDD} --socket ${sock} --be-memory-share=1.5)
expect_exit(2 "--be-memory-share: -0.2 is not a fraction in (0, 1]" ${CONCORDD} --socket ${sock} --be-memory-share=-0.2)
expect_exit(2 "--be-memory-share 'half': not a number" ${CONCORDD} --socket ${sock} --be-memory-share half)
expect_exit(2 "--memory-total 'abc' is not a size" ${CONCORDD} --socket ${sock} --memory-total abc)
expect_exit(2 "--memory-total '-8G' is not a size" ${CONCORDD} --socket ${sock} --memory-total=-8G)
expect_exit(2 "--memory-total: 0 bytes is outside" ${CONCORDD} --socket ${sock} --memory-total 0)
if(EXISTS ${sock})
  message(FATAL_ERROR "a refused concordd command line left its socket ${sock} behind")
endif()

# Numbers on the command line are what they say: a negative seed is refused, not wrapped.
expect_exit(2 "--seed" ${CONCORD} run ${pair} --seed -1)

# The cuda backend on a machine without a GPU: one error, exit 1, and no teardown noise (no device
# was opened, so there is nothing to drain).
execute_process(COMMAND ${CONCORD} backends OUTPUT_VARIABLE backends)
execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE gpu OUTPUT_QUIET ERROR_QUIET)
if(backends MATCHES "cuda" AND NOT gpu EQUAL 0)
  execute_process(COMMAND ${CONCORD} run ${pair} --backend cuda RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR err MATCHES "did not drain")
    message(FATAL_ERROR "run --backend cuda without a GPU: exit ${rc}, expected 1 without teardown noise:\n${err}")
  endif()
endif()

# compare: a field of the wrong type names the file (nothing thrown on), and runs of one workload
# with different headlines (with and without --no-serial) are not ranked in one column.
file(WRITE ${WORK}/typed.json "{\"policy\": 7, \"workload\": \"x.yaml\", \"metrics\": {\"headline\": {\"name\": \"throughput_over_serial\", \"value\": 1.0}}}")
expect_exit(1 "typed.json: not a `concord run` results file" ${CONCORD} compare ${WORK}/typed.json)
execute_process(COMMAND ${CONCORD} -q run ${pair} --policy serial --out ${WORK}/with.json OUTPUT_QUIET)
execute_process(COMMAND ${CONCORD} -q run ${pair} --policy streams --no-serial --out ${WORK}/without.json OUTPUT_QUIET)
expect_exit(1 "compare runs with the same headline" ${CONCORD} compare ${WORK}/with.json ${WORK}/without.json)

# Numbers that are not finite are refused on both command lines (they would become integers later).
expect_exit(2 "'nan' is not a finite number" ${CONCORD} run ${pair} --max-wall nan)
expect_exit(2 "--idle-timeout" ${CONCORDD} --socket ${sock} --idle-timeout inf)
