// round-robin: time-slicing by kernel. Tenants take turns; at most `streams` launches run at once
// (default 1), each on the whole GPU. A tenant with nothing ready loses its turn.
#pragma once

#include "concord/policy.h"

namespace concord::policy {

class RoundRobinPolicy final : public Policy {
 public:
  explicit RoundRobinPolicy(int streams) : streams_(streams) {}
  std::string name() const override { return "round-robin"; }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  int streams_;
  int64_t next_tenant_ = 0;
};

Result<std::unique_ptr<Policy>> make_round_robin(const PolicyParams& params);

}  // namespace concord::policy
