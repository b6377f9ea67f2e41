// random: at most `streams` launches at once (default 1), each on the whole GPU; the next one is
// drawn uniformly from the waiting launches with the run's seeded random source.
#pragma once

#include "concord/policy.h"

namespace concord::policy {

class RandomPolicy final : public Policy {
 public:
  explicit RandomPolicy(int streams) : streams_(streams) {}
  std::string name() const override { return "random"; }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  int streams_;
};

Result<std::unique_ptr<Policy>> make_random(const PolicyParams& params);

}  // namespace concord::policy
