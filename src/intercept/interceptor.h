// The launch path of an intercepted process: every kernel (or CUDA graph) launch the hooks catch
// comes here. Lazily, on the first launch (or request mark), the interceptor reads its settings and
// registers the process with the node daemon (ipc::TenantClient); any failure makes it pass every call through
// for the process's life, with one line on stderr. While connected, a launch is noticed to the
// daemon, waits for its release unless the daemon lets the tenant run free, and goes where the
// decision puts it:
//   - the application's own stream, when the decision is the whole GPU at that stream's priority;
//   - else a shadow stream for (application stream, priority, SM set): a green-context stream of
//     the announced SM set, or a plain stream of the decided priority; an event hand-off before
//     (application -> shadow) and after (shadow -> application) keeps the application stream's order.
// After each released launch an event from a pool is recorded; a completion thread polls the
// events and reports the completions, and builds the green contexts of announced SM sets.
// Launches into a capturing stream pass through untouched.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "ipc/protocol.h"

namespace concord::intercept {

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
  const void* args = nullptr;
};

// The process's interceptor (made on first use, never destroyed: hooks run until the process's
// last instruction; its threads stop at exit).
CUresult intercept_launch(const LaunchCall& call) noexcept;
void note_stream_created(CUstream stream) noexcept;
void note_stream_destroyed(CUstream stream) noexcept;
void note_capture_begun() noexcept;
void note_capture_ended() noexcept;
void note_synchronized() noexcept;
void note_allocated(CUdeviceptr ptr, size_t bytes) noexcept;
void note_freed(CUdeviceptr ptr) noexcept;
// An LC request's boundaries as the application marks them (include/concord/intercept.h).
int note_request(bool begin) noexcept;

}  // namespace concord::intercept
