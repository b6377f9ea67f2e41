// Every CUDA call checked in one place: a failing call becomes a Status naming the file, line,
// the call and the error name. Device code never throws; host code never ignores an error.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "concord/status.h"

namespace concord::cuda {

inline Status runtime_status(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return Status::ok();
  return Status::device_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + cudaGetErrorName(e) +
                              " (" + cudaGetErrorString(e) + ")");
}

}  // namespace concord::cuda

// Returns a device_error Status from the enclosing function when a runtime call fails.
#define CONCORD_CUDA(call) CONCORD_RETURN_IF_ERROR(::concord::cuda::runtime_status((call), #call, __FILE__, __LINE__))
// For launches: checks the launch error right after <<<>>>.
#define CONCORD_CUDA_LAUNCHED() CONCORD_CUDA(cudaGetLastError())
