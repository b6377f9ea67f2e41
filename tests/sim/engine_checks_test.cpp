// The engine's checks and its bookkeeping where the simulator alone would not show a mistake:
// placements it must refuse, requests it must refuse, what it lists as ready, and the times it
// records when the host's clock reads later than the device's completion times (the CUDA backend's
// case, which a backend that jumps to each completion never shows).
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::ScriptedPolicy;
using testing::step;
using testing::tenant;
using testing::whole;
using testing::workload;

// Runs `w` once with `try_first` called at the first scheduling call (the clock at 0, every first
// launch ready, nothing running) and every ready launch then dispatched on the whole GPU.
Result<RunRecord> with_first_call(const Workload& w, const std::function<void(SchedContext&)>& try_first) {
  bool first = true;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    if (first) {
      first = false;
      try_first(ctx);
    }
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, whole(ctx)).status());
    }
    return Status::ok();
  });
  return run_on_sim(w, p);
}

TEST(EngineChecks, PlacementsOutsideTheDeviceOrTheirFieldsAreRefused) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}), tenant("b", {step("stream_triad", 1 << 22)})});
  std::map<std::string, StatusCode> got;
  auto run = with_first_call(w, [&](SchedContext& ctx) {
    const LaunchId a = ctx.ready()[0].id;
    const LaunchId b = ctx.ready()[1].id;
    const int sms = ctx.device().sm_count;
    auto code = [&](const std::string& what, const Placement& p, LaunchId id) { got[what] = ctx.dispatch(id, p).status().code(); };
    Placement p = whole(ctx);
    p.form = LaunchForm::persistent;
    p.tlp = -1;
    code("negative tlp", p, a);
    p = whole(ctx);
    p.sms = SmSet::of({sms});  // one past the last SM
    code("sm beyond the device", p, a);
    p.sms = SmSet::of({0, sms + 7});
    code("sm 8 past the device", p, a);
    p = whole(ctx);
    p.form = LaunchForm::persistent;
    p.tight_tlp = 2;  // and no tight_sms
    code("tight tlp without sms", p, a);
    p = whole(ctx);
    p.form = LaunchForm::persistent;
    p.fusion = Fusion{a, {}, 1, 1};
    code("fused with itself", p, a);
    // Refusals leave nothing behind: both launches are still ready, nothing runs.
    EXPECT_EQ(ctx.ready().size(), 2u);
    EXPECT_TRUE(ctx.running().empty());
    (void)b;
  });
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(got["negative tlp"], StatusCode::invalid_argument);
  EXPECT_EQ(got["sm beyond the device"], StatusCode::invalid_argument);
  EXPECT_EQ(got["sm 8 past the device"], StatusCode::invalid_argument);
  EXPECT_EQ(got["tight tlp without sms"], StatusCode::invalid_argument);
  EXPECT_EQ(got["fused with itself"], StatusCode::failed_precondition);
  EXPECT_EQ(run->dispatches.size(), 2u);
}

// A native launch on part of the GPU gets a green context's SMs: its set rounded up to whole TPCs.
// A persistent one keeps its exact SMs.
TEST(EngineChecks, NativePartialSetsAreRoundedUpToTpcs) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}), tenant("b", {step("stream_triad", 1 << 22)})});
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement pl;
      pl.sms = SmSet::of({0, 5});  // SMs 0 and 5: TPCs 0 and 2 (two SMs a TPC)
      if (r.tenant.value == 1) pl.form = LaunchForm::persistent;
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, pl).status());
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->dispatches.size(), 2u);
  for (const DispatchRecord& d : run->dispatches) {
    const SmSet want = d.tenants[0].value == 0 ? SmSet::of({0, 1, 4, 5}) : SmSet::of({0, 5});
    EXPECT_EQ(d.placement.sms, want) << "tenant " << d.tenants[0].value << ": " << d.placement.sms.to_string();
  }
}

// A launch keeps the variant of its first dispatch: the rest of it may not run another, even
// where its block numbers exist in both (the largest blocks' grid is the smallest).
TEST(EngineChecks, ALaunchSplitOverDispatchesKeepsItsVariant) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 22)})});
  const KernelSpec& k = w.tenants[0].steps[0].kernel;
  const int largest = k.variant_count() - 1;
  ASSERT_GT(largest, 0);
  ASSERT_LT(k.variant(largest).logical_blocks, k.variant(0).logical_blocks);
  StatusCode other_variant = StatusCode::ok;
  bool split = false;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement pl = whole(ctx);
      pl.form = LaunchForm::persistent;
      pl.variant = largest;
      if (!split) {
        split = true;
        const int64_t blocks = r.kernel->variant(largest).logical_blocks;
        pl.range = BlockRange{0, blocks / 2};
        CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, pl).status());
        Placement rest = whole(ctx);
        rest.form = LaunchForm::persistent;
        rest.variant = 0;
        rest.range = BlockRange{blocks / 2, blocks};
        other_variant = ctx.dispatch(r.id, rest).status().code();
        continue;
      }
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, pl).status());
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(other_variant, StatusCode::invalid_argument);
  ASSERT_EQ(run->dispatches.size(), 2u);
  EXPECT_EQ(run->dispatches[1].placement.variant, largest);
  EXPECT_EQ(run->launches[0].logical_blocks, k.variant(largest).logical_blocks);
}

