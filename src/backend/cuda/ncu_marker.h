// Launches the marker kernels of the ncu worker (src/backend/cuda/ncu_marker.cu).
#pragma once

#include <cuda_runtime_api.h>

namespace concord::cuda {

// `skip` = false: concord_ncu_marker (job `job` starts); true: concord_ncu_skip (launches until
// the next job marker are set-up work, not measured).
cudaError_t launch_ncu_marker(bool skip, int job, cudaStream_t stream);

}  // namespace concord::cuda
