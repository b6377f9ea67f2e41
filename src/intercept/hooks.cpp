// The library's exported symbols: dlsym, cuGetProcAddress (both ABIs), every intercepted driver
// entry point under its exported name, and the client API of include/concord/intercept.h.
// Everything else in the library is hidden (the export list the build writes from entry_points.def).
//
// How a process reaches a wrapper:
//   - a call it links directly against libcuda (cuLaunchKernel, ...) binds to the export here,
//     the preloaded library coming first;
//   - dlsym(handle, name) answers with the wrapper whenever the real lookup lands on one of
//     libcuda's intercepted functions (whatever the handle: libcuda's, RTLD_DEFAULT, RTLD_NEXT);
//   - cuGetProcAddress / _v2 (how the CUDA runtime and libraries find the driver since 11.3) asks
//     the real one, then hands back the wrapper of the function it returned: the requested version
//     and stream flavour are the driver's own choice, matched by address (by the driver's naming
//     rule, symbols.h, should the address be one dlsym does not give), and a lookup of
//     cuGetProcAddress itself gets this file's wrapper of it.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "concord/intercept.h"
#include "intercept/interceptor.h"
#include "intercept/real_driver.h"
#include "intercept/symbols.h"

// cuda.h maps these names onto their newest versions; the library defines each version under its
// own exported name.
#undef cuGetProcAddress
#undef cuStreamDestroy
#undef cuStreamBeginCapture
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemAllocPitch
#undef cuMemGetInfo

#define CONCORD_EXPORT extern "C" __attribute__((visibility("default")))

