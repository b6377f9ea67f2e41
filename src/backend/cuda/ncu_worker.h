// The program Nsight Compute profiles for `concord profile raise` (CUDA builds only).
#pragma once

#include <string>

#include "concord/status.h"

namespace concord::profile {

// One plain launch of each job of the job file, each after a marker kernel (ncu_marker.h).
Status run_ncu_worker(const std::string& jobs_file);

}  // namespace concord::profile
