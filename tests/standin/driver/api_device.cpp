// The stand-in's entry points for initialisation, devices, contexts, green contexts, error names
// and cuGetProcAddress.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api.h"

namespace standin {

std::vector<Proc>& procs() {
  static std::vector<Proc> table;
  return table;
}

CUresult fail(const char* call, CUresult r, const std::string& detail) {
  record_error(call, r, detail);
  return r;
}

Device* device_of(CUdevice d) {
  Driver& dr = driver();
  if (d < 0 || static_cast<size_t>(d) >= dr.devices.size()) return nullptr;
  return dr.devices[static_cast<size_t>(d)].get();
}

namespace {

Context* make_context(Device& d, bool primary) {
  auto* c = new Context();
  c->device = &d;
  c->primary = primary;
  for (int i = 0; i < d.sms; ++i) c->sms.set(static_cast<size_t>(i));
  adopt(c);
  c->legacy = new_stream(c, 0, 0);
  c->legacy->legacy = true;
  return c;
}

// Green-context resources carry their SMs in the driver's own padding.
SmMask sms_of(const CUdevResource& r) {
  SmMask m;
  static_assert(sizeof(r._internal_padding) * 8 >= kMaxSms);
  for (int i = 0; i < kMaxSms; ++i) {
    if (r._internal_padding[i / 8] & (1u << (i % 8))) m.set(static_cast<size_t>(i));
  }
  return m;
}
void set_sms(CUdevResource& r, const SmMask& m) {
  r.type = CU_DEV_RESOURCE_TYPE_SM;
  std::memset(r._internal_padding, 0, sizeof r._internal_padding);
  for (int i = 0; i < kMaxSms; ++i) {
    if (m.test(static_cast<size_t>(i))) r._internal_padding[i / 8] |= static_cast<unsigned char>(1u << (i % 8));
  }
  r.sm.smCount = static_cast<unsigned>(m.count());
}

const char* error_name(CUresult r) {
  switch (r) {
#define NAME(x) \
  case x:       \
    return #x;
    NAME(CUDA_SUCCESS)
    NAME(CUDA_ERROR_INVALID_VALUE)
    NAME(CUDA_ERROR_OUT_OF_MEMORY)
    NAME(CUDA_ERROR_NOT_INITIALIZED)
    NAME(CUDA_ERROR_DEINITIALIZED)
    NAME(CUDA_ERROR_INVALID_DEVICE)
    NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_INVALID_HANDLE)
    NAME(CUDA_ERROR_NOT_FOUND)
    NAME(CUDA_ERROR_NOT_READY)
    NAME(CUDA_ERROR_ILLEGAL_STATE)
    NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    NAME(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    NAME(CUDA_ERROR_NOT_SUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_MERGE)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
    NAME(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    NAME(CUDA_ERROR_CAPTURED_EVENT)
    NAME(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    NAME(CUDA_ERROR_INVALID_RESOURCE_TYPE)
    NAME(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION)
    NAME(CUDA_ERROR_INVALID_IMAGE)
    NAME(CUDA_ERROR_UNKNOWN)
#undef NAME
    default:
      return nullptr;
  }
}

}  // namespace

Context* primary_of(Device& d) {
  if (!d.primary) d.primary = make_context(d, true);
  return d.primary;
}

}  // namespace standin

using namespace standin;

// ---- initialisation, version, errors -------------------------------------------------------

STANDIN_API CUresult cuInit(unsigned flags) {
  if (flags != 0) return fail("cuInit", CUDA_ERROR_INVALID_VALUE, "flags must be 0");
  Lock lock(driver().mu);
  Driver& d = driver();
  if (!d.initialized) {
    d.initialized = true;
    for (auto& dev : d.devices) start_device(*dev);
  }
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuInit, "cuInit", 2000, false);

STANDIN_API CUresult cuDriverGetVersion(int* version) {
  if (!version) return fail("cuDriverGetVersion", CUDA_ERROR_INVALID_VALUE);
  // CONCORD_STANDIN_DRIVER_VERSION: the CUDA version the stand-in says it supports (a driver older
  // than the library's build, for `concord doctor`'s tests).
  const char* v = std::getenv("CONCORD_STANDIN_DRIVER_VERSION");
  *version = v != nullptr && *v != '\0' ? std::atoi(v) : 13000;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDriverGetVersion, "cuDriverGetVersion", 2020, false);

STANDIN_API CUresult cuGetErrorName(CUresult error, const char** str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  *str = error_name(error);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
STANDIN_PROC(cuGetErrorName, "cuGetErrorName", 6000, false);

STANDIN_API CUresult cuGetErrorString(CUresult error, const char** str) { return cuGetErrorName(error, str); }
STANDIN_PROC(cuGetErrorString, "cuGetErrorString", 6000, false);

// ---- devices -------------------------------------------------------------------------------

STANDIN_API CUresult cuDeviceGetCount(int* count) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGetCount");
  if (!count) return fail("cuDeviceGetCount", CUDA_ERROR_INVALID_VALUE);
  *count = static_cast<int>(driver().devices.size());
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGetCount, "cuDeviceGetCount", 2000, false);

STANDIN_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGet");
  if (!device) return fail("cuDeviceGet", CUDA_ERROR_INVALID_VALUE);
  if (!device_of(ordinal)) return fail("cuDeviceGet", CUDA_ERROR_INVALID_DEVICE, "ordinal " + std::to_string(ordinal));
  *device = ordinal;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGet, "cuDeviceGet", 2000, false);

STANDIN_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGetName");
  Device* d = device_of(dev);
  if (!d) return fail("cuDeviceGetName", CUDA_ERROR_INVALID_DEVICE);
  if (!name || len <= 0) return fail("cuDeviceGetName", CUDA_ERROR_INVALID_VALUE);
  std::snprintf(name, static_cast<size_t>(len), "%s", d->name.c_str());
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGetName, "cuDeviceGetName", 2000, false);