namespace concord::intercept {
namespace {

static_assert(CU_GET_PROC_ADDRESS_LEGACY_STREAM == kProcAddressLegacyStream);
static_assert(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == kProcAddressPerThreadStream);

// The real function of entry `e`, or null (no driver, or this driver lacks it).
template <typename Fn>
Fn real(Entry e) {
  const RealDriver* d = real_driver();
  return d ? d->get<Fn>(e) : nullptr;
}

// The older versions cudaTypedefs.h declares only for the driver's own build.
using StreamDestroyV1 = CUresult (*)(CUstream);
using BeginCaptureV1 = CUresult (*)(CUstream);

// What a hook answers when the driver (or this entry point of it) is missing.
constexpr CUresult kNoDriver = CUDA_ERROR_NOT_INITIALIZED;

// The real cuLaunchKernelEx of the caller's stream flavour (null on a driver without it): how a
// kernel is given a priority its stream does not have.
PFN_cuLaunchKernelEx_v11060 launch_ex(bool per_thread) {
  return real<PFN_cuLaunchKernelEx_v11060>(per_thread ? Entry::LaunchKernelEx_ptsz : Entry::LaunchKernelEx);
}

CUlaunchConfig launch_config(ipc::Dim3 grid, ipc::Dim3 block, unsigned shared, CUstream stream, CUlaunchAttribute* attrs,
                             unsigned n) {
  CUlaunchConfig c{};
  c.gridDimX = grid.x;
  c.gridDimY = grid.y;
  c.gridDimZ = grid.z;
  c.blockDimX = block.x;
  c.blockDimY = block.y;
  c.blockDimZ = block.z;
  c.sharedMemBytes = shared;
  c.hStream = stream;
  c.attrs = attrs;
  c.numAttrs = n;
  return c;
}

// A kernel launch's call, but for its arguments and how to invoke it.
LaunchCall shaped_call(CUstream stream, bool per_thread, CUfunction f, ipc::Dim3 grid, ipc::Dim3 block, unsigned shared) {
  LaunchCall call;
  call.stream = stream;
  call.per_thread = per_thread;
  call.function = f;
  call.grid = grid;
  call.block = block;
  call.shared_mem = shared;
  return call;
}

template <Entry E>
CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream stream, void** params, void** extra, bool per_thread) {
  struct Args {
    PFN_cuLaunchKernel_v4000 fn;
    PFN_cuLaunchKernelEx_v11060 ex;
    CUfunction f;
    unsigned gx, gy, gz, bx, by, bz, shared;
    void** params;
    void** extra;
  };
  const Args a{real<PFN_cuLaunchKernel_v4000>(E), launch_ex(per_thread), f, gx, gy, gz, bx, by, bz, shared, params, extra};
  if (!a.fn) return kNoDriver;
  LaunchCall call = shaped_call(stream, per_thread, f, {gx, gy, gz}, {bx, by, bz}, shared);
  call.args = &a;
  call.invoke = [](const void* p, CUstream target) {
    const Args& x = *static_cast<const Args*>(p);
    return x.fn(x.f, x.gx, x.gy, x.gz, x.bx, x.by, x.bz, x.shared, target, x.params, x.extra);
  };
  if (a.ex) {
    call.invoke_priority = [](const void* p, CUstream target, int priority) {
      const Args& x = *static_cast<const Args*>(p);
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      attr.value.priority = priority;
      CUlaunchConfig c = launch_config({x.gx, x.gy, x.gz}, {x.bx, x.by, x.bz}, x.shared, target, &attr, 1);
      return x.ex(&c, x.f, x.params, x.extra);
    };
    call.invoke_shared = [](const void* p, CUstream target, int priority, uint32_t shared_mem) {
      const Args& x = *static_cast<const Args*>(p);
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      attr.value.priority = priority;
      CUlaunchConfig c = launch_config({x.gx, x.gy, x.gz}, {x.bx, x.by, x.bz}, shared_mem, target, &attr, priority != kNoPriority ? 1 : 0);
      return x.ex(&c, x.f, x.params, x.extra);
    };
  }
  return intercept_launch(call);
}

template <Entry E>
CUresult launch_cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, CUstream stream, void** params, bool per_thread) {
  struct Args {
    PFN_cuLaunchCooperativeKernel_v9000 fn;
    PFN_cuLaunchKernelEx_v11060 ex;
    CUfunction f;
    unsigned gx, gy, gz, bx, by, bz, shared;
    void** params;
  };
  const Args a{real<PFN_cuLaunchCooperativeKernel_v9000>(E), launch_ex(per_thread), f, gx, gy, gz, bx, by, bz, shared, params};
  if (!a.fn) return kNoDriver;
  LaunchCall call = shaped_call(stream, per_thread, f, {gx, gy, gz}, {bx, by, bz}, shared);
  call.args = &a;
  call.invoke = [](const void* p, CUstream target) {
    const Args& x = *static_cast<const Args*>(p);
    return x.fn(x.f, x.gx, x.gy, x.gz, x.bx, x.by, x.bz, x.shared, target, x.params);
  };
  if (a.ex) {
    call.invoke_priority = [](const void* p, CUstream target, int priority) {
      const Args& x = *static_cast<const Args*>(p);
      CUlaunchAttribute attrs[2]{};
      attrs[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[0].value.cooperative = 1;
      attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      attrs[1].value.priority = priority;
      CUlaunchConfig c = launch_config({x.gx, x.gy, x.gz}, {x.bx, x.by, x.bz}, x.shared, target, attrs, 2);
      return x.ex(&c, x.f, x.params, nullptr);
    };
  }
  return intercept_launch(call);
}

template <Entry E>
CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra, bool per_thread) {
  struct Args {
    PFN_cuLaunchKernelEx_v11060 fn;
    const CUlaunchConfig* config;
    CUfunction f;
    void** params;
    void** extra;
  };
  const Args a{real<PFN_cuLaunchKernelEx_v11060>(E), config, f, params, extra};
  if (!a.fn) return kNoDriver;
  if (!config) return a.fn(config, f, params, extra);  // the driver's own error for a null config
  LaunchCall call;
  call.stream = config->hStream;
  call.per_thread = per_thread;
  call.function = f;
  call.grid = {config->gridDimX, config->gridDimY, config->gridDimZ};
  call.block = {config->blockDimX, config->blockDimY, config->blockDimZ};
  call.shared_mem = config->sharedMemBytes;
  call.args = &a;
  call.invoke = [](const void* p, CUstream target) {
    const Args& x = *static_cast<const Args*>(p);
    if (target == x.config->hStream) return x.fn(x.config, x.f, x.params, x.extra);
    CUlaunchConfig moved = *x.config;
    moved.hStream = target;
    return x.fn(&moved, x.f, x.params, x.extra);
  };
  call.invoke_priority = [](const void* p, CUstream target, int priority) {
    const Args& x = *static_cast<const Args*>(p);
    // The caller's attributes, its own priority (if any) replaced.
    std::vector<CUlaunchAttribute> attrs;
    for (unsigned i = 0; x.config->attrs != nullptr && i < x.config->numAttrs; ++i) {
      if (x.config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PRIORITY) attrs.push_back(x.config->attrs[i]);
    }
    CUlaunchAttribute prio{};
    prio.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    prio.value.priority = priority;
    attrs.push_back(prio);
    CUlaunchConfig moved = *x.config;
    moved.hStream = target;
    moved.attrs = attrs.data();
    moved.numAttrs = static_cast<unsigned>(attrs.size());
    return x.fn(&moved, x.f, x.params, x.extra);
  };
  // Padding only a launch whose attributes are priorities at most (a cluster, cooperative or
  // memory-sync attribute may depend on the shared memory it asked for).
  bool only_priority = true;
  if (config->numAttrs > 0 && config->attrs == nullptr) only_priority = false;  // the driver's error, not ours
  for (unsigned i = 0; only_priority && i < config->numAttrs; ++i) only_priority = config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PRIORITY;
  if (only_priority) {
    call.invoke_shared = [](const void* p, CUstream target, int priority, uint32_t shared_mem) {
      const Args& x = *static_cast<const Args*>(p);
      CUlaunchAttribute prio{};
      prio.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      prio.value.priority = priority;
      CUlaunchConfig moved = *x.config;
      moved.hStream = target;
      moved.sharedMemBytes = shared_mem;
      if (priority != kNoPriority) {
        moved.attrs = &prio;
        moved.numAttrs = 1;
      }
      return x.fn(&moved, x.f, x.params, x.extra);
    };
  }
  return intercept_launch(call);
}

