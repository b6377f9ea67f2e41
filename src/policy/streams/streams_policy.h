// streams: every ready launch goes to the GPU at once, on all SMs, as if each tenant had its own
// CUDA stream; the hardware block scheduler decides who runs where.
#pragma once

#include "concord/policy.h"

namespace concord::policy {

class StreamsPolicy final : public Policy {
 public:
  std::string name() const override { return "streams"; }

 protected:
  Status schedule(SchedContext& ctx) override;
};

Result<std::unique_ptr<Policy>> make_streams(const PolicyParams& params);

}  // namespace concord::policy
