# `concord plot` draws each kind of figure from small results files (runs made here on the
# simulator, and fixtures in DATA), and refuses files of the wrong kind, naming them.
# Inputs: CONCORD, EXAMPLES, DATA, WORK.
file(MAKE_DIRECTORY ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/isolate.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../expect.cmake)

# An SVG that holds `needle` (matplotlib keeps text as text in these figures).
function(expect_svg file needle)
  if(NOT EXISTS ${file})
    message(FATAL_ERROR "no figure ${file}")
  endif()
  file(READ ${file} svg)
  string(FIND "${svg}" "<svg" at)
  string(FIND "${svg}" "${needle}" has)
  if(at EQUAL -1 OR has EQUAL -1)
    message(FATAL_ERROR "${file} is not an SVG with '${needle}'")
  endif()
endfunction()

foreach(p streams static-partition)
  expect_ok(${CONCORD} run ${EXAMPLES}/gpu4.yaml --policy ${p} --seed 2 --out ${WORK}/gpu4-${p}.json)
endforeach()
expect_ok(${CONCORD} plot latency ${WORK}/gpu4-streams.json ${WORK}/gpu4-static-partition.json -o ${WORK}/latency.svg)
expect_svg(${WORK}/latency.svg "static-partition")
# The default bars: each workload's headline (gpu4 has arrivals: its LC SLO attainment).
expect_ok(${CONCORD} plot stp ${WORK}/gpu4-streams.json ${WORK}/gpu4-static-partition.json -o ${WORK}/stp.svg)
expect_svg(${WORK}/stp.svg "LC SLO attainment")
expect_ok(${CONCORD} plot stp --metric stp ${WORK}/gpu4-streams.json ${WORK}/gpu4-static-partition.json -o ${WORK}/window.svg)
expect_svg(${WORK}/window.svg "co-run window")
# A closed-loop and an open-loop workload side by side: a panel each, with its own axis.
expect_ok(${CONCORD} run ${EXAMPLES}/pair.yaml --policy streams --out ${WORK}/pair-streams.json)
expect_ok(${CONCORD} plot stp ${WORK}/pair-streams.json ${WORK}/gpu4-streams.json -o ${WORK}/panels.svg)
expect_svg(${WORK}/panels.svg "throughput over serial")
expect_ok(${CONCORD} plot stp --metric speedup ${WORK}/gpu4-streams.json -o ${WORK}/speedup.png)
if(NOT EXISTS ${WORK}/speedup.png)
  message(FATAL_ERROR "no PNG figure")
endif()

# Members of an archive, as bench/results stores them.
execute_process(COMMAND ${CMAKE_COMMAND} -E tar cJf ${WORK}/runs.tar.xz gpu4-streams.json gpu4-static-partition.json
                WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not make the archive")
endif()
expect_ok(${CONCORD} plot latency "${WORK}/runs.tar.xz:gpu4-*.json" -o ${WORK}/latency-archive.svg)
expect_svg(${WORK}/latency-archive.svg "streams")

expect_ok(${CONCORD} plot fidelity ${DATA}/fidelity.json -o ${WORK}/fidelity.svg)
expect_svg(${WORK}/fidelity.svg "median makespan error")
expect_ok(${CONCORD} plot sweep ${DATA}/gpu_bench_pair.json -o ${WORK}/sweep.svg)
expect_svg(${WORK}/sweep.svg "green split")

# Wrong inputs: exit 1 naming the file and what it lacks; a bad command line: exit 2.
expect_error("pair.yaml: not JSON" ${CONCORD} plot stp ${EXAMPLES}/pair.yaml -o ${WORK}/x.svg)
expect_error("fidelity.json: neither a concord run results file" ${CONCORD} plot stp ${DATA}/fidelity.json -o ${WORK}/x.svg)
expect_ok(${CONCORD} run ${EXAMPLES}/pair.yaml --no-serial --out ${WORK}/pair.json)
expect_error("pair.json: no latency-critical tenant" ${CONCORD} plot latency ${WORK}/pair.json -o ${WORK}/x.svg)
expect_error("runs.tar.xz: no member matches 'none*'" ${CONCORD} plot latency "${WORK}/runs.tar.xz:none*" -o ${WORK}/x.svg)
execute_process(COMMAND ${CONCORD} plot stp ${WORK}/gpu4-streams.json -o ${WORK}/x.gif RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "an unknown figure format exits ${rc}, not 2")
endif()
execute_process(COMMAND ${CONCORD} plot pie ${WORK}/gpu4-streams.json -o ${WORK}/x.svg RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "an unknown kind exits ${rc}, not 2")
endif()