template <Entry E>
CUresult graph_launch(CUgraphExec graph, CUstream stream, bool per_thread) {
  struct Args {
    PFN_cuGraphLaunch_v10000 fn;
    CUgraphExec graph;
  };
  const Args a{real<PFN_cuGraphLaunch_v10000>(E), graph};
  if (!a.fn) return kNoDriver;
  LaunchCall call;
  call.stream = stream;
  call.per_thread = per_thread;
  call.function = graph;
  call.graph = true;
  call.args = &a;
  call.invoke = [](const void* p, CUstream target) {
    const Args& x = *static_cast<const Args*>(p);
    return x.fn(x.graph, target);
  };
  return intercept_launch(call);
}

// The wrappers in entry_points() order (set below, once every wrapper is declared).
extern const std::array<void*, static_cast<size_t>(Entry::count)> kWrappers;

// The wrapper for the real function `fn` found by a lookup of `symbol`, or `fn` itself.
void* wrap(const RealDriver& driver, const char* symbol, void* fn, int cuda_version, cuuint64_t flags) {
  int e = entry_of(driver, fn);
  if (e < 0) e = resolve_proc(symbol, cuda_version, flags);
  return e >= 0 ? kWrappers[static_cast<size_t>(e)] : fn;
}

}  // namespace
}  // namespace concord::intercept

using concord::intercept::Entry;
using concord::intercept::real;

// ---- launches -------------------------------------------------------------------------------

