// Simulator invariants: work conservation, determinism, occupancy limits, SM sets, preemption,
// fusion and resizing.
#include <gtest/gtest.h>

#include <map>

#include "backend/sim/sim_backend.h"
#include "concord/occupancy.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::ScriptedPolicy;
using testing::step;
using testing::tenant;
using testing::workload;

Workload mixed_workload() {
  return workload({tenant("a", {step("hotspot", 2048), step("vector_add", 1 << 22, 2)}, 2),
                   tenant("b", {step("kmeans", 1 << 18), step("bfs", 1 << 20)}, 3),
                   tenant("c", {step("matmul", 1024)}, 2)});
}

TEST(SimInvariants, EveryLaunchFinishesExactlyItsLogicalBlocks) {
  for (const char* policy : {"serial", "streams", "static-partition", "round-robin", "random"}) {
    const Workload w = mixed_workload();
    auto run = run_on_sim(w, policy);
    ASSERT_TRUE(run.is_ok()) << policy << ": " << run.status().to_string();
    // 2 requests x 3 launches + 3 x 2 + 2 x 1
    ASSERT_EQ(run->launches.size(), 14u) << policy;
    std::map<int64_t, int64_t> done;
    for (const auto& d : run->dispatches) {
      for (size_t k = 0; k < d.launches.size(); ++k) done[d.launches[k].value] += d.blocks_done[k];
    }
    for (const auto& l : run->launches) {
      EXPECT_EQ(done[l.id.value], l.logical_blocks) << policy << " launch " << l.id.value;
      EXPECT_GE(l.end, l.start);
      EXPECT_GE(l.start, l.ready);
    }
    for (const auto& t : run->tenants) {
      for (const auto& r : t.requests) {
        EXPECT_GE(r.start, r.arrival);
        EXPECT_GT(r.end, r.start);
      }
    }
  }
}

TEST(SimInvariants, SameSeedSameResultsDifferentSeedDifferentArrivals) {
  Workload w = mixed_workload();
  w.tenants[1].arrival.kind = ArrivalProcess::Kind::poisson;
  w.tenants[1].arrival.rate_per_s = 5000;
  auto a = run_on_sim(w, "random", 7);
  auto b = run_on_sim(w, "random", 7);
  auto c = run_on_sim(w, "random", 8);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  ASSERT_EQ(a->dispatches.size(), b->dispatches.size());
  for (size_t i = 0; i < a->dispatches.size(); ++i) {
    EXPECT_EQ(a->dispatches[i].launches, b->dispatches[i].launches);
    EXPECT_EQ(a->dispatches[i].start, b->dispatches[i].start);  // bit for bit
    EXPECT_EQ(a->dispatches[i].end, b->dispatches[i].end);
  }
  EXPECT_EQ(a->makespan, b->makespan);
  EXPECT_NE(a->tenants[1].requests[0].arrival, c->tenants[1].requests[0].arrival);
}

// Drives the backend directly and checks per-SM limits and SM sets after every event.
TEST(SimInvariants, ResidencyNeverExceedsSmLimitsAndStaysInSmSets) {
  const DeviceSpec dev = h200_spec();
  sim::SimBackend sim(dev);
  const KernelSpec a = *make_suite_kernel("tc_gemm", 4096);  // heavy shared memory and registers
  const KernelSpec b = *make_suite_kernel("vector_add", 1 << 24);
  const KernelSpec c = *make_suite_kernel("hotspot", 4096);
  std::map<int64_t, SmSet> allowed;
  auto submit = [&](int64_t id, const KernelSpec& k, SmSet sms, int tlp, LaunchForm form) {
    DispatchRequest r;
    r.id = DispatchId{id};
    r.parts.push_back(DispatchPart{LaunchId{id}, TenantId{id}, &k, k.default_variant,
                                   BlockRange{0, k.variant(k.default_variant).logical_blocks}, 1});
    r.placement.sms = sms;
    r.placement.tlp = tlp;
    r.placement.form = form;
    allowed[id] = sms;
    ASSERT_TRUE(sim.dispatch(r).is_ok());
  };
  submit(0, a, SmSet::range(0, 80), 0, LaunchForm::native);
  submit(1, b, SmSet::range(40, 92), 3, LaunchForm::persistent);
  submit(2, c, dev.all_sms(), 0, LaunchForm::native);
  int events = 0;
  while (sim.running() > 0) {
    for (int sm = 0; sm < dev.sm_count; ++sm) {
      const SmResources f = sim.free_resources(sm);
      ASSERT_GE(f.blocks, 0);
      ASSERT_GE(f.threads, 0);
      ASSERT_GE(f.registers, 0);
      ASSERT_GE(f.shared_bytes, 0);
      for (const auto& [id, n] : sim.residents_on(sm)) {
        ASSERT_TRUE(allowed[id.value].contains(sm)) << "dispatch " << id.value << " on SM " << sm;
        if (id.value == 1) {
          ASSERT_LE(n, 3) << "TLP";
        }
      }
    }
    auto done = sim.advance(1e9);
    ASSERT_TRUE(done.is_ok());
    ++events;
  }
  EXPECT_EQ(events, 3);
  for (int sm = 0; sm < dev.sm_count; ++sm) {
    EXPECT_EQ(sim.free_resources(sm).blocks, dev.sm.max_blocks);
    EXPECT_EQ(sim.free_resources(sm).shared_bytes, dev.sm.max_shared_bytes);
  }
}

