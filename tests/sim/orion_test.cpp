// Orion and priority-streams on the simulator: LC kernels on the high-priority stream, BE held by
// Orion's rule (src/mechanism/orion_gate.h), and the LC tail latency both buy over streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "concord/metrics.h"
#include "mechanism/orion_gate.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

TenantSpec lc_tenant(std::vector<KernelStep> steps, int requests, double rate) {
  TenantSpec t = tenant("infer", std::move(steps), requests);
  t.cls = TenantClass::latency_critical;
  t.arrival.kind = ArrivalProcess::Kind::poisson;
  t.arrival.rate_per_s = rate;
  t.latency_target = 2e-3;
  return t;
}

// An inference-like LC tenant (compute- and memory-bound kernels) beside a training-like BE
// tenant whose kernels each fill the GPU many times over.
Workload lc_beside_be() {
  return workload({lc_tenant({step("sgemm", 512), step("vector_add", 1 << 20), step("sgemm", 512)}, 60, 400),
                   tenant("train", {step("stream_triad", 1 << 24), step("fma_loop", 8 << 20)}, 400)});
}

double lc_p99(const RunRecord& run) {
  std::vector<double> latencies;
  for (const TenantRecord& t : run.tenants) {
    if (t.cls != TenantClass::latency_critical) continue;
    for (const RequestRecord& r : t.requests) latencies.push_back(r.latency());
  }
  return percentile(latencies, 99);
}

bool is_lc(const RunRecord& run, const DispatchRecord& d) {
  return run.tenants[static_cast<size_t>(d.tenants.front().value)].cls == TenantClass::latency_critical;
}

const LaunchRecord& launch_of(const RunRecord& run, const DispatchRecord& d) {
  const auto it = std::find_if(run.launches.begin(), run.launches.end(), [&](const LaunchRecord& l) { return l.id == d.launches.front(); });
  if (it == run.launches.end()) throw std::logic_error("dispatch without its launch");
  return *it;
}

// BE dispatches made while some LC request was active (after it arrived, before it ended).
int be_dispatches_during_lc_requests(const RunRecord& run) {
  int n = 0;
  for (const DispatchRecord& d : run.dispatches) {
    if (is_lc(run, d)) continue;
    for (const TenantRecord& t : run.tenants) {
      if (t.cls != TenantClass::latency_critical) continue;
      for (const RequestRecord& r : t.requests) n += d.dispatched > r.arrival + 1e-12 && d.dispatched < r.end - 1e-12 ? 1 : 0;
    }
  }
  return n;
}

TEST(Orion, LcLaunchesAtOnceHighBeNormalAndBeWaitsWhileLcRequestsRun) {
  const Workload w = lc_beside_be();
  // Every BE kernel here needs more SMs than the device has: none may start beside an LC request.
  const Estimator e(h200_spec());
  for (const KernelStep& s : w.tenants[1].steps) EXPECT_GT(policy::orion_op(e, s.kernel).sm_need, 132) << s.kernel.name;
  auto run = run_on_sim(w, "orion");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  int lc = 0;
  int be = 0;
  for (const DispatchRecord& d : run->dispatches) {
    EXPECT_EQ(d.placement.sms.count(), 132);
    if (is_lc(*run, d)) {
      ++lc;
      EXPECT_EQ(d.placement.priority, kHighStreamPriority);
      EXPECT_DOUBLE_EQ(d.dispatched, launch_of(*run, d).ready);  // at once
    } else {
      ++be;
      EXPECT_EQ(d.placement.priority, kNormalStreamPriority);
    }
  }
  EXPECT_EQ(lc, 60 * 3);
  EXPECT_EQ(be, 400 * 2);
  EXPECT_EQ(be_dispatches_during_lc_requests(*run), 0);
  // streams starts BE kernels beside LC requests all the time.
  auto streams = run_on_sim(w, "streams");
  ASSERT_TRUE(streams.is_ok()) << streams.status().to_string();
  EXPECT_GT(be_dispatches_during_lc_requests(*streams), 10);
}

TEST(Orion, LcTailBeatsStreamsAndPriorityStreams) {
  const Workload w = lc_beside_be();
  auto orion = run_on_sim(w, "orion");
  auto streams = run_on_sim(w, "streams");
  auto priority = run_on_sim(w, "priority-streams");
  ASSERT_TRUE(orion.is_ok()) << orion.status().to_string();
  ASSERT_TRUE(streams.is_ok()) << streams.status().to_string();
  ASSERT_TRUE(priority.is_ok()) << priority.status().to_string();
  const double p99_orion = lc_p99(*orion);
  const double p99_streams = lc_p99(*streams);
  const double p99_priority = lc_p99(*priority);
  // Priority places LC blocks first as BE blocks retire; Orion also keeps new BE kernels out.
  EXPECT_LT(p99_priority, p99_streams);
  EXPECT_LT(p99_orion, 0.5 * p99_streams);
  EXPECT_LE(p99_orion, p99_priority);
}

TEST(PriorityStreams, LcOnTheHighPriorityStreamBeOnTheLowestEverythingAtOnce) {
  auto run = run_on_sim(lc_beside_be(), "priority-streams");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  for (const DispatchRecord& d : run->dispatches) {
    EXPECT_EQ(d.placement.priority, is_lc(*run, d) ? kHighStreamPriority : kNormalStreamPriority);
    EXPECT_DOUBLE_EQ(d.dispatched, launch_of(*run, d).ready);
  }
}

