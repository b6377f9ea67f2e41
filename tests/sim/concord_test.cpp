// concord (src/policy/concord/): the project's own LC/BE policy on the simulator. On the scenario
// SGDRC's tests use (one LC tenant beside two BE tenants of elastic kernels) and on one whose BE
// runs an opaque library kernel: which rule each BE launch went through (its counters), the tail
// it keeps and the BE it lets through against orion's.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hand_context.h"
#include "lc_be_scenario.h"
#include "policy/concord/concord_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using policy::ConcordOptions;
using policy::ConcordPolicy;
using testing::curve_kernel;
using testing::HandContext;
using testing::lc_beside_be;
using testing::LcBe;
using testing::measure;
using testing::step;
using testing::tenant;
using testing::workload;

TEST(ConcordScenario, ElasticBeBesideLcOnlyWhereItLeavesTheLcAlone) {
  auto alone = testing::run_on_sim(lc_beside_be(false), "streams");
  ASSERT_TRUE(alone.is_ok()) << alone.status().to_string();
  auto orion = testing::run_on_sim(lc_beside_be(true), "orion");
  ASSERT_TRUE(orion.is_ok()) << orion.status().to_string();
  ConcordPolicy concord{ConcordOptions{}};
  auto run = testing::run_on_sim(lc_beside_be(true), concord);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const LcBe a = measure(*alone), o = measure(*orion), c = measure(*run);
  std::printf("LC p99 alone %.3f ms, orion %.3f ms, concord %.3f ms; BE/s orion %.1f, concord %.1f\n", a.p99 * 1e3, o.p99 * 1e3,
              c.p99 * 1e3, o.be_per_s, c.be_per_s);
  const auto stats = concord.stats();
  for (const auto& [k, v] : stats) std::printf("  %s = %.0f\n", k.c_str(), v);
  // Every BE kernel here is elastic. With no LC work in flight they launch natively (be_alone);
  // beside LC work they run shrunk on the other TPCs only once every LC kernel in flight has a
  // time measured without elastic BE (baseline samples) and while the LC kernels beside them keep
  // within `slack` of it (judged samples); the others pass Orion's whole rule as opaque ones do.
  EXPECT_GT(stats.at("concord.be_alone"), 0);
  EXPECT_GT(stats.at("concord.be_elastic_beside_lc"), 0);
  EXPECT_GT(stats.at("concord.be_elastic_as_opaque"), 0);
  EXPECT_GT(stats.at("concord.be_resizes"), 0);
  EXPECT_GT(stats.at("concord.lc_baseline_samples"), 0);
  EXPECT_GT(stats.at("concord.lc_judged_samples"), 0);
  EXPECT_EQ(stats.at("concord.lc_launches"), 80 * 7);  // 80 requests of 7 launches
  // H200 model: each elastic kernel judged slowed the LC's requests beside it 1.x-2x over their
  // latency without it, so after three judged requests concord makes orion's decisions: LC p99
  // 1.04 ms against orion's 1.00 (0.80 alone), BE at orion's. Before the rule (every elastic BE
  // kernel beside the LC, persistent throughout) the same scenario gave 1.22 ms and 1.04x orion's
  // BE, and the GPU's bench/lsbe showed the LC's tail broken.
  EXPECT_EQ(stats.at("concord.be_persistent_alone"), 0) << "alone, BE launches natively";
  EXPECT_GT(stats.at("concord.be_elastic_interfering"), 0);
  EXPECT_GT(c.be_per_s, 0.98 * o.be_per_s);
  EXPECT_LT(c.p99, 1.1 * o.p99);
}

// The same scenario with no room for slowdown (slack 0) and with unbounded room: every elastic
// kernel judged beside the LC is found to interfere in the first, none in the second, which then
// runs elastic BE beside the LC more often and the LC's tail longer.
TEST(ConcordScenario, SlackDecidesWhichElasticKernelsInterfere) {
  ConcordOptions strict;
  strict.slack = 0;
  ConcordOptions loose;
  loose.slack = 1e9;
  ConcordPolicy s{strict}, l{loose};
  auto rs = testing::run_on_sim(lc_beside_be(true), s);
  ASSERT_TRUE(rs.is_ok()) << rs.status().to_string();
  auto rl = testing::run_on_sim(lc_beside_be(true), l);
  ASSERT_TRUE(rl.is_ok()) << rl.status().to_string();
  const auto ss = s.stats(), ls = l.stats();
  const LcBe ms = measure(*rs), ml = measure(*rl);
  std::printf("slack 0: LC p99 %.3f ms, beside LC %.0f, interfering %.0f; unbounded: %.3f ms, beside LC %.0f\n", ms.p99 * 1e3,
              ss.at("concord.be_elastic_beside_lc"), ss.at("concord.be_elastic_interfering"), ml.p99 * 1e3,
              ls.at("concord.be_elastic_beside_lc"));
  EXPECT_GT(ss.at("concord.be_elastic_interfering"), 0);
  EXPECT_EQ(ls.at("concord.be_elastic_interfering"), 0);
  EXPECT_GT(ls.at("concord.be_elastic_beside_lc"), ss.at("concord.be_elastic_beside_lc"));
  EXPECT_GT(ml.p99, ms.p99);
}