CONCORD_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                       unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return concord::intercept::launch_kernel<Entry::LaunchKernel>(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra, false);
}
CONCORD_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                            unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return concord::intercept::launch_kernel<Entry::LaunchKernel_ptsz>(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra,
                                                                     true);
}
CONCORD_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return concord::intercept::launch_kernel_ex<Entry::LaunchKernelEx>(config, f, params, extra, false);
}
CONCORD_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return concord::intercept::launch_kernel_ex<Entry::LaunchKernelEx_ptsz>(config, f, params, extra, true);
}
CONCORD_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                  unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params) {
  return concord::intercept::launch_cooperative<Entry::LaunchCooperativeKernel>(f, gx, gy, gz, bx, by, bz, shared, stream,
                                                                                params, false);
}
CONCORD_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                       unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                                       void** params) {
  return concord::intercept::launch_cooperative<Entry::LaunchCooperativeKernel_ptsz>(f, gx, gy, gz, bx, by, bz, shared,
                                                                                     stream, params, true);
}
CONCORD_EXPORT CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) {
  return concord::intercept::graph_launch<Entry::GraphLaunch>(graph, stream, false);
}
CONCORD_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) {
  return concord::intercept::graph_launch<Entry::GraphLaunch_ptsz>(graph, stream, true);
}

// ---- streams ---------------------------------------------------------------------------------

// An LC tenant's streams are made at its lease's priority, so its launches need no other stream.
CONCORD_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  auto fn = real<PFN_cuStreamCreate_v2000>(Entry::StreamCreate);
  auto with_priority = real<PFN_cuStreamCreateWithPriority_v5050>(Entry::StreamCreateWithPriority);
  if (!fn) return concord::intercept::kNoDriver;
  const std::optional<int> priority = with_priority ? concord::intercept::note_new_stream_priority(std::nullopt) : std::nullopt;
  const CUresult r = priority ? with_priority(stream, flags, *priority) : fn(stream, flags);
  if (r == CUDA_SUCCESS && stream) concord::intercept::note_stream_created(*stream);
  return r;
}
CONCORD_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned flags, int priority) {
  auto fn = real<PFN_cuStreamCreateWithPriority_v5050>(Entry::StreamCreateWithPriority);
  if (!fn) return concord::intercept::kNoDriver;
  const CUresult r = fn(stream, flags, concord::intercept::note_new_stream_priority(priority).value_or(priority));
  if (r == CUDA_SUCCESS && stream) concord::intercept::note_stream_created(*stream);
  return r;
}
CONCORD_EXPORT CUresult cuStreamDestroy(CUstream stream) {
  auto fn = real<concord::intercept::StreamDestroyV1>(Entry::StreamDestroy);
  if (!fn) return concord::intercept::kNoDriver;
  concord::intercept::note_stream_destroyed(stream);
  return fn(stream);
}
CONCORD_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  auto fn = real<PFN_cuStreamDestroy_v4000>(Entry::StreamDestroy_v2);
  if (!fn) return concord::intercept::kNoDriver;
  concord::intercept::note_stream_destroyed(stream);
  return fn(stream);
}

// ---- synchronisation -------------------------------------------------------------------------

// A synchronisation that returns says every launch it waited for has ended: the cheapest
// completion there is.
CONCORD_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  auto fn = real<PFN_cuStreamSynchronize_v2000>(Entry::StreamSynchronize);
  if (!fn) return concord::intercept::kNoDriver;
  const concord::intercept::SyncMark mark = concord::intercept::note_sync_begin(stream, false, false);
  const CUresult r = fn(stream);
  concord::intercept::note_sync_end(mark, r);
  return r;
}
CONCORD_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  auto fn = real<PFN_cuStreamSynchronize_v7000_ptsz>(Entry::StreamSynchronize_ptsz);
  if (!fn) return concord::intercept::kNoDriver;
  const concord::intercept::SyncMark mark = concord::intercept::note_sync_begin(stream, true, false);
  const CUresult r = fn(stream);
  concord::intercept::note_sync_end(mark, r);
  return r;
}
CONCORD_EXPORT CUresult cuCtxSynchronize() {
  auto fn = real<PFN_cuCtxSynchronize_v2000>(Entry::CtxSynchronize);
  if (!fn) return concord::intercept::kNoDriver;
  const concord::intercept::SyncMark mark = concord::intercept::note_sync_begin(nullptr, false, true);
  const CUresult r = fn();
  concord::intercept::note_sync_end(mark, r);
  return r;
}
CONCORD_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  auto fn = real<PFN_cuCtxSynchronize_v13000>(Entry::CtxSynchronize_v2);
  if (!fn) return concord::intercept::kNoDriver;
  const concord::intercept::SyncMark mark = concord::intercept::note_sync_begin(nullptr, false, true);
  const CUresult r = fn(ctx);
  concord::intercept::note_sync_end(mark, r);
  return r;
}

