// Runs that end early: a fault in one tenant's kernel, the time limit with a kernel that never
// ends (one that preemption stops, one that nothing stops), and a stop request. Each ends the run
// within a bounded time, naming the tenant, and keeps what the other tenants finished.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>

#include "backend/sim/sim_backend.h"
#include "concord/engine.h"
#include "concord/experiment.h"
#include "concord/spec_source.h"
#include "concord/backend_factory.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::step;
using testing::tenant;
using testing::workload;

// The simulator, with every dispatch of one kernel failing as an illegal address would on a GPU:
// its completion carries a device error naming the tenant, kernel and dispatch, and, as the fault
// poisons the device, so does every completion after it.
class FaultingBackend final : public Backend {
 public:
  FaultingBackend(std::string faulty_kernel) : sim_(h200_spec()), faulty_(std::move(faulty_kernel)) {}
  std::string name() const override { return sim_.name(); }
  const DeviceSpec& device() const override { return sim_.device(); }
  Capabilities capabilities(const KernelSpec& k) const override { return sim_.capabilities(k); }
  Status can_implement(const DispatchRequest& r) const override { return sim_.can_implement(r); }
  Status dispatch(const DispatchRequest& r) override {
    for (const DispatchPart& p : r.parts) {
      if (p.kernel->name == faulty_) {
        faulty_dispatches_.insert(r.id.value);
        label_[r.id.value] = "tenant " + std::to_string(p.tenant.value) + " kernel '" + p.kernel->name + "' dispatch " +
                             std::to_string(r.id.value);
      }
    }
    return sim_.dispatch(r);
  }
  Status set_sm_set(DispatchId d, const SmSet& s) override { return sim_.set_sm_set(d, s); }
  Status set_tlp(DispatchId d, int t, const SmSet& s, int tt) override { return sim_.set_tlp(d, t, s, tt); }
  Status preempt(DispatchId d) override { return sim_.preempt(d); }
  Result<std::vector<int64_t>> progress(DispatchId d) const override { return sim_.progress(d); }
  Seconds now() const override { return sim_.now(); }
  Result<std::vector<Completion>> advance(Seconds until) override {
    auto out = sim_.advance(until);
    if (!out) return out;
    for (Completion& c : *out) {
      if (!faulty_dispatches_.count(c.dispatch.value) && !poisoned_) continue;
      poisoned_ = true;
      c.error = Status::device_error("sim: dispatch " + std::to_string(c.dispatch.value) +
                                     " failed: cudaErrorIllegalAddress (injected)");
      std::fill(c.blocks_done.begin(), c.blocks_done.end(), 0);
    }
    return out;
  }
  int running() const override { return sim_.running(); }
  Status abort_all(Seconds grace) override { return sim_.abort_all(grace); }

 private:
  sim::SimBackend sim_;
  std::string faulty_;
  std::set<int64_t> faulty_dispatches_;
  std::map<int64_t, std::string> label_;
  bool poisoned_ = false;
};

// Everything ready on the whole GPU at once, elastic kernels in the persistent form (preemptible).
std::unique_ptr<Policy> everything_at_once() {
  return std::make_unique<testing::ScriptedPolicy>([](SchedContext& ctx) {
    std::vector<ReadyLaunch> waiting;
    for (const ReadyLaunch& r : ctx.ready()) {
      if (!r.has_running_dispatch) waiting.push_back(r);
    }
    for (const ReadyLaunch& r : waiting) {
      Placement p = testing::whole(ctx);
      if (ctx.capabilities(*r.kernel).persistent_form) p.form = LaunchForm::persistent;
      auto d = ctx.dispatch(r.id, p);
      if (!d) return d.status();
    }
    return Status::ok();
  });
}

// A kernel that runs for hours of simulated time: elastic (preemption stops it at its next
// logical block) or opaque (nothing stops it).
KernelStep endless(const std::string& name, bool elastic) {
  KernelStep s = step("fma_loop", 1 << 20);
  s.kernel.name = name;
  s.kernel.elastic = elastic;
  for (KernelVariant& v : s.kernel.variants) {
    v.logical_blocks = kMaxLogicalBlocks;
    v.flops_per_block = 1e9;
  }
  return s;
}

// A tenant whose one request arrives at `at` seconds.
TenantSpec arriving_at(TenantSpec t, Seconds at) {
  t.arrival.kind = ArrivalProcess::Kind::timestamps;
  t.arrival.timestamps = {at};
  t.requests = 1;
  return t;
}

int64_t finished_requests(const TenantRecord& t) {
  return std::count_if(t.requests.begin(), t.requests.end(), [](const RequestRecord& q) { return q.end >= 0; });
}

