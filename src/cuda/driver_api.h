// The few driver-API functions Concord needs (green contexts, loading functions), found at run time through the
// runtime's cudaGetDriverEntryPointByVersion. Nothing links libcuda.so, so binaries built with
// CUDA still start (and run on the simulator) on machines without a GPU driver.
#pragma once

#include <cuda.h>

#include "concord/status.h"

namespace concord::cuda {

struct DriverApi {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetDevResource) device_get_dev_resource = nullptr;
  decltype(&::cuDevSmResourceSplitByCount) dev_sm_resource_split_by_count = nullptr;
  decltype(&::cuDevResourceGenerateDesc) dev_resource_generate_desc = nullptr;
  decltype(&::cuGreenCtxCreate) green_ctx_create = nullptr;
  decltype(&::cuGreenCtxDestroy) green_ctx_destroy = nullptr;
  decltype(&::cuGreenCtxStreamCreate) green_ctx_stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuFuncLoad) func_load = nullptr;  // loads a lazily loaded function now
};

// Loads the table once; an error names the function that could not be found.
Result<const DriverApi*> driver_api();

// A failing driver call as a Status with file, line, call and error name.
Status driver_status(CUresult r, const char* call, const char* file, int line);

}  // namespace concord::cuda

#define CONCORD_CU(call) CONCORD_RETURN_IF_ERROR(::concord::cuda::driver_status((call), #call, __FILE__, __LINE__))