// ---- stream capture --------------------------------------------------------------------------

namespace {
CUresult captured(CUresult r) {
  if (r == CUDA_SUCCESS) concord::intercept::note_capture_begun();
  return r;
}
// A capture is over whatever EndCapture answers (an invalidated capture ends too), except when the
// stream was not capturing or the call came from a thread that may not end it; the count never
// drops below zero.
CUresult capture_ended(CUresult r) {
  if (r != CUDA_ERROR_ILLEGAL_STATE && r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) concord::intercept::note_capture_ended();
  return r;
}
}  // namespace

CONCORD_EXPORT CUresult cuStreamBeginCapture(CUstream stream) {
  auto fn = real<concord::intercept::BeginCaptureV1>(Entry::StreamBeginCapture);
  return fn ? captured(fn(stream)) : concord::intercept::kNoDriver;
}
CONCORD_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  auto fn = real<concord::intercept::BeginCaptureV1>(Entry::StreamBeginCapture_ptsz);
  return fn ? captured(fn(stream)) : concord::intercept::kNoDriver;
}
CONCORD_EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  auto fn = real<PFN_cuStreamBeginCapture_v10010>(Entry::StreamBeginCapture_v2);
  return fn ? captured(fn(stream, mode)) : concord::intercept::kNoDriver;
}
CONCORD_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  auto fn = real<PFN_cuStreamBeginCapture_v10010_ptsz>(Entry::StreamBeginCapture_v2_ptsz);
  return fn ? captured(fn(stream, mode)) : concord::intercept::kNoDriver;
}
CONCORD_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                                    const CUgraphEdgeData* edges, size_t count, CUstreamCaptureMode mode) {
  auto fn = real<PFN_cuStreamBeginCaptureToGraph_v12030>(Entry::StreamBeginCaptureToGraph);
  return fn ? captured(fn(stream, graph, deps, edges, count, mode)) : concord::intercept::kNoDriver;
}
CONCORD_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                                         const CUgraphEdgeData* edges, size_t count,
                                                         CUstreamCaptureMode mode) {
  auto fn = real<PFN_cuStreamBeginCaptureToGraph_v12030_ptsz>(Entry::StreamBeginCaptureToGraph_ptsz);
  return fn ? captured(fn(stream, graph, deps, edges, count, mode)) : concord::intercept::kNoDriver;
}
CONCORD_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  auto fn = real<PFN_cuStreamEndCapture_v10000>(Entry::StreamEndCapture);
  if (!fn) return concord::intercept::kNoDriver;
  return capture_ended(fn(stream, graph));
}
CONCORD_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  auto fn = real<PFN_cuStreamEndCapture_v10000_ptsz>(Entry::StreamEndCapture_ptsz);
  if (!fn) return concord::intercept::kNoDriver;
  return capture_ended(fn(stream, graph));
}

// ---- memory (docs/intercept.md, "Memory") ----------------------------------------------------

