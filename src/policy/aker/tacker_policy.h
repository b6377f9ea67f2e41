// tacker: Aker's baseline Tacker (Aker paper, Section 9.3; its conference version [36]): the same kernel
// manager with kernel reorder, but a fusion takes the whole BE kernel (no split at the opportune
// ratio) and only a tensor-core kernel with a CUDA-core kernel fuses; no BE + BE fusion.
#pragma once

#include <memory>
#include <string>

#include "concord/policy.h"
#include "policy/aker/aker_state.h"

namespace concord::policy {

class TackerPolicy final : public Policy {
 public:
  TackerPolicy(double idle_cap, bool lc_fusion_estimated) : state_(idle_cap) { state_.set_lc_fusion_estimated(lc_fusion_estimated); }
  std::string name() const override { return "tacker"; }
  Status on_complete(SchedContext& ctx, const Completion& completion) override {
    state_.complete(completion);
    return schedule(ctx);
  }
  std::map<std::string, double> stats() const override { return state_.stats(); }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  AkerState state_;
};

Result<std::unique_ptr<Policy>> make_tacker(const PolicyParams& params);

}  // namespace concord::policy
