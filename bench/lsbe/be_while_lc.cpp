#include "be_while_lc.h"

namespace concord::lsbe {

class BeWhileLc::Recorder final : public TenantSink {
 public:
  Recorder(TenantSink& sink, std::set<int64_t>& left) : sink_(sink), left_(left) {}
  Seconds now() const override { return sink_.now(); }
  Result<TenantId> join(const TenantInfo& info, std::optional<TenantHints> hints,
                        const std::vector<const KernelSpec*>& kernels) override {
    return sink_.join(info, std::move(hints), kernels);
  }
  Result<int64_t> arrive(TenantId tenant, Seconds at) override { return sink_.arrive(tenant, at); }
  Status submit(TenantId tenant, const LaunchSubmission& launch) override { return sink_.submit(tenant, launch); }
  Status leave(TenantId tenant) override {
    CONCORD_RETURN_IF_ERROR(sink_.leave(tenant));
    left_.insert(tenant.value);
    return Status::ok();
  }

 private:
  TenantSink& sink_;
  std::set<int64_t>& left_;
};

BeWhileLc::BeWhileLc(const Workload& workload, SpecSourceOptions options, StopBe stop_be)
    : workload_(workload), inner_(workload, options), stop_be_(std::move(stop_be)), lc_ended_(workload.tenants.size(), 0) {}

// SpecSource gives tenant i of the spec TenantId i (spec_source.h).
bool BeWhileLc::is_lc(TenantId t) const {
  return t.valid() && t.value < static_cast<int64_t>(workload_.tenants.size()) &&
         workload_.tenants[static_cast<size_t>(t.value)].cls == TenantClass::latency_critical;
}

bool BeWhileLc::lc_done() const {
  bool any = false;
  for (size_t i = 0; i < workload_.tenants.size(); ++i) {
    if (workload_.tenants[i].cls != TenantClass::latency_critical) continue;
    any = true;
    if (lc_ended_[i] < workload_.tenants[i].requests) return false;
  }
  return any;
}

Status BeWhileLc::stop_be(TenantSink& sink) {
  be_stopped_ = true;
  for (size_t i = 0; i < workload_.tenants.size(); ++i) {
    const TenantId id{static_cast<int64_t>(i)};
    if (is_lc(id) || left_.count(id.value)) continue;
    CONCORD_RETURN_IF_ERROR(sink.leave(id));
    left_.insert(id.value);
  }
  return Status::ok();
}

Status BeWhileLc::open(TenantSink& sink) {
  Recorder r(sink, left_);
  return inner_.open(r);
}

Result<Seconds> BeWhileLc::pump(TenantSink& sink) {
  Recorder r(sink, left_);
  return inner_.pump(r);
}

Status BeWhileLc::on_launch_end(TenantSink& sink, TenantId tenant, LaunchId launch, Seconds at) {
  Recorder r(sink, left_);
  return inner_.on_launch_end(r, tenant, launch, at);
}

Status BeWhileLc::on_request_end(TenantSink& sink, TenantId tenant, int64_t request, Seconds at) {
  Recorder r(sink, left_);
  if (is_lc(tenant)) {
    ++lc_ended_[static_cast<size_t>(tenant.value)];
    CONCORD_RETURN_IF_ERROR(inner_.on_request_end(r, tenant, request, at));
    return lc_done() && !be_stopped_ ? stop_be(sink) : Status::ok();
  }
  if (be_stopped_ || left_.count(tenant.value)) return Status::ok();  // no next request
  if (stop_be_ && stop_be_(tenant)) return stop_be(sink);
  return inner_.on_request_end(r, tenant, request, at);
}

}  // namespace concord::lsbe
