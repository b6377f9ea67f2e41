// PBS's profiler step: the "pbs" facet (requested bytes per block, L1 and L2 miss rates) read from
// the same Nsight Compute passes as RAISE's (`concord profile raise`). Only the CLI (through the
// generated policy::ncu_facets()), tests and benches use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/pbs/pbs_facet.h"
#include "profile/ncu.h"

namespace concord::policy {

// The PBS facet of one job (pbs_facet_from_ncu over its launches: bytes summed, hit rates weighted
// by duration) per `logical_blocks`; with several passes, each field is the mean over passes.
// An error names a missing metric (a CSV from a pass that did not collect them).
Result<PbsFacet> pbs_facet_of_job(const std::vector<std::vector<profile::NcuLaunch>>& passes_of_job,
                                  int64_t logical_blocks, const std::string& where);

// The "pbs" facet from ncu: the job's logical blocks come from the suite's spec of its kernel, size
// and variant, so a library kernel (not the suite's to count) and a pass without the PBS metrics
// leave the job without one, named.
std::vector<profile::NcuFacet> pbs_ncu_facets();

}  // namespace concord::policy