// A fusion partner runs the variant Fusion::partner_variant names, its range in that variant's
// blocks; the ready list then shows the variant the partner is fixed to, the rest of it must keep
// it, and a variant the kernel does not have is refused naming the field.
TEST(EngineChecks, AFusionPartnerRunsTheVariantItIsGiven) {
  const Workload w = workload({tenant("a", {step("fma_loop", 1 << 22)}), tenant("b", {step("stream_triad", 1 << 24)})});
  const KernelSpec& kb = w.tenants[1].steps[0].kernel;
  const int smallest = 0;
  ASSERT_NE(smallest, kb.default_variant);
  const int64_t blocks_b = kb.variant(smallest).logical_blocks;
  StatusCode bad_variant = StatusCode::ok, other_variant = StatusCode::ok;
  std::string bad_message;
  int seen_variant = -2;
  bool fused = false;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    if (!fused) {
      fused = true;
      Placement pl = whole(ctx);
      pl.form = LaunchForm::persistent;
      pl.variant = 0;
      pl.fusion = Fusion{ready[1].id, {0, blocks_b / 2}, 1, 1, kb.variant_count()};
      const Status bad = ctx.dispatch(ready[0].id, pl).status();
      bad_variant = bad.code();
      bad_message = bad.message();
      pl.fusion->partner_variant = smallest;
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(ready[0].id, pl).status());
      for (const ReadyLaunch& r : ctx.ready()) {
        if (r.id == ready[1].id) seen_variant = r.variant;
      }
      Placement rest = whole(ctx);
      rest.form = LaunchForm::persistent;
      rest.variant = kb.default_variant;
      other_variant = ctx.dispatch(ready[1].id, rest).status().code();
      return Status::ok();
    }
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement rest = whole(ctx);
      rest.form = LaunchForm::persistent;
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, rest).status());
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(bad_variant, StatusCode::invalid_argument);
  EXPECT_NE(bad_message.find("partner_variant"), std::string::npos) << bad_message;
  EXPECT_EQ(seen_variant, smallest);
  EXPECT_EQ(other_variant, StatusCode::invalid_argument);
  ASSERT_GE(run->dispatches.size(), 2u);
  const DispatchRecord& f = run->dispatches[0];
  ASSERT_TRUE(f.placement.fusion.has_value());
  EXPECT_EQ(f.placement.fusion->partner_variant, smallest);
  EXPECT_EQ(f.ranges[1], (BlockRange{0, blocks_b / 2}));
  EXPECT_EQ(run->launches[1].logical_blocks, blocks_b);
  // The rest of the partner ran in its variant, every block once.
  int64_t done_b = 0;
  for (const DispatchRecord& d : run->dispatches) {
    for (size_t i = 0; i < d.launches.size(); ++i) {
      if (d.launches[i] == run->launches[1].id) done_b += d.ranges[i].size();
    }
  }
  EXPECT_EQ(done_b, blocks_b);
}

// Resizing a running dispatch onto SMs the device does not have is refused.
TEST(EngineChecks, AResizeBeyondTheDeviceIsRefused) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 22)})});
  std::vector<StatusCode> codes;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement pl;
      pl.sms = SmSet::range(0, 8);
      pl.form = LaunchForm::persistent;
      auto d = ctx.dispatch(r.id, pl);
      if (!d) return d.status();
      codes.push_back(ctx.resize(*d, SmSet::of({0, ctx.device().sm_count})).code());
      codes.push_back(ctx.resize(*d, SmSet()).code());
      codes.push_back(ctx.resize(*d, SmSet::range(0, 16)).code());
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(codes, (std::vector<StatusCode>{StatusCode::invalid_argument, StatusCode::invalid_argument, StatusCode::ok}));
}

