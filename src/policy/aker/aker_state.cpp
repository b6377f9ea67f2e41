#include "policy/aker/aker_state.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "concord/occupancy.h"
#include "concord/placement_rule.h"

namespace concord::policy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_lc(const SchedContext& ctx, TenantId t) { return ctx.tenant(t).info.cls == TenantClass::latency_critical; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Achieved utilisations from the estimator's time on every SM (what the profiler derives from its
// measured curve: KernelProfile's compute_utilization and memory_utilization).
AkerUtilisation estimated_utilisation(const DeviceSpec& dev, const KernelSpec& k, const KernelVariant& v, Seconds seconds) {
  AkerUtilisation u;
  u.tensor = k.unit == ComputeUnit::tensor;
  if (!(seconds > 0)) return u;
  const double blocks = static_cast<double>(v.logical_blocks);
  const double peak = u.tensor ? dev.tensor_flops : dev.fp32_flops;
  u.compute = peak > 0 ? v.flops_per_block * blocks / seconds / peak : 0;
  u.memory = dev.dram_bytes_per_s > 0 ? v.bytes_per_block * blocks / seconds / dev.dram_bytes_per_s : 0;
  return u;
}

}  // namespace

const AkerKernel& AkerState::kernel(const SchedContext& ctx, const KernelSpec& k, int variant) {
  const auto key = std::make_pair(&k, variant);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  AkerKernel out;
  const KernelVariant& v = k.variant(variant);
  if (auto f = v.facets.find(kAkerFacetName); f != v.facets.end()) {
    // Attached facets were checked when they were stored and attached; one that does not read
    // here is treated as absent.
    if (auto facet = aker_facet_from_json(f->second)) out.facet = std::move(*facet);
  }
  const Seconds whole = ctx.estimator().seconds(k, variant, ctx.device().sm_count);
  if (out.facet) {
    out.cls = out.facet->cls;
    out.utilisation = out.facet->utilisation;
    if (out.facet->solo.size() >= 2) {
      if (auto solo = AkerSoloModel::fit(out.facet->solo)) {
        out.solo = std::move(*solo);
        out.measured = true;
      }
    }
  } else {
    out.utilisation = estimated_utilisation(ctx.device(), k, v, whole);
    out.cls = aker_class(out.utilisation);
  }
  if (!out.measured) out.solo = AkerSoloModel::proportional(static_cast<double>(v.logical_blocks), whole);
  return kernels_.emplace(key, std::move(out)).first->second;
}

BlockRange aker_pending_in(const ReadyLaunch& r, int variant) {
  if (r.variant >= 0 || variant == r.kernel->default_variant) return r.pending;
  return BlockRange{0, r.kernel->variant(variant).logical_blocks};
}

const AkerVersion* AkerState::version(const SchedContext& ctx, const ReadyLaunch& self_launch, const ReadyLaunch& partner_launch) {
  const KernelSpec& self = *self_launch.kernel;
  const KernelSpec& partner = *partner_launch.kernel;
  if (refused_.count({&self, &partner})) return nullptr;
  const VersionKey key{&self, &partner, self_launch.variant, partner_launch.variant};
  if (auto it = versions_.find(key); it != versions_.end()) return it->second ? &*it->second : nullptr;
  const DeviceSpec& dev = ctx.device();
  FusionShapeFilter within;
  within.variant_a = self_launch.variant;
  within.variant_b = partner_launch.variant;
  // Measured versions: every variant of K_1 whose facet holds entries for this partner, each
  // entry's partner variant and ratio as long as the launches allow them and the block fits.
  std::vector<AkerFusedModel> models;
  std::vector<AkerVersion> measured;
  for (int va = 0; va < self.variant_count(); ++va) {
    if (within.variant_a >= 0 && va != within.variant_a) continue;
    const AkerKernel& a = kernel(ctx, self, va);
    if (!a.facet) continue;
    for (const AkerFusedEntry& e : a.facet->fused) {
      if (e.partner != partner.name || e.partner_size != partner.size) continue;
      int vb = -1;
      for (int i = 0; i < partner.variant_count(); ++i) {
        if (partner.variant(i).name == e.partner_variant) vb = i;
      }
      if (vb < 0 || (within.variant_b >= 0 && vb != within.variant_b)) continue;
      FusionShapeFilter exact{va, vb, e.self_parts, e.partner_parts};
      const std::vector<FusionShape> fits = fusion_shapes_that_fit(dev, self, partner, exact);
      if (fits.empty()) continue;
      auto m = AkerFusedModel::fit(e.points);
      if (!m) continue;
      models.push_back(*m);
      measured.push_back(AkerVersion{std::move(*m), va, vb, e.self_parts, e.partner_parts, fits.front().blocks_per_sm, true});
    }
  }
  std::optional<AkerVersion> best;
  if (const auto i = aker_best_version(models)) {
    best = std::move(measured[*i]);
  } else if (const auto shape = best_fusion_shape(dev, self, partner, within)) {
    const AkerKernel& a = kernel(ctx, self, shape->variant_a);
    const AkerKernel& b = kernel(ctx, partner, shape->variant_b);
    best = AkerVersion{AkerFusedModel::estimated(aker_contention(a.utilisation, b.utilisation)),
                       shape->variant_a,
                       shape->variant_b,
                       shape->parts_a,
                       shape->parts_b,
                       shape->blocks_per_sm,
                       false};
  }
  auto& stored = versions_.emplace(key, std::move(best)).first->second;
  return stored ? &*stored : nullptr;
}

