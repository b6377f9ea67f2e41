// The real driver: libcuda.so.1's own entry points, found with the real dlsym (the library's
// exported dlsym is a hook, so it cannot be used for this), and the check macro for calls the
// library makes itself. Nothing here links libcuda: a process without a driver still loads the
// library and every hook answers with the driver's "not initialised".
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <array>

#include "concord/status.h"
#include "intercept/symbols.h"

namespace concord::intercept {

using DlsymFn = void* (*)(void*, const char*);
// glibc's dlsym, found through dlvsym (never through the hook); null when glibc has neither version.
DlsymFn real_dlsym();

struct RealDriver {
  // The intercepted entry points, by Entry index (null where this driver lacks one).
  std::array<void*, static_cast<size_t>(Entry::count)> entry{};
  // Whether the driver has everything the launch path calls below (a driver older than CUDA 12.3
  // lacks cuFuncGetName): without it the hooks still forward every call, and the process runs
  // pass-through.
  bool complete = false;

  // What the library itself calls.
  PFN_cuEventCreate_v2000 event_create = nullptr;
  PFN_cuEventRecord_v2000 event_record = nullptr;
  PFN_cuEventQuery_v2000 event_query = nullptr;
  PFN_cuEventDestroy_v4000 event_destroy = nullptr;
  PFN_cuStreamWaitEvent_v3020 stream_wait_event = nullptr;
  PFN_cuStreamIsCapturing_v10000 stream_is_capturing = nullptr;
  PFN_cuStreamGetPriority_v5050 stream_get_priority = nullptr;
  PFN_cuCtxGetStreamPriorityRange_v5050 ctx_get_stream_priority_range = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current = nullptr;
  PFN_cuCtxGetDevice_v2000 ctx_get_device = nullptr;
  // The tenant's GPU as the node daemon knows it (its PCI bus id; null: the tenant names none).
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetPCIBusId_v4010 device_get_pci_bus_id = nullptr;
  PFN_cuDeviceTotalMem_v3020 device_total_mem = nullptr;  // its memory, for the daemon's books (null: not reported)
  PFN_cuThreadExchangeStreamCaptureMode_v10010 thread_exchange_capture_mode = nullptr;
  PFN_cuFuncGetName_v12030 func_get_name = nullptr;
  PFN_cuKernelGetName_v12030 kernel_get_name = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuMemsetD32Async_v3020 memset_d32_async = nullptr;
  PFN_cuMemcpyDtoHAsync_v3020 memcpy_dtoh_async = nullptr;
  PFN_cuLibraryLoadData_v12000 library_load_data = nullptr;
  PFN_cuLibraryGetKernel_v12000 library_get_kernel = nullptr;
  PFN_cuLibraryUnload_v12000 library_unload = nullptr;
  // Green contexts (null on a driver without them: SM sets are then not honoured).
  PFN_cuDeviceGetDevResource_v12040 device_get_dev_resource = nullptr;
  PFN_cuDevSmResourceSplitByCount_v12040 dev_sm_resource_split_by_count = nullptr;
  PFN_cuDevResourceGenerateDesc_v12040 dev_resource_generate_desc = nullptr;
  PFN_cuGreenCtxCreate_v12040 green_ctx_create = nullptr;
  PFN_cuGreenCtxDestroy_v12040 green_ctx_destroy = nullptr;
  PFN_cuGreenCtxStreamCreate_v12050 green_ctx_stream_create = nullptr;
  // Room (intercept/room.h): device limits and function attributes (null: no residency cap).
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuFuncGetAttribute_v2020 func_get_attribute = nullptr;
  PFN_cuFuncSetAttribute_v9000 func_set_attribute = nullptr;
  PFN_cuKernelGetFunction_v12000 kernel_get_function = nullptr;
  PFN_cuKernelSetAttribute_v12000 kernel_set_attribute = nullptr;

  template <typename Fn>
  Fn get(Entry e) const {
    return reinterpret_cast<Fn>(entry[static_cast<size_t>(e)]);
  }
  bool has_green_contexts() const {
    return device_get_dev_resource && dev_sm_resource_split_by_count && dev_resource_generate_desc && green_ctx_create &&
           green_ctx_destroy && green_ctx_stream_create;
  }
};

// The table, loaded once (libcuda.so.1 opened, or found already loaded); null when libcuda.so.1
// cannot be opened or lacks the functions every driver since CUDA 12.3 has. Safe to call from any
// thread and from inside a dlsym() hook.
const RealDriver* real_driver();

// Which Entry the real function `fn` is, or -1: how a pointer some lookup returned is matched to
// its wrapper.
int entry_of(const RealDriver& driver, const void* fn);

// A failing driver call as a Status naming the file, line, call and error name.
Status driver_status(CUresult r, const char* call, const char* file, int line);

}  // namespace concord::intercept

// Returns a device_error Status from the enclosing function when a real driver call fails.
#define CONCORD_INTERCEPT_CU(call) \
  CONCORD_RETURN_IF_ERROR(::concord::intercept::driver_status((call), #call, __FILE__, __LINE__))
