// aker: Aker's QoS-aware kernel manager (Aker paper, Section 8.3) over fused versions chosen by Section 7's
// selector and predicted by Section 6's models. One kernel (fused or not) runs at a time. For the
// LC kernel of the newest query, the BE kernel whose opportune split gives the largest gain is
// fused beside it when the time the fusion adds stays within the QoS headroom (Eq. 4); else a BE
// kernel that fits the headroom runs alone first; else the LC kernel runs alone. With no LC kernel
// ready, two BE kernels fuse when they gain, else one runs alone.
#pragma once

#include <memory>
#include <string>

#include "concord/policy.h"
#include "policy/aker/aker_state.h"

namespace concord::policy {

struct AkerOptions {
  // With no LC query active, BE work dispatched at once is kept within this share of the smallest
  // LC target (elastic kernels are split to fit; 0: no limit).
  double idle_cap = 0.1;
  // An LC kernel fuses only in versions with a measured model (`lc_fusion=measured`, the
  // default) or also in estimated ones (`lc_fusion=estimated`).
  bool lc_fusion_estimated = false;
};
// Parses `lc_fusion` (measured | estimated).
Result<bool> lc_fusion_param(const std::string& policy, const PolicyParams& params);

class AkerPolicy final : public Policy {
 public:
  explicit AkerPolicy(AkerOptions o) : state_(o.idle_cap) { state_.set_lc_fusion_estimated(o.lc_fusion_estimated); }
  std::string name() const override { return "aker"; }
  Status on_complete(SchedContext& ctx, const Completion& completion) override {
    state_.complete(completion);
    return schedule(ctx);
  }
  std::map<std::string, double> stats() const override { return state_.stats(); }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  Status lc_step(SchedContext& ctx, const AkerPresent& present);
  Status be_step(SchedContext& ctx, const AkerPresent& present);

  AkerState state_;
};

Result<std::unique_ptr<Policy>> make_aker(const PolicyParams& params);
// The `idle_cap` parameter the three Aker-family policies take (aker, tacker, baymax).
Result<double> idle_cap_param(const std::string& policy, const PolicyParams& params);

}  // namespace concord::policy
