// The LC/BE bench's tenant source: a workload spec whose BE tenants run closed loop only while its
// LC tenants have requests to serve, so that BE work is measured over the LC tenants' active
// window and a run ends soon after the last LC request (the BE requests in flight then finish;
// none starts after).
#pragma once

#include <functional>
#include <set>
#include <vector>

#include "concord/spec_source.h"

namespace concord::lsbe {

class BeWhileLc final : public TenantSource {
 public:
  // `stop_be`, when given, also ends the BE tenants once it returns true; it is asked at each BE
  // request's end with the tenant whose request ended (the bench's MPS peers run a BE tenant
  // without its LC tenant in the process; bench/pbs ends every tenant when the first is done).
  // A workload without LC tenants and without `stop_be` runs its BE tenants' requests to the end.
  using StopBe = std::function<bool(TenantId ended)>;
  BeWhileLc(const Workload& workload, SpecSourceOptions options, StopBe stop_be = {});

  std::string name() const override { return "lc-be:" + workload_.name; }
  Status open(TenantSink& sink) override;
  Result<Seconds> pump(TenantSink& sink) override;
  Status on_request_end(TenantSink& sink, TenantId tenant, int64_t request, Seconds at) override;
  Status on_launch_end(TenantSink& sink, TenantId tenant, LaunchId launch, Seconds at) override;
  bool exhausted() const override { return left_.size() == workload_.tenants.size(); }

  // Whether BE tenants were ended by the LC tenants' end or by `stop_be` (false: they ran out of
  // requests first).
  bool be_stopped() const { return be_stopped_; }

 private:
  class Recorder;  // the engine's sink, noting which tenants left
  bool is_lc(TenantId t) const;
  bool lc_done() const;
  Status stop_be(TenantSink& sink);

  const Workload& workload_;
  SpecSource inner_;
  StopBe stop_be_;
  std::vector<int64_t> lc_ended_;  // per tenant: LC requests ended
  std::set<int64_t> left_;
  bool be_stopped_ = false;
};

}  // namespace concord::lsbe
