#include "intercept/real_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <string>

namespace concord::intercept {
namespace {

// Set while this thread loads the table: a dlsym() the loading itself causes (libcuda's
// constructors) must not wait for the table it is part of.
thread_local bool t_loading = false;

const RealDriver* load() {
  DlsymFn sym = real_dlsym();
  if (!sym) return nullptr;
  // The libcuda the process already uses, else load it (a process linked with -lcuda has it).
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return nullptr;
  auto* d = new RealDriver();  // never freed: hooks run until the process's last instruction
  const auto entries = entry_points();
  for (size_t i = 0; i < entries.size(); ++i) d->entry[i] = sym(lib, entries[i].exported);
  auto bind = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym(lib, name)); };
  bind(d->event_create, "cuEventCreate");
  bind(d->event_record, "cuEventRecord");
  bind(d->event_query, "cuEventQuery");
  bind(d->event_destroy, "cuEventDestroy_v2");
  bind(d->stream_wait_event, "cuStreamWaitEvent");
  bind(d->stream_is_capturing, "cuStreamIsCapturing");
  bind(d->stream_get_priority, "cuStreamGetPriority");
  bind(d->ctx_get_stream_priority_range, "cuCtxGetStreamPriorityRange");
  bind(d->ctx_get_current, "cuCtxGetCurrent");
  bind(d->ctx_set_current, "cuCtxSetCurrent");
  bind(d->ctx_get_device, "cuCtxGetDevice");
  bind(d->device_get, "cuDeviceGet");
  bind(d->device_get_pci_bus_id, "cuDeviceGetPCIBusId");
  bind(d->device_total_mem, "cuDeviceTotalMem_v2");
  bind(d->thread_exchange_capture_mode, "cuThreadExchangeStreamCaptureMode");
  bind(d->func_get_name, "cuFuncGetName");
  bind(d->kernel_get_name, "cuKernelGetName");
  bind(d->get_error_name, "cuGetErrorName");
  bind(d->memset_d32_async, "cuMemsetD32Async");
  bind(d->memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  bind(d->library_load_data, "cuLibraryLoadData");
  bind(d->library_get_kernel, "cuLibraryGetKernel");
  bind(d->library_unload, "cuLibraryUnload");
  bind(d->device_get_dev_resource, "cuDeviceGetDevResource");
  bind(d->dev_sm_resource_split_by_count, "cuDevSmResourceSplitByCount");
  bind(d->dev_resource_generate_desc, "cuDevResourceGenerateDesc");
  bind(d->green_ctx_create, "cuGreenCtxCreate");
  bind(d->green_ctx_destroy, "cuGreenCtxDestroy");
  bind(d->green_ctx_stream_create, "cuGreenCtxStreamCreate");
  bind(d->device_get_attribute, "cuDeviceGetAttribute");
  bind(d->func_get_attribute, "cuFuncGetAttribute");
  bind(d->func_set_attribute, "cuFuncSetAttribute");
  bind(d->kernel_get_function, "cuKernelGetFunction");
  bind(d->kernel_set_attribute, "cuKernelSetAttribute");
  // The launch path needs all of these; a driver older than 12.3 lacks cuFuncGetName.
  d->complete = d->event_create && d->event_record && d->event_query && d->event_destroy && d->stream_wait_event &&
                        d->stream_is_capturing && d->stream_get_priority && d->ctx_get_stream_priority_range &&
                        d->ctx_get_current && d->ctx_set_current && d->ctx_get_device && d->thread_exchange_capture_mode &&
                        d->func_get_name && d->kernel_get_name && d->get_error_name && d->memset_d32_async && d->memcpy_dtoh_async &&
                        d->library_load_data && d->library_get_kernel && d->library_unload &&
                        d->entry[static_cast<size_t>(Entry::GetProcAddress_v2)] != nullptr;
  return d;
}

}  // namespace

DlsymFn real_dlsym() {
  static const DlsymFn fn = [] {
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return fn;
}

const RealDriver* real_driver() {
  // No lock around the load: dlopen takes the loader's lock, and a library constructor holding
  // that lock may look up a cu* symbol through the dlsym hook, which comes here. Two threads may
  // both load; the first to publish wins and the other's table is left (it is never freed anyway).
  static std::atomic<const RealDriver*> table{nullptr};
  static std::atomic<bool> failed{false};
  if (const RealDriver* d = table.load(std::memory_order_acquire)) return d;
  if (failed.load(std::memory_order_acquire) || t_loading) return nullptr;
  t_loading = true;
  const RealDriver* d = load();
  t_loading = false;
  if (!d) {
    failed.store(true, std::memory_order_release);
    return nullptr;
  }
  const RealDriver* first = nullptr;
  if (!table.compare_exchange_strong(first, d, std::memory_order_acq_rel)) return first;
  return d;
}

int entry_of(const RealDriver& driver, const void* fn) {
  if (!fn) return -1;
  for (size_t i = 0; i < driver.entry.size(); ++i) {
    if (driver.entry[i] == fn) return static_cast<int>(i);
  }
  return -1;
}

Status driver_status(CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  if (const RealDriver* d = real_driver(); d && d->get_error_name) d->get_error_name(r, &name);
  return Status::device_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                              (name ? name : "CUresult " + std::to_string(static_cast<int>(r))));
}

}  // namespace concord::intercept