std::optional<int> AkerState::pair_rank(const SchedContext& ctx, const KernelSpec& a, const KernelSpec& b) {
  if (&a == &b || refused_.count({&a, &b})) return std::nullopt;
  const Capabilities ca = ctx.capabilities(a), cb = ctx.capabilities(b);
  if (!ca.fusion || !cb.fusion || !ca.persistent_form || !cb.persistent_form) return std::nullopt;
  return aker_pair_rank(kernel(ctx, a, a.default_variant).cls, kernel(ctx, b, b.default_variant).cls);
}

Seconds AkerState::idle_limit(const SchedContext& ctx) const {
  if (!(idle_cap_ > 0)) return kInf;
  Seconds least = kInf;
  for (const TenantView& t : ctx.tenants()) {
    if (t.info.cls == TenantClass::latency_critical && t.info.latency_target > 0) least = std::min(least, t.info.latency_target);
  }
  return idle_cap_ * least;
}

const AkerPresent& AkerState::present(const SchedContext& ctx) {
  const Seconds now = ctx.now();
  present_.queries.clear();
  present_.lc.reset();
  present_.lc_of_newest = false;
  present_.be.clear();
  // Each active query: (tenant, request) -> its index in `queries`.
  std::map<std::pair<int64_t, int64_t>, size_t> index;
  auto query = [&](TenantId t, int64_t request, Seconds arrival) -> AkerQuery& {
    const auto key = std::make_pair(t.value, request);
    auto [it, added] = index.emplace(key, present_.queries.size());
    if (added) present_.queries.push_back({arrival, ctx.tenant(t).info.latency_target, 0});
    return present_.queries[it->second];
  };
  std::map<std::pair<int64_t, int64_t>, Seconds> seen;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!is_lc(ctx, r.tenant)) {
      if (!r.has_running_dispatch) present_.be.push_back(r);
      continue;
    }
    seen[{r.tenant.value, r.request}] = r.request_arrival;
    query(r.tenant, r.request, r.request_arrival).remaining += solo_seconds(ctx, *r.kernel, aker_variant_of(r), r.pending_blocks);
    if (!r.has_running_dispatch && (!present_.lc || r.request_arrival < present_.lc->request_arrival)) present_.lc = r;
  }
  for (const TenantView& t : ctx.tenants()) {
    if (t.info.cls != TenantClass::latency_critical) continue;
    for (const QueuedLaunch& q : ctx.queued(t.id)) {
      const auto key = std::make_pair(t.id.value, q.request);
      // A queued request's arrival is not in the present: it came after the last look that did
      // not see it, so that look's time is a bound that errs toward less headroom.
      Seconds arrival = last_call_;
      if (auto s = seen.find(key); s != seen.end()) arrival = s->second;
      else if (auto a = arrivals_.find(key); a != arrivals_.end()) arrival = a->second;
      seen[key] = arrival;
      const KernelVariant& v = q.kernel->variant(q.kernel->default_variant);
      query(t.id, q.request, arrival).remaining += solo_seconds(ctx, *q.kernel, q.kernel->default_variant, v.logical_blocks);
    }
  }
  arrivals_ = std::move(seen);
  std::stable_sort(present_.queries.begin(), present_.queries.end(),
                   [](const AkerQuery& a, const AkerQuery& b) { return a.arrival < b.arrival; });
  if (present_.lc) {
    const Seconds newest = present_.queries.back().arrival;
    present_.lc_of_newest = present_.lc->request_arrival >= newest;
  }
  const auto n = static_cast<int64_t>(ctx.tenants().size());
  auto turn = [&](const ReadyLaunch& r) { return ((r.tenant.value - be_cursor_ - 1) % n + n) % n; };
  std::stable_sort(present_.be.begin(), present_.be.end(), [&](const ReadyLaunch& a, const ReadyLaunch& b) { return turn(a) < turn(b); });
  // Decisions are made with nothing in flight (one dispatch at a time), so nothing is busy.
  present_.headroom = aker_headroom(present_.queries, now, 0);
  last_call_ = now;
  return present_;
}

