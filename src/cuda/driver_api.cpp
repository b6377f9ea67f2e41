#include "cuda/driver_api.h"

#include <cuda_runtime_api.h>

#include <string>

namespace concord::cuda {
namespace {

template <typename F>
Status load(F& fn, const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12080, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    return Status::device_error(std::string("driver entry point ") + name + " not found (" + cudaGetErrorName(e) + ")");
  }
  fn = reinterpret_cast<F>(p);
  return Status::ok();
}

Result<DriverApi> load_all() {
  DriverApi api;
  CONCORD_RETURN_IF_ERROR(load(api.device_get, "cuDeviceGet"));
  CONCORD_RETURN_IF_ERROR(load(api.device_get_dev_resource, "cuDeviceGetDevResource"));
  CONCORD_RETURN_IF_ERROR(load(api.dev_sm_resource_split_by_count, "cuDevSmResourceSplitByCount"));
  CONCORD_RETURN_IF_ERROR(load(api.dev_resource_generate_desc, "cuDevResourceGenerateDesc"));
  CONCORD_RETURN_IF_ERROR(load(api.green_ctx_create, "cuGreenCtxCreate"));
  CONCORD_RETURN_IF_ERROR(load(api.green_ctx_destroy, "cuGreenCtxDestroy"));
  CONCORD_RETURN_IF_ERROR(load(api.green_ctx_stream_create, "cuGreenCtxStreamCreate"));
  CONCORD_RETURN_IF_ERROR(load(api.stream_destroy, "cuStreamDestroy"));
  CONCORD_RETURN_IF_ERROR(load(api.get_error_name, "cuGetErrorName"));
  CONCORD_RETURN_IF_ERROR(load(api.func_load, "cuFuncLoad"));
  return api;
}

}  // namespace

Result<const DriverApi*> driver_api() {
  static const Result<DriverApi> api = load_all();
  if (!api) return api.status();
  return &api.value();
}

Status driver_status(CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  if (auto api = driver_api(); api && (*api)->get_error_name) (*api)->get_error_name(r, &name);
  return Status::device_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                              (name ? name : ("CUresult " + std::to_string(static_cast<int>(r))).c_str()));
}

}  // namespace concord::cuda
