# bench/fedcm's tools, end to end on the simulator: a run stopped by a bad workload keeps the
# results of the workloads before it (the file is written after each one, marked incomplete), a
# full run is marked complete, and compose.py writes every combination and names bad input.
# Inputs: BENCH (concord_fedcm_bench), SRC (the source tree), WORK, PYTHON (may be empty).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

include(${CMAKE_CURRENT_LIST_DIR}/../expect.cmake)

# A good workload, then one that does not exist: the error names the file.
expect_error(missing.yaml ${BENCH} run --backend sim ${SRC}/bench/fedcm/workloads/n2a.yaml ${WORK}/missing.yaml
             --sigmas none --schemes serial,streams --out ${WORK}/partial.json)
if(NOT EXISTS ${WORK}/partial.json)
  message(FATAL_ERROR "the first workload's results were lost")
endif()
file(READ ${WORK}/partial.json j)
string(JSON complete GET "${j}" complete)
string(JSON runs LENGTH "${j}" runs)
string(JSON first GET "${j}" runs 0 workload)
if(complete OR NOT runs EQUAL 2 OR NOT first STREQUAL "n2a")
  message(FATAL_ERROR "partial file: complete=${complete}, ${runs} runs (want 2 of n2a), first ${first}")
endif()

expect_ok(${BENCH} run --backend sim ${SRC}/bench/fedcm/workloads/n2b.yaml --sigmas none --schemes serial,fedcm
          --out ${WORK}/full.json)
file(READ ${WORK}/full.json j)
string(JSON complete GET "${j}" complete)
if(NOT complete)
  message(FATAL_ERROR "a finished run is not marked complete")
endif()
if(EXISTS ${WORK}/full.json.tmp)
  message(FATAL_ERROR "the temporary file was left behind")
endif()

if(PYTHON)
  expect_ok(${PYTHON} ${SRC}/bench/fedcm/compose.py ${SRC}/bench/fedcm/pool.yaml ${WORK}/perm --n 2 3)
  file(GLOB made ${WORK}/perm/*.yaml)
  list(LENGTH made n)
  if(NOT n EQUAL 165)  # 10 tenants: 45 pairs + 120 triples
    message(FATAL_ERROR "compose.py wrote ${n} workloads, want 165")
  endif()
  # Each generated workload loads and runs (one of them, on the simulator).
  expect_ok(${BENCH} run --backend sim ${WORK}/perm/p2-compute-memory.yaml --sigmas none --schemes serial
            --out ${WORK}/perm.json)
  file(WRITE ${WORK}/bad_pool.yaml "name: bad\ntenants:\n  - {requests: 3}\n")
  expect_error("tenants[0]: field 'name'" ${PYTHON} ${SRC}/bench/fedcm/compose.py ${WORK}/bad_pool.yaml ${WORK}/bad)
endif()
