// manual: hand-written placements, for experiments and for checking what a mechanism can give.
// Each tenant's launches run at once with its own placement; optionally two tenants are fused.
// Parameters (t = tenant index):
//   sms.t=0-95,100        SM set of tenant t (default: every SM)
//   tlp.t=N               resident blocks per SM (persistent form only; default: as many as fit)
//   cache.t=l1-bypass     cache policy (normal, l1-bypass, l2-evict-first, both)
//   form=persistent       launch form of every tenant (native or persistent; default native)
//   fuse=0+1, ratio=1:1   fuse the launches of tenants 0 and 1 whenever both have one ready
#pragma once

#include <map>
#include <optional>
#include <utility>

#include "concord/policy.h"

namespace concord::policy {

class ManualPolicy final : public Policy {
 public:
  struct TenantPlacement {
    std::optional<SmSet> sms;
    int tlp = 0;
    CachePolicy cache = CachePolicy::normal;
  };
  ManualPolicy(std::map<int64_t, TenantPlacement> placements, LaunchForm form, std::optional<std::pair<int64_t, int64_t>> fuse,
               std::pair<int, int> ratio)
      : placements_(std::move(placements)), form_(form), fuse_(fuse), ratio_(ratio) {}
  std::string name() const override { return "manual"; }
  // Each tenant's launches get the placement the run names for it.
  bool repeats_decisions() const override { return true; }
  Status on_start(SchedContext& ctx) override;

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  Placement placement_for(const SchedContext& ctx, TenantId t) const;

  std::map<int64_t, TenantPlacement> placements_;
  LaunchForm form_;
  std::optional<std::pair<int64_t, int64_t>> fuse_;
  std::pair<int, int> ratio_;
};

// Parses "0-95,100,120-131" into an SM set.
Result<SmSet> parse_sm_list(const std::string& text);

Result<std::unique_ptr<Policy>> make_manual(const PolicyParams& params);

}  // namespace concord::policy
