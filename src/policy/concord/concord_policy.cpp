#include "policy/concord/concord_policy.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "mechanism/params.h"

namespace concord::policy {

bool ConcordPolicy::is_lc(const SchedContext& ctx, TenantId t) const {
  return ctx.tenant(t).info.cls == TenantClass::latency_critical;
}

bool ConcordPolicy::elastic(const SchedContext& ctx, const KernelSpec& kernel) const {
  const Capabilities caps = ctx.capabilities(kernel);
  return caps.persistent_form && caps.resize;
}

const OrionOp& ConcordPolicy::op_of(const SchedContext& ctx, const KernelSpec& kernel) {
  auto it = ops_.find(&kernel);
  if (it == ops_.end()) it = ops_.emplace(&kernel, orion_op(ctx.estimator(), kernel)).first;
  return it->second;
}

int ConcordPolicy::need_of(const SchedContext& ctx, const KernelSpec& kernel) {
  auto it = needs_.find(&kernel);
  if (it == needs_.end()) {
    if (tpcs_.empty()) tpcs_ = tpcs_in_order(ctx.device());
    it = needs_.emplace(&kernel, kernel_min_tpcs(ctx.estimator(), kernel, kernel.default_variant, tpcs_, o_.tolerance)).first;
  }
  return it->second;
}

Status ConcordPolicy::on_start(SchedContext& ctx) {
  // The needs of hinted LC kernels, worked out when their tenants joined, stay.
  if (tpcs_.empty()) tpcs_ = tpcs_in_order(ctx.device());
  elastic_.clear();
  lc_flights_.clear();
  lc_baseline_.clear();
  lc_request_.clear();
  be_beside_.clear();
  held_.clear();
  as_opaque_.clear();
  gate_ = {};
  last_be_tenant_ = -1;
  lc_launches_ = be_alone_ = be_persistent_alone_ = be_elastic_beside_lc_ = be_opaque_admitted_beside_lc_ = be_opaque_held_ = be_elastic_held_ = resizes_ = 0;
  be_elastic_as_opaque_ = be_elastic_interfering_ = lc_baseline_samples_ = lc_judged_samples_ = 0;
  return Status::ok();
}

Status ConcordPolicy::on_tenant_joined(SchedContext& ctx, TenantId tenant) {
  const TenantView& view = ctx.tenant(tenant);
  if (view.info.cls != TenantClass::latency_critical || !view.hints) return Status::ok();
  Seconds sum = 0;
  for (const TenantHints::Step& s : view.hints->request) {
    sum += static_cast<double>(s.count) * op_of(ctx, *s.kernel).seconds;
    need_of(ctx, *s.kernel);
  }
  lc_.hinted(tenant, sum);
  return Status::ok();
}

bool ConcordPolicy::interferes(const KernelSpec* kernel) const {
  auto it = be_beside_.find(kernel);
  return it != be_beside_.end() && it->second.interferes;
}

bool ConcordPolicy::has_baseline(TenantId tenant) const {
  const auto t = static_cast<size_t>(tenant.value);
  return t < lc_baseline_.size() && lc_baseline_[t].samples > 0;
}

void ConcordPolicy::learn(const Completion& completion, Seconds now) {
  auto it = lc_flights_.find(completion.dispatch.value);
  if (it == lc_flights_.end()) return;
  const LcFlight flight = std::move(it->second);
  lc_flights_.erase(it);
  const auto t = static_cast<size_t>(flight.tenant.value);
  if (t >= lc_request_.size() || lc_request_[t].request != flight.request) return;
  LcRequest& q = lc_request_[t];
  if (!completion.error.is_ok() || completion.preempted) q.spoiled = true;
  if (!flight.last) return;
  const Seconds latency = now - q.arrival;
  const bool spoiled = q.spoiled || !(latency > 0);
  std::vector<const KernelSpec*> beside = std::move(q.beside);
  q = LcRequest{};
  if (spoiled) return;
  if (beside.empty()) {
    // No shrunk elastic BE beside any of its kernels (Orion's admissions only): a baseline sample.
    if (lc_baseline_.size() <= t) lc_baseline_.resize(t + 1);
    LcBaseline& b = lc_baseline_[t];
    ++b.samples;
    b.seconds += (latency - b.seconds) / static_cast<double>(b.samples);
    ++lc_baseline_samples_;
    return;
  }
  if (!has_baseline(flight.tenant)) return;
  const double ratio = latency / lc_baseline_[t].seconds;
  ++lc_judged_samples_;
  std::sort(beside.begin(), beside.end());  // each BE kernel judged once per request
  beside.erase(std::unique(beside.begin(), beside.end()), beside.end());
  for (const KernelSpec* k : beside) {
    BeBeside& b = be_beside_[k];
    ++b.samples;
    b.slowdown += (ratio - b.slowdown) / static_cast<double>(b.samples);
    // From the first verdict (the header says why): a kernel judged wrongly costs BE throughput,
    // one judged late costs the LC's tail.
    if (!b.interferes && b.slowdown > 1 + o_.slack) {
      b.interferes = true;
      ++be_elastic_interfering_;
    }
  }
}

Status ConcordPolicy::on_complete(SchedContext& ctx, const Completion& completion) {
  elastic_.erase(completion.dispatch.value);
  learn(completion, ctx.now());
  return schedule(ctx);
}

Status ConcordPolicy::resize_elastic(SchedContext& ctx, const SmSet& be_side, int tlp) {
  const auto running = ctx.running();
  for (auto& [id, flight] : elastic_) {
    const bool tlp_changes = flight.tlp != tlp && ctx.capabilities(*flight.kernel).tlp;
    if (flight.sms == be_side && !tlp_changes) continue;
    // A dispatch may have ended before its completion reached on_complete: ask nothing of it.
    const bool alive = std::any_of(running.begin(), running.end(), [&](const RunningDispatch& r) { return r.id == flight.id; });
    if (!alive) continue;
    if (flight.sms != be_side) {
      CONCORD_RETURN_IF_ERROR(ctx.resize(flight.id, be_side));
      flight.sms = be_side;
      ++resizes_;
    }
    if (tlp_changes) {
      CONCORD_RETURN_IF_ERROR(ctx.set_tlp(flight.id, tlp));
      flight.tlp = tlp;
    }
  }
  return Status::ok();
}

Status ConcordPolicy::schedule(SchedContext& ctx) {
  if (tpcs_.empty()) tpcs_ = tpcs_in_order(ctx.device());
  const auto tenants = ctx.tenants();
  waiting_.clear();
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting_.push_back(r);
  }
  // LC kernels launch at once, on every SM, at high priority.
  for (const ReadyLaunch& r : waiting_) {
    if (!is_lc(ctx, r.tenant)) continue;
    lc_.launched(r.tenant, op_of(ctx, *r.kernel).seconds, r.request, r.last_of_request);
    Placement p = whole_gpu(ctx);
    p.priority = kHighStreamPriority;
    auto d = ctx.dispatch(r.id, p);
    if (!d) return d.status();
    ++lc_launches_;
    const auto t = static_cast<size_t>(r.tenant.value);
    if (lc_request_.size() <= t) lc_request_.resize(t + 1);
    LcRequest& q = lc_request_[t];
    if (q.request != r.request) q = LcRequest{r.request, r.request_arrival, false, {}};
    lc_flights_[d->value] = LcFlight{r.tenant, r.request, r.last_of_request};
    // Elastic kernels still running: one whose completion comes later in the same batch has
    // already left running() and runs beside nothing.
    const auto running = ctx.running();  // taken after the dispatch: the span may move with it
    for (const auto& [id, e] : elastic_) {
      const bool alive = std::any_of(running.begin(), running.end(), [&](const RunningDispatch& rd) { return rd.id == e.id; });
      if (alive) q.beside.push_back(e.kernel);
    }
  }
  std::erase_if(waiting_, [&](const ReadyLaunch& r) { return is_lc(ctx, r.tenant); });
  // No BE launch to decide and no elastic one to resize: nothing more to read.
  if (waiting_.empty() && elastic_.empty()) return Status::ok();