STANDIN_API CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGetPCIBusId");
  Device* d = device_of(dev);
  if (!d) return fail("cuDeviceGetPCIBusId", CUDA_ERROR_INVALID_DEVICE);
  if (!bus || len < 13) return fail("cuDeviceGetPCIBusId", CUDA_ERROR_INVALID_VALUE);
  std::snprintf(bus, static_cast<size_t>(len), "%s", d->bus_id.c_str());
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 4010, false);

STANDIN_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceTotalMem_v2");
  Device* d = device_of(dev);
  if (!d) return fail("cuDeviceTotalMem_v2", CUDA_ERROR_INVALID_DEVICE);
  if (!bytes) return fail("cuDeviceTotalMem_v2", CUDA_ERROR_INVALID_VALUE);
  *bytes = d->memory;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, false);

STANDIN_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGetAttribute");
  Device* d = device_of(dev);
  if (!d) return fail("cuDeviceGetAttribute", CUDA_ERROR_INVALID_DEVICE);
  if (!value) return fail("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE);
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = d->sms; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = d->smem_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = d->smem_per_block_optin; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = d->smem_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *value = d->reserved_smem_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = d->threads_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = d->blocks_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = d->regs_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 50 * 1024 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = 0x19 + 0x10 * d->ordinal; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; break;
    default:
      return fail("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE, "attribute " + std::to_string(static_cast<int>(attr)) +
                                                                         " is not modelled");
  }
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000, false);

// ---- contexts ------------------------------------------------------------------------------

STANDIN_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDevicePrimaryCtxRetain");
  Device* d = device_of(dev);
  if (!d) return fail("cuDevicePrimaryCtxRetain", CUDA_ERROR_INVALID_DEVICE);
  if (!ctx) return fail("cuDevicePrimaryCtxRetain", CUDA_ERROR_INVALID_VALUE);
  *ctx = reinterpret_cast<CUcontext>(primary_of(*d));
  ++d->primary_refs;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, false);

STANDIN_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDevicePrimaryCtxRelease_v2");
  Device* d = device_of(dev);
  if (!d) return fail("cuDevicePrimaryCtxRelease_v2", CUDA_ERROR_INVALID_DEVICE);
  if (d->primary_refs == 0) return fail("cuDevicePrimaryCtxRelease_v2", CUDA_ERROR_INVALID_CONTEXT, "not retained");
  --d->primary_refs;  // the primary context lives on (its state is the process's)
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, false);

