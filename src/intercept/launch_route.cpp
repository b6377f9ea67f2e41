#include "intercept/launch_route.h"

#include <cstdio>
#include <string>

namespace concord::intercept {

Result<int> StreamPlacer::app_priority(CUstream app, uint64_t key) {
  // The launch path's lookup: this thread's copy, no lock.
  if (const std::optional<int> mine = priority_cache_.find(key)) return *mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto it = app_priorities_.find(key); it != app_priorities_.end()) {
      priority_cache_.keep(key, it->second);
      return it->second;
    }
  }
  int priority = 0;
  CONCORD_INTERCEPT_CU(driver_.stream_get_priority(app, &priority));
  std::lock_guard<std::mutex> lock(mu_);
  app_priorities_[key] = priority;
  priority_cache_.keep(key, priority);
  return priority;
}

Result<CUstream> StreamPlacer::priority_shadow(CUstream app, uint64_t key, CUcontext ctx, int priority, bool* on_app) {
  std::lock_guard<std::mutex> lock(mu_);
  StreamState& state = streams_[{key, ctx}];
  if (!state.priority_known) {
    CONCORD_INTERCEPT_CU(driver_.stream_get_priority(app, &state.priority));
    state.priority_known = true;
  }
  if (state.priority == priority) {
    *on_app = true;
    return app;
  }
  *on_app = false;
  if (auto it = state.priority_shadows.find(priority); it != state.priority_shadows.end()) return it->second.get();
  CUstream raw = nullptr;
  CONCORD_INTERCEPT_CU(driver_.get<PFN_cuStreamCreateWithPriority_v5050>(Entry::StreamCreateWithPriority)(
      &raw, CU_STREAM_NON_BLOCKING, priority));
  return state.priority_shadows.emplace(priority, OwnedStream(&driver_, raw)).first->second.get();
}

Result<StreamPlacer::HandoffEvents*> StreamPlacer::handoff_events(CUcontext ctx) {
  thread_local std::vector<std::pair<const StreamPlacer*, HandoffEvents*>> mine;  // this thread's, one pair per context
  for (const auto& [placer, e] : mine) {
    if (placer == this && e->context == ctx) return e;
  }
  auto events = std::make_unique<HandoffEvents>();
  events->context = ctx;
  CUevent before = nullptr, after = nullptr;
  CONCORD_INTERCEPT_CU(driver_.event_create(&before, CU_EVENT_DISABLE_TIMING));
  events->before = OwnedEvent(&driver_, before);
  CONCORD_INTERCEPT_CU(driver_.event_create(&after, CU_EVENT_DISABLE_TIMING));
  events->after = OwnedEvent(&driver_, after);
  HandoffEvents* pair = events.get();
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    handoffs_.push_back(std::move(events));
  }
  mine.emplace_back(this, pair);
  return pair;
}

Status StreamPlacer::handoff(CUstream from, CUstream to, CUevent event) {
  CONCORD_INTERCEPT_CU(driver_.event_record(event, from));
  CONCORD_INTERCEPT_CU(driver_.stream_wait_event(to, event, 0));
  return Status::ok();
}

CUresult StreamPlacer::handed_off(const LaunchCall& call, CUstream app, CUstream target, HandoffEvents& events) {
  const CUresult r = call.invoke(call.args, target);
  if (r != CUDA_SUCCESS) return r;
  if (Status back = handoff(target, app, events.after.get()); !back) {
    // The application stream would no longer wait for this launch: wait on the host instead, so
    // that its order still holds.
    std::fprintf(stderr, "concord-intercept: hand-off back to the application stream failed (%s); synchronising\n",
                 back.message().c_str());
    driver_.get<PFN_cuStreamSynchronize_v2000>(Entry::StreamSynchronize)(target);
  }
  return r;
}

StreamPlacer::Placed StreamPlacer::at_priority(const LaunchCall& call, CUstream app, uint64_t key, int priority) {
  Result<int> own = app_priority(app, key);
  if (own && *own == priority) return {call.invoke(call.args, call.stream), Route::own_stream};
  if (own && call.invoke_priority) {
    // A kernel takes the priority as a launch attribute: no other stream, no hand-off.
    return {call.invoke_priority(call.args, call.stream, priority), Route::priority_attribute};
  }
  // A graph (or a stream whose priority cannot be read): a shadow stream of that priority.
  CUcontext ctx = nullptr;
  if (driver_.ctx_get_current(&ctx) != CUDA_SUCCESS) return {call.invoke(call.args, call.stream), Route::own_stream};
  bool on_app = true;
  Result<CUstream> shadow = priority_shadow(app, key, ctx, priority, &on_app);
  Result<HandoffEvents*> events = shadow && !on_app ? handoff_events(ctx) : Result<HandoffEvents*>(nullptr);
  if (!shadow || on_app || !events || !*events || !handoff(app, *shadow, (*events)->before.get())) {
    return {call.invoke(call.args, call.stream), Route::own_stream};
  }
  return {handed_off(call, app, *shadow, **events), Route::shadow_stream};
}

StreamPlacer::Placed StreamPlacer::on_green(const LaunchCall& call, CUstream app, CUstream green) {
  CUcontext ctx = nullptr;
  if (driver_.ctx_get_current(&ctx) != CUDA_SUCCESS) return {CUDA_ERROR_INVALID_CONTEXT, Route::green_stream};
  Result<HandoffEvents*> events = handoff_events(ctx);
  if (!events || !handoff(app, green, (*events)->before.get())) return {CUDA_ERROR_INVALID_HANDLE, Route::green_stream};
  return {handed_off(call, app, green, **events), Route::green_stream};
}

void StreamPlacer::forget(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    it = it->first.first == key ? streams_.erase(it) : std::next(it);
  }
  app_priorities_.erase(key);
  priority_cache_.invalidate();
}

}  // namespace concord::intercept