// Every finished request's launches ended, in order, within the run.
void expect_consistent(const RunRecord& run) {
  for (const LaunchRecord& l : run.launches) {
    const TenantRecord& t = run.tenants[static_cast<size_t>(l.tenant.value)];
    if (t.requests[static_cast<size_t>(l.request)].end >= 0) {
      EXPECT_GE(l.end, 0) << "launch " << l.id.value << " of a finished request did not end";
    }
  }
}

TEST(EarlyEnd, AFaultEndsTheRunNamingTheTenantAndKeepsWhatTheOthersFinished) {
  // Under every policy: `good` runs a closed loop; `bad` arrives later and its kernel faults.
  const Workload w = workload({tenant("good", {step("vector_add", 1 << 20)}, 400),
                               arriving_at(tenant("bad", {step("stream_triad", 1 << 22)}), 0.001)});
  for (const auto& entry : builtin_policies().list()) {
    if (entry.name == "manual") continue;  // needs placements named per tenant
    SCOPED_TRACE(entry.name);
    auto policy = builtin_policies().make(entry.name, {});
    ASSERT_TRUE(policy.is_ok());
    FaultingBackend backend("stream_triad");
    const RunOutcome out = run_workload_outcome(w, backend, **policy, EngineOptions{});
    ASSERT_EQ(out.status.code(), StatusCode::device_error) << out.status.to_string();
    EXPECT_NE(out.status.message().find("tenant 'bad' kernel 'stream_triad' (launch"), std::string::npos) << out.status.message();
    EXPECT_NE(out.status.message().find("cudaErrorIllegalAddress"), std::string::npos);
    const RunRecord& run = out.record;
    ASSERT_EQ(run.tenants.size(), 2u);
    const int64_t good = finished_requests(run.tenants[0]);
    EXPECT_GT(good, 0) << "what `good` finished before the fault is kept";
    // shortest-first runs the short kernel while one is ready: `good`'s closed loop finishes
    // before the long faulting kernel ever runs.
    if (entry.name != "shortest-first") {
      EXPECT_LT(good, 400);
    }
    EXPECT_EQ(finished_requests(run.tenants[1]), 0);
    // The faulty dispatch failed, and with it whatever ran then: each named, the fault first.
    const auto failed = std::count_if(run.dispatches.begin(), run.dispatches.end(),
                                      [](const DispatchRecord& d) { return !d.error.empty(); });
    EXPECT_GE(failed, 1);
    const auto with_it = out.status.message().find("failed with it");
    EXPECT_EQ(failed > 1, with_it != std::string::npos) << out.status.message();
    if (with_it != std::string::npos) {
      EXPECT_NE(out.status.message().find("tenant 'good' kernel 'vector_add'", with_it), std::string::npos) << out.status.message();
    }
    // `good`'s dispatch in flight at the fault was stopped or ran to its end: nothing left running.
    for (const DispatchRecord& d : run.dispatches) EXPECT_GE(d.end, 0) << "dispatch " << d.id.value;
    expect_consistent(run);
  }
}

TEST(EarlyEnd, TheTimeLimitStopsAKernelThatNeverEndsAndNamesIt) {
  const Workload w = workload({tenant("good", {step("vector_add", 1 << 20)}, 100000),
                               arriving_at(tenant("spin", {endless("spin", true)}), 0.001)});
  sim::SimBackend backend(h200_spec());
  auto policy = everything_at_once();
  EngineOptions o;
  o.time_limit = 0.05;
  const RunOutcome out = run_workload_outcome(w, backend, *policy, o);
  ASSERT_EQ(out.status.code(), StatusCode::deadline_exceeded) << out.status.to_string();
  EXPECT_NE(out.status.message().find("tenant 'spin' kernel 'spin'"), std::string::npos) << out.status.message();
  EXPECT_EQ(out.status.message().find("not ended"), std::string::npos) << "preemption stops it: " << out.status.message();
  EXPECT_GT(finished_requests(out.record.tenants[0]), 0);
  // The endless dispatch was preempted at the limit, with what it did recorded.
  const DispatchRecord& spin = *std::find_if(out.record.dispatches.begin(), out.record.dispatches.end(), [&](const DispatchRecord& d) {
    return d.tenants.front() == TenantId{1};
  });
  EXPECT_TRUE(spin.preempted);
  EXPECT_GE(spin.end, 0.05);
  EXPECT_LE(spin.end, 0.05 + o.abort_grace);
  ASSERT_EQ(spin.blocks_done.size(), 1u);
  EXPECT_GT(spin.blocks_done[0], 0);
  EXPECT_EQ(backend.running(), 0);
  expect_consistent(out.record);
}

