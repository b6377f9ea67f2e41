#include "policy/pbs/tlp_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "concord/occupancy.h"

namespace concord::policy {

Status TlpRunner::admits(const std::string& policy, const WorkloadShape& shape, const DeviceSpec& device) const {
  if (sharing_ == SmSharing::split && shape.tenants > device.sm_count) {
    return Status::failed_precondition(fmt::format(
        "policy '{}' gives every tenant an equal share of at least one SM (sms=split): {} tenants do not fit the {} SMs of {}; "
        "run it with --param sms=shared or with at most {} tenants",
        policy, shape.tenants, device.sm_count, device.name, device.sm_count));
  }
  return Status::ok();
}

Result<SmSharing> sm_sharing_param(const PolicyParams& params) {
  auto it = params.find("sms");
  if (it == params.end() || it->second == "split") return SmSharing::split;
  if (it->second == "shared") return SmSharing::shared;
  return Status::invalid_argument("parameter 'sms': must be split or shared, is '" + it->second + "'");
}

void TlpRunner::joined(TenantId t) {
  active_.insert(t.value);
  state_.try_emplace(t.value);
}

std::vector<TenantId> TlpRunner::active() const {
  std::vector<TenantId> out;
  for (int64_t t : active_) out.push_back(TenantId{t});
  return out;
}

SmSet TlpRunner::sms_for(const SchedContext& ctx, TenantId t) const {
  const int sms = ctx.device().sm_count;
  if (sharing_ == SmSharing::shared || active_.size() <= 1) return ctx.device().all_sms();
  // An equal contiguous share per active tenant, in tenant order; the last takes the remainder.
  const int n = static_cast<int>(active_.size());
  const auto pos = static_cast<int>(std::distance(active_.begin(), active_.find(t.value)));
  if (pos >= n) return ctx.device().all_sms();  // a tenant that left still drains anywhere
  const int share = std::max(1, sms / n);
  const int first = pos * share;
  return SmSet::range(first, pos == n - 1 ? sms - first : share);
}

int TlpRunner::tlp(TenantId t) const {
  auto it = state_.find(t.value);
  return it == state_.end() ? 0 : it->second.tlp;
}

int TlpRunner::max_tlp(const SchedContext& ctx, TenantId t) const {
  const KernelSpec* kernel = nullptr;
  int variant = 0;
  if (auto it = state_.find(t.value); it != state_.end() && it->second.last_kernel) {
    kernel = it->second.last_kernel;
    variant = it->second.last_variant;
  }
  if (!kernel) {
    for (const ReadyLaunch& r : ctx.ready()) {
      if (r.tenant == t) {
        kernel = r.kernel;
        variant = r.kernel->default_variant;
        break;
      }
    }
  }
  if (!kernel) {
    auto queued = ctx.queued(t);
    if (!queued.empty()) {
      kernel = queued.front().kernel;
      variant = kernel->default_variant;
    }
  }
  if (!kernel) return 1;
  return std::max(1, max_resident_blocks(ctx.device(), kernel->variant(variant)));
}

const std::set<std::string>& TlpRunner::kernels_of(TenantId t) const {
  static const std::set<std::string> none;
  auto it = state_.find(t.value);
  return it == state_.end() ? none : it->second.kernels;
}

Status TlpRunner::dispatch_ready(SchedContext& ctx) {
  const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
  for (const ReadyLaunch& r : ready) {
    if (r.has_running_dispatch) continue;
    TenantState& s = state_[r.tenant.value];
    const KernelSpec& k = *r.kernel;
    const Capabilities caps = ctx.capabilities(k);
    Placement p;
    p.sms = sms_for(ctx, r.tenant);
    if (caps.persistent_form && caps.tlp) {
      p.form = LaunchForm::persistent;
      p.tlp = s.tlp;
    }
    const bool bypass = s.cache == CachePolicy::l1_bypass || s.cache == CachePolicy::both;
    const bool evict = s.cache == CachePolicy::l2_evict_first || s.cache == CachePolicy::both;
    if ((!bypass || caps.l1_bypass) && (!evict || caps.l2_evict_first)) p.cache = s.cache;
    auto id = ctx.dispatch(r.id, p);
    if (!id) return id.status();
    const KernelVariant& v = k.variant(k.default_variant);
    auto facet = pbs_facet_of(v);
    if (!facet) return facet.status();
    s.last_kernel = &k;
    s.last_variant = k.default_variant;
    s.kernels.insert(k.name + "/" + v.name);
    if (!has_pbs_facet(v)) without_facet_.insert(k.name + "/" + v.name);
    dispatches_[id->value] = {r.tenant, facet->requested_bytes_per_block, 0, p.form == LaunchForm::persistent};
  }
  return Status::ok();
}

void TlpRunner::count(DispatchState& d, int64_t done) {
  if (done <= d.counted) return;
  TenantState& s = state_[d.tenant.value];
  const double blocks = static_cast<double>(done - d.counted);
  s.blocks += blocks;
  s.bytes += blocks * d.bytes_per_block;
  d.counted = done;
}

void TlpRunner::completed(const Completion& c) {
  auto it = dispatches_.find(c.dispatch.value);
  if (it == dispatches_.end()) return;
  if (!c.blocks_done.empty()) count(it->second, c.blocks_done[0]);
  dispatches_.erase(it);
}

Status TlpRunner::set_tlp(SchedContext& ctx, TenantId t, int tlp) {
  TenantState& s = state_[t.value];
  if (s.tlp == tlp) return Status::ok();
  s.tlp = tlp;
  ++tlp_changes_;
  for (const RunningDispatch& r : ctx.running()) {
    auto it = dispatches_.find(r.id.value);
    if (it == dispatches_.end() || it->second.tenant != t || !it->second.persistent) continue;
    CONCORD_RETURN_IF_ERROR(ctx.set_tlp(r.id, tlp));
  }
  return Status::ok();
}

Status TlpRunner::start_window(SchedContext& ctx) {
  // Blocks done so far belong to no window.
  for (const RunningDispatch& r : ctx.running()) {
    auto it = dispatches_.find(r.id.value);
    if (it == dispatches_.end()) continue;
    auto progress = ctx.progress(r.id);
    if (!progress) return progress.status();
    if (!progress->empty()) it->second.counted = std::max(it->second.counted, (*progress)[0]);
  }
  for (auto& [t, s] : state_) s.blocks = s.bytes = 0;
  window_start_ = ctx.now();
  return Status::ok();
}

Result<std::vector<TenantWindow>> TlpRunner::finish_window(SchedContext& ctx) {
  for (const RunningDispatch& r : ctx.running()) {
    auto it = dispatches_.find(r.id.value);
    if (it == dispatches_.end()) continue;
    auto progress = ctx.progress(r.id);
    if (!progress) return progress.status();
    if (!progress->empty()) count(it->second, (*progress)[0]);
  }
  const double seconds = ctx.now() - window_start_;
  if (!(seconds > 0)) return Status::failed_precondition("tlp runner: a sampling window of no time");
  std::vector<TenantWindow> out;
  for (int64_t t : active_) {
    const TenantState& s = state_[t];
    out.push_back({TenantId{t}, s.blocks / seconds, s.bytes / seconds});
  }
  return out;
}

}  // namespace concord::policy