Result<bool> AkerState::dispatch_fused(SchedContext& ctx, const ReadyLaunch& self, const ReadyLaunch& partner, int64_t self_blocks,
                                       const AkerFusionPlan& plan, bool lc) {
  const AkerVersion* v = version(ctx, self, partner);
  if (!v) return false;
  const BlockRange self_pending = aker_pending_in(self, v->self_variant);
  const BlockRange partner_pending = aker_pending_in(partner, v->partner_variant);
  Placement p;
  p.sms = ctx.device().all_sms();
  p.form = LaunchForm::persistent;
  p.priority = lc ? kHighStreamPriority : kNormalStreamPriority;
  p.variant = v->self_variant;
  p.range = BlockRange{self_pending.begin, self_pending.begin + self_blocks};
  p.fusion = Fusion{partner.id, {partner_pending.begin, partner_pending.begin + plan.partner_blocks}, v->self_parts,
                    v->partner_parts, v->partner_variant};
  auto d = ctx.dispatch(self.id, p);
  if (!d) {
    const StatusCode code = d.status().code();
    if (code != StatusCode::unsupported && code != StatusCode::invalid_argument) return d.status();
    refused_[{self.kernel, partner.kernel}] = true;  // e.g. the fused block does not fit an SM
    ++refusals_;
    return false;
  }
  Flight f;
  f.id = *d;
  f.version = VersionKey{self.kernel, partner.kernel, self.variant, partner.variant};
  f.ratio = plan.ratio;
  f.self = plan.self;
  flight_ = f;
  ++(lc ? fused_lc_ : fused_be_);
  be_cursor_ = partner.tenant.value;
  return true;
}

Status AkerState::dispatch_alone(SchedContext& ctx, const ReadyLaunch& r, int64_t blocks, bool lc) {
  Placement p;
  p.sms = ctx.device().all_sms();  // the native form: the fastest for a kernel alone
  p.priority = lc ? kHighStreamPriority : kNormalStreamPriority;
  p.range = BlockRange{r.pending.begin, r.pending.begin + blocks};
  auto d = ctx.dispatch(r.id, p);
  if (!d) return d.status();
  Flight f;
  f.id = *d;
  f.kernel = r.kernel;
  f.variant = aker_variant_of(r);
  f.blocks = blocks;
  flight_ = f;
  if (lc) {
    ++lc_alone_;
  } else {
    ++be_alone_;
    be_cursor_ = r.tenant.value;
  }
  return Status::ok();
}

Result<bool> AkerState::fuse_beside_lc(SchedContext& ctx, const AkerPresent& present, const ReadyLaunch& lc, bool whole_be,
                                       bool tc_cd_only) {
  for (;;) {
    const ReadyLaunch* best = nullptr;
    AkerFusionPlan best_plan;
    int64_t best_self_blocks = 0;
    int best_rank = 0;
    for (const ReadyLaunch& be : present.be) {
      const std::optional<int> rank = pair_rank(ctx, *lc.kernel, *be.kernel);
      if (!rank || (tc_cd_only && *rank != 0)) continue;  // rank 0: tensor-core with CUDA-core
      const AkerVersion* v = version(ctx, lc, be);
      if (!v || (!v->measured && !lc_fusion_estimated_)) continue;
      // The LC kernel whole in the version's variant, the BE kernel in its own.
      const int64_t self_blocks = aker_pending_in(lc, v->self_variant).size();
      const Seconds self = solo_seconds(ctx, *lc.kernel, v->self_variant, self_blocks);
      const AkerSoloModel& partner = kernel(ctx, *be.kernel, v->partner_variant).solo;
      const int64_t partner_blocks = aker_pending_in(be, v->partner_variant).size();
      const auto plan = whole_be ? aker_plan_whole(self, partner, partner_blocks, v->model)
                                 : aker_plan_opportune(self, partner, partner_blocks, v->model);
      if (!plan || !aker_fits(*plan, present.headroom)) continue;
      if (!best || *rank < best_rank || (*rank == best_rank && plan->gain() > best_plan.gain())) {
        best = &be;
        best_plan = *plan;
        best_self_blocks = self_blocks;
        best_rank = *rank;
      }
    }
    if (!best) return false;
    end_lc_decision();
    auto fused = dispatch_fused(ctx, lc, *best, best_self_blocks, best_plan, true);
    if (!fused) return fused.status();
    if (*fused) return true;
    // The backend refused that version (the pair is now excluded): choose again.
  }
}

