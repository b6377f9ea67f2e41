// The launch path of an intercepted process: every kernel (or CUDA graph) launch the hooks catch
// comes here. Lazily, on the first launch (or stream creation, request mark, device allocation or
// cuMemGetInfo: the memory quota holds from the first byte), the interceptor
// reads its settings and registers the process with the node daemon (ipc::TenantClient); any
// failure makes it pass every call through for the process's life, with one line on stderr.
// While connected, a launch follows the tenant's lease (include/concord/lease.h), read from shared
// memory with no call to the daemon:
//   - an LC tenant launches at once and raises its work-in-flight flag on its GPU's board (lowered
//     when its launches have ended outside a request);
//   - a BE tenant waits while its gate is closed (or closed while an LC flag it yields to is up),
//     and while its launches in flight are at the lease's cap; then launches at once;
//   - either way at the lease's priority: the stream's own when it matches (an LC tenant's streams
//     are created at the high priority), else a launch attribute for a kernel, or a shadow stream
//     with event hand-offs for a graph;
//   - then the launch is noticed to the daemon (never blocking).
// A per-launch lease (a policy without a lease form, BE tenants only) notices first and waits for
// the daemon's decision, which may put the launch on a green-context stream of an SM set.
// Completions: an event ("marker") after every CONCORD_MARKER_EVERY launches of a stream (every
// launch when decisions are per launch, or often enough for an in-flight cap), one from the
// completion thread when an LC stream goes quiet, and the application's own synchronisations;
// each says its stream's launches up to it have ended. Launches into a capturing stream pass
// through untouched.
#pragma once

#include <cuda.h>

#include <array>
#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

#include "intercept/memory_book.h"
#include "ipc/protocol.h"

namespace concord::intercept {

// No launch-priority attribute: the target stream's own priority.
inline constexpr int kNoPriority = INT_MIN;

// One launch as a hook saw it. `invoke` makes the real launch on `target` (the application's
// stream or a shadow stream) with the hook's own arguments, which `args` points to.
struct LaunchCall {
  CUstream stream = nullptr;  // as the application passed it
  bool per_thread = false;    // the _ptsz flavour: a null stream is the calling thread's default stream
  const void* function = nullptr;  // the CUfunction (or CUkernel), or the CUgraphExec
  bool graph = false;
  ipc::Dim3 grid, block;
  uint32_t shared_mem = 0;
  CUresult (*invoke)(const void* args, CUstream target) = nullptr;
  // The same launch on `target` at stream priority `priority` (a launch attribute of
  // cuLaunchKernelEx); null for a graph, which has no such attribute.
  CUresult (*invoke_priority)(const void* args, CUstream target, int priority) = nullptr;
  // The same launch with `shared_mem` bytes of dynamic shared memory (the residency cap's
  // padding), at stream priority `priority` unless it is kNoPriority; null where that cannot be done
  // safely (a graph, a cooperative launch, a launch with cluster or other attributes).
  CUresult (*invoke_shared)(const void* args, CUstream target, int priority, uint32_t shared_mem) = nullptr;
  const void* args = nullptr;
};

// What a synchronisation covers: (stream key, last launch, its count on the stream) of each
// stream it waits for, taken before it begins.
struct SyncMark {
  std::vector<std::array<uint64_t, 3>> covered;
};

// The process's interceptor (made on first use, never destroyed: hooks run until the process's
// last instruction; its threads stop at exit).
CUresult intercept_launch(const LaunchCall& call) noexcept;
// The priority to create an application's stream with (std::nullopt: as it asked; `asked`: the
// priority it asked for, if any): an LC tenant's streams get its lease's high priority.
std::optional<int> note_new_stream_priority(std::optional<int> asked) noexcept;
void note_stream_created(CUstream stream) noexcept;
void note_stream_destroyed(CUstream stream) noexcept;
void note_capture_begun() noexcept;
void note_capture_ended() noexcept;
// A synchronisation of `stream` (the calling thread's default stream for a null one in the _ptsz
// flavour), or of the whole context; its end, when it returned `r`.
SyncMark note_sync_begin(CUstream stream, bool per_thread, bool whole_context) noexcept;
void note_sync_end(const SyncMark& mark, CUresult r) noexcept;
// Memory (docs/intercept.md, "Memory"): the process's book, the process registered with the daemon
// first (an allocation is often a program's first GPU call); null when the library is disabled or
// its own bookkeeping failed. The hooks reserve against it before each real allocation.
MemoryBook* memory_book() noexcept;
// `call` of `bytes` refused for the quota (the hook answers CUDA_ERROR_OUT_OF_MEMORY): one line on
// stderr now and then, naming the quota.
void note_memory_refused(const char* call, uint64_t bytes) noexcept;
// The book changed (an allocation counted, memory freed): counters, and the daemon told.
void note_memory_changed(bool allocated, bool freed) noexcept;
// An LC request's boundaries as the application marks them (include/concord/intercept.h).
int note_request(bool begin) noexcept;

}  // namespace concord::intercept
