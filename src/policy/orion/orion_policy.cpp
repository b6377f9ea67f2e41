#include "policy/orion/orion_policy.h"

#include <algorithm>

#include "mechanism/params.h"
#include "policy/priority_streams/priority_streams_policy.h"
#include "policy/streams/streams_policy.h"

namespace concord::policy {

Status OrionPolicy::on_start(SchedContext& ctx) {
  sm_threshold_ = options_.sm_threshold > 0 ? options_.sm_threshold : ctx.device().sm_count;
  return Status::ok();
}

const OrionOp& OrionPolicy::op_of(const SchedContext& ctx, const KernelSpec& kernel) {
  auto it = ops_.find(&kernel);
  if (it == ops_.end()) it = ops_.emplace(&kernel, orion_op(ctx.estimator(), kernel)).first;
  return it->second;
}

Status OrionPolicy::on_tenant_joined(SchedContext& ctx, TenantId tenant) {
  const TenantView& view = ctx.tenant(tenant);
  if (view.info.cls != TenantClass::latency_critical || !view.hints) return Status::ok();
  Seconds sum = 0;
  for (const TenantHints::Step& s : view.hints->request) sum += static_cast<double>(s.count) * op_of(ctx, *s.kernel).seconds;
  lc_.hinted(tenant, sum);
  return Status::ok();
}

Status OrionPolicy::launch_lc(SchedContext& ctx, const ReadyLaunch& r) {
  lc_.launched(r.tenant, op_of(ctx, *r.kernel).seconds, r.request, r.last_of_request);
  if (options_.ahead && !r.last_of_request) {
    // What dispatch_with_request queues behind it: the rest of the request as submitted.
    for (const QueuedLaunch& q : ctx.queued(r.tenant)) {
      if (q.request != r.request) break;
      lc_.launched(r.tenant, op_of(ctx, *q.kernel).seconds, q.request, q.last_of_request);
      if (q.last_of_request) break;
    }
  }
  Placement p = whole_gpu(ctx);
  p.priority = class_priority(TenantClass::latency_critical);
  return dispatch_with_request(ctx, r, p, options_.ahead);
}

Status OrionPolicy::schedule(SchedContext& ctx) {
  waiting_.clear();
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting_.push_back(r);
  }
  const auto tenants = ctx.tenants();
  auto is_lc = [&](TenantId t) { return ctx.tenant(t).info.cls == TenantClass::latency_critical; };
  // LC kernels launch at once.
  for (const ReadyLaunch& r : waiting_) {
    if (is_lc(r.tenant)) CONCORD_RETURN_IF_ERROR(launch_lc(ctx, r));
  }
  // The present: which LC requests are active and what each runs, and whether any BE kernel runs.
  OrionPresent present = present_.read(ctx, sm_threshold_, options_.dur_fraction, lc_,
                                       [&](const KernelSpec& k) -> const OrionOp& { return op_of(ctx, k); });
  OrionView& view = present.view;
  const OrionRule& rule = present.rule;
  // BE kernels in turns, from the tenant after the last one launched; each pass counts SMs anew.
  const auto n = static_cast<int64_t>(tenants.size());
  auto turn = [&](const ReadyLaunch& r) { return (r.tenant.value - last_be_tenant_ - 1 + 2 * n) % n; };
  std::erase_if(waiting_, [&](const ReadyLaunch& r) { return is_lc(r.tenant); });
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](const ReadyLaunch& a, const ReadyLaunch& b) { return turn(a) < turn(b); });
  be_.pass_sms = 0;
  for (const ReadyLaunch& r : waiting_) {
    const OrionDecision decision = orion_admit(rule, be_, view, op_of(ctx, *r.kernel));
    if (decision.verdict != OrionVerdict::launch) continue;
    Placement p = whole_gpu(ctx);
    p.priority = class_priority(TenantClass::best_effort);
    auto d = ctx.dispatch(r.id, p);
    if (!d) return d.status();
    be_ = decision.state;
    view.be_running = true;
    last_be_tenant_ = r.tenant.value;
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_orion(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("orion", params, {"sm_threshold", "dur_fraction", "ahead"}));
  OrionOptions o;
  auto sms = int_param(params, "sm_threshold", 0, 1);  // absent: 0, the device's SM count
  if (!sms) return sms.status();
  o.sm_threshold = *sms;
  auto fraction = double_param(params, "dur_fraction", o.dur_fraction);
  if (!fraction) return fraction.status();
  if (!(*fraction > 0)) {
    return Status::invalid_argument("orion: parameter 'dur_fraction' must be above 0 (a share of the LC request's latency), not '" +
                                    params.at("dur_fraction") + "'");
  }
  o.dur_fraction = *fraction;
  auto ahead = ahead_flag("orion", params);
  if (!ahead) return ahead.status();
  o.ahead = *ahead;
  return std::unique_ptr<Policy>(std::make_unique<OrionPolicy>(o));
}

}  // namespace concord::policy