TEST(SimInvariants, EngineRoundsNativeSetsToTpcsAndKeepsPersistentSetsExact) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 22)}), tenant("b", {step("vector_add", 1 << 22)})});
  ScriptedPolicy p([](SchedContext& ctx) -> Status {
    std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const auto& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement pl;
      pl.sms = SmSet::of({3, 8});
      pl.form = r.tenant.value == 0 ? LaunchForm::native : LaunchForm::persistent;
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, pl).status());
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run->dispatches[0].placement.sms, SmSet::of({2, 3, 8, 9}));
  EXPECT_EQ(run->dispatches[1].placement.sms, SmSet::of({3, 8}));
}

// Dispatches persistently; preempts the first dispatch from a tick, then resumes the rest.
class PreemptOnce final : public Policy {
 public:
  std::string name() const override { return "preempt-once"; }
  Status on_tick(SchedContext& ctx) override {
    if (preempted_ || ctx.running().empty()) return Status::ok();
    preempted_ = true;
    return ctx.preempt(ctx.running().front().id);
  }
  bool preempted_ = false;

 protected:
  Status schedule(SchedContext& ctx) override {
    if (!ctx.running().empty() || ctx.ready().empty()) return Status::ok();
    Placement pl;
    pl.sms = ctx.device().all_sms();
    pl.form = LaunchForm::persistent;
    pl.tlp = 2;
    auto d = ctx.dispatch(ctx.ready().front().id, pl);
    if (d && !preempted_) ctx.request_tick(ctx.now() + 1e-4);
    return d.status();
  }
};

TEST(SimInvariants, PreemptThenResumeFinishesEveryBlockExactlyOnce) {
  const Workload w = workload({tenant("victim", {step("fma_loop", 1 << 24)})});
  PreemptOnce policy;
  auto run = run_on_sim(w, policy);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_TRUE(policy.preempted_);
  ASSERT_EQ(run->dispatches.size(), 2u);
  const auto& first = run->dispatches[0];
  const auto& second = run->dispatches[1];
  EXPECT_TRUE(first.preempted);
  EXPECT_GT(first.blocks_done[0], 0);
  EXPECT_LT(first.blocks_done[0], first.ranges[0].size());
  // The resumed dispatch covers exactly the blocks the first did not finish.
  EXPECT_EQ(second.ranges[0].begin, first.ranges[0].begin + first.blocks_done[0]);
  EXPECT_EQ(second.ranges[0].end, first.ranges[0].end);
  EXPECT_FALSE(second.preempted);
  EXPECT_EQ(first.blocks_done[0] + second.blocks_done[0], run->launches[0].logical_blocks);
}

