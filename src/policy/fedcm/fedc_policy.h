// fedc: the paper's FedC (the FEDCM paper, Section IV): FEDCM's collocation by Algorithm 1 with normal
// caching throughout, the baseline that isolates what cache bypass adds.
#pragma once

#include <memory>

#include "policy/fedcm/fedcm_policy.h"

namespace concord::policy {

// Normal caching for every decision.
class NormalCaching final : public CacheRule {
 public:
  CachePolicy choose(const SchedContext&, const KernelSpec&, const SmSet&, const std::optional<SmSet>&,
                     const std::vector<SmSet>&) const override {
    return CachePolicy::normal;
  }
};

Result<std::unique_ptr<Policy>> make_fedc(const PolicyParams& params);

}  // namespace concord::policy
