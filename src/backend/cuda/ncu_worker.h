// The program Nsight Compute profiles for `concord profile raise` (CUDA builds only).
#pragma once

#include <string>

#include "concord/status.h"

namespace concord::cuda {

// One plain launch of each job of the job file (suite_jobs_to_text), each after a marker kernel
// (ncu_marker.h); registered as the build's NcuWorker (concord/backend_factory.h).
Status ncu_worker(const std::string& jobs_file);

}  // namespace concord::cuda