TEST(SimInvariants, FusedLaunchFinishesBothParts) {
  const Workload w = workload({tenant("compute", {step("fma_loop", 1 << 22)}), tenant("memory", {step("stream_triad", 1 << 26)})});
  ScriptedPolicy p([](SchedContext& ctx) -> Status {
    if (!ctx.running().empty() || ctx.ready().size() < 2) return Status::ok();
    Placement pl;
    pl.sms = ctx.device().all_sms();
    pl.form = LaunchForm::persistent;
    pl.fusion = Fusion{ctx.ready()[1].id, {}, 1, 1};
    return ctx.dispatch(ctx.ready()[0].id, pl).status();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->dispatches.size(), 1u);
  const auto& d = run->dispatches[0];
  ASSERT_EQ(d.launches.size(), 2u);
  EXPECT_EQ(d.blocks_done[0], run->launches[d.launches[0].value].logical_blocks);
  EXPECT_EQ(d.blocks_done[1], run->launches[d.launches[1].value].logical_blocks);
  EXPECT_EQ(run->tenants[0].finish, run->tenants[1].finish);  // one kernel, one completion
}

TEST(SimInvariants, SplitRangesCoverTheLaunch) {
  const Workload w = workload({tenant("a", {step("srad", 2048)})});
  ScriptedPolicy p([](SchedContext& ctx) -> Status {
    std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const auto& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement pl;
      pl.sms = SmSet::range(0, 32);
      pl.form = LaunchForm::persistent;
      pl.range = BlockRange{r.pending.begin, r.pending.begin + std::min<int64_t>(1000, r.pending.size())};
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, pl).status());
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  int64_t expect_begin = 0;
  for (const auto& d : run->dispatches) {
    EXPECT_EQ(d.ranges[0].begin, expect_begin);
    expect_begin = d.ranges[0].end;
  }
  EXPECT_EQ(expect_begin, run->launches[0].logical_blocks);
  EXPECT_GT(run->dispatches.size(), 1u);
}

TEST(SimInvariants, ShrinkingTheSmSetSlowsALaunchAndGrowingSpeedsItUp) {
  const DeviceSpec dev = h200_spec();
  const KernelSpec k = *make_suite_kernel("fma_loop", 1 << 24);
  auto run_with = [&](bool shrink) {
    sim::SimBackend sim(dev);
    DispatchRequest r;
    r.id = DispatchId{0};
    r.parts.push_back(DispatchPart{LaunchId{0}, TenantId{0}, &k, k.default_variant,
                                   BlockRange{0, k.variant(k.default_variant).logical_blocks}, 1});
    r.placement.sms = dev.all_sms();
    r.placement.form = LaunchForm::persistent;
    EXPECT_TRUE(sim.dispatch(r).is_ok());
    EXPECT_TRUE(sim.advance(1e-4).is_ok());
    const double full_rate = sim.rates_of(r.id)[0];
    if (shrink) {
      EXPECT_TRUE(sim.set_sm_set(r.id, SmSet::range(0, 33)).is_ok());
      EXPECT_TRUE(sim.advance(2e-4).is_ok());
      EXPECT_NEAR(sim.rates_of(r.id)[0] / full_rate, 0.25, 0.02);
      for (int sm = 33; sm < dev.sm_count; ++sm) EXPECT_TRUE(sim.residents_on(sm).empty());
      EXPECT_TRUE(sim.set_sm_set(r.id, dev.all_sms()).is_ok());
      EXPECT_TRUE(sim.advance(3e-4).is_ok());
      EXPECT_NEAR(sim.rates_of(r.id)[0] / full_rate, 1.0, 1e-9);
    }
    auto done = sim.advance(1e9);
    EXPECT_TRUE(done.is_ok());
    return sim.now();
  };
  EXPECT_GT(run_with(true), run_with(false));
}

// A lower TLP takes effect on the blocks already resident (as launch.cuh's leave_if_over_limit
// does on the GPU); a higher one fills the new slots; a fused dispatch refuses the change.
TEST(SimInvariants, LoweringTlpInPlaceEvictsTheSurplusAndRaisingRefills) {
  const DeviceSpec dev = h200_spec();
  const KernelSpec k = *make_suite_kernel("stream_triad", 1 << 26);
  sim::SimBackend sim(dev);
  DispatchRequest r;
  r.id = DispatchId{0};
  r.parts.push_back(DispatchPart{LaunchId{0}, TenantId{0}, &k, k.default_variant,
                                 BlockRange{0, k.variant(k.default_variant).logical_blocks}, 1});
  r.placement.sms = dev.all_sms();
  r.placement.form = LaunchForm::persistent;
  r.placement.tlp = 2;
  ASSERT_TRUE(sim.dispatch(r).is_ok());
  ASSERT_TRUE(sim.advance(1e-5).is_ok());
  ASSERT_EQ(sim.residents_on(0).at(r.id), 2);
  ASSERT_TRUE(sim.set_tlp(r.id, 1, SmSet(), 0).is_ok());
  for (int sm = 0; sm < dev.sm_count; ++sm) EXPECT_LE(sim.residents_on(sm)[r.id], 1) << "SM " << sm;
  ASSERT_TRUE(sim.set_tlp(r.id, 2, SmSet(), 0).is_ok());
  ASSERT_TRUE(sim.advance(2e-5).is_ok());
  EXPECT_EQ(sim.residents_on(0).at(r.id), 2);
  auto done = sim.advance(1e9);
  ASSERT_TRUE(done.is_ok());
  ASSERT_EQ(done->size(), 1u);
}

TEST(SimInvariants, CompletionsOfOneInstantAreAllRecordedBeforeAnyHookRuns) {
  // Two equal launches on equal halves finish at the same instant and come back from one
  // advance(); when the policy hears of the first, the second must not look running (a resize,
  // set_tlp or preempt of it would reach a backend that has forgotten it).
  const Workload w = workload({tenant("a", {step("fma_loop", 1 << 20)}), tenant("b", {step("fma_loop", 1 << 20)})});
  int completions = 0;
  std::vector<size_t> running_seen;
  ScriptedPolicy p(
      [&](SchedContext& ctx) -> Status {
        std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
        for (const auto& r : ready) {
          if (r.has_running_dispatch) continue;
          Placement pl;
          pl.sms = SmSet::range(r.tenant.value == 0 ? 0 : 66, 66);
          pl.form = LaunchForm::persistent;
          CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, pl).status());
        }
        return Status::ok();
      },
      [&](SchedContext& ctx, const Completion& c) -> Status {
        ++completions;
        running_seen.push_back(ctx.running().size());
        for (const RunningDispatch& d : ctx.running()) {
          if (d.id == c.dispatch) return Status::internal("a completed dispatch still looks running");
        }
        return Status::ok();
      });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(completions, 2);
  ASSERT_EQ(run->dispatches.size(), 2u);
  ASSERT_DOUBLE_EQ(run->dispatches[0].end, run->dispatches[1].end);  // one instant, one batch
  EXPECT_EQ(running_seen, (std::vector<size_t>{0, 0}));
}