STANDIN_API CUresult cuCtxCreate_v4(CUcontext* ctx, CUctxCreateParams* params, unsigned flags, CUdevice dev) {
  (void)flags;
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxCreate_v4");
  Device* d = device_of(dev);
  if (!d) return fail("cuCtxCreate_v4", CUDA_ERROR_INVALID_DEVICE);
  if (!ctx) return fail("cuCtxCreate_v4", CUDA_ERROR_INVALID_VALUE);
  if (params && (params->numExecAffinityParams != 0 || params->cigParams)) {
    return fail("cuCtxCreate_v4", CUDA_ERROR_NOT_SUPPORTED, "execution affinity and CIG are not modelled");
  }
  Context* c = make_context(*d, false);
  // A created context is pushed onto the calling thread's stack.
  context_stack().push_back(c);
  *ctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxCreate_v4, "cuCtxCreate", 12050, false);

STANDIN_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxDestroy_v2");
  Context* c = as<Context>(ctx, Kind::context);
  if (!c || c->primary || c->green) return fail("cuCtxDestroy_v2", CUDA_ERROR_INVALID_CONTEXT);
  wait_context(lock, c);
  c->destroyed = true;
  retire(c);
  std::erase(context_stack(), c);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxDestroy_v2, "cuCtxDestroy", 4000, false);

STANDIN_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxGetCurrent");
  if (!ctx) return fail("cuCtxGetCurrent", CUDA_ERROR_INVALID_VALUE);
  *ctx = reinterpret_cast<CUcontext>(current());
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxGetCurrent, "cuCtxGetCurrent", 4000, false);

STANDIN_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxSetCurrent");
  Context* c = nullptr;
  if (ctx) {
    c = as<Context>(ctx, Kind::context);
    if (!c) return fail("cuCtxSetCurrent", CUDA_ERROR_INVALID_CONTEXT);
  }
  set_current(c);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxSetCurrent, "cuCtxSetCurrent", 4000, false);

STANDIN_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxPushCurrent_v2");
  Context* c = as<Context>(ctx, Kind::context);
  if (!c) return fail("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT);
  context_stack().push_back(c);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxPushCurrent_v2, "cuCtxPushCurrent", 4000, false);

STANDIN_API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxPopCurrent_v2");
  if (context_stack().empty()) return fail("cuCtxPopCurrent_v2", CUDA_ERROR_INVALID_CONTEXT, "the stack is empty");
  if (ctx) *ctx = reinterpret_cast<CUcontext>(context_stack().back());
  context_stack().pop_back();
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxPopCurrent_v2, "cuCtxPopCurrent", 4000, false);

STANDIN_API CUresult cuCtxGetDevice(CUdevice* dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxGetDevice");
  if (!dev) return fail("cuCtxGetDevice", CUDA_ERROR_INVALID_VALUE);
  Context* c = current();
  if (!c) return fail("cuCtxGetDevice", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  *dev = c->device->ordinal;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxGetDevice, "cuCtxGetDevice", 2000, false);

STANDIN_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxGetId");
  Context* c = ctx ? as<Context>(ctx, Kind::context) : current();
  if (!c) return fail("cuCtxGetId", CUDA_ERROR_INVALID_CONTEXT);
  if (!id) return fail("cuCtxGetId", CUDA_ERROR_INVALID_VALUE);
  *id = c->id;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxGetId, "cuCtxGetId", 12000, false);

// The H100's range: 0 (least) to -5 (greatest).
STANDIN_API CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxGetStreamPriorityRange");
  if (!current()) return fail("cuCtxGetStreamPriorityRange", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 5050, false);

STANDIN_API CUresult cuCtxSynchronize() {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxSynchronize");
  Context* c = current();
  if (!c) return fail("cuCtxSynchronize", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  if (unsafe_forbidden()) return fail("cuCtxSynchronize", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  wait_context(lock, c);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxSynchronize, "cuCtxSynchronize", 2000, false);

STANDIN_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxSynchronize_v2");
  Context* c = ctx ? as<Context>(ctx, Kind::context) : current();
  if (!c) return fail("cuCtxSynchronize_v2", CUDA_ERROR_INVALID_CONTEXT);
  if (unsafe_forbidden()) return fail("cuCtxSynchronize_v2", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "during a capture");
  wait_context(lock, c);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, false);

// ---- green contexts ------------------------------------------------------------------------

STANDIN_API CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource* resource, CUdevResourceType type) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDeviceGetDevResource");
  Device* d = device_of(dev);
  if (!d) return fail("cuDeviceGetDevResource", CUDA_ERROR_INVALID_DEVICE);
  if (!resource) return fail("cuDeviceGetDevResource", CUDA_ERROR_INVALID_VALUE);
  if (type != CU_DEV_RESOURCE_TYPE_SM) return fail("cuDeviceGetDevResource", CUDA_ERROR_INVALID_RESOURCE_TYPE);
  std::memset(resource, 0, sizeof *resource);
  SmMask all;
  for (int i = 0; i < d->sms; ++i) all.set(static_cast<size_t>(i));
  set_sms(*resource, all);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDeviceGetDevResource, "cuDeviceGetDevResource", 12040, false);