// Small BE kernels (a few SMs' worth of blocks) start beside an LC request only when their
// profile differs from the kernel the LC request runs.
TEST(Orion, SmallBeKernelsJoinOnlyLcKernelsOfTheOtherProfile) {
  const Estimator e(h200_spec());
  const KernelStep be = step("vector_add", 1 << 20);
  const KernelStep compute = step("sgemm", 512, 20);
  const KernelStep memory = step("vector_add", 1 << 19, 20);
  for (const auto& [k, profile] : {std::pair{&be, policy::OrionProfile::memory}, std::pair{&compute, policy::OrionProfile::compute},
                                   std::pair{&memory, policy::OrionProfile::memory}}) {
    const policy::OrionOp op = policy::orion_op(e, k->kernel);
    ASSERT_LE(op.sm_need, 132) << k->kernel.name;
    ASSERT_EQ(op.profile, profile) << k->kernel.name;
  }
  auto joins = [&](const KernelStep& lc_kernel) {
    const Workload w = workload({lc_tenant({lc_kernel}, 20, 2000), tenant("be", {be}, 4000)});
    auto run = run_on_sim(w, "orion");
    if (!run) throw std::runtime_error(run.status().to_string());
    return be_dispatches_during_lc_requests(*run);
  };
  EXPECT_GT(joins(compute), 100);
  EXPECT_EQ(joins(memory), 0);
}

// Two BE tenants whose kernels each last longer than DUR_THRESHOLD: one's kernel waits until the
// other's has drained, while an LC tenant still has requests to come; without the gate they overlap.
TEST(Orion, BeWaitsForBeToDrainOnceItsDurationPassesTheThreshold) {
  const Workload w = workload({lc_tenant({step("sgemm", 512)}, 3, 20), tenant("a", {step("stream_triad", 1 << 24)}, 20),
                               tenant("b", {step("fma_loop", 8 << 20)}, 20)});
  auto overlaps = [&](const PolicyParams& params) {
    auto run = run_on_sim(w, "orion", 1, params);
    if (!run) throw std::runtime_error(run.status().to_string());
    int n = 0;
    for (const DispatchRecord& x : run->dispatches) {
      for (const DispatchRecord& y : run->dispatches) {
        if (is_lc(*run, x) || is_lc(*run, y) || x.tenants.front() == y.tenants.front()) continue;
        n += x.dispatched < y.end - 1e-12 && y.dispatched < x.end - 1e-12 ? 1 : 0;  // both in flight at once
      }
    }
    return n;
  };
  EXPECT_EQ(overlaps({}), 0);
  EXPECT_GT(overlaps({{"dur_fraction", "inf"}}), 0);
}

// The simulator's block scheduler has the CUDA backend's two levels: a launch at > 0 gets slots
// before an older one at <= 0; among launches of one level the older goes first, whatever its value.
TEST(PriorityStreams, TheSimulatorServesTwoLevelsThenAge) {
  const Workload w = workload({tenant("a", {step("stream_triad", 1 << 24)}), tenant("b", {step("stream_triad", 1 << 24)})});
  auto first_started = [&](int priority_a, int priority_b) {
    testing::ScriptedPolicy policy([&](SchedContext& ctx) -> Status {
      const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
      for (const ReadyLaunch& r : ready) {
        if (r.has_running_dispatch) continue;
        Placement p = testing::whole(ctx);
        p.priority = r.tenant.value == 0 ? priority_a : priority_b;
        CONCORD_RETURN_IF_ERROR(ctx.dispatch(r.id, p).status());
      }
      return Status::ok();
    });
    auto run = run_on_sim(w, policy);
    if (!run) throw std::runtime_error(run.status().to_string());
    const auto& d = run->dispatches;
    EXPECT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].tenants.front().value, 0);  // a is dispatched first, b second
    EXPECT_NE(d[0].start, d[1].start);
    return d[0].start < d[1].start ? "a" : "b";
  };
  EXPECT_EQ(std::string(first_started(0, 0)), "a");
  EXPECT_EQ(std::string(first_started(0, kHighStreamPriority)), "b");
  EXPECT_EQ(std::string(first_started(-3, 0)), "a");  // both normal
  EXPECT_EQ(std::string(first_started(5, kHighStreamPriority)), "a");  // both high
}

TEST(Orion, ParametersAreCheckedByName) {
  EXPECT_TRUE(builtin_policies().make("orion", {{"sm_threshold", "66"}, {"dur_fraction", "0.05"}, {"ahead", "task"}}).is_ok());
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"sm_threshold", "0"}, {"sm_threshold", "x"}, {"dur_fraction", "0"}, {"dur_fraction", "-1"}, {"dur_fraction", "nan"},
           {"ahead", "2"}, {"depth", "1"}}) {
    auto p = builtin_policies().make("orion", {{key, value}});
    ASSERT_FALSE(p.is_ok()) << key << "=" << value;
    EXPECT_NE(p.status().message().find(key), std::string::npos) << p.status().to_string();
  }
  EXPECT_FALSE(builtin_policies().make("priority-streams", {{"ahead", "1"}}).is_ok());
}

}  // namespace
}  // namespace concord
