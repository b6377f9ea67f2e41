// Hand-built scheduling state for policy tests: a SchedContext whose tenants, ready and queued
// launches the test sets, recording what the policy does (dispatches, resizes, TLP changes) and
// keeping running() up to date; and kernels with a measured SM curve. Used by the SGDRC and
// concord tests.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "concord/device.h"
#include "concord/estimator.h"
#include "concord/policy.h"

namespace concord::testing {

// An elastic (or not) kernel whose measured curve scales perfectly to `knee_sms`, flat after.
inline KernelSpec curve_kernel(const std::string& name, int knee_sms, int64_t blocks = 4096, bool elastic = true) {
  KernelSpec k;
  k.name = name;
  k.elastic = elastic;
  KernelVariant v;
  v.name = "mid";
  v.logical_blocks = blocks;
  v.flops_per_block = 1e6;
  v.bytes_per_block = 1e4;
  k.variants = {v};
  // Measured: perfect scaling to `knee_sms`, flat after (as `concord run --profiles` attaches).
  for (int sms = 2; sms <= 132; sms += 2) k.sm_curve.push_back({sms, 1e-3 * 132.0 / std::min(sms, knee_sms)});
  return k;
}

// A SchedContext whose state the test sets: tenants, ready and queued launches; it records what
// the policy does (dispatches, resizes, TLP changes) and keeps running() up to date.
class HandContext final : public SchedContext {
 public:
  HandContext() : device_(h200_spec()), estimator_(device_) {}

  TenantId add_tenant(TenantClass cls) {
    TenantView v;
    v.id = TenantId{static_cast<int64_t>(tenants_.size())};
    v.info.name = "t" + std::to_string(v.id.value);
    v.info.cls = cls;
    tenants_.push_back(v);
    queued_.emplace_back();
    return v.id;
  }
  // `request`, `last`: the request it belongs to and whether its end ends it (arriving now).
  LaunchId make_ready(TenantId t, const KernelSpec& k, int64_t request = 0, bool last = false) {
    ReadyLaunch r;
    r.id = LaunchId{next_launch_++};
    r.tenant = t;
    r.kernel = &k;
    r.pending = {0, k.variant(0).logical_blocks};
    r.pending_blocks = r.pending.size();
    r.request = request;
    r.last_of_request = last;
    r.request_arrival = clock;
    ready_.push_back(r);
    return r.id;
  }
  void queue(TenantId t, const KernelSpec& k, int64_t request = 0, bool last = false) {
    queued_[static_cast<size_t>(t.value)].push_back(QueuedLaunch{LaunchId{next_launch_++}, &k, request, last});
  }
  // Ends a running dispatch (the whole of its launch): it leaves running(), its tenant's next
  // queued launch becomes ready (stream order), then the policy hears of it, as from the engine.
  // `c`'s times, error and preemption are what the policy hears (dispatch is set here).
  Status finish(Policy& p, DispatchId id, Completion c = {}) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == id; });
    if (it == running_.end()) return Status::not_found("finish: not running");
    const TenantId t = it->tenants.front();
    running_.erase(it);
    auto& q = queued_[static_cast<size_t>(t.value)];
    if (!q.empty()) {
      const QueuedLaunch next = q.front();
      q.erase(q.begin());
      make_ready(t, *next.kernel, next.request, next.last_of_request);
    }
    c.dispatch = id;
    return p.on_complete(*this, c);
  }
  // Ends a dispatch without telling the policy yet: a completion later in the same batch.
  void end_silently(DispatchId id) {
    running_.erase(std::remove_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == id; }),
                   running_.end());
  }
  const RunningDispatch* running_of(TenantId t) const {
    for (const auto& r : running_) {
      if (r.tenants.front() == t) return &r;
    }
    return nullptr;
  }

  struct Resize {
    DispatchId id;
    SmSet sms;
  };
  struct Tlp {
    DispatchId id;
    int tlp;
  };
  std::vector<Resize> resizes;
  std::vector<Tlp> tlps;
  std::vector<std::pair<TenantId, Placement>> dispatched;

  Seconds clock = 0;  // what now() says; the test moves it
  Seconds now() const override { return clock; }
  const DeviceSpec& device() const override { return device_; }
  std::span<const TenantView> tenants() const override { return tenants_; }
  const Estimator& estimator() const override { return estimator_; }
  Capabilities capabilities(const KernelSpec& k) const override {
    Capabilities c;
    if (!k.elastic) return c;
    c.persistent_form = c.exact_sm_sets = c.tlp = c.split_range = c.resize = c.preempt = true;
    return c;
  }
  std::span<const ReadyLaunch> ready() const override { return ready_; }
  std::span<const QueuedLaunch> queued(TenantId t) const override { return queued_[static_cast<size_t>(t.value)]; }
  std::span<const RunningDispatch> running() const override { return running_; }
  std::mt19937_64& rng() override { return rng_; }
  Result<DispatchId> dispatch(LaunchId launch, const Placement& p, DispatchId after) override {
    if (after.valid()) return Status::unsupported("hand context: no stream order");
    auto it = std::find_if(ready_.begin(), ready_.end(), [&](const ReadyLaunch& r) { return r.id == launch; });
    if (it == ready_.end()) return Status::failed_precondition("launch not ready");
    RunningDispatch d;
    d.id = DispatchId{next_dispatch_++};
    d.launches = {launch};
    d.tenants = {it->tenant};
    d.kernels = {it->kernel};
    d.placement = p;
    running_.push_back(d);
    dispatched.emplace_back(it->tenant, p);
    ready_.erase(it);  // all its blocks are dispatched
    return d.id;
  }
  Status resize(DispatchId id, const SmSet& sms) override {
    for (auto& r : running_) {
      if (r.id != id) continue;
      if (r.placement.form != LaunchForm::persistent) return Status::unsupported("not persistent");
      r.placement.sms = sms;
      resizes.push_back({id, sms});
      return Status::ok();
    }
    return Status::not_found("resize: not running");
  }
  Status set_tlp(DispatchId id, int tlp, const SmSet&, int) override {
    for (auto& r : running_) {
      if (r.id != id) continue;
      r.placement.tlp = tlp;
      tlps.push_back({id, tlp});
      return Status::ok();
    }
    return Status::not_found("set_tlp: not running");
  }
  Status preempt(DispatchId) override { return Status::unsupported("sgdrc does not preempt"); }
  Result<std::vector<int64_t>> progress(DispatchId) const override { return std::vector<int64_t>{0}; }
  void request_tick(Seconds) override {}
  Status prepare_sm_set(const SmSet& sms, TenantId t) override {
    prepared.emplace_back(t, sms);
    return Status::ok();
  }
  std::vector<std::pair<TenantId, SmSet>> prepared;

 private:
  DeviceSpec device_;
  Estimator estimator_;
  std::vector<TenantView> tenants_;
  std::vector<ReadyLaunch> ready_;
  std::vector<std::vector<QueuedLaunch>> queued_;
  std::vector<RunningDispatch> running_;
  std::mt19937_64 rng_{1};
  int64_t next_launch_ = 0;
  int64_t next_dispatch_ = 0;
};

}  // namespace concord::testing
