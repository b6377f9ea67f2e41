// sgdrc: SGDRC's spatial-temporal scheduling with tidal SM masking (the SGDRC paper Sections 4, 7.1).
// At most one LC kernel and one BE kernel are in flight; each class is a queue served round robin
// across its tenants. The LC kernel runs at once, with high stream priority, on the first TPCs of
// the device, as many as the largest minimum-TPC need in the sliding window; the BE kernel runs on
// the other TPCs, and on every SM while no LC work is queued. A running elastic BE kernel shrinks
// in place when LC work arrives and grows back when it ends (one resize per change of the split);
// an opaque one keeps its SMs and the next BE launch gets the current BE side. While LC work is
// queued, BE's resident blocks per SM are lowered (`be_tlp`; 0 turns it off), a stand-in for the
// paper's VRAM channel partitioning (Section 7.2), which Concord does not have.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "concord/policy.h"
#include "mechanism/tidal.h"
#include "mechanism/orion_gate.h"

namespace concord::policy {

struct SgdrcOptions {
  int window = 4;            // LC launches behind the head in the sliding window (W)
  double tolerance = 0.03;   // a kernel's TPC need: the fewest TPCs within this of its minimum latency
  int steps = 8;             // LC shares are rounded up to one of this many sizes
  int be_reserve = 1;        // TPCs always left to BE
  int be_tlp = 1;            // resident BE blocks per SM while LC work is queued; 0: not throttled
  bool lc_l2_persist = false;  // LC launches keep their data in L2's persisting carve-out (Placement::l2_persist)
  // LC kernels in their native form, on a green context of the LC side (`lc_form=native`, the
  // default), or persistent like BE kernels (`lc_form=persistent`): on an H100 the persistent
  // wrapper's cost on short LC kernels took sgdrc's SLO attainment from 99.7% to 74.8% at 70% load
  // (docs/results.md).
  bool lc_native = true;
  // Deviations to measure what the paper's choices cost on the GPU (docs/policies.md), off by
  // default: the LC kernel on every SM instead of its side (lc_all_sms); one BE kernel in flight
  // per BE tenant instead of one in all (be_per_tenant).
  bool lc_all_sms = false;
  bool be_per_tenant = false;
  // `be_throttle=profile`: the be_tlp throttle applies only to a BE kernel of the LC kernel's
  // profile (compute- or memory-bound, or unknown, by Orion's roofline rule); one of the other
  // profile keeps every resident block on the BE side. The default (`always`) throttles every BE
  // kernel while LC work is queued.
  bool be_throttle_by_profile = false;
};

class SgdrcPolicy final : public Policy {
 public:
  explicit SgdrcPolicy(SgdrcOptions options) : o_(options) {}
  std::string name() const override { return "sgdrc"; }
  Status on_start(SchedContext& ctx) override;
  Status on_complete(SchedContext& ctx, const Completion& completion) override;
  // The TPCs an LC kernel variant needs (kernel_min_tpcs), computed once per kernel and variant.
  int need_of(const SchedContext& ctx, const KernelSpec& kernel, int variant);

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  struct Flight {
    DispatchId id;
    TenantId tenant;
    const KernelSpec* kernel = nullptr;
    bool resizable = false;  // persistent: its SM set and TLP can change while it runs
    SmSet sms;
    int tlp = 0;
  };
  // The next launch of class `cls` to dispatch: the ready one, not yet running, of the first
  // tenant after `cursor` in round-robin order.
  std::optional<ReadyLaunch> next_of(const SchedContext& ctx, TenantClass cls, int64_t cursor) const;
  // The window's need (window_need) with `head` the LC launch in flight or about to be dispatched.
  int lc_need(SchedContext& ctx, TenantId head_tenant, const KernelSpec& head_kernel);
  Status apply_to_be(SchedContext& ctx, const TidalSplit& split);
  // A BE kernel's resident blocks per SM under `split` beside the LC kernel in flight (be_tlp, or
  // 0 where the split has no LC side or be_throttle=profile lets it run unthrottled).
  int be_tlp_for(const SchedContext& ctx, const TidalSplit& split, const KernelSpec& be_kernel);
  OrionProfile profile_of(const SchedContext& ctx, const KernelSpec& kernel);
  Placement placement_on(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, int tlp, bool native = false) const;

  SgdrcOptions o_;
  std::vector<SmSet> tpcs_;
  std::map<std::pair<const KernelSpec*, int>, int> needs_;
  std::map<const KernelSpec*, OrionProfile> profiles_;
  std::optional<Flight> lc_;
  std::map<int64_t, Flight> be_;  // by BE tenant: one entry, or one per tenant with be_per_tenant
  int64_t lc_cursor_ = -1, be_cursor_ = -1;  // the tenant served last in each class
  std::vector<std::vector<int>> streams_;    // lc_need's scratch, reused between decisions
};

Result<std::unique_ptr<Policy>> make_sgdrc(const PolicyParams& params);

}  // namespace concord::policy
