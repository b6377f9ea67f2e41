// Where an intercepted launch goes: the application's own stream when its priority is the one
// asked for; else, for a kernel, the same stream with a launch-priority attribute; else (a graph)
// a shadow stream of that priority, or a green-context stream of an SM set, with an event hand-off
// before (application -> shadow) and after (shadow -> application) so that everything the
// application queued on its stream before the launch precedes it and everything after follows it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "concord/status.h"
#include "intercept/cu_handles.h"
#include "intercept/interceptor.h"
#include "intercept/real_driver.h"
#include "intercept/thread_cache.h"

namespace concord::intercept {

class StreamPlacer {
 public:
  explicit StreamPlacer(const RealDriver& driver) : driver_(driver) {}

  // How a launch went out.
  enum class Route : uint8_t { own_stream, priority_attribute, shadow_stream, green_stream };
  struct Placed {
    CUresult result = CUDA_SUCCESS;
    Route route = Route::own_stream;
  };
  // `call` on `app` (stream key `key`) at stream priority `priority`.
  Placed at_priority(const LaunchCall& call, CUstream app, uint64_t key, int priority);
  // `call` on `green` (a stream of a green context) in `app`'s order; a launch the driver refuses
  // there is not retried (the caller decides).
  Placed on_green(const LaunchCall& call, CUstream app, CUstream green);
  // A stream the application destroyed (its handle may come back for another).
  void forget(uint64_t key);

 private:
  // Shadow streams of one application stream (in one context), by priority.
  struct StreamState {
    bool priority_known = false;
    int priority = 0;
    std::map<int, OwnedStream> priority_shadows;
  };
  // The two events of one thread's hand-offs, in one context (a record followed by its wait at
  // once on the same thread, so one pair per thread serves every stream).
  struct HandoffEvents {
    CUcontext context = nullptr;
    OwnedEvent before, after;
  };
  Result<int> app_priority(CUstream app, uint64_t key);
  Result<CUstream> priority_shadow(CUstream app, uint64_t key, CUcontext ctx, int priority, bool* on_app);
  Result<HandoffEvents*> handoff_events(CUcontext ctx);
  Status handoff(CUstream from, CUstream to, CUevent event);
  // `call` on `target` between two hand-offs with `app`.
  CUresult handed_off(const LaunchCall& call, CUstream app, CUstream target, HandoffEvents& events);

  const RealDriver& driver_;
  std::mutex mu_;
  std::map<std::pair<uint64_t, CUcontext>, StreamState> streams_;
  std::unordered_map<uint64_t, int> app_priorities_;  // by stream key
  ThreadCache<uint64_t, int, struct PriorityCacheTag> priority_cache_;  // app_priorities_, per thread
  std::mutex handoff_mu_;
  std::vector<std::unique_ptr<HandoffEvents>> handoffs_;  // every thread's, owned here
};

}  // namespace concord::intercept
