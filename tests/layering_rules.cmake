# The layers of docs/architecture.md as include rules, read by layering.cmake (the check) and
# layering_negative.cmake (which proves each rule refuses what it names).
# Each rule: a folder under src/, and the include prefixes its files may not use (comma-separated).
# A policy's facet files (src/policy/<name>/<name>_facet.h, _metrics.h, _class.h, _model.h: the profile
# data it owns and what classifies and models it) are a layer of their own on core; only core's
# headers and each other are open to them. The profile layer names no policy, not even a facet: a
# folder's profiler step fills its facet, and the store checks it through the registered codec.
set(facet_header_regex "^policy/[a-z_]+/[a-z_]+_(facet|metrics|class|model)\\.h$")
# A policy's profiler step (src/policy/<name>/<name>_profiler.*: what fills its facet, through the
# Backend interface) is a layer on the profile layer: it may use profile/ and the backend factory,
# and only the CLI, tests and benches use it. So is src/policy/ncu_facets.h, the list of the facets
# the profiler steps read from Nsight Compute.
set(profiler_step_regex "^policy/([a-z_]+/[a-z_]+_profiler\\.(h|cpp)|ncu_facets\\.h)$")
set(profiler_step_header_regex "^policy/([a-z_]+/[a-z_]+_profiler|ncu_facets)\\.h$")
set(profiler_step_allowed "profile/,concord/profile.h")
set(facet_core_regex "^concord/(status|kernel|device|ids|sm_set|facet_codec)\\.h$")
set(above_core "concord/workload.h,concord/spec_source.h,concord/experiment.h,concord/report.h")
set(rules
  "core|policy/,mechanism/,ipc/,intercept/,daemon/,backend/,cuda/,frontend/,workload/,profile/,runner/,cli/,kernels/,${above_core},concord/profile.h"
  "cuda|backend/,kernels/,policy/,mechanism/,frontend/,workload/,profile/,runner/,cli/,daemon/,intercept/,ipc/,${above_core},concord/profile.h"
  "mechanism|policy/,backend/,cuda/,kernels/,frontend/,workload/,profile/,runner/,cli/,daemon/,ipc/,intercept/,${above_core},concord/profile.h"
  "policy|backend/,cuda/,kernels/,frontend/,workload/,profile/,runner/,cli/,daemon/,ipc/,intercept/,${above_core},concord/profile.h"
  "backend/sim|policy/,mechanism/,cuda/,kernels/device/,backend/cuda/,frontend/,workload/,runner/,cli/,profile/,daemon/,concord/spec_source.h,concord/experiment.h"
  "backend/cuda|policy/,mechanism/,backend/sim/,frontend/,workload/,profile/,runner/,cli/,daemon/,ipc/,intercept/,concord/experiment.h,concord/profile.h"
  "frontend|policy/,mechanism/,backend/,cuda/,runner/,cli/,profile/,daemon/,concord/experiment.h"
  "workload|policy/,mechanism/,backend/,cuda/,runner/,cli/,profile/,daemon/,concord/experiment.h"
  "kernels|policy/,mechanism/,backend/,frontend/,workload/,runner/,cli/,profile/,daemon/"
  "profile|policy/,mechanism/,backend/,cuda/,kernels/device/,frontend/,runner/,cli/,daemon/"
  "intercept|policy/,mechanism/,backend/,cuda/,frontend/,workload/,profile/,runner/,cli/,kernels/,daemon/,${above_core},concord/profile.h,concord/engine.h,concord/policy.h,concord/backend.h"
  "ipc|intercept/,daemon/,policy/,mechanism/,backend/,cuda/,frontend/,workload/,profile/,runner/,cli/,kernels/,${above_core},concord/profile.h,concord/engine.h,concord/policy.h,concord/backend.h"
  "slurm|policy/,mechanism/,backend/,cuda/,frontend/,workload/,profile/,runner/,cli/,kernels/,daemon/,${above_core},concord/profile.h,concord/engine.h,concord/policy.h,concord/backend.h"
  "daemon|intercept/,policy/,backend/,cuda/,frontend/,workload/,profile/,runner/,cli/,kernels/,mechanism/,${above_core},concord/profile.h")
