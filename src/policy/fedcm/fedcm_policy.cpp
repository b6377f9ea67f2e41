#include "policy/fedcm/fedcm_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "concord/occupancy.h"
#include "mechanism/params.h"

namespace concord::policy {
namespace {

// The GPCs (FEDCM's shader arrays) a set touches, as a bit mask, from each GPC's SM set.
uint64_t gpcs_of(const std::vector<SmSet>& gpc_sms, const SmSet& sms) {
  uint64_t g = 0;
  for (size_t i = 0; i < gpc_sms.size() && i < 64; ++i) {
    if (gpc_sms[i].intersects(sms)) g |= uint64_t{1} << i;
  }
  return g;
}

// Hands distinct members of `pool` to `take` in seeded random order until it returns false (or
// the pool is exhausted): a Fisher-Yates shuffle carried only as far as needed, so a decision
// that adds a few SMs does not shuffle all of them. The members are copied first, so `take` may
// change the set `pool` refers to.
template <typename Take>
void random_members(const SmSet& pool, std::mt19937_64& rng, Take&& take) {
  int ids[kMaxSms];
  int n = 0;
  pool.for_each([&](int sm) { ids[n++] = sm; });
  for (int k = 0; k < n; ++k) {
    // A uniform index in [k, n) from the top 32 bits of one draw (Lemire's multiply-shift; its
    // bias, below 2^-24 for n <= 256, does not matter for picking SMs).
    const uint64_t top = rng() >> 32;
    const int j = k + static_cast<int>((top * static_cast<uint64_t>(n - k)) >> 32);
    std::swap(ids[k], ids[j]);
    if (!take(ids[k])) return;
  }
}

}  // namespace

std::vector<SmSet> gpc_sets(const DeviceSpec& d) {
  std::vector<SmSet> out;
  for (int sm = 0; sm < d.sm_count; ++sm) {
    const auto g = static_cast<size_t>(d.gpc_of_sm[static_cast<size_t>(sm)]);
    if (out.size() <= g) out.resize(g + 1);
    out[g].add(sm);
  }
  return out;
}

std::vector<size_t> critical_kernels(const std::vector<double>& seconds, double sigma) {
  std::vector<size_t> idx(seconds.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
  const size_t keep = std::min(idx.size(), static_cast<size_t>(std::ceil(std::clamp(sigma, 0.0, 1.0) * idx.size())));
  idx.resize(keep);
  return idx;
}

std::vector<std::vector<bool>> critical_instances(const std::vector<double>& step_seconds,
                                                  const std::vector<int>& step_counts, double sigma) {
  std::vector<double> seconds;  // one entry per launch instance, in request order
  std::vector<std::pair<size_t, int>> where;
  for (size_t i = 0; i < step_seconds.size(); ++i) {
    for (int r = 0; r < step_counts[i]; ++r) {
      seconds.push_back(step_seconds[i]);
      where.emplace_back(i, r);
    }
  }
  std::vector<std::vector<bool>> out(step_seconds.size());
  for (size_t i = 0; i < step_seconds.size(); ++i) out[i].assign(static_cast<size_t>(step_counts[i]), false);
  for (size_t k : critical_kernels(seconds, sigma)) out[where[k].first][static_cast<size_t>(where[k].second)] = true;
  return out;
}

std::vector<FedcmCandidate> fedcm_candidates(const SchedContext& ctx, const ReadyLaunch& ready,
                                             const std::vector<std::optional<SmSet>>& masks, std::mt19937_64& rng,
                                             int demand_sms) {
  const DeviceSpec& dev = ctx.device();
  const int sms = dev.sm_count;
  const KernelSpec& kernel = *ready.kernel;
  const int v = kernel.default_variant;
  const double d = static_cast<double>(demand_sms >= 0 ? demand_sms : ctx.estimator().demand_sms(kernel, v)) / sms;
  const BlockFootprint fp = footprint_of(dev, kernel.variant(v));
  const SmOccupants occ = occupants_of(ctx);
  const std::vector<double> share_on = share_per_sm(fp, occ, sms);
  // U per group of SMs holding the same kernels: a set's share is a sum over the groups it meets.
  std::vector<std::pair<SmSet, double>> group_share;
  group_share.reserve(occ.groups.size());
  for (const auto& g : occ.groups) group_share.emplace_back(g.sms, resource_share(fp, g.load));

  const int r = static_cast<int>(ready.tenant.value);
  const SmSet own = masks[static_cast<size_t>(r)].value_or(SmSet());
  std::vector<std::pair<int, SmSet>> bases = {{-1, own}};  // reuse
  bases.reserve(masks.size() + 1);
  for (size_t i = 0; i < masks.size(); ++i) {
    if (static_cast<int>(i) == r || !masks[i]) continue;
    // Merge; a union already considered (a partner set inside ours, or equal to an earlier
    // partner's) is the same candidate and is not scored twice.
    const SmSet merged = own | *masks[i];
    if (std::any_of(bases.begin(), bases.end(), [&](const auto& b) { return b.second == merged; })) continue;
    bases.emplace_back(static_cast<int>(i), merged);
  }
  std::vector<FedcmCandidate> out;
  for (auto& [partner, base] : bases) {
    FedcmCandidate c;
    c.partner = partner;
    c.sms = base;
    double share = 0;
    int grouped = 0;
    for (const auto& [g, u] : group_share) {
      const int n = g.count_and(base);
      share += u * n / sms;
      grouped += n;
    }
    share += static_cast<double>(base.count() - grouped) / sms;  // SMs in no group: alone, U = 1
    // Add or remove seeded-random SMs until the share is within [0.9, 1.1] of d.
    if (share < 0.9 * d) {
      random_members(dev.all_sms().minus(c.sms), rng, [&](int j) {
        c.sms.add(j);
        share += share_on[static_cast<size_t>(j)] / sms;
        return share < 0.9 * d;
      });
    } else if (share > 1.1 * d) {
      int left = c.sms.count();
      random_members(c.sms, rng, [&](int j) {
        if (left <= 1) return false;
        c.sms.remove(j);
        --left;
        share -= share_on[static_cast<size_t>(j)] / sms;
        return share > 1.1 * d;
      });
    }
    if (c.sms.empty()) continue;
    c.share = share;
    c.u = share * sms / c.sms.count();  // Eq. 1
    c.estimate = ctx.estimator().seconds(kernel, v, c.sms.count()) / std::max(c.u, 1e-9);
    out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.estimate < b.estimate; });
  return out;
}

CachePolicy fedcm_cache(const SchedContext& ctx, const KernelSpec& kernel, int variant, const SmSet& mine,
                        const std::optional<SmSet>& theirs, double gamma) {
  return fedcm_cache(ctx, kernel, variant, mine, theirs, gamma, gpc_sets(ctx.device()));
}

CachePolicy fedcm_cache(const SchedContext& ctx, const KernelSpec& kernel, int variant, const SmSet& mine,
                        const std::optional<SmSet>& theirs, double gamma, const std::vector<SmSet>& gpc_sms) {
  const Capabilities caps = ctx.capabilities(kernel);
  const uint64_t all = gpcs_of(gpc_sms, ctx.device().all_sms());
  const uint64_t my_gpcs = gpcs_of(gpc_sms, mine);
  const bool l1 = caps.l1_bypass && theirs && my_gpcs == gpcs_of(gpc_sms, *theirs);
  const bool l2 = caps.l2_evict_first && my_gpcs == all;
  const int c = mine.count();
  const double base = ctx.estimator().seconds(kernel, variant, c, CachePolicy::normal);
  // Section III-B's filter: no policy whose estimated slowdown alone exceeds gamma.
  auto tolerable = [&](CachePolicy p) { return ctx.estimator().seconds(kernel, variant, c, p) <= gamma * base; };
  if (l1 && l2 && tolerable(CachePolicy::both)) return CachePolicy::both;
  if (l1 && tolerable(CachePolicy::l1_bypass)) return CachePolicy::l1_bypass;
  if (l2 && tolerable(CachePolicy::l2_evict_first)) return CachePolicy::l2_evict_first;
  return CachePolicy::normal;
}

Status FedcmPolicy::on_start(SchedContext& ctx) {
  gpc_sms_ = gpc_sets(ctx.device());
  demand_.clear();
  return Status::ok();
}

Status FedcmPolicy::on_tenant_joined(SchedContext& ctx, TenantId tenant) {
  const auto t = static_cast<size_t>(tenant.value);
  if (masks_.size() <= t) {
    masks_.resize(t + 1, std::nullopt);
    caches_.resize(t + 1, CachePolicy::normal);
    shares_.resize(t + 1, 1.0);
    critical_.resize(t + 1);
    seen_.resize(t + 1);
  }
  const TenantView& view = ctx.tenant(tenant);
  if (!view.hints) return Status::ok();
  // The hint names the request's kernels: rank them before the first one runs.
  std::vector<double> seconds;
  std::vector<int> counts;
  for (const TenantHints::Step& s : view.hints->request) {
    seconds.push_back(ctx.estimator().seconds(*s.kernel, s.kernel->default_variant, ctx.device().sm_count));
    counts.push_back(static_cast<int>(std::min<int64_t>(s.count, std::numeric_limits<int>::max())));
  }
  critical_[t].clear();
  for (const auto& repeats : critical_instances(seconds, counts, options_.sigma)) {
    critical_[t].insert(critical_[t].end(), repeats.begin(), repeats.end());
  }
  return Status::ok();
}

bool FedcmPolicy::critical(const SchedContext& ctx, const ReadyLaunch& r) {
  const auto t = static_cast<size_t>(r.tenant.value);
  if (!ctx.tenant(r.tenant).hints) {
    // No hint: the ranking comes from the last whole request seen; until one has been seen,
    // every kernel is decided afresh.
    if (r.index == 0) seen_[t].clear();
    if (static_cast<size_t>(r.index) == seen_[t].size()) seen_[t].push_back(ctx.estimator().seconds(*r.kernel, r.kernel->default_variant, ctx.device().sm_count));
    if (r.last_of_request && static_cast<size_t>(r.index) + 1 == seen_[t].size()) {
      const auto ranked = critical_instances(seen_[t], std::vector<int>(seen_[t].size(), 1), options_.sigma);
      critical_[t].clear();
      for (const auto& one : ranked) critical_[t].push_back(one.front());
    }
  }
  const auto& flags = critical_[t];
  if (flags.empty()) return true;
  return r.index >= 0 && static_cast<size_t>(r.index) < flags.size() && flags[static_cast<size_t>(r.index)];
}

Status FedcmPolicy::schedule(SchedContext& ctx) {
  std::vector<ReadyLaunch> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r);
  }
  for (const ReadyLaunch& r : waiting) {
    const auto t = static_cast<size_t>(r.tenant.value);
    SmSet sms;
    CachePolicy cache = CachePolicy::normal;
    double u = 1;
    if (critical(ctx, r) || !masks_[t]) {
      auto dit = demand_.find(r.kernel);
      if (dit == demand_.end()) {
        dit = demand_.emplace(r.kernel, ctx.estimator().demand_sms(*r.kernel, r.kernel->default_variant)).first;
      }
      const auto candidates = fedcm_candidates(ctx, r, masks_, ctx.rng(), dit->second);
      if (candidates.empty()) return Status::internal("fedcm: no candidate SM set");
      sms = candidates.front().sms;
      u = candidates.front().u;
      std::optional<SmSet> partner;
      if (candidates.front().partner >= 0) partner = masks_[static_cast<size_t>(candidates.front().partner)];
      masks_[t] = sms;
      cache = cache_rule_->choose(ctx, *r.kernel, sms, partner, gpc_sms_);
      caches_[t] = cache;
      shares_[t] = u;
    } else {
      // Non-critical: the preceding decision, SM set and cache policy alike (Section III-A).
      sms = *masks_[t];
      cache = caches_[t];
      u = shares_[t];
      if (cache != CachePolicy::normal) {
        const Capabilities caps = ctx.capabilities(*r.kernel);
        if ((bypasses_l1(cache) && !caps.l1_bypass) || (evicts_l2_first(cache) && !caps.l2_evict_first)) cache = CachePolicy::normal;
      }
    }
    auto d = ctx.dispatch(r.id, sm_set_placement(ctx, *r.kernel, sms, cache, u));
    if (!d) return d.status();
  }
  return Status::ok();
}

