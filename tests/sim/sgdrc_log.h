// A SchedContext that forwards every call to the engine's and logs the SM sets the policy gives
// (dispatches and resizes), and sgdrc run through it: the SGDRC tests on the simulator and on the
// GPU read what the policy did from the log.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "concord/policy.h"
#include "policy/sgdrc/sgdrc_policy.h"

namespace concord::testing {

// Forwards every call to the engine's context and logs the policy's resizes and dispatches.
class LoggingContext final : public SchedContext {
 public:
  explicit LoggingContext(SchedContext& inner) : in_(inner) {}
  struct Event {
    Seconds at;
    DispatchId id;
    TenantId tenant;  // dispatches only
    SmSet sms;
    bool resize;
  };
  std::vector<Event>* log = nullptr;

  Seconds now() const override { return in_.now(); }
  const DeviceSpec& device() const override { return in_.device(); }
  std::span<const TenantView> tenants() const override { return in_.tenants(); }
  const Estimator& estimator() const override { return in_.estimator(); }
  Capabilities capabilities(const KernelSpec& k) const override { return in_.capabilities(k); }
  std::span<const ReadyLaunch> ready() const override { return in_.ready(); }
  std::span<const QueuedLaunch> queued(TenantId t) const override { return in_.queued(t); }
  std::span<const RunningDispatch> running() const override { return in_.running(); }
  std::mt19937_64& rng() override { return in_.rng(); }
  Result<DispatchId> dispatch(LaunchId launch, const Placement& p, DispatchId after) override {
    auto d = in_.dispatch(launch, p, after);
    if (d) log->push_back({now(), *d, in_.running().back().tenants.front(), in_.running().back().placement.sms, false});
    return d;
  }
  Status resize(DispatchId id, const SmSet& sms) override {
    log->push_back({now(), id, TenantId{}, sms, true});
    return in_.resize(id, sms);
  }
  Status set_tlp(DispatchId id, int tlp, const SmSet& s, int t) override { return in_.set_tlp(id, tlp, s, t); }
  Status preempt(DispatchId id) override { return in_.preempt(id); }
  Result<std::vector<int64_t>> progress(DispatchId id) const override { return in_.progress(id); }
  void request_tick(Seconds at) override { in_.request_tick(at); }
  Status prepare_sm_set(const SmSet& sms, TenantId t) override { return in_.prepare_sm_set(sms, t); }

 private:
  SchedContext& in_;
};

class LoggedSgdrc final : public Policy {
 public:
  explicit LoggedSgdrc(policy::SgdrcOptions o) : inner_(o) {}
  std::string name() const override { return "sgdrc"; }
  Status on_start(SchedContext& c) override { return with(c, [&](SchedContext& x) { return inner_.on_start(x); }); }
  Status on_ready(SchedContext& c, LaunchId l) override { return with(c, [&](SchedContext& x) { return inner_.on_ready(x, l); }); }
  Status on_complete(SchedContext& c, const Completion& d) override {
    return with(c, [&](SchedContext& x) { return inner_.on_complete(x, d); });
  }
  Status on_tick(SchedContext& c) override { return with(c, [&](SchedContext& x) { return inner_.on_tick(x); }); }
  std::vector<LoggingContext::Event> log;

 private:
  template <typename F>
  Status with(SchedContext& c, F f) {
    LoggingContext x(c);
    x.log = &log;
    return f(x);
  }
  policy::SgdrcPolicy inner_;
};

// The BE resizes in a log: shrinks (to part of the GPU), grows (back to every SM), repeats (to the
// set the dispatch already had: SGDRC resizes once per change, so none) and resizes of a dispatch
// the log never saw dispatched.
struct TidalResizes {
  int shrinks = 0;
  int grows = 0;
  int repeats = 0;
  int unknown = 0;
};
inline TidalResizes tidal_resizes(const std::vector<LoggingContext::Event>& log, const SmSet& all_sms) {
  TidalResizes out;
  std::map<int64_t, SmSet> sets;  // each dispatch's set, as dispatched and resized
  for (const auto& e : log) {
    if (!e.resize) {
      sets[e.id.value] = e.sms;
      continue;
    }
    auto it = sets.find(e.id.value);
    if (it == sets.end()) {
      ++out.unknown;
      continue;
    }
    out.repeats += it->second == e.sms ? 1 : 0;
    (e.sms == all_sms ? out.grows : out.shrinks) += 1;
    it->second = e.sms;
  }
  return out;
}

}  // namespace concord::testing