namespace concord::intercept {
namespace {

// The book's calls are noexcept but for what grows its maps: a failure of the library's own loses
// an entry (its bytes stay counted), never the application's call.
template <typename Fn>
void quietly(Fn fn) noexcept {
  try {
    fn();
  } catch (...) {
  }
}

// A device allocation of `bytes`: reserved against the quota before the real call `real`, counted
// at `*ptr` when it succeeds, the reservation given back when not.
template <typename Real>
CUresult counted_alloc(const char* call, CUdeviceptr* ptr, uint64_t bytes, Real real) {
  MemoryBook* book = memory_book();
  if (!book) return real();
  if (!book->reserve(bytes)) {
    note_memory_refused(call, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = real();
  const bool ok = r == CUDA_SUCCESS && ptr != nullptr;
  if (ok) {
    quietly([&] { book->allocated(*ptr, bytes); });
  } else {
    book->cancel(bytes);
  }
  note_memory_changed(ok, false);
  return r;
}

// A free of `ptr` by `real`: out of the book before the call (the driver may give the address out
// again as soon as it returns), back in if it fails.
template <typename Real>
CUresult counted_free(CUdeviceptr ptr, Real real) {
  MemoryBook* book = memory_book();
  if (!book) return real();
  MemoryBook::Taken taken;
  quietly([&] { taken = book->take(ptr); });
  const CUresult r = real();
  quietly([&] { book->freed(taken, r == CUDA_SUCCESS); });
  if (taken.bytes > 0) note_memory_changed(false, r == CUDA_SUCCESS);
  return r;
}

// A VMM call that changes a handle's state, under the book's VMM mutex: `note` books it after it
// succeeded and returns the bytes it freed.
template <typename Real, typename Note>
CUresult vmm_call(Real real, Note note) {
  MemoryBook* book = memory_book();
  if (!book) return real();
  std::unique_lock<std::mutex> lock(book->vmm_mutex());
  const CUresult r = real();
  if (r != CUDA_SUCCESS) return r;
  uint64_t freed = 0;
  quietly([&] { freed = note(*book); });
  lock.unlock();
  if (freed > 0) note_memory_changed(false, true);
  return r;
}

// What cuMemGetInfo answers the tenant: its quota for the total, what is left of it (at most what
// the device has free) for the free memory.
template <typename Size, typename Real>
CUresult memory_info(Size* free_bytes, Size* total_bytes, Real real) {
  Size f = 0, t = 0;
  const CUresult r = real(free_bytes ? &f : nullptr, total_bytes ? &t : nullptr);
  if (r != CUDA_SUCCESS) return r;
  MemoryBook* book = memory_book();
  if (book && book->quota().limited()) {
    const auto [left, limit] = book->info(f, t);
    constexpr uint64_t most = std::numeric_limits<Size>::max();
    f = static_cast<Size>(std::min<uint64_t>(left, most));
    t = static_cast<Size>(std::min<uint64_t>(limit, most));
  }
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
  return r;
}

using MemGetInfoV1 = CUresult (*)(unsigned int*, unsigned int*);

}  // namespace
}  // namespace concord::intercept

using concord::intercept::counted_alloc;
using concord::intercept::counted_free;
using concord::intercept::MemoryBook;
using concord::intercept::vmm_call;

CONCORD_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  auto fn = real<PFN_cuMemAlloc_v3020>(Entry::MemAlloc_v2);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_alloc("cuMemAlloc_v2", ptr, bytes, [&] { return fn(ptr, bytes); });
}
// The pitch is the driver's choice: the rows' bytes are reserved first, and what the pitch adds
// after the call (the allocation is freed again when that does not fit).
CONCORD_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* ptr, size_t* pitch, size_t width, size_t height, unsigned element) {
  auto fn = real<PFN_cuMemAllocPitch_v3020>(Entry::MemAllocPitch_v2);
  auto free_fn = real<PFN_cuMemFree_v3020>(Entry::MemFree_v2);
  if (!fn) return concord::intercept::kNoDriver;
  uint64_t rows = 0;
  MemoryBook* book = concord::intercept::memory_book();
  if (!book || __builtin_mul_overflow(uint64_t{width}, uint64_t{height}, &rows)) return fn(ptr, pitch, width, height, element);
  if (!book->reserve(rows)) {
    concord::intercept::note_memory_refused("cuMemAllocPitch_v2", rows);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = fn(ptr, pitch, width, height, element);
  if (r != CUDA_SUCCESS || !ptr || !pitch) {
    book->cancel(rows);
    concord::intercept::note_memory_changed(false, false);
    return r;
  }
  const uint64_t bytes = uint64_t{*pitch} * height;
  if (bytes > rows && !book->reserve(bytes - rows)) {
    if (free_fn) (void)free_fn(*ptr);
    book->cancel(rows);
    concord::intercept::note_memory_refused("cuMemAllocPitch_v2", bytes);
    concord::intercept::note_memory_changed(false, false);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  concord::intercept::quietly([&] { book->allocated(*ptr, std::max(bytes, rows)); });
  concord::intercept::note_memory_changed(true, false);
  return r;
}
// Managed memory is counted whole from its allocation, wherever its pages are.
CONCORD_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* ptr, size_t bytes, unsigned flags) {
  auto fn = real<PFN_cuMemAllocManaged_v6000>(Entry::MemAllocManaged);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_alloc("cuMemAllocManaged", ptr, bytes, [&] { return fn(ptr, bytes, flags); });
}
CONCORD_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  auto fn = real<PFN_cuMemFree_v3020>(Entry::MemFree_v2);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_free(ptr, [&] { return fn(ptr); });
}
// Stream-ordered allocations count from the call to the free's call: the pool's memory reserved
// and not allocated is not counted (docs/intercept.md, "Memory").
CONCORD_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  auto fn = real<PFN_cuMemAllocAsync_v11020>(Entry::MemAllocAsync);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_alloc("cuMemAllocAsync", ptr, bytes, [&] { return fn(ptr, bytes, stream); });
}
CONCORD_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  auto fn = real<PFN_cuMemAllocAsync_v11020_ptsz>(Entry::MemAllocAsync_ptsz);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_alloc("cuMemAllocAsync_ptsz", ptr, bytes, [&] { return fn(ptr, bytes, stream); });
}
CONCORD_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  auto fn = real<PFN_cuMemAllocFromPoolAsync_v11020>(Entry::MemAllocFromPoolAsync);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_alloc("cuMemAllocFromPoolAsync", ptr, bytes, [&] { return fn(ptr, bytes, pool, stream); });
}
CONCORD_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  auto fn = real<PFN_cuMemAllocFromPoolAsync_v11020_ptsz>(Entry::MemAllocFromPoolAsync_ptsz);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_alloc("cuMemAllocFromPoolAsync_ptsz", ptr, bytes, [&] { return fn(ptr, bytes, pool, stream); });
}
CONCORD_EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  auto fn = real<PFN_cuMemFreeAsync_v11020>(Entry::MemFreeAsync);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_free(ptr, [&] { return fn(ptr, stream); });
}
CONCORD_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream stream) {
  auto fn = real<PFN_cuMemFreeAsync_v11020_ptsz>(Entry::MemFreeAsync_ptsz);
  if (!fn) return concord::intercept::kNoDriver;
  return counted_free(ptr, [&] { return fn(ptr, stream); });
}