  // The present as Orion's rule reads it, and the TPC need of the LC kernels running.
  OrionPresent present = present_.read(ctx, ctx.device().sm_count, o_.dur_fraction, lc_,
                                       [&](const KernelSpec& k) -> const OrionOp& { return op_of(ctx, k); });
  OrionView& view = present.view;
  const OrionRule& rule = present.rule;
  int need = 0;
  bool lc_proven = true;  // every LC tenant with work running or queued has a baseline
  for (const RunningDispatch& d : ctx.running()) {
    if (!is_lc(ctx, d.tenants.front())) continue;
    need = std::max(need, need_of(ctx, *d.kernels.front()));
    lc_proven = lc_proven && has_baseline(d.tenants.front());
  }
  // The LC side covers what each LC tenant has submitted behind its running kernel too (up to
  // `window` launches per tenant; SGDRC's window counts them across tenants): a request's
  // kernels follow one another, and a side sized for the running one alone would shrink the BE
  // again at each of the next (each shrink waits for the BE's blocks on the SMs it leaves), and
  // let it grow back in the gaps between them.
  bool lc_queued = false;
  for (const TenantView& tv : tenants) {
    if (tv.info.cls != TenantClass::latency_critical) continue;
    int k = 0;
    for (const QueuedLaunch& q : ctx.queued(tv.id)) {
      if (k++ >= o_.window) break;
      need = std::max(need, need_of(ctx, *q.kernel));
      lc_proven = lc_proven && has_baseline(tv.id);
      lc_queued = true;
    }
  }
  const bool lc_work = view.lc_active || lc_queued;