// An observer hears of each accepted resize, with the new SM set and the time, and of no refused one.
TEST(EngineChecks, AnObserverSeesEachResize) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 24)})});
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      Placement pl;
      pl.sms = SmSet::range(0, 8);
      pl.form = LaunchForm::persistent;
      auto d = ctx.dispatch(r.id, pl);
      if (!d) return d.status();
      (void)ctx.resize(*d, SmSet());  // refused: not heard of
      CONCORD_RETURN_IF_ERROR(ctx.resize(*d, SmSet::range(0, 16)));
      CONCORD_RETURN_IF_ERROR(ctx.resize(*d, SmSet::range(8, 12)));
    }
    return Status::ok();
  });
  struct Resizes final : EngineObserver {
    std::vector<std::pair<int64_t, int>> seen;  // dispatch, SM count
    void on_resize(DispatchId dispatch, const SmSet& sms, Seconds at) override {
      EXPECT_GE(at, 0);
      seen.emplace_back(dispatch.value, sms.count());
    }
  } observer;
  sim::SimBackend backend(h200_spec());
  EngineOptions o;
  o.observer = &observer;
  auto run = run_workload(w, backend, p, o);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->dispatches.size(), 1u);
  const int64_t id = run->dispatches[0].id.value;
  EXPECT_EQ(observer.seen, (std::vector<std::pair<int64_t, int>>{{id, 16}, {id, 12}}));
  EXPECT_EQ(run->dispatches[0].placement.sms.count(), 8);  // the record keeps the first set
}

// Part of a tenant's next launch queued behind the dispatch running its whole launch before it:
// that launch is not ready (its predecessor still runs), and a second part may not be queued
// behind the same dispatch (one successor per dispatch: it runs when the dispatch ends). Once the
// predecessor ends, the rest of it is ready and runs.
TEST(EngineChecks, OneLaunchQueuedBehindADispatchAndNotListedAsReady) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 22), step("stream_triad", 1 << 22)})});
  bool done = false;
  StatusCode second_part = StatusCode::ok;
  bool listed_as_ready = false;
  ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    for (const ReadyLaunch& r : ready) {
      if (r.has_running_dispatch) continue;
      auto d = ctx.dispatch(r.id, whole(ctx));
      if (!d) return d.status();
      if (done) continue;
      done = true;
      const QueuedLaunch next = ctx.queued(r.tenant).front();
      const int64_t blocks = next.kernel->variant(next.kernel->default_variant).logical_blocks;
      Placement first_half = whole(ctx);
      first_half.form = LaunchForm::persistent;
      first_half.range = BlockRange{0, blocks / 2};
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(next.id, first_half, *d).status());
      for (const ReadyLaunch& x : ctx.ready()) listed_as_ready = listed_as_ready || x.id == next.id;
      Placement second_half = first_half;
      second_half.range = BlockRange{blocks / 2, blocks};
      second_part = ctx.dispatch(next.id, second_half, *d).status().code();
    }
    return Status::ok();
  });
  auto run = run_on_sim(w, p);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_FALSE(listed_as_ready) << "a launch whose predecessor still runs was listed as ready";
  EXPECT_EQ(second_part, StatusCode::failed_precondition);
  ASSERT_EQ(run->dispatches.size(), 3u);  // the first launch, half of the second behind it, then the rest
  EXPECT_TRUE(run->dispatches[1].after.valid());
  EXPECT_FALSE(run->dispatches[2].after.valid());
  EXPECT_GE(run->dispatches[2].dispatched, run->dispatches[0].end);
  EXPECT_EQ(run->tenants[0].logical_blocks, run->launches[0].logical_blocks + run->launches[1].logical_blocks);
}

// A source whose only tenant leaves after its first request and then tries another.
class LeavingSource final : public TenantSource {
 public:
  LeavingSource() : kernel_(*make_suite_kernel("vector_add", 1 << 20)) {}
  std::string name() const override { return "leaving"; }
  Status open(TenantSink& sink) override {
    TenantInfo info;
    info.name = "a";
    auto id = sink.join(info, std::nullopt, {&kernel_});
    if (!id) return id.status();
    tenant_ = *id;
    return Status::ok();
  }
  Result<Seconds> pump(TenantSink& sink) override {
    if (!arrived_) {
      arrived_ = true;
      auto r = sink.arrive(tenant_, sink.now());
      if (!r) return r.status();
      CONCORD_RETURN_IF_ERROR(sink.submit(tenant_, LaunchSubmission{&kernel_, *r, true}));
    }
    return std::numeric_limits<double>::infinity();
  }
  Status on_request_end(TenantSink& sink, TenantId tenant, int64_t, Seconds at) override {
    CONCORD_RETURN_IF_ERROR(sink.leave(tenant));
    after_leaving = sink.arrive(tenant, at).status().code();
    return Status::ok();
  }
  bool exhausted() const override { return arrived_; }
  StatusCode after_leaving = StatusCode::ok;

 private:
  KernelSpec kernel_;
  TenantId tenant_;
  bool arrived_ = false;
};

TEST(EngineChecks, ATenantThatLeftCannotStartARequest) {
  LeavingSource source;
  auto policy = builtin_policies().make("serial", {});
  ASSERT_TRUE(policy.is_ok());
  sim::SimBackend backend(h200_spec());
  auto run = run_engine(source, backend, **policy, EngineOptions{});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(source.after_leaving, StatusCode::failed_precondition);
  ASSERT_EQ(run->tenants.size(), 1u);
  EXPECT_EQ(run->tenants[0].requests.size(), 1u);
}