// VMM: physical memory counts at cuMemCreate (device memory only), once however often it is
// mapped, until the driver frees it (every reference released, every mapping unmapped).
CONCORD_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                    unsigned long long flags) {
  auto fn = real<PFN_cuMemCreate_v10020>(Entry::MemCreate);
  if (!fn) return concord::intercept::kNoDriver;
  MemoryBook* book = concord::intercept::memory_book();
  if (!book || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return fn(handle, size, prop, flags);
  if (!book->reserve(size)) {
    concord::intercept::note_memory_refused("cuMemCreate", size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::unique_lock<std::mutex> lock(book->vmm_mutex());
  const CUresult r = fn(handle, size, prop, flags);
  const bool ok = r == CUDA_SUCCESS && handle != nullptr;
  if (ok) {
    concord::intercept::quietly([&] { book->created(*handle, size); });
  } else {
    book->cancel(size);
  }
  lock.unlock();
  concord::intercept::note_memory_changed(ok, false);
  return r;
}
CONCORD_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  auto fn = real<PFN_cuMemRetainAllocationHandle_v11000>(Entry::MemRetainAllocationHandle);
  if (!fn) return concord::intercept::kNoDriver;
  return vmm_call([&] { return fn(handle, addr); }, [&](MemoryBook& b) {
    if (handle) b.retained(*handle);
    return uint64_t{0};
  });
}
CONCORD_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                 unsigned long long flags) {
  auto fn = real<PFN_cuMemMap_v10020>(Entry::MemMap);
  if (!fn) return concord::intercept::kNoDriver;
  return vmm_call([&] { return fn(ptr, size, offset, handle, flags); }, [&](MemoryBook& b) {
    b.mapped(ptr, handle);
    return uint64_t{0};
  });
}
CONCORD_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  auto fn = real<PFN_cuMemUnmap_v10020>(Entry::MemUnmap);
  if (!fn) return concord::intercept::kNoDriver;
  return vmm_call([&] { return fn(ptr, size); }, [&](MemoryBook& b) { return b.unmapped(ptr, size); });
}
CONCORD_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto fn = real<PFN_cuMemRelease_v10020>(Entry::MemRelease);
  if (!fn) return concord::intercept::kNoDriver;
  return vmm_call([&] { return fn(handle); }, [&](MemoryBook& b) { return b.released(handle); });
}