CachePolicy BypassRule::choose(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& mine,
                              const std::optional<SmSet>& partner, const std::vector<SmSet>& gpc_sms) const {
  return fedcm_cache(ctx, kernel, kernel.default_variant, mine, partner, gamma_, gpc_sms);
}

Result<FedcmOptions> fedcm_options(const std::string& name, const PolicyParams& params, bool with_gamma) {
  if (with_gamma) {
    CONCORD_RETURN_IF_ERROR(only_params(name, params, {"sigma", "gamma"}));
  } else {
    CONCORD_RETURN_IF_ERROR(only_params(name, params, {"sigma"}));
  }
  FedcmOptions o;
  auto sigma = double_param(params, "sigma", o.sigma);
  if (!sigma) return sigma.status();
  auto gamma = double_param(params, "gamma", o.gamma);
  if (!gamma) return gamma.status();
  if (*sigma <= 0 || *sigma > 1) return Status::invalid_argument("parameter 'sigma': must be in (0, 1]");
  if (*gamma < 1) return Status::invalid_argument("parameter 'gamma': must be >= 1");
  o.sigma = *sigma;
  o.gamma = *gamma;
  return o;
}

Result<std::unique_ptr<Policy>> make_fedcm(const PolicyParams& params) {
  auto o = fedcm_options("fedcm", params, true);
  if (!o) return o.status();
  return std::unique_ptr<Policy>(std::make_unique<FedcmPolicy>("fedcm", *o, std::make_unique<BypassRule>(o->gamma)));
}

}  // namespace concord::policy