Status AkerState::dispatch_be_within(SchedContext& ctx, const ReadyLaunch& r, Seconds limit, bool idle) {
  int64_t blocks = r.pending.size();
  if (std::isfinite(limit) && ctx.capabilities(*r.kernel).split_range) {
    const int variant = aker_variant_of(r);
    const double fit = kernel(ctx, *r.kernel, variant).solo.blocks_within(limit);
    // Whole waves (every SM full) where the limit allows one. Less than a wave: with no query
    // active (idle_limit) one wave all the same, since a smaller piece leaves the GPU idle while
    // nothing waits for it; beside an active query the part of a wave that fits, and nothing where
    // not one block fits (its target comes first).
    const int64_t wave =
        std::max<int64_t>(1, int64_t{ctx.device().sm_count} * max_resident_blocks(ctx.device(), r.kernel->variant(variant)));
    const auto fits = static_cast<int64_t>(std::floor(std::clamp(fit, 0.0, 9e18)));
    if (fits >= wave) {
      blocks = std::min(blocks, fits / wave * wave);
    } else if (idle) {
      blocks = std::min(blocks, wave);
    } else if (fits >= 1) {
      blocks = std::min(blocks, fits);
    } else {
      return Status::ok();
    }
  }
  return dispatch_alone(ctx, r, blocks, false);
}

Status AkerState::reorder_or_lc(SchedContext& ctx, const ReadyLaunch& lc, const std::vector<ReadyLaunch>& be, Seconds headroom) {
  for (const ReadyLaunch& r : be) {
    if (solo_seconds(ctx, *r.kernel, aker_variant_of(r), r.pending.size()) < headroom) {
      end_lc_decision();
      return dispatch_alone(ctx, r, r.pending.size(), false);
    }
  }
  end_lc_decision();
  return dispatch_alone(ctx, lc, lc.pending.size(), true);
}

void AkerState::complete(const Completion& c) {
  if (!flight_ || c.dispatch != flight_->id) return;
  const Flight f = *flight_;
  flight_.reset();
  const Seconds took = c.end - c.start;
  if (!c.error.is_ok() || c.preempted || !(took > 0)) return;
  if (!f.version) {
    auto it = kernels_.find({f.kernel, f.variant});
    if (it != kernels_.end()) solo_errors_.push_back(it->second.solo.observe(static_cast<double>(f.blocks), took));
    return;
  }
  auto it = versions_.find(*f.version);
  if (it != versions_.end() && it->second && f.self > 0) fused_errors_.push_back(it->second->model.observe(f.ratio, took / f.self));
}

void AkerState::end_lc_decision() {
  decision_seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - decision_t0_).count());
}

std::map<std::string, double> AkerState::stats() const {
  std::map<std::string, double> s;
  s["lc_alone"] = static_cast<double>(lc_alone_);
  s["be_alone"] = static_cast<double>(be_alone_);
  s["fused_lc_be"] = static_cast<double>(fused_lc_);
  s["fused_be_be"] = static_cast<double>(fused_be_);
  s["fusions_refused"] = static_cast<double>(refusals_);
  s["lc_decisions"] = static_cast<double>(decision_seconds_.size());
  if (!decision_seconds_.empty()) {
    s["lc_decision_median_us"] = median(decision_seconds_) * 1e6;
    s["lc_decision_max_us"] = *std::max_element(decision_seconds_.begin(), decision_seconds_.end()) * 1e6;
  }
  s["solo_predictions"] = static_cast<double>(solo_errors_.size());
  if (!solo_errors_.empty()) s["solo_error_median"] = median(solo_errors_);
  s["fused_predictions"] = static_cast<double>(fused_errors_.size());
  if (!fused_errors_.empty()) s["fused_error_median"] = median(fused_errors_);
  int solo_refits = 0, fused_refits = 0, measured = 0, measured_versions = 0;
  for (const auto& [key, k] : kernels_) {
    solo_refits += k.solo.refits();
    measured += k.measured ? 1 : 0;
  }
  int versions = 0;
  for (const auto& [key, v] : versions_) {
    if (!v) continue;
    ++versions;
    fused_refits += v->model.refits();
    measured_versions += v->measured ? 1 : 0;
  }
  s["solo_refits"] = solo_refits;
  s["fused_refits"] = fused_refits;
  s["kernels_measured"] = measured;
  s["kernels_estimated"] = static_cast<double>(kernels_.size()) - measured;
  s["versions_measured"] = measured_versions;
  s["versions_estimated"] = versions - measured_versions;
  return s;
}

}  // namespace concord::policy
