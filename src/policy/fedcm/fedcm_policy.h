// fedcm / fedc: FEDCM's kernel-level collocation with SM sets and cache bypass (fedcm.md,
// Section III). `fedc` is the paper's FedC: the same collocation without cache bypass.
//
// For each tenant's ready kernel: critical kernels (the top sigma of the tenant's kernels by
// estimated time) run Algorithm 1; non-critical ones reuse the tenant's last SM set. Algorithm 1
// considers the tenant's own set and its union with each other tenant's set, estimates the share
// of each SM's static resources (shared memory, registers, threads) the kernel would get next to
// the kernels already there (U[i,j]), adds or removes seeded-random SMs until the kernel's
// effective share of the GPU is within [0.9, 1.1] of its demand d, and keeps the candidate with
// the shortest estimated time T[s0, c_m] / u. How a launch then shares its SMs with the kernels
// there is sharing.h's (`sharing=native|arbitrate`). Bypass (fedcm only): L1 when the chosen partner
// covers the same GPCs (FEDCM's shader arrays), L2 evict-first when the set spans every GPC, each
// kept only if the estimated slowdown alone is at most gamma (`filter=alone`, the paper's, default)
// and, with `filter=pressure`, also the slowdown the profile measured beside a streaming kernel
// sharing the SMs (measured on the H200: no better; docs/policies.md).
#pragma once

#include <map>
#include <optional>
#include <random>
#include <vector>

#include "concord/policy.h"
#include "mechanism/sm_sharing.h"

namespace concord::policy {

struct FedcmOptions {
  double sigma = 0.1;    // share of each tenant's kernels that are critical
  double gamma = 1.1;    // tolerated slowdown from a bypass
  bool pressure_filter = false;  // gamma also applies to the slowdown measured under pressure
  bool bypass = true;    // false: FedC
  SmSharing sharing = SmSharing::native;  // how kernels on shared SMs split them (sharing.h)
};

// One SM set Algorithm 1 considered for a ready kernel.
struct FedcmCandidate {
  int partner = -1;       // tenant whose set was merged in; -1 = the tenant's own set
  SmSet sms;
  double share = 0;       // effective share of the GPU: sum over the set of U[i,j] / SM count
  double u = 0;           // Eq. 1: mean U[i,j] over the set
  double estimate = 0;    // T[s0, c_m] / u
};

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
// `pressure`: a policy is also refused when its slowdown measured beside a streaming kernel
// (KernelSpec::cache_slowdown_pressure, where measured) exceeds gamma.
CachePolicy fedcm_cache(const SchedContext& ctx, const KernelSpec& kernel, int variant, const SmSet& mine,
                        const std::optional<SmSet>& theirs, double gamma, bool pressure = false);
// The same with each GPC's SM set given (gpc_sets), as the policy keeps them.
CachePolicy fedcm_cache(const SchedContext& ctx, const KernelSpec& kernel, int variant, const SmSet& mine,
                        const std::optional<SmSet>& theirs, double gamma, const std::vector<SmSet>& gpc_sms,
                        bool pressure = false);
// The SMs of each GPC of the device.
std::vector<SmSet> gpc_sets(const DeviceSpec& d);

class FedcmPolicy final : public Policy {
 public:
  explicit FedcmPolicy(FedcmOptions options) : options_(options) {}
  std::string name() const override { return options_.bypass ? "fedcm" : "fedc"; }
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override;

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  // Whether `r` is one of its tenant's critical kernels (decided by Algorithm 1 every time).
  bool critical(const SchedContext& ctx, const ReadyLaunch& r);

  FedcmOptions options_;
  std::vector<std::optional<SmSet>> masks_;      // per tenant: its last SM set
  std::vector<SmSet> gpc_sms_;                   // per GPC: its SMs (the bypass rules)
  std::vector<CachePolicy> caches_;              // per tenant: its last cache decision
  std::vector<double> shares_;                   // per tenant: u (Eq. 1) of its last decision
  std::map<const KernelSpec*, int> demand_;      // d in SMs, per kernel (asked once)
  std::vector<std::vector<bool>> critical_;      // per tenant, by launch index within a request
  std::vector<std::vector<double>> seen_;        // per tenant without hints: its current request's kernel times
};

Result<std::unique_ptr<Policy>> make_fedcm(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_fedc(const PolicyParams& params);

}  // namespace concord::policy