// The tenant's view of the GPU's memory: its quota.
CONCORD_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  auto fn = real<PFN_cuMemGetInfo_v3020>(Entry::MemGetInfo_v2);
  if (!fn) return concord::intercept::kNoDriver;
  return concord::intercept::memory_info(free_bytes, total_bytes, fn);
}
CONCORD_EXPORT CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) {
  auto fn = real<concord::intercept::MemGetInfoV1>(Entry::MemGetInfo);
  if (!fn) return concord::intercept::kNoDriver;
  return concord::intercept::memory_info(free_bytes, total_bytes, fn);
}

// ---- lookups ---------------------------------------------------------------------------------

CONCORD_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  const concord::intercept::RealDriver* d = concord::intercept::real_driver();
  auto fn = d ? d->get<PFN_cuGetProcAddress_v11030>(Entry::GetProcAddress) : nullptr;
  if (!fn) return concord::intercept::kNoDriver;
  const CUresult r = fn(symbol, pfn, cuda_version, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = concord::intercept::wrap(*d, symbol, *pfn, cuda_version, flags);
  return r;
}
CONCORD_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* status) {
  const concord::intercept::RealDriver* d = concord::intercept::real_driver();
  auto fn = d ? d->get<PFN_cuGetProcAddress_v12000>(Entry::GetProcAddress_v2) : nullptr;
  if (!fn) return concord::intercept::kNoDriver;
  const CUresult r = fn(symbol, pfn, cuda_version, flags, status);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = concord::intercept::wrap(*d, symbol, *pfn, cuda_version, flags);
  return r;
}

CONCORD_EXPORT void* dlsym(void* handle, const char* name) {
  const concord::intercept::DlsymFn real_dlsym = concord::intercept::real_dlsym();
  if (!real_dlsym) return nullptr;
  void* p = real_dlsym(handle, name);
  if (p && concord::intercept::maybe_intercepted(name)) {
    if (const concord::intercept::RealDriver* d = concord::intercept::real_driver()) {
      const int e = concord::intercept::entry_of(*d, p);
      if (e >= 0) return concord::intercept::kWrappers[static_cast<size_t>(e)];
    }
  }
  return p;
}

// ---- client API ------------------------------------------------------------------------------

CONCORD_EXPORT int concord_request_begin(void) { return concord::intercept::note_request(true); }
CONCORD_EXPORT int concord_request_end(void) { return concord::intercept::note_request(false); }

namespace concord::intercept {
namespace {

template <typename Fn>
void* as_pointer(Fn fn) {
  return reinterpret_cast<void*>(fn);
}

// Each entry point's wrapper (this file's function of its exported name), in Entry's order.
const std::array<void*, static_cast<size_t>(Entry::count)> kWrappers = {
#define CONCORD_ENTRY_POINT(name, base, version, per_thread) as_pointer(&::cu##name),
#include "intercept/entry_points.def"
#undef CONCORD_ENTRY_POINT
};

}  // namespace
}  // namespace concord::intercept
