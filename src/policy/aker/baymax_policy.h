// baymax: Aker's baseline Baymax (Aker paper, Section 1, 9.3): kernel reorder only, one kernel at a time and no
// preemption. The LC kernel of the oldest query runs unless a BE kernel's predicted duration fits
// every active query's headroom (aker_headroom), which then runs first; with no LC query active, a
// BE dispatch is kept within a share of the smallest LC target (the work queued on the GPU capped).
#pragma once

#include <memory>
#include <string>

#include "concord/policy.h"
#include "policy/aker/aker_state.h"

namespace concord::policy {

class BaymaxPolicy final : public Policy {
 public:
  explicit BaymaxPolicy(double idle_cap) : state_(idle_cap) {}
  std::string name() const override { return "baymax"; }
  Status on_complete(SchedContext& ctx, const Completion& completion) override {
    state_.complete(completion);
    return schedule(ctx);
  }
  std::map<std::string, double> stats() const override { return state_.stats(); }

 protected:
  Status schedule(SchedContext& ctx) override {
    if (state_.in_flight()) return Status::ok();
    state_.start_decision();
    const AkerPresent& present = state_.present(ctx);
    if (present.lc) return state_.reorder_or_lc(ctx, *present.lc, present.be, present.headroom);
    return present.be.empty() ? Status::ok() : state_.be_alone(ctx, present);
  }

 private:
  AkerState state_;
};

Result<std::unique_ptr<Policy>> make_baymax(const PolicyParams& params);

}  // namespace concord::policy