TEST(EarlyEnd, TheTimeLimitEndsARunWhoseOpaqueKernelNeverEndsAndSaysSo) {
  const Workload w = workload({tenant("good", {step("vector_add", 1 << 20)}, 100000),
                               arriving_at(tenant("hang", {endless("hang", false)}), 0.001)});
  sim::SimBackend backend(h200_spec());
  auto policy = everything_at_once();
  EngineOptions o;
  o.time_limit = 0.05;
  const RunOutcome out = run_workload_outcome(w, backend, *policy, o);
  ASSERT_EQ(out.status.code(), StatusCode::deadline_exceeded) << out.status.to_string();
  const std::string& m = out.status.message();
  EXPECT_NE(m.find("not ended when the run gave up on them"), std::string::npos) << m;
  EXPECT_NE(m.find("tenant 'hang' kernel 'hang'"), std::string::npos) << m;
  EXPECT_GT(finished_requests(out.record.tenants[0]), 0);
  // The opaque dispatch never ended: its times are -1 (null in the results); `good`'s ended.
  for (const DispatchRecord& d : out.record.dispatches) {
    if (d.tenants.front() == TenantId{1}) {
      EXPECT_EQ(d.end, -1);
      EXPECT_EQ(d.start, -1);
    } else {
      EXPECT_GE(d.end, 0);
    }
  }
  expect_consistent(out.record);
}

// Sets a stop flag once `after` requests have ended, as a signal handler would.
class StopAfter final : public EngineObserver {
 public:
  StopAfter(std::atomic<bool>& stop, int after) : stop_(stop), after_(after) {}
  void on_request_end(TenantId, const RequestRecord&) override {
    if (++ended_ == after_) stop_.store(true);
  }

 private:
  std::atomic<bool>& stop_;
  int after_;
  int ended_ = 0;
};

TEST(EarlyEnd, AStopRequestEndsTheRunWithWhatFinished) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}, 1000), tenant("b", {step("fma_loop", 1 << 20)}, 1000)});
  for (const auto& entry : builtin_policies().list()) {
    if (entry.name == "manual") continue;
    SCOPED_TRACE(entry.name);
    auto policy = builtin_policies().make(entry.name, {});
    ASSERT_TRUE(policy.is_ok());
    sim::SimBackend backend(h200_spec());
    std::atomic<bool> stop{false};
    StopAfter observer(stop, 20);
    EngineOptions o;
    o.stop = &stop;
    o.observer = &observer;
    const RunOutcome out = run_workload_outcome(w, backend, **policy, o);
    ASSERT_EQ(out.status.code(), StatusCode::cancelled) << out.status.to_string();
    EXPECT_EQ(finished_requests(out.record.tenants[0]) + finished_requests(out.record.tenants[1]) >= 20, true);
    EXPECT_LT(finished_requests(out.record.tenants[0]) + finished_requests(out.record.tenants[1]), 2000);
    EXPECT_EQ(backend.running(), 0) << "what ran was stopped or ended within the grace";
    expect_consistent(out.record);
  }
}

TEST(EarlyEnd, AnExperimentStoppedInAReferenceRunKeepsTheWholeSharedRun) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}, 30), tenant("b", {step("fma_loop", 1 << 20)}, 30)});
  std::atomic<bool> stop{false};
  StopAfter observer(stop, 60);  // the shared run's last request: the reference runs find the flag set
  ExperimentConfig config;
  config.backend = BackendConfig{"sim", h200_spec(), 1};
  config.policy = "streams";
  config.observer = &observer;
  config.stop = &stop;
  ReferenceCache cache;
  const ExperimentOutcome out = run_experiment_outcome(w, config, cache);
  ASSERT_EQ(out.status.code(), StatusCode::cancelled) << out.status.to_string();
  EXPECT_TRUE(out.ran);
  EXPECT_EQ(out.stage, "alone run of tenant 'a'");
  EXPECT_EQ(finished_requests(out.result.run.tenants[0]), 30);
  EXPECT_EQ(finished_requests(out.result.run.tenants[1]), 30);

  // Stopped in the shared run: the stage says so and what finished is there.
  std::atomic<bool> early{false};
  StopAfter soon(early, 10);
  config.observer = &soon;
  config.stop = &early;
  const ExperimentOutcome cut = run_experiment_outcome(w, config, cache);
  ASSERT_EQ(cut.status.code(), StatusCode::cancelled);
  EXPECT_EQ(cut.stage, "shared run");
  EXPECT_GE(finished_requests(cut.result.run.tenants[0]) + finished_requests(cut.result.run.tenants[1]), 10);
}

}  // namespace
}  // namespace concord