  // Tidal split for elastic BE: the LC side while LC work runs, every SM otherwise (worked out
  // only when an elastic kernel runs or is placed).
  std::optional<SmSet> be_side;
  const auto side = [&]() -> const SmSet& {
    if (!be_side) {
      const int tpc_count = static_cast<int>(tpcs_.size());
      TidalSplit split = tidal_split(tpcs_, lc_work ? round_lc_need(need, tpc_count, o_.steps, o_.be_reserve) : 0);
      be_side = split.be.empty() ? ctx.device().all_sms() : split.be;
    }
    return *be_side;
  };
  const int be_tlp = lc_work ? o_.be_tlp : 0;
  if (!elastic_.empty()) CONCORD_RETURN_IF_ERROR(resize_elastic(ctx, side(), be_tlp));

  // BE launches in turns, from the tenant after the last one launched.
  const auto n = static_cast<int64_t>(tenants.size());
  auto turn = [&](const ReadyLaunch& r) { return (r.tenant.value - last_be_tenant_ - 1 + 2 * n) % n; };
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](const ReadyLaunch& a, const ReadyLaunch& b) { return turn(a) < turn(b); });
  gate_.pass_sms = 0;
  for (const ReadyLaunch& r : waiting_) {
    Placement p = whole_gpu(ctx);
    p.priority = kNormalStreamPriority;
    bool as_elastic = elastic(ctx, *r.kernel);
    if (as_elastic && lc_work) {
      // Beside LC work only where measured to leave the LC alone; otherwise Orion's whole rule.
      as_elastic = lc_proven && !interferes(r.kernel);
      if (!as_elastic && as_opaque_.insert(r.id.value).second) ++be_elastic_as_opaque_;
    } else if (as_elastic && (o_.native_alone || interferes(r.kernel))) {
      // Nothing to shrink for (the native form is the fastest), or it may not run beside LC work.
      as_elastic = false;
    }
    if (as_elastic) {
      // Elastic: persistent on the BE side, shrunk and grown with the split while it runs. Beside
      // LC work it still passes Orion's profile and duration rules (not its SM count: it shrinks
      // instead): a BE kernel on the other TPCs still shares DRAM bandwidth and L2 with the LC's,
      // so a memory-bound one beside a memory-bound LC kernel slows it whatever its SMs.
      OrionDecision decision;
      if (o_.elastic_gate) {
        OrionRule shrunk = rule;
        shrunk.sm_threshold = std::numeric_limits<int64_t>::max();
        decision = orion_admit(shrunk, gate_, view, op_of(ctx, *r.kernel));
        if (decision.verdict != OrionVerdict::launch) {
          if (held_.insert(r.id.value).second) ++be_elastic_held_;
          continue;
        }
        // Confined to the BE side, it takes none of the SMs the gate counts for opaque launches.
        const int64_t pass_sms = gate_.pass_sms;
        gate_ = decision.state;
        gate_.pass_sms = pass_sms;
      }
      p.sms = side();
      p.form = LaunchForm::persistent;
      if (ctx.capabilities(*r.kernel).tlp) p.tlp = be_tlp;
      auto d = ctx.dispatch(r.id, p);
      if (!d) return d.status();
      elastic_[d->value] = ElasticFlight{*d, r.kernel, p.sms, p.tlp};
      for (const auto& [id, flight] : lc_flights_) lc_request_[static_cast<size_t>(flight.tenant.value)].beside.push_back(r.kernel);
      ++(lc_work ? be_elastic_beside_lc_ : be_persistent_alone_);
    } else {
      // Opaque: Orion's admission rule.
      const OrionDecision decision = orion_admit(rule, gate_, view, op_of(ctx, *r.kernel));
      if (decision.verdict != OrionVerdict::launch) {
        if (held_.insert(r.id.value).second) ++be_opaque_held_;
        continue;
      }
      auto d = ctx.dispatch(r.id, p);
      if (!d) return d.status();
      gate_ = decision.state;
      ++(lc_work ? be_opaque_admitted_beside_lc_ : be_alone_);
    }
    held_.erase(r.id.value);
    as_opaque_.erase(r.id.value);
    view.be_running = true;
    last_be_tenant_ = r.tenant.value;
  }
  return Status::ok();
}

