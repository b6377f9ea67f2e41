# Each rule of layering_rules.cmake refuses what it names: for every (folder, forbidden prefix) a
# tree holding one file in that folder with one such include, checked by layering.cmake, must fail
# naming that file and include. Likewise a facet file including a policy's header, and a CUDA
# build conditional. Run as
#   cmake -DWORK=<scratch folder> -P layering_negative.cmake
include(${CMAKE_CURRENT_LIST_DIR}/layering_rules.cmake)
set(failures "")
set(checked 0)
# Runs the check on the tree at WORK/<name> (then removed) and expects it refused with `expected`.
function(expect_tree_refused name expected)
  set(root "${WORK}/${name}")
  execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${root}/src -P ${CMAKE_CURRENT_LIST_DIR}/layering.cmake
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(REMOVE_RECURSE "${root}")
  string(FIND "${out}${err}" "${expected}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    set(failures "${failures}  tree ${name}: not refused with '${expected}' (rc ${rc})\n" PARENT_SCOPE)
  endif()
endfunction()
# A tree holding one file in src/ with one line.
function(expect_refused name file include_line expected)
  file(REMOVE_RECURSE "${WORK}/${name}")
  file(WRITE "${WORK}/${name}/src/${file}" "${include_line}\n")
  expect_tree_refused("${name}" "${expected}")
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
set(i 0)
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 folder)
  list(GET parts 1 forbidden)
  string(REPLACE "," ";" forbidden "${forbidden}")
  foreach(prefix IN LISTS forbidden)
    if(prefix MATCHES "\\.h$")
      set(inc "${prefix}")
    else()
      set(inc "${prefix}probe.h")
    endif()
    math(EXPR i "${i} + 1")
    expect_refused("r${i}" "${folder}/probe.cpp" "#include \"${inc}\"" "src/${folder}/probe.cpp includes ${inc}")
  endforeach()
endforeach()
expect_refused("facet" "policy/demo/demo_facet.cpp" "#include \"concord/engine.h\"" "a facet file builds on core's types only")
expect_refused("cuda-if" "core/probe.cpp" "#ifdef CONCORD_HAVE_CUDA" "has a CUDA build conditional")
expect_refused("profiler-step-user" "policy/demo/demo_policy.cpp" "#include \"policy/demo/demo_profiler.h\""
               "a policy's profiler step is the CLI's")
expect_refused("profiler-step-reach" "policy/demo/demo_profiler.cpp" "#include \"runner/probe.h\""
               "src/policy/demo/demo_profiler.cpp includes runner/probe.h")
expect_refused("policy-profile" "policy/demo/demo_policy.cpp" "#include \"profile/profiler.h\""
               "src/policy/demo/demo_policy.cpp includes profile/profiler.h")
expect_refused("profile-facet" "profile/probe.cpp" "#include \"policy/demo/demo_facet.h\""
               "src/profile/probe.cpp includes policy/demo/demo_facet.h")
# A public header that includes a Concord header needs one source of its name under src/.
file(WRITE "${WORK}/face-none/include/concord/probe.h" "#include \"concord/status.h\"\n")
file(WRITE "${WORK}/face-none/src/core/other.cpp" "\n")
expect_tree_refused("face-none" "include/concord/probe.h includes Concord headers but no source under src/ is named probe.cpp")
file(WRITE "${WORK}/face-two/include/concord/probe.h" "#include \"concord/status.h\"\n")
file(WRITE "${WORK}/face-two/src/core/probe.cpp" "\n")
file(WRITE "${WORK}/face-two/src/runner/probe.cpp" "\n")
expect_tree_refused("face-two" "2 sources under src/ are named probe.cpp")
math(EXPR i "${i} + 2")
# And what the rules allow passes: a policy on mechanism and core, a profiler step on the profile
# layer, the CLI on a profiler step.
file(REMOVE_RECURSE "${WORK}/allowed")
file(WRITE "${WORK}/allowed/src/policy/demo/demo_policy.cpp" "#include \"mechanism/params.h\"\n#include \"concord/policy.h\"\n")
file(WRITE "${WORK}/allowed/src/policy/demo/demo_profiler.cpp" "#include \"profile/profiler.h\"\n#include \"concord/profile.h\"\n")
file(WRITE "${WORK}/allowed/src/cli/probe.cpp" "#include \"policy/demo/demo_profiler.h\"\n")
# A leaf public header, and one with its source.
file(WRITE "${WORK}/allowed/include/concord/leaf.h" "#include <cstdint>\n")
file(WRITE "${WORK}/allowed/include/concord/face.h" "#include \"concord/status.h\"\n")
file(WRITE "${WORK}/allowed/src/core/face.cpp" "#include \"concord/face.h\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${WORK}/allowed/src -P ${CMAKE_CURRENT_LIST_DIR}/layering.cmake RESULT_VARIABLE rc
                OUTPUT_QUIET ERROR_VARIABLE err)
file(REMOVE_RECURSE "${WORK}/allowed")
if(NOT rc EQUAL 0)
  string(APPEND failures "  allowed includes were refused: ${err}\n")
endif()
if(failures)
  message(FATAL_ERROR "layering_negative: rules that did not refuse:\n${failures}")
endif()
message(STATUS "layering_negative: each of the ${i} folder and public-header rules, the facet, profiler-step and CUDA rules refuse what they name")