TEST(SimInvariants, UnsupportedRequestsAreRefusedWithReasons) {
  const Workload w = workload({tenant("lib", {step("cublas_gemm", 2048)})});
  std::vector<Status> refusals;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    if (!ctx.running().empty() || ctx.ready().empty()) return Status::ok();
    const LaunchId id = ctx.ready().front().id;
    Placement pl;
    pl.sms = ctx.device().all_sms();
    pl.form = LaunchForm::persistent;
    refusals.push_back(ctx.dispatch(id, pl).status());  // opaque: no persistent form
    pl.form = LaunchForm::native;
    pl.cache = CachePolicy::l1_bypass;
    refusals.push_back(ctx.dispatch(id, pl).status());  // opaque: no L1 bypass
    pl.cache = CachePolicy::normal;
    pl.sms = SmSet::range(0, 200);
    refusals.push_back(ctx.dispatch(id, pl).status());  // beyond the device
    pl.sms = SmSet();
    refusals.push_back(ctx.dispatch(id, pl).status());  // empty
    pl.sms = ctx.device().all_sms();
    pl.range = BlockRange{0, 1};
    refusals.push_back(ctx.dispatch(id, pl).status());  // opaque: no split
    pl.range.reset();
    pl.cache = CachePolicy::l2_evict_first;  // an access-policy window: allowed
    return ctx.dispatch(id, pl).status();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(refusals.size(), 5u);
  for (const Status& s : refusals) {
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("cublas_gemm"), std::string::npos) << s.message();
  }
}

TEST(SimInvariants, APolicyThatHoldsEverythingIsReported) {
  const Workload w = workload({tenant("a", {step("bfs", 1 << 16)})});
  ScriptedPolicy p([](SchedContext&) { return Status::ok(); });
  auto run = run_on_sim(w, p);
  ASSERT_FALSE(run.is_ok());
  EXPECT_NE(run.status().message().find("holds 1 ready launches"), std::string::npos);
}

}  // namespace
}  // namespace concord
