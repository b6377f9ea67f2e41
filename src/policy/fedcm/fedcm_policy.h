// fedcm / fedc: FEDCM's kernel-level collocation with SM sets and cache bypass (the FEDCM paper,
// Section III). `fedc` is the paper's FedC: the same collocation without cache bypass.
//
// For each tenant's ready kernel: critical kernels (the top sigma of the tenant's kernels by
// estimated time) run Algorithm 1; non-critical ones reuse the tenant's last SM set. Algorithm 1
// considers the tenant's own set and its union with each other tenant's set, estimates the share
// of each SM's static resources (shared memory, registers, threads) the kernel would get next to
// the kernels already there (U[i,j]), adds or removes seeded-random SMs until the kernel's
// effective share of the GPU is within [0.9, 1.1] of its demand d, and keeps the candidate with
// the shortest estimated time T[s0, c_m] / u. How a launch then shares its SMs with the kernels
// there is mechanism/sm_sharing.h's. The cache policy of a critical decision comes from a cache rule
// the policy is built with: fedcm's BypassRule (L1 bypass when the chosen partner covers the same
// GPCs, FEDCM's shader arrays; L2 evict-first when the set spans every GPC; each kept only if the
// estimated slowdown alone is at most gamma), or FedC's normal caching (src/policy/fedc).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <optional>
#include <random>
#include <vector>

#include "concord/policy.h"
#include "mechanism/sm_sharing.h"

namespace concord::policy {

struct FedcmOptions {
  double sigma = 0.1;    // share of each tenant's kernels that are critical
  double gamma = 1.1;    // tolerated slowdown from a bypass
};
// `sigma` and (with_gamma) `gamma` of a FEDCM-family policy, checked.
Result<FedcmOptions> fedcm_options(const std::string& name, const PolicyParams& params, bool with_gamma);

// The cache policy a critical decision gives a kernel placed on `mine`, next to a partner on
// `partner` (none: its own set).
class CacheRule {
 public:
  virtual ~CacheRule() = default;
  virtual CachePolicy choose(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& mine,
                             const std::optional<SmSet>& partner, const std::vector<SmSet>& gpc_sms) const = 0;
};

// One SM set Algorithm 1 considered for a ready kernel.
struct FedcmCandidate {
  int partner = -1;       // tenant whose set was merged in; -1 = the tenant's own set
  SmSet sms;
  double share = 0;       // effective share of the GPU: sum over the set of U[i,j] / SM count
  double u = 0;           // Eq. 1: mean U[i,j] over the set
  double estimate = 0;    // T[s0, c_m] / u
};

// FEDCM's critical kernels (Section III-A): the top ceil(sigma * n) of `seconds` (indices, longest
// first; at least one when sigma > 0).
std::vector<size_t> critical_kernels(const std::vector<double>& seconds, double sigma);

// FEDCM's critical kernels (Section III-A) of a tenant's request, per launch: the top
// ceil(sigma x launches) launch instances by estimated time (a step run `count` times is that
// many instances; ties go to the earlier one). Indexed [step][repeat].
std::vector<std::vector<bool>> critical_instances(const std::vector<double>& step_seconds,
                                                  const std::vector<int>& step_counts, double sigma);

// Algorithm 1 for one ready kernel of tenant `r`: every candidate, best (smallest estimate) first.
// `demand_sms` < 0: asked of the estimator (the policy passes its cached value).
std::vector<FedcmCandidate> fedcm_candidates(const SchedContext& ctx, const ReadyLaunch& ready,
                                             const std::vector<std::optional<SmSet>>& masks, std::mt19937_64& rng,
                                             int demand_sms = -1);
// The bypass rules and the gamma filter for a kernel placed on `mine` next to a partner on `theirs`.
CachePolicy fedcm_cache(const SchedContext& ctx, const KernelSpec& kernel, int variant, const SmSet& mine,
                        const std::optional<SmSet>& theirs, double gamma);
// The same with each GPC's SM set given (gpc_sets), as the policy keeps them.
CachePolicy fedcm_cache(const SchedContext& ctx, const KernelSpec& kernel, int variant, const SmSet& mine,
                        const std::optional<SmSet>& theirs, double gamma, const std::vector<SmSet>& gpc_sms);

// FEDCM's bypass rules with its gamma filter (Section III-B).
class BypassRule final : public CacheRule {
 public:
  explicit BypassRule(double gamma) : gamma_(gamma) {}
  CachePolicy choose(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& mine,
                     const std::optional<SmSet>& partner, const std::vector<SmSet>& gpc_sms) const override;

 private:
  double gamma_;
};
// The SMs of each GPC of the device.
std::vector<SmSet> gpc_sets(const DeviceSpec& d);

class FedcmPolicy final : public Policy {
 public:
  FedcmPolicy(std::string name, FedcmOptions options, std::unique_ptr<CacheRule> cache_rule)
      : name_(std::move(name)), options_(options), cache_rule_(std::move(cache_rule)) {}
  std::string name() const override { return name_; }
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override;

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  // Whether `r` is one of its tenant's critical kernels (decided by Algorithm 1 every time).
  bool critical(const SchedContext& ctx, const ReadyLaunch& r);

  std::string name_;
  FedcmOptions options_;
  std::unique_ptr<CacheRule> cache_rule_;
  std::vector<std::optional<SmSet>> masks_;      // per tenant: its last SM set
  std::vector<SmSet> gpc_sms_;                   // per GPC: its SMs (the bypass rules)
  std::vector<CachePolicy> caches_;              // per tenant: its last cache decision
  std::vector<double> shares_;                   // per tenant: u (Eq. 1) of its last decision
  std::map<const KernelSpec*, int> demand_;      // d in SMs, per kernel (asked once)
  std::vector<std::vector<bool>> critical_;      // per tenant, by launch index within a request
  std::vector<std::vector<double>> seen_;        // per tenant without hints: its current request's kernel times
};

Result<std::unique_ptr<Policy>> make_fedcm(const PolicyParams& params);

}  // namespace concord::policy