// Groups of at least `min_count` SMs: a multiple of 8 (Hopper's co-scheduled unit), or of 2 (a TPC)
// with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, taken in SM order; the rest left over.
STANDIN_API CUresult cuDevSmResourceSplitByCount(CUdevResource* result, unsigned* groups, const CUdevResource* input,
                                                 CUdevResource* remaining, unsigned flags, unsigned min_count) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDevSmResourceSplitByCount");
  if (!groups || !input || input->type != CU_DEV_RESOURCE_TYPE_SM || min_count == 0) {
    return fail("cuDevSmResourceSplitByCount", CUDA_ERROR_INVALID_VALUE);
  }
  const unsigned unit = (flags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) ? 2 : 8;
  const unsigned size = (min_count + unit - 1) / unit * unit;
  const SmMask in = sms_of(*input);
  std::vector<int> ids;
  for (int i = 0; i < kMaxSms; ++i) {
    if (in.test(static_cast<size_t>(i))) ids.push_back(i);
  }
  const unsigned possible = static_cast<unsigned>(ids.size()) / size;
  const unsigned n = result ? std::min(*groups, possible) : possible;
  if (result) {
    for (unsigned g = 0; g < n; ++g) {
      SmMask m;
      for (unsigned k = 0; k < size; ++k) m.set(static_cast<size_t>(ids[g * size + k]));
      std::memset(&result[g], 0, sizeof result[g]);
      set_sms(result[g], m);
    }
  }
  if (remaining) {
    SmMask rest;
    for (size_t k = static_cast<size_t>(n) * size; k < ids.size(); ++k) rest.set(static_cast<size_t>(ids[k]));
    std::memset(remaining, 0, sizeof *remaining);
    set_sms(*remaining, rest);
  }
  *groups = n;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDevSmResourceSplitByCount, "cuDevSmResourceSplitByCount", 12040, false);

STANDIN_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* desc, CUdevResource* resources, unsigned count) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuDevResourceGenerateDesc");
  if (!desc || !resources || count == 0) return fail("cuDevResourceGenerateDesc", CUDA_ERROR_INVALID_VALUE);
  auto* r = new ResourceDesc();
  for (unsigned i = 0; i < count; ++i) {
    if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) return fail("cuDevResourceGenerateDesc", CUDA_ERROR_INVALID_RESOURCE_TYPE);
    r->sms |= sms_of(resources[i]);
  }
  adopt(r);
  *desc = reinterpret_cast<CUdevResourceDesc>(r);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc", 12040, false);

STANDIN_API CUresult cuGreenCtxCreate(CUgreenCtx* out, CUdevResourceDesc desc, CUdevice dev, unsigned flags) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGreenCtxCreate");
  Device* d = device_of(dev);
  if (!d) return fail("cuGreenCtxCreate", CUDA_ERROR_INVALID_DEVICE);
  ResourceDesc* r = as<ResourceDesc>(desc, Kind::desc);
  if (!out || !r || r->sms.none()) return fail("cuGreenCtxCreate", CUDA_ERROR_INVALID_VALUE);
  if (flags != CU_GREEN_CTX_DEFAULT_STREAM) {
    return fail("cuGreenCtxCreate", CUDA_ERROR_INVALID_VALUE, "flags must be CU_GREEN_CTX_DEFAULT_STREAM");
  }
  primary_of(*d);
  ++d->primary_refs;
  auto* g = new GreenCtx();
  g->ctx.device = d;
  g->ctx.green = true;
  g->ctx.sms = r->sms;
  adopt(g);
  adopt(&g->ctx);
  g->ctx.legacy = new_stream(&g->ctx, 0, 0);
  g->ctx.legacy->legacy = true;
  record_line("{\"record\":\"green_context\",\"pid\":" + std::to_string(::getpid()) + ",\"context\":" + std::to_string(g->ctx.id) +
              ",\"sms\":" + std::to_string(g->ctx.sms.count()) + "}");
  *out = reinterpret_cast<CUgreenCtx>(g);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGreenCtxCreate, "cuGreenCtxCreate", 12040, false);

