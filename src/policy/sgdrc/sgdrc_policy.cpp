#include "policy/sgdrc/sgdrc_policy.h"

#include <algorithm>

#include "mechanism/params.h"

namespace concord::policy {
namespace {

bool is_lc(const SchedContext& ctx, TenantId t) { return ctx.tenant(t).info.cls == TenantClass::latency_critical; }

// Completions come in batches: a dispatch may have ended (the engine no longer runs it) before
// the policy hears of it in its own on_complete, so nothing may be asked of it meanwhile.
bool still_running(const SchedContext& ctx, DispatchId id) {
  const auto running = ctx.running();
  return std::any_of(running.begin(), running.end(), [&](const RunningDispatch& r) { return r.id == id; });
}

}  // namespace

int SgdrcPolicy::need_of(const SchedContext& ctx, const KernelSpec& kernel, int variant) {
  const auto key = std::make_pair(&kernel, variant);
  auto it = needs_.find(key);
  if (it == needs_.end()) {
    if (tpcs_.empty()) tpcs_ = tpcs_in_order(ctx.device());
    it = needs_.emplace(key, kernel_min_tpcs(ctx.estimator(), kernel, variant, tpcs_, o_.tolerance)).first;
  }
  return it->second;
}

OrionProfile SgdrcPolicy::profile_of(const SchedContext& ctx, const KernelSpec& kernel) {
  auto it = profiles_.find(&kernel);
  if (it == profiles_.end()) it = profiles_.emplace(&kernel, orion_op(ctx.estimator(), kernel).profile).first;
  return it->second;
}

int SgdrcPolicy::be_tlp_for(const SchedContext& ctx, const TidalSplit& split, const KernelSpec& be_kernel) {
  if (split.lc_tpcs == 0) return 0;
  if (o_.be_throttle_by_profile && lc_) {
    const OrionProfile lc = profile_of(ctx, *lc_->kernel), be = profile_of(ctx, be_kernel);
    if (lc != OrionProfile::unknown && be != OrionProfile::unknown && lc != be) return 0;
  }
  return o_.be_tlp;
}

Status SgdrcPolicy::on_start(SchedContext& ctx) {
  tpcs_ = tpcs_in_order(ctx.device());
  needs_.clear();
  profiles_.clear();
  lc_.reset();
  be_.clear();
  lc_cursor_ = be_cursor_ = -1;
  const int tpc_count = static_cast<int>(tpcs_.size());
  const std::vector<int> sizes = lc_share_sizes(tpc_count, o_.steps, o_.be_reserve);
  for (const TenantView& t : ctx.tenants()) {
    // The offline phase: each LC kernel's need, where the tenant says what it will run.
    bool native = !t.hints.has_value();  // without hints, any launch may be opaque
    if (t.info.cls == TenantClass::latency_critical && o_.lc_native && !o_.lc_all_sms) native = true;
    if (t.hints) {
      for (const auto& step : t.hints->request) {
        if (t.info.cls == TenantClass::latency_critical) need_of(ctx, *step.kernel, step.kernel->default_variant);
        native = native || !ctx.capabilities(*step.kernel).persistent_form;
      }
    }
    if (!native) continue;
    // Native launches run on green contexts: make the few this tenant's side can get now.
    for (int size : sizes) {
      const TidalSplit split = tidal_split(tpcs_, size);
      const SmSet& sms = t.info.cls == TenantClass::latency_critical ? split.lc : split.be;
      if (!sms.empty()) CONCORD_RETURN_IF_ERROR(ctx.prepare_sm_set(sms, t.id));
    }
  }
  return Status::ok();
}

Status SgdrcPolicy::on_complete(SchedContext& ctx, const Completion& completion) {
  if (lc_ && lc_->id == completion.dispatch) lc_.reset();
  for (auto it = be_.begin(); it != be_.end(); ++it) {
    if (it->second.id == completion.dispatch) {
      be_.erase(it);
      break;
    }
  }
  return schedule(ctx);
}

std::optional<ReadyLaunch> SgdrcPolicy::next_of(const SchedContext& ctx, TenantClass cls, int64_t cursor) const {
  const auto n = static_cast<int64_t>(ctx.tenants().size());
  const ReadyLaunch* best = nullptr;
  int64_t best_turn = n;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (r.has_running_dispatch || ctx.tenant(r.tenant).info.cls != cls) continue;
    const int64_t turn = ((r.tenant.value - cursor - 1) % n + n) % n;  // 0: the tenant right after the cursor
    if (turn < best_turn) {
      best_turn = turn;
      best = &r;
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

int SgdrcPolicy::lc_need(SchedContext& ctx, TenantId head_tenant, const KernelSpec& head_kernel) {
  const auto n = static_cast<int64_t>(ctx.tenants().size());
  const size_t per_tenant = static_cast<size_t>(o_.window) + 1;  // no tenant contributes more than the window holds
  streams_.clear();
  for (int64_t i = 0; i < n; ++i) {
    const TenantId t{(head_tenant.value + i) % n};
    if (!is_lc(ctx, t)) continue;
    std::vector<int> s;
    if (t == head_tenant) {
      s.push_back(need_of(ctx, head_kernel, head_kernel.default_variant));
    } else {
      for (const ReadyLaunch& r : ctx.ready()) {
        if (r.tenant == t) {
          s.push_back(need_of(ctx, *r.kernel, r.kernel->default_variant));
          break;
        }
      }
    }
    // What the tenant has submitted behind its ready or running launch (a tenant with nothing
    // ready has nothing queued).
    if (!s.empty()) {
      for (const QueuedLaunch& q : ctx.queued(t)) {
        if (s.size() >= per_tenant) break;
        s.push_back(need_of(ctx, *q.kernel, q.kernel->default_variant));
      }
    }
    streams_.push_back(std::move(s));
  }
  return window_need(streams_, o_.window);
}

Placement SgdrcPolicy::placement_on(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, int tlp,
                                    bool native) const {
  const Capabilities caps = ctx.capabilities(kernel);
  Placement p;
  p.sms = sms;
  if (caps.persistent_form && !native) {
    // Elastic kernels run persistent (Section 7.1's persistent-thread style): their SM set and
    // resident blocks can change while they run.
    p.form = LaunchForm::persistent;
    if (caps.tlp) p.tlp = tlp;
  }
  return p;
}

Status SgdrcPolicy::apply_to_be(SchedContext& ctx, const TidalSplit& split) {
  for (auto& [tenant, be] : be_) {
    if (!be.resizable || !still_running(ctx, be.id)) continue;
    if (be.sms != split.be) {
      CONCORD_RETURN_IF_ERROR(ctx.resize(be.id, split.be));
      be.sms = split.be;
    }
    const int tlp = be_tlp_for(ctx, split, *be.kernel);
    if (be.tlp != tlp && ctx.capabilities(*be.kernel).tlp) {
      CONCORD_RETURN_IF_ERROR(ctx.set_tlp(be.id, tlp));
      be.tlp = tlp;
    }
  }
  return Status::ok();
}

Status SgdrcPolicy::schedule(SchedContext& ctx) {
  if (tpcs_.empty()) tpcs_ = tpcs_in_order(ctx.device());
  std::optional<ReadyLaunch> lc_next;
  if (!lc_) lc_next = next_of(ctx, TenantClass::latency_critical, lc_cursor_);
  int need = 0;
  if (lc_) need = lc_need(ctx, lc_->tenant, *lc_->kernel);
  else if (lc_next) need = lc_need(ctx, lc_next->tenant, *lc_next->kernel);
  const int tpc_count = static_cast<int>(tpcs_.size());
  TidalSplit split = tidal_split(tpcs_, round_lc_need(need, tpc_count, o_.steps, o_.be_reserve));
  if (split.be.empty()) split.be = ctx.device().all_sms();  // a one-TPC device: nothing to split

  // The LC kernel is launched first, so the host's wait for the BE resize is not on its path;
  // with the higher stream priority its blocks take the LC side's slots as BE's blocks leave them
  // (resize is SGDRC's eviction: blocks on SMs leaving the set exit within one logical block).
  if (lc_next) {
    const SmSet& lc_sms = o_.lc_all_sms || split.lc.empty() ? ctx.device().all_sms() : split.lc;
    Placement p = placement_on(ctx, *lc_next->kernel, lc_sms, 0, o_.lc_native);
    p.priority = kHighStreamPriority;
    p.l2_persist = o_.lc_l2_persist;  // the memory substitute for channel colouring (docs/policies.md)
    auto d = ctx.dispatch(lc_next->id, p);
    if (!d) return d.status();
    lc_ = Flight{*d, lc_next->tenant, lc_next->kernel, p.form == LaunchForm::persistent, p.sms, 0};
    lc_cursor_ = lc_next->tenant.value;
  }
  CONCORD_RETURN_IF_ERROR(apply_to_be(ctx, split));
  // One BE kernel in flight (the paper), or one per BE tenant (be_per_tenant), in round-robin
  // order. A tenant with a kernel in flight has no other ready (stream order), so next_of skips it.
  while (be_.empty() || o_.be_per_tenant) {
    const std::optional<ReadyLaunch> be_next = next_of(ctx, TenantClass::best_effort, be_cursor_);
    if (!be_next || be_.count(be_next->tenant.value)) break;
    const Placement p = placement_on(ctx, *be_next->kernel, split.be, be_tlp_for(ctx, split, *be_next->kernel));
    auto d = ctx.dispatch(be_next->id, p);
    if (!d) return d.status();
    const bool resizable = p.form == LaunchForm::persistent && ctx.capabilities(*be_next->kernel).resize;
    be_.emplace(be_next->tenant.value, Flight{*d, be_next->tenant, be_next->kernel, resizable, p.sms, p.tlp});
    be_cursor_ = be_next->tenant.value;
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_sgdrc(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("sgdrc", params, {"window", "tolerance", "steps", "reserve", "be_tlp", "l2_persist", "lc_sms",
                                               "lc_form", "be_flights", "be_throttle"}));
  SgdrcOptions o;
  auto window = int_param(params, "window", o.window, 0);
  if (!window) return window.status();
  auto tolerance = double_param(params, "tolerance", o.tolerance);
  if (!tolerance) return tolerance.status();
  if (!(*tolerance >= 0 && *tolerance < 1)) {
    return Status::invalid_argument("parameter 'tolerance': must be in [0, 1) (a share of the minimum latency)");
  }
  auto steps = int_param(params, "steps", o.steps, 1);
  if (!steps) return steps.status();
  auto reserve = int_param(params, "reserve", o.be_reserve, 1);
  if (!reserve) return reserve.status();
  auto be_tlp = int_param(params, "be_tlp", o.be_tlp, 0);
  if (!be_tlp) return be_tlp.status();
  auto l2 = bool_param(params, "l2_persist", o.lc_l2_persist);
  auto all_sms = choice_param(params, "lc_sms", "need", "all", o.lc_all_sms);
  auto native = choice_param(params, "lc_form", "persistent", "native", o.lc_native);
  auto per_tenant = choice_param(params, "be_flights", "one", "tenant", o.be_per_tenant);
  auto by_profile = choice_param(params, "be_throttle", "always", "profile", o.be_throttle_by_profile);
  for (const Status& s : {l2.status(), all_sms.status(), native.status(), per_tenant.status(), by_profile.status()}) {
    CONCORD_RETURN_IF_ERROR(s);
  }
  o.be_throttle_by_profile = *by_profile;
  o.lc_l2_persist = *l2;
  o.lc_all_sms = *all_sms;
  o.lc_native = *native;
  o.be_per_tenant = *per_tenant;
  o.window = *window;
  o.tolerance = *tolerance;
  o.steps = *steps;
  o.be_reserve = *reserve;
  o.be_tlp = *be_tlp;
  return std::unique_ptr<Policy>(std::make_unique<SgdrcPolicy>(o));
}

}  // namespace concord::policy