std::map<std::string, double> ConcordPolicy::stats() const {
  // The LC requests' mean slowdown beside each judged elastic BE kernel, least and most.
  double least = 0, most = 0;
  for (const auto& [kernel, b] : be_beside_) {
    if (b.samples == 0) continue;
    const double m = b.slowdown;
    least = least == 0 ? m : std::min(least, m);
    most = std::max(most, m);
  }
  return {{"concord.lc_slowdown_beside_elastic_min", least},
          {"concord.lc_slowdown_beside_elastic_max", most},
          {"concord.lc_launches", static_cast<double>(lc_launches_)},
          {"concord.be_alone", static_cast<double>(be_alone_)},
          {"concord.be_persistent_alone", static_cast<double>(be_persistent_alone_)},
          {"concord.be_elastic_beside_lc", static_cast<double>(be_elastic_beside_lc_)},
          {"concord.be_opaque_admitted_beside_lc", static_cast<double>(be_opaque_admitted_beside_lc_)},
          {"concord.be_opaque_held", static_cast<double>(be_opaque_held_)},
          {"concord.be_elastic_held", static_cast<double>(be_elastic_held_)},
          {"concord.be_resizes", static_cast<double>(resizes_)},
          {"concord.be_elastic_as_opaque", static_cast<double>(be_elastic_as_opaque_)},
          {"concord.be_elastic_interfering", static_cast<double>(be_elastic_interfering_)},
          {"concord.lc_baseline_samples", static_cast<double>(lc_baseline_samples_)},
          {"concord.lc_judged_samples", static_cast<double>(lc_judged_samples_)}};
}

Result<std::unique_ptr<Policy>> make_concord(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("concord", params, {"dur_fraction", "tolerance", "steps", "reserve", "window", "be_tlp", "elastic_gate", "native_alone", "slack"}));
  ConcordOptions o;
  auto fraction = double_param(params, "dur_fraction", o.dur_fraction);
  if (!fraction) return fraction.status();
  if (!(*fraction > 0)) {
    return Status::invalid_argument("concord: parameter 'dur_fraction' must be above 0 (a share of the LC request's latency), not '" +
                                    params.at("dur_fraction") + "'");
  }
  auto tolerance = double_param(params, "tolerance", o.tolerance);
  if (!tolerance) return tolerance.status();
  if (!(*tolerance >= 0 && *tolerance < 1)) {
    return Status::invalid_argument("concord: parameter 'tolerance' must be in [0, 1) (a share of the minimum latency), not '" +
                                    params.at("tolerance") + "'");
  }
  auto native = bool_param(params, "native_alone", o.native_alone);
  if (!native) return native.status();
  o.native_alone = *native;
  auto slack = double_param(params, "slack", o.slack);
  if (!slack) return slack.status();
  if (!(*slack >= 0)) {
    return Status::invalid_argument("concord: parameter 'slack' must be 0 or above (a share of the LC kernel's time without elastic BE), not '" +
                                    params.at("slack") + "'");
  }
  o.slack = *slack;
  auto gate = bool_param(params, "elastic_gate", o.elastic_gate);
  if (!gate) return gate.status();
  o.elastic_gate = *gate;
  auto be_tlp = int_param(params, "be_tlp", o.be_tlp, 0);
  if (!be_tlp) return be_tlp.status();
  o.be_tlp = *be_tlp;
  auto window = int_param(params, "window", o.window, 0);
  if (!window) return window.status();
  o.window = *window;
  auto steps = int_param(params, "steps", o.steps, 1);
  if (!steps) return steps.status();
  auto reserve = int_param(params, "reserve", o.be_reserve, 1);
  if (!reserve) return reserve.status();
  o.dur_fraction = *fraction;
  o.tolerance = *tolerance;
  o.steps = *steps;
  o.be_reserve = *reserve;
  return std::unique_ptr<Policy>(std::make_unique<ConcordPolicy>(o));
}

}  // namespace concord::policy