// With `native_alone` off, BE launched while no LC work is in flight runs persistent (and is shrunk
// when the LC comes); on, it runs natively.
TEST(ConcordScenario, NativeAloneDecidesTheFormOfBeWithoutLcWork) {
  ConcordOptions persistent;
  persistent.native_alone = false;
  ConcordPolicy on{ConcordOptions{}}, off{persistent};
  ASSERT_TRUE(testing::run_on_sim(lc_beside_be(true), on).is_ok());
  ASSERT_TRUE(testing::run_on_sim(lc_beside_be(true), off).is_ok());
  EXPECT_EQ(on.stats().at("concord.be_persistent_alone"), 0);
  EXPECT_GT(on.stats().at("concord.be_alone"), 0);
  EXPECT_GT(off.stats().at("concord.be_persistent_alone"), 0);
}

// ---- the measured-interference rule on hand-built queues ----

// An LC tenant and a BE tenant of elastic kernels; Orion's rules are left out of the elastic path
// (elastic_gate off) so that only the rule under test decides.
struct Hand {
  HandContext ctx;
  TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  TenantId be = ctx.add_tenant(TenantClass::best_effort);
  KernelSpec lc_kernel = curve_kernel("lc", 40);
  KernelSpec be_kernel = curve_kernel("be", 132);
  ConcordPolicy policy{[] {
    ConcordOptions o;
    o.elastic_gate = false;
    return o;
  }()};
  Hand() { EXPECT_TRUE(policy.on_start(ctx).is_ok()); }
  double stat(const std::string& name) const { return policy.stats().at("concord." + name); }
  int64_t next_request = 0;
  // An LC request of one kernel arrives now and is dispatched; its dispatch.
  DispatchId lc_launch() {
    const LaunchId id = ctx.make_ready(lc, lc_kernel, next_request++, true);
    EXPECT_TRUE(policy.on_ready(ctx, id).is_ok());
    const RunningDispatch* d = ctx.running_of(lc);
    EXPECT_NE(d, nullptr);
    return d ? d->id : DispatchId{};
  }
  // The running dispatch of `launch`, or none.
  const RunningDispatch* dispatch_of(LaunchId launch) const {
    for (const RunningDispatch& d : ctx.running()) {
      if (d.launches.front() == launch) return &d;
    }
    return nullptr;
  }
  // A BE launch becomes ready; the launch (dispatch_of says whether the policy dispatched it).
  LaunchId be_launch() {
    const LaunchId id = ctx.make_ready(be, be_kernel);
    EXPECT_TRUE(policy.on_ready(ctx, id).is_ok());
    return id;
  }
  // Ends `d` `seconds` from now (the clock moves on).
  void end(DispatchId d, Seconds seconds) {
    Completion c;
    c.start = ctx.clock;
    ctx.clock += seconds;
    c.end = ctx.clock;
    ASSERT_TRUE(ctx.finish(policy, d, c).is_ok());
  }
};

