// The facets the policy folders read from Nsight Compute, in folder order: what `concord profile
// raise` stores. Defined by the build (src/policy/CMakeLists.txt) from every folder declared with
// NCU_FACETS, each giving <folder>_ncu_facets() in its profiler step.
#pragma once

#include <vector>

#include "profile/ncu.h"

namespace concord::policy {

std::vector<profile::NcuFacet> ncu_facets();

}  // namespace concord::policy