// The simulator, with the host reading its clock `lag` seconds after the device's completion
// times, as with the CUDA backend (the engine sees a completion after the event that ended it).
class LaggingHost final : public Backend {
 public:
  LaggingHost(const DeviceSpec& device, Seconds lag) : sim_(device), lag_(lag) {}
  std::string name() const override { return sim_.name(); }
  const DeviceSpec& device() const override { return sim_.device(); }
  Capabilities capabilities(const KernelSpec& k) const override { return sim_.capabilities(k); }
  Status can_implement(const DispatchRequest& r) const override { return sim_.can_implement(r); }
  Status prepare_tenant(TenantId t, const std::vector<const KernelSpec*>& k) override { return sim_.prepare_tenant(t, k); }
  Status start_clock() override { return sim_.start_clock(); }
  Status dispatch(const DispatchRequest& r) override { return sim_.dispatch(r); }
  Status set_sm_set(DispatchId d, const SmSet& s) override { return sim_.set_sm_set(d, s); }
  Status set_tlp(DispatchId d, int t, const SmSet& s, int tt) override { return sim_.set_tlp(d, t, s, tt); }
  Status preempt(DispatchId d) override { return sim_.preempt(d); }
  Result<std::vector<int64_t>> progress(DispatchId d) const override { return sim_.progress(d); }
  Seconds now() const override { return sim_.now() + lag_; }
  Result<std::vector<Completion>> advance(Seconds until) override { return sim_.advance(until - lag_); }
  int running() const override { return sim_.running(); }
  Status abort_all(Seconds grace) override { return sim_.abort_all(grace); }

 private:
  sim::SimBackend sim_;
  Seconds lag_;
};

// A kernel queued behind its predecessor starts on the device as that one ends: it became ready
// at the predecessor's end (device time), not when the host heard of it. Requests start with
// their first kernel and end with their last.
TEST(EngineChecks, TimesComeFromTheDeviceWhenTheHostHearsLater) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20), step("stream_triad", 1 << 22), step("hotspot", 1024)}, 2)});
  auto policy = builtin_policies().make("streams", {{"ahead", "task"}});
  ASSERT_TRUE(policy.is_ok());
  constexpr Seconds kLag = 1e-3;
  LaggingHost backend(h200_spec(), kLag);
  auto run = run_workload(w, backend, **policy, EngineOptions{});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->launches.size(), 6u);
  for (size_t i = 0; i < run->launches.size(); ++i) {
    const LaunchRecord& l = run->launches[i];
    if (l.index == 0) continue;
    const LaunchRecord& before = run->launches[i - 1];
    EXPECT_DOUBLE_EQ(l.ready, before.end) << "launch " << i << " was queued behind launch " << i - 1;
  }
  for (int64_t q = 0; q < 2; ++q) {
    const RequestRecord& r = run->tenants[0].requests[static_cast<size_t>(q)];
    EXPECT_DOUBLE_EQ(r.start, run->launches[static_cast<size_t>(3 * q)].start) << "request " << q;
    EXPECT_DOUBLE_EQ(r.end, run->launches[static_cast<size_t>(3 * q + 2)].end) << "request " << q;
  }
}

// streams with ahead=task queues the rest of a request behind its first launch, and no more: a
// request that arrived meanwhile is dispatched when its own first launch becomes ready (after the
// earlier request's end), not queued behind the earlier one at once.
TEST(EngineChecks, AheadTaskQueuesOneRequestNotTheNext) {
  TenantSpec t = tenant("a", {step("vector_add", 1 << 20), step("stream_triad", 1 << 22), step("hotspot", 1024)}, 2);
  t.arrival.kind = ArrivalProcess::Kind::timestamps;
  t.arrival.timestamps = {0.0, 0.0};
  const Workload w = workload({t});
  auto policy = builtin_policies().make("streams", {{"ahead", "task"}});
  ASSERT_TRUE(policy.is_ok());
  sim::SimBackend backend(h200_spec());
  auto run = run_workload(w, backend, **policy, EngineOptions{});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->dispatches.size(), 6u);
  const RequestRecord& first = run->tenants[0].requests[0];
  for (const DispatchRecord& d : run->dispatches) {
    const LaunchRecord& l = run->launches[static_cast<size_t>(d.launches[0].value)];
    if (l.request == 0) {
      EXPECT_DOUBLE_EQ(d.dispatched, 0.0) << "request 0's launches all queued at once";
    } else {
      EXPECT_GE(d.dispatched, first.end) << "request 1's launch " << l.index << " queued before request 0 ended";
    }
  }
}

}  // namespace
}  // namespace concord