TEST(ConcordLearning, ElasticBeWaitsForTheLcTenantsBaselineThenIsJudged) {
  Hand h;
  // No baseline yet: the elastic launch beside LC work takes Orion's whole rule (which holds it or
  // launches it natively), not the BE side.
  DispatchId lc = h.lc_launch();
  LaunchId be = h.be_launch();
  EXPECT_EQ(h.stat("be_elastic_as_opaque"), 1);
  EXPECT_EQ(h.stat("be_elastic_beside_lc"), 0);
  if (const RunningDispatch* d = h.dispatch_of(be)) {
    EXPECT_NE(d->placement.form, LaunchForm::persistent);
  }
  h.end(lc, 1e-3);
  EXPECT_EQ(h.stat("lc_baseline_samples"), 1);
  // Held, it went when the LC's work ended: natively, on every SM.
  const RunningDispatch* alone = h.dispatch_of(be);
  ASSERT_NE(alone, nullptr);
  EXPECT_NE(alone->placement.form, LaunchForm::persistent);
  EXPECT_EQ(alone->placement.sms.count(), h.ctx.device().sm_count);
  h.end(alone->id, 1e-3);
  // With a baseline: persistent, shrunk beside the LC.
  lc = h.lc_launch();
  be = h.be_launch();
  const RunningDispatch* d = h.dispatch_of(be);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->placement.form, LaunchForm::persistent);
  EXPECT_LT(d->placement.sms.count(), h.ctx.device().sm_count);
  EXPECT_EQ(h.stat("be_elastic_beside_lc"), 1);
  const DispatchId be_id = d->id;
  // The LC's request beside it takes 2x its latency without: judged at once.
  EXPECT_EQ(h.stat("be_elastic_interfering"), 0);
  h.end(lc, 2e-3);
  lc = h.lc_launch();
  EXPECT_EQ(h.stat("lc_judged_samples"), 1);
  EXPECT_EQ(h.stat("be_elastic_interfering"), 1);
  EXPECT_NEAR(h.stat("lc_slowdown_beside_elastic_max"), 2.0, 1e-9);
  // Judged: the next launch of that kernel beside LC work goes through Orion's whole rule.
  h.end(be_id, 1e-3);
  const LaunchId next = h.be_launch();
  EXPECT_EQ(h.stat("be_elastic_as_opaque"), 2);
  EXPECT_EQ(h.stat("be_elastic_beside_lc"), 1);
  if (const RunningDispatch* n = h.dispatch_of(next)) {
    EXPECT_NE(n->placement.form, LaunchForm::persistent);
  }
}

// The mean of the verdicts decides, from the first: LC requests within slack beside it leave the
// kernel beside the LC; one slow enough to lift the mean past slack ends it.
TEST(ConcordLearning, TheMeanOfTheLcRequestsSlowdownsDecidesFromTheFirst) {
  Hand h;
  DispatchId lc = h.lc_launch();
  h.end(lc, 1e-3);
  lc = h.lc_launch();
  ASSERT_NE(h.dispatch_of(h.be_launch()), nullptr);
  for (const Seconds t : {1.05e-3, 0.95e-3, 1.08e-3, 1.0e-3}) {
    h.end(lc, t);
    lc = h.lc_launch();
  }
  EXPECT_EQ(h.stat("lc_judged_samples"), 4);
  EXPECT_EQ(h.stat("be_elastic_interfering"), 0);
  EXPECT_NEAR(h.stat("lc_slowdown_beside_elastic_max"), 1.02, 1e-9);
  h.end(lc, 2e-3);  // the mean becomes (4.08 + 2) / 5 = 1.216
  EXPECT_EQ(h.stat("be_elastic_interfering"), 1);
  EXPECT_NEAR(h.stat("lc_slowdown_beside_elastic_max"), 1.216, 1e-9);
}

TEST(ConcordLearning, FailedPreemptedAndEmptyCompletionsTeachNothing) {
  Hand h;
  Completion failed;
  failed.start = 1.0;
  failed.end = 1.001;
  failed.error = Status::device_error("a fault");
  ASSERT_TRUE(h.ctx.finish(h.policy, h.lc_launch(), failed).is_ok());
  Completion preempted;
  preempted.start = 1.0;
  preempted.end = 1.001;
  preempted.preempted = true;
  ASSERT_TRUE(h.ctx.finish(h.policy, h.lc_launch(), preempted).is_ok());
  ASSERT_TRUE(h.ctx.finish(h.policy, h.lc_launch(), Completion{}).is_ok());  // no time
  EXPECT_EQ(h.stat("lc_baseline_samples"), 0);
  EXPECT_EQ(h.stat("lc_judged_samples"), 0);
  // And a completion of a dispatch the policy never saw is ignored.
  Completion stray;
  stray.dispatch = DispatchId{999};
  stray.start = 1.0;
  stray.end = 1.001;
  ASSERT_TRUE(h.policy.on_complete(h.ctx, stray).is_ok());
  EXPECT_EQ(h.stat("lc_baseline_samples"), 0);
}

// An elastic kernel whose completion comes later in the same batch has already left running():
// the LC request dispatched meanwhile did not run beside it, and its latency is a baseline sample.
TEST(ConcordLearning, AnElasticKernelEndedInTheSameBatchIsNotBesideTheNextLcRequest) {
  Hand h;
  DispatchId lc = h.lc_launch();
  h.end(lc, 1e-3);
  lc = h.lc_launch();
  const RunningDispatch* be = h.dispatch_of(h.be_launch());
  ASSERT_NE(be, nullptr);
  const DispatchId be_id = be->id;
  h.ctx.queue(h.lc, h.lc_kernel, h.next_request++, true);  // the LC's next request, dispatched when `lc` ends
  h.ctx.end_silently(be_id);
  h.end(lc, 1e-3);  // judged: the BE ran beside it
  EXPECT_EQ(h.stat("lc_judged_samples"), 1);
  const RunningDispatch* next = h.ctx.running_of(h.lc);
  ASSERT_NE(next, nullptr);
  const DispatchId next_id = next->id;
  Completion be_done;
  be_done.dispatch = be_id;
  ASSERT_TRUE(h.policy.on_complete(h.ctx, be_done).is_ok());
  h.end(next_id, 5e-3);
  EXPECT_EQ(h.stat("lc_judged_samples"), 1) << "the ended BE kernel was counted beside the next LC request";
  EXPECT_EQ(h.stat("lc_baseline_samples"), 2);
}