STANDIN_API CUresult cuGreenCtxDestroy(CUgreenCtx handle) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGreenCtxDestroy");
  GreenCtx* g = as<GreenCtx>(handle, Kind::green);
  if (!g) return fail("cuGreenCtxDestroy", CUDA_ERROR_INVALID_HANDLE);
  wait_context(lock, &g->ctx);
  for (Stream* s : std::vector<Stream*>(g->ctx.device->streams)) {
    if (s->ctx == &g->ctx) destroy_stream(s);
  }
  g->ctx.destroyed = true;
  retire(&g->ctx);
  retire(g);
  std::erase(context_stack(), &g->ctx);
  --g->ctx.device->primary_refs;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGreenCtxDestroy, "cuGreenCtxDestroy", 12040, false);

STANDIN_API CUresult cuCtxFromGreenCtx(CUcontext* ctx, CUgreenCtx handle) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuCtxFromGreenCtx");
  GreenCtx* g = as<GreenCtx>(handle, Kind::green);
  if (!g || !ctx) return fail("cuCtxFromGreenCtx", CUDA_ERROR_INVALID_HANDLE);
  *ctx = reinterpret_cast<CUcontext>(&g->ctx);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuCtxFromGreenCtx, "cuCtxFromGreenCtx", 12040, false);

STANDIN_API CUresult cuGreenCtxStreamCreate(CUstream* stream, CUgreenCtx handle, unsigned flags, int priority) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGreenCtxStreamCreate");
  GreenCtx* g = as<GreenCtx>(handle, Kind::green);
  if (!g || !stream) return fail("cuGreenCtxStreamCreate", CUDA_ERROR_INVALID_HANDLE);
  if (flags != CU_STREAM_NON_BLOCKING) {
    return fail("cuGreenCtxStreamCreate", CUDA_ERROR_INVALID_VALUE, "flags must be CU_STREAM_NON_BLOCKING");
  }
  Stream* s = new_stream(&g->ctx, flags, std::clamp(priority, -5, 0));
  record_line("{\"record\":\"stream\",\"pid\":" + std::to_string(::getpid()) + ",\"stream\":" + std::to_string(s->id) +
              ",\"context\":" + std::to_string(g->ctx.id) + ",\"green\":true,\"priority\":" + std::to_string(s->priority) +
              ",\"flags\":" + std::to_string(flags) + "}");
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGreenCtxStreamCreate, "cuGreenCtxStreamCreate", 12050, false);

// ---- cuGetProcAddress ----------------------------------------------------------------------

namespace {

// The driver's rule: among the variants of `symbol` no newer than `version`, the per-thread one
// when the flags ask for it and one exists, else the legacy one; the newest of those.
CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Proc* best[2] = {nullptr, nullptr};
  bool known = false;
  for (const Proc& p : procs()) {
    if (std::strcmp(p.base, symbol) != 0) continue;
    known = true;
    if (p.version > version) continue;
    const Proc*& slot = best[p.per_thread ? 1 : 0];
    if (!slot || slot->version < p.version) slot = &p;
  }
  const Proc* chosen = per_thread && best[1] ? best[1] : best[0];
  *pfn = chosen ? chosen->fn : nullptr;
  if (status) {
    *status = chosen ? CU_GET_PROC_ADDRESS_SUCCESS
                     : (known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  return chosen ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

STANDIN_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return lookup(symbol, pfn, version, flags, nullptr);
}
STANDIN_PROC(cuGetProcAddress, "cuGetProcAddress", 11030, false);

STANDIN_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  return lookup(symbol, pfn, version, flags, status);
}
STANDIN_PROC(cuGetProcAddress_v2, "cuGetProcAddress", 12000, false);
