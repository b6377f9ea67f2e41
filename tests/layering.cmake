# The layers of docs/architecture.md, enforced: no folder includes a layer above it. Run as
#   cmake -DSRC=<repo>/src -P layering.cmake
# Each rule: a folder, and the include prefixes its files may not use (comma-separated).
# A policy's facet files (src/policy/<name>/<name>_facet.h, _metrics.h, _class.h, _model.h: the profile
# data it owns and what classifies and models it)
# are a layer of their own on core, below the profiler that fills them; only core's headers and
# each other are open to them, and the profiler may use them.
set(facet_header_regex "^policy/[a-z_]+/[a-z_]+_(facet|metrics|class|model)\\.h$")
set(rules
  "core|policy/,mechanism/,ipc/,intercept/,daemon/,backend/,frontend/,workload/,profile/,runner/,cli/,kernels/,concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h,concord/profile.h"
  "mechanism|policy/,backend/,frontend/,workload/,runner/,cli/,daemon/,concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h"
  "policy|backend/,frontend/,workload/,runner/,cli/,daemon/,concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h"
  "backend/sim|policy/,mechanism/,frontend/,workload/,runner/,cli/,profile/,daemon/,concord/spec_source.h,concord/experiment.h"
  "frontend|policy/,mechanism/,backend/,runner/,cli/,profile/,daemon/,concord/experiment.h"
  "workload|policy/,mechanism/,backend/,runner/,cli/,profile/,daemon/,concord/experiment.h"
  "kernels|policy/,mechanism/,frontend/,workload/,runner/,cli/,profile/,daemon/"
  "profile|policy/,mechanism/,frontend/,runner/,cli/,daemon/"
  "intercept|policy/,mechanism/,backend/,frontend/,workload/,profile/,runner/,cli/,kernels/,daemon/,concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h,concord/profile.h,concord/engine.h,concord/policy.h,concord/backend.h"
  "ipc|intercept/,daemon/,policy/,mechanism/,backend/,frontend/,workload/,profile/,runner/,cli/,kernels/,concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h,concord/profile.h,concord/engine.h,concord/policy.h,concord/backend.h"
  "daemon|intercept/,policy/,backend/,frontend/,workload/,profile/,runner/,cli/,kernels/,mechanism/,concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h,concord/profile.h")
set(violations "")
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 folder)
  list(GET parts 1 forbidden)
  string(REPLACE "," ";" forbidden "${forbidden}")
  file(GLOB_RECURSE files "${SRC}/${folder}/*.h" "${SRC}/${folder}/*.cpp" "${SRC}/${folder}/*.cu" "${SRC}/${folder}/*.cuh")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
      foreach(prefix IN LISTS forbidden)
        string(FIND "${inc}" "${prefix}" at)
        if(at EQUAL 0 AND folder STREQUAL "profile" AND inc MATCHES "${facet_header_regex}")
          set(at -1)
        endif()
        if(at EQUAL 0)
          file(RELATIVE_PATH rel "${SRC}" "${f}")
          string(APPEND violations "  src/${rel} includes ${inc} (src/${folder} may not use ${prefix})\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
file(GLOB facet_files "${SRC}/policy/*/*_facet.*" "${SRC}/policy/*/*_metrics.*" "${SRC}/policy/*/*_class.*"
     "${SRC}/policy/*/*_model.*")
foreach(f IN LISTS facet_files)
  file(STRINGS "${f}" includes REGEX "^#include \"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
    if(NOT inc MATCHES "${facet_header_regex}" AND NOT inc MATCHES "^concord/(status|kernel|device|ids|sm_set)\\.h$")
      file(RELATIVE_PATH rel "${SRC}" "${f}")
      string(APPEND violations "  src/${rel} includes ${inc} (a facet file builds on core's types only)\n")
    endif()
  endforeach()
endforeach()
# Build-configuration conditionals on CUDA: only backend registration may differ between a CUDA
# build and one without (src/backend/registration.h); everything else is the same code.
file(GLOB_RECURSE all_sources "${SRC}/*.h" "${SRC}/*.cpp" "${SRC}/../bench/*.cpp" "${SRC}/../bench/*.h")
foreach(f IN LISTS all_sources)
  file(STRINGS "${f}" conditionals REGEX "^#[ ]*(if|ifdef|ifndef|elif).*CONCORD_(WITH|HAVE)_CUDA")
  if(conditionals)
    file(RELATIVE_PATH rel "${SRC}/.." "${f}")
    string(APPEND violations "  ${rel} has a CUDA build conditional (register through src/backend/registration.h)\n")
  endif()
endforeach()
if(violations)
  message(FATAL_ERROR "layering: includes across layers, upward, or CUDA conditionals:\n${violations}")
endif()
message(STATUS "layering: every folder includes only its own layer and those below")
