// RAISE's profiler step: its metric vectors read from Nsight Compute (`concord profile raise`). Only
// the CLI (through the generated policy::ncu_facets()), tests and benches use it.
#pragma once

#include <string>
#include <vector>

#include "policy/raise/raise_metrics.h"
#include "profile/ncu.h"

namespace concord::policy {

// The RAISE vector of one job: each metric scaled to 0-10 and averaged over the job's launches
// weighted by their duration (RAISE paper, Section VI-A: multi-kernel tasks are weighted by kernel
// time). An error names a launch without the duration or a metric.
Result<RaiseVector> raise_vector(const std::vector<profile::NcuLaunch>& launches, const std::string& where);

// The "raise" facet from ncu: the eight metrics of raise_metrics.h; a job's vector is its mean over
// the passes (one pass's metrics vary by a few hundredths of a score). Required of every job.
std::vector<profile::NcuFacet> raise_ncu_facets();

}  // namespace concord::policy
