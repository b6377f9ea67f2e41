#include "mechanism/task_streams.h"

#include <algorithm>

#include "concord/occupancy.h"
#include "mechanism/params.h"

namespace concord::policy {

namespace {

// The variant a task running variant `task_variant` runs `kernel` in: the same index (the kernel's
// last when it has fewer); where that block does not fit on an SM (a task whose kernels differ in
// which variants fit), the largest below it that fits, else the kernel's default.
int kernel_variant(const DeviceSpec& device, const KernelSpec& kernel, int task_variant) {
  const int wanted = std::clamp(task_variant, 0, kernel.variant_count() - 1);
  for (int v = wanted; v >= 0; --v) {
    if (max_resident_blocks(device, kernel.variant(v)) > 0) return v;
  }
  return kernel.default_variant;
}

}  // namespace

int max_variant(const KernelSpec& kernel) {
  int best = 0;
  for (int v = 1; v < kernel.variant_count(); ++v) {
    if (kernel.variant(v).threads_per_block > kernel.variant(best).threads_per_block) best = v;
  }
  return best;
}

Status TaskStreams::schedule(SchedContext& ctx, TaskChooser& chooser) {
  // Tasks whose request has neither a ready nor a running launch left are finished. One pass over
  // the ready and running lists marks the tenants that still have work (not one pass per task).
  if (running_ > 0) {
    live_.assign(ctx.tenants().size(), 0);
    for (const ReadyLaunch& r : ctx.ready()) {
      const auto* a = active_of(r.tenant);
      if (a && (*a)->request == r.request) live_[static_cast<size_t>(r.tenant.value)] = 1;
    }
    for (const RunningDispatch& d : ctx.running()) {
      for (TenantId t : d.tenants) live_[static_cast<size_t>(t.value)] = 1;
    }
    for (size_t t = 0; t < active_.size(); ++t) {
      if (active_[t] && live_[t] == 0) {
        active_[t].reset();
        --running_;
      }
    }
  }
  // Running tasks go on: their next launch on their stream, in their variant. What to dispatch is
  // collected first (dispatching changes the ready list).
  continuing_.clear();
  waiting_.clear();
  for (const ReadyLaunch& r : ctx.ready()) {
    if (r.has_running_dispatch) continue;
    const auto* a = active_of(r.tenant);
    if (a && (*a)->request == r.request) {
      continuing_.push_back({r.id, kernel_variant(ctx.device(), *r.kernel, (*a)->variant)});
    } else if (!a) {
      waiting_.push_back({r.id, r.tenant, r.request});
    }
  }
  for (const auto& [launch, variant] : continuing_) {
    Placement p = whole_gpu(ctx);
    p.variant = variant;
    auto d = ctx.dispatch(launch, p);
    if (!d) return d.status();
  }
  std::vector<WaitingTask>& waiting = waiting_;
  // New tasks while a stream is free.
  while (running_tasks() < streams_ && !waiting.empty()) {
    auto c = chooser.choose(ctx, waiting);
    if (!c) break;  // hold
    CONCORD_RETURN_IF_ERROR(start_task(ctx, waiting, *c));
  }
  return queue_ahead(ctx);
}

Status TaskStreams::start_task(SchedContext& ctx, std::vector<WaitingTask>& waiting, const TaskChoice& c) {
  const WaitingTask w = waiting[c.index];
  const KernelSpec* kernel = nullptr;
  for (const ReadyLaunch& x : ctx.ready()) {
    if (x.id == w.launch) kernel = x.kernel;
  }
  if (!kernel) return Status::internal("task streams: waiting launch " + std::to_string(w.launch.value) + " is not ready");
  Placement p = whole_gpu(ctx);
  p.variant = kernel_variant(ctx.device(), *kernel, c.variant);
  auto d = ctx.dispatch(w.launch, p);
  if (!d) return d.status();
  const auto t = static_cast<size_t>(w.tenant.value);
  if (active_.size() <= t) active_.resize(t + 1);
  if (!active_[t]) ++running_;
  active_[t] = Active{w.request, c.variant};
  waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(c.index));
  return Status::ok();
}

Status TaskStreams::queue_ahead(SchedContext& ctx) {
  if (ahead_ == 0) return Status::ok();
  // Each running task's dispatches in flight (one running, the rest queued behind it) and the
  // latest, from one pass over the running list.
  flight_.assign(ctx.tenants().size(), Flight{});
  for (const RunningDispatch& d : ctx.running()) {
    if (d.tenants.size() != 1) continue;
    Flight& f = flight_[static_cast<size_t>(d.tenants[0].value)];
    ++f.count;
    if (!f.last.valid() || d.id > f.last) f.last = d.id;
  }
  int queued = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    if (!active_[i]) continue;
    const auto tenant = static_cast<int64_t>(i);
    const Active& task = *active_[i];
    int in_flight = flight_[static_cast<size_t>(tenant)].count;
    DispatchId last = flight_[static_cast<size_t>(tenant)].last;
    if (!last.valid()) continue;  // its next kernel is ready, not yet dispatched
    while (ahead_ < 0 || in_flight < 1 + ahead_) {
      const auto submitted = ctx.queued(TenantId{tenant});
      if (submitted.empty() || submitted.front().request != task.request) break;
      if (burst_ > 0 && queued == burst_) {
        // Enough for one call: let the engine look at completions first, then go on (on_tick).
        ctx.request_tick(ctx.now());
        return Status::ok();
      }
      ++queued;
      Placement p = whole_gpu(ctx);
      p.variant = kernel_variant(ctx.device(), *submitted.front().kernel, task.variant);
      auto d = ctx.dispatch(submitted.front().id, p, last);
      if (!d) return d.status();
      last = *d;
      ++in_flight;
    }
  }
  return Status::ok();
}

Result<QueueParams> queue_params(const std::string& policy, const PolicyParams& params) {
  QueueParams q;
  if (auto it = params.find("ahead"); it != params.end() && it->second != "task") {
    auto n = int_param(params, "ahead", -1, 0);
    if (!n) return Status::invalid_argument(policy + ": parameter 'ahead' must be 'task' or an integer >= 0, not '" + it->second + "'");
    q.ahead = *n;
  }
  auto burst = int_param(params, "burst", 4, 0);
  if (!burst) return Status::invalid_argument(policy + ": " + burst.status().message());
  q.burst = *burst;
  return q;
}

}  // namespace concord::policy
