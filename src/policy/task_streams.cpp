#include "policy/task_streams.h"

#include <algorithm>

#include "concord/occupancy.h"
#include "policy/params.h"

namespace concord::policy {

int max_variant(const KernelSpec& kernel) {
  int best = 0;
  for (int v = 1; v < kernel.variant_count(); ++v) {
    if (kernel.variant(v).threads_per_block > kernel.variant(best).threads_per_block) best = v;
  }
  return best;
}

RaiseVector kernel_raise_vector(const KernelSpec& kernel, int variant, const Estimator& estimator) {
  const KernelVariant& v = kernel.variant(variant);
  if (v.raise_metrics) return *v.raise_metrics;
  // Estimate from the roofline: utilisations of the FP32 (or tensor) pipes and of DRAM over the
  // estimated time; occupancy from the occupancy calculator and the grid; instruction issue
  // follows the arithmetic plus a share of the memory traffic. Only the simulator without
  // profiles uses this; measured vectors come from `concord profile raise`.
  const DeviceSpec& dev = estimator.device();
  const double t = std::max(estimator.seconds(kernel, variant, dev.sm_count), 1e-9);
  const double blocks = static_cast<double>(v.logical_blocks);
  const double peak = kernel.unit == ComputeUnit::tensor ? dev.tensor_flops : dev.fp32_flops;
  const double cu = std::clamp(v.flops_per_block * blocks / t / peak, 0.0, 1.0);
  const double mu = std::clamp(v.bytes_per_block * blocks / t / dev.dram_bytes_per_s, 0.0, 1.0);
  const double resident = max_resident_blocks(dev, v);
  const double per_sm = std::min(resident, blocks / dev.sm_count);
  const double aoc = std::clamp(per_sm * v.warps_per_block() / (dev.sm.max_threads / 32.0), 0.0, 1.0);
  const double sme = std::clamp(blocks / dev.sm_count, 0.0, 1.0);
  const double ipc = std::clamp(cu + 0.2 * mu, 0.0, 1.0);
  RaiseVector m{};
  at(m, RaiseMetric::aoc) = 10 * aoc;
  at(m, RaiseMetric::sme) = 10 * sme;
  at(m, RaiseMetric::ipc) = 10 * ipc;
  at(m, RaiseMetric::isu) = 10 * ipc;
  at(m, RaiseMetric::spu) = kernel.unit == ComputeUnit::tensor ? 1.0 : 10 * cu;
  at(m, RaiseMetric::du) = 10 * mu;
  at(m, RaiseMetric::lsu) = 10 * std::min(1.0, 0.5 * mu + 0.1);
  at(m, RaiseMetric::tu) = 10 * std::min(1.0, 0.7 * mu);
  return m;
}

TaskInfo task_info(const TenantSpec& tenant, const Estimator& estimator) {
  TaskInfo info;
  int variants = 1;
  for (const KernelStep& s : tenant.steps) variants = std::max(variants, s.kernel.variant_count());
  for (int v = 0; v < variants; ++v) {
    RaiseVector sum{};
    double total = 0;
    for (const KernelStep& s : tenant.steps) {
      const int kv = std::min(v, s.kernel.variant_count() - 1);
      const double w = estimator.seconds(s.kernel, kv, estimator.device().sm_count) * s.count;
      const RaiseVector m = kernel_raise_vector(s.kernel, kv, estimator);
      if (!s.kernel.variant(kv).raise_metrics) info.measured = false;
      for (size_t i = 0; i < m.size(); ++i) sum[i] += w * m[i];
      total += w;
    }
    if (total > 0) {
      for (double& x : sum) x /= total;
    }
    info.vectors.push_back(sum);
  }
  // The class of the task's largest-block variant (Table IV's types are read on Max), unless the
  // workload states it (`raise_type`, as the paper's Table IV does by hand).
  const KernelSpec& first = tenant.steps.front().kernel;
  info.class_variant = static_cast<size_t>(std::min<int>(max_variant(first), variants - 1));
  info.cls = tenant.raise_type ? *tenant.raise_type : raise_class(info.vectors[info.class_variant]);
  return info;
}

Status TaskStreamPolicy::on_start(SchedContext& ctx) {
  infos_.clear();
  for (const TenantSpec& t : ctx.workload().tenants) {
    if (t.steps.empty()) return Status::invalid_argument(name() + ": tenant '" + t.name + "' has no kernels");
    infos_.push_back(task_info(t, ctx.estimator()));
  }
  active_.clear();
  return Status::ok();
}

Status TaskStreamPolicy::schedule(SchedContext& ctx) {
  // Tasks whose request has neither a ready nor a running launch left are finished.
  for (auto it = active_.begin(); it != active_.end();) {
    const TenantId t{it->first};
    const int64_t req = it->second.request;
    const bool ready = std::any_of(ctx.ready().begin(), ctx.ready().end(),
                                   [&](const ReadyLaunch& r) { return r.tenant == t && r.request == req; });
    const bool running = std::any_of(ctx.running().begin(), ctx.running().end(), [&](const RunningDispatch& d) {
      return std::find(d.tenants.begin(), d.tenants.end(), t) != d.tenants.end();
    });
    if (!ready && !running) {
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  // A task handed a stream owns it once the task before it has ended.
  for (auto& [t, a] : active_) {
    if (a.behind >= 0 && !active_.contains(a.behind)) a.behind = -1;
    if (a.handed >= 0 && !active_.contains(a.handed)) a.handed = -1;
  }
  // Running tasks go on: their next launch on their stream, in their variant.
  const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
  std::vector<Waiting> waiting;
  for (const ReadyLaunch& r : ready) {
    if (r.has_running_dispatch) continue;
    auto it = active_.find(r.tenant.value);
    if (it != active_.end() && it->second.request == r.request) {
      Placement p = whole_gpu(ctx);
      p.variant = std::min(it->second.variant, r.kernel->variant_count() - 1);
      auto d = ctx.dispatch(r.id, p);
      if (!d) return d.status();
    } else if (it == active_.end()) {
      waiting.push_back({r.id, r.tenant, r.request});
    }
  }
  // New tasks while a stream is free (a task handed a stream shares its predecessor's).
  auto streams_in_use = [&] {
    return std::count_if(active_.begin(), active_.end(), [](const auto& a) { return a.second.behind < 0; });
  };
  while (streams_in_use() < streams_ && !waiting.empty()) {
    auto c = choose(ctx, waiting);
    if (!c) break;  // hold
    CONCORD_RETURN_IF_ERROR(start_task(ctx, ready, waiting, *c, DispatchId{}, -1));
  }
  CONCORD_RETURN_IF_ERROR(queue_ahead(ctx));
  if (handoff_ && !waiting.empty()) CONCORD_RETURN_IF_ERROR(hand_off(ctx, ready, waiting));
  return Status::ok();
}

Status TaskStreamPolicy::start_task(SchedContext& ctx, const std::vector<ReadyLaunch>& ready, std::vector<Waiting>& waiting,
                                    const Choice& c, DispatchId after, int64_t behind) {
  const Waiting w = waiting[c.index];
  const ReadyLaunch* r = nullptr;
  for (const ReadyLaunch& x : ready) {
    if (x.id == w.launch) r = &x;
  }
  if (!r) return Status::internal(name() + ": waiting launch " + std::to_string(w.launch.value) + " is not ready");
  Placement p = whole_gpu(ctx);
  p.variant = std::min(c.variant, r->kernel->variant_count() - 1);
  auto d = after.valid() ? ctx.dispatch_after(w.launch, p, after) : ctx.dispatch(w.launch, p);
  if (!d) return d.status();
  active_[w.tenant.value] = {w.request, c.variant, behind, -1};
  waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(c.index));
  return Status::ok();
}

// A task's dispatches in flight (one running, the rest queued behind it) and the latest of them.
std::pair<int, const RunningDispatch*> TaskStreamPolicy::in_flight_of(const SchedContext& ctx, int64_t tenant) {
  int n = 0;
  const RunningDispatch* tail = nullptr;
  for (const RunningDispatch& d : ctx.running()) {
    if (d.tenants.size() != 1 || d.tenants[0].value != tenant) continue;
    ++n;
    if (!tail || d.id > tail->id) tail = &d;
  }
  return {n, tail};
}

Status TaskStreamPolicy::hand_off(SchedContext& ctx, const std::vector<ReadyLaunch>& ready, std::vector<Waiting>& waiting) {
  bool any = false;
  for (auto& [tenant, task] : active_) {
    if (waiting.empty()) break;
    if (task.handed >= 0 || task.behind >= 0) continue;  // handed already, or not started itself
    // The hand-off waits for the task's last kernel to be the only one left: decided when that
    // kernel starts, not when it is queued (a whole task is queued as it starts, and a decision
    // that early would hold the next task's resources for the whole task).
    const auto [in_flight, tail] = in_flight_of(ctx, tenant);
    if (in_flight != 1 || tail->launches.size() != 1 || ctx.launches_after(tail->launches[0]) > 0) continue;
    const DispatchId after = tail->id;
    const int64_t from = tenant;
    releasing_ = from;
    auto c = choose(ctx, waiting);
    releasing_ = -1;
    if (!c) continue;
    const int64_t to = waiting[c->index].tenant.value;
    CONCORD_RETURN_IF_ERROR(start_task(ctx, ready, waiting, *c, after, from));
    task.handed = to;
    any = true;
  }
  // The new tasks' later kernels go on their streams in the next call.
  if (any && ahead_ != 0) ctx.request_tick(ctx.now());
  return Status::ok();
}

Status TaskStreamPolicy::queue_ahead(SchedContext& ctx) {
  if (ahead_ == 0) return Status::ok();
  int queued = 0;
  for (const auto& [tenant, task] : active_) {
    auto [in_flight, tail] = in_flight_of(ctx, tenant);
    if (!tail) continue;  // its next kernel is ready, not yet dispatched
    DispatchId last = tail->id;
    LaunchId launch = tail->launches[0];
    while ((ahead_ < 0 || in_flight < 1 + ahead_) && ctx.launches_after(launch) > 0) {
      if (burst_ > 0 && queued == burst_) {
        // Enough for one call: let the engine look at completions first, then go on (on_tick).
        ctx.request_tick(ctx.now());
        return Status::ok();
      }
      ++queued;
      const KernelSpec* next = ctx.next_kernel(launch);
      Placement p = whole_gpu(ctx);
      p.variant = std::min(task.variant, next->variant_count() - 1);
      auto d = ctx.queue_next(last, p);
      if (!d) return d.status();
      last = *d;
      ++in_flight;
      // The launch just queued: running() gains the new dispatch at its end.
      const auto running = ctx.running();
      auto it = running.rbegin();
      while (it != running.rend() && it->id != last) ++it;
      if (it == running.rend()) return Status::internal(name() + ": queued dispatch " + std::to_string(last.value) + " is not running");
      launch = it->launches[0];
    }
  }
  return Status::ok();
}

Status apply_queue_params(const std::string& policy, const PolicyParams& params, TaskStreamPolicy& p) {
  auto ahead = ahead_param(policy, params);
  if (!ahead) return ahead.status();
  auto burst = int_param(params, "burst", 4, 0);
  if (!burst) return Status::invalid_argument(policy + ": " + burst.status().message());
  auto handoff = bool_param(params, "handoff", false);
  if (!handoff) return Status::invalid_argument(policy + ": " + handoff.status().message());
  p.set_ahead(*ahead);
  p.set_burst(*burst);
  p.set_handoff(*handoff);
  return Status::ok();
}

Result<int> ahead_param(const std::string& policy, const PolicyParams& params) {
  auto it = params.find("ahead");
  if (it == params.end() || it->second == "task") return -1;
  auto n = int_param(params, "ahead", -1, 0);
  if (!n) return Status::invalid_argument(policy + ": parameter 'ahead' must be 'task' or an integer >= 0, not '" + it->second + "'");
  return *n;
}

}  // namespace concord::policy
