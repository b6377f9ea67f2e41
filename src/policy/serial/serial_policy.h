// serial: one launch at a time on the whole GPU, in the order launches became ready.
#pragma once

#include "concord/policy.h"

namespace concord::policy {

class SerialPolicy final : public Policy {
 public:
  std::string name() const override { return "serial"; }

 protected:
  Status schedule(SchedContext& ctx) override;
};

Result<std::unique_ptr<Policy>> make_serial(const PolicyParams& params);

}  // namespace concord::policy