// A request of several kernels is judged once, at its last kernel, on its latency from arrival.
TEST(ConcordLearning, ARequestIsJudgedOnceAtItsLastKernel) {
  Hand h;
  DispatchId lc = h.lc_launch();
  h.end(lc, 3e-3);  // baseline: 3 ms
  // A request of three kernels; elastic BE beside the first only.
  const int64_t request = h.next_request++;
  h.ctx.queue(h.lc, h.lc_kernel, request, false);
  h.ctx.queue(h.lc, h.lc_kernel, request, true);
  ASSERT_TRUE(h.policy.on_ready(h.ctx, h.ctx.make_ready(h.lc, h.lc_kernel, request, false)).is_ok());
  const RunningDispatch* be = h.dispatch_of(h.be_launch());
  ASSERT_NE(be, nullptr);
  const DispatchId be_id = be->id;
  h.end(h.ctx.running_of(h.lc)->id, 1e-3);
  h.end(be_id, 0);
  h.end(h.ctx.running_of(h.lc)->id, 1e-3);
  EXPECT_EQ(h.stat("lc_judged_samples"), 0) << "judged before its last kernel";
  h.end(h.ctx.running_of(h.lc)->id, 2e-3);  // 4 ms from arrival: 1.33x
  EXPECT_EQ(h.stat("lc_judged_samples"), 1);
  EXPECT_EQ(h.stat("lc_baseline_samples"), 1);
  EXPECT_EQ(h.stat("be_elastic_interfering"), 1);
  EXPECT_NEAR(h.stat("lc_slowdown_beside_elastic_max"), 4.0 / 3.0, 1e-9);
}

// An LC tenant beside a BE tenant of opaque library GEMMs: those pass Orion's gate.
Workload lc_beside_opaque() {
  Workload w = lc_beside_be(false);
  TenantSpec be = tenant("blas", {step("cublas_gemm", 4096)}, 400);
  w.tenants.push_back(be);
  return w;
}

TEST(ConcordScenario, OpaqueBePassesOrionsGate) {
  ConcordPolicy concord{ConcordOptions{}};
  auto run = testing::run_on_sim(lc_beside_opaque(), concord);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  auto orion = testing::run_on_sim(lc_beside_opaque(), "orion");
  ASSERT_TRUE(orion.is_ok()) << orion.status().to_string();
  const LcBe o = measure(*orion), c = measure(*run);
  std::printf("opaque BE: LC p99 orion %.3f ms, concord %.3f ms; BE/s orion %.1f, concord %.1f\n", o.p99 * 1e3, c.p99 * 1e3,
              o.be_per_s, c.be_per_s);
  const auto stats = concord.stats();
  for (const auto& [k, v] : stats) std::printf("  %s = %.0f\n", k.c_str(), v);
  EXPECT_EQ(stats.at("concord.be_elastic_beside_lc"), 0);
  EXPECT_EQ(stats.at("concord.be_resizes"), 0);
  EXPECT_GT(stats.at("concord.be_opaque_held"), 0);
  EXPECT_GT(stats.at("concord.be_alone") + stats.at("concord.be_opaque_admitted_beside_lc"), 0);
  // The same rule as orion's on the same launches: the same tail within the simulator's noise.
  EXPECT_LT(c.p99, 1.1 * o.p99);
}

TEST(ConcordParams, BadValuesAreRefusedByName) {
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"dur_fraction", "0"}, {"tolerance", "1"}, {"steps", "0"}, {"reserve", "0"}, {"window", "-1"}, {"be_tlp", "-1"}, {"elastic_gate", "maybe"}, {"native_alone", "2"}, {"slack", "-0.1"}, {"ahead", "1"}}) {
    auto p = builtin_policies().make("concord", {{name, value}});
    ASSERT_FALSE(p.is_ok()) << name << "=" << value;
    EXPECT_NE(p.status().message().find(name), std::string::npos) << p.status().to_string();
  }
  EXPECT_TRUE(builtin_policies().make("concord", {{"dur_fraction", "0.05"}, {"steps", "4"}, {"slack", "0.2"}, {"native_alone", "false"}}).is_ok());
}

}  // namespace
}  // namespace concord
