// SGDRC (the SGDRC paper Sections 4, 7.1): tidal SM masking as pure functions, the policy's decisions on
// hand-built queues (a SchedContext of the test's own), and a simulator scenario of one LC tenant
// beside two BE tenants against streams and static-partition.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "concord/metrics.h"
#include "mechanism/tidal.h"
#include "policy/sgdrc/sgdrc_policy.h"
#include "lc_be_scenario.h"
#include "hand_context.h"
#include "sgdrc_log.h"
#include "test_support.h"

namespace concord {
namespace {

using policy::SgdrcOptions;
using policy::SgdrcPolicy;
using testing::curve_kernel;
using testing::HandContext;
using testing::step;
using testing::tenant;
using testing::workload;

// ---- tidal SM masking: pure functions ----

TEST(Tidal, LcTakesTheFirstTpcsAndBeTheRest) {
  const DeviceSpec dev = h200_spec();
  const auto tpcs = policy::tpcs_in_order(dev);
  ASSERT_EQ(tpcs.size(), 66u);
  const auto split = policy::tidal_split(tpcs, 10);
  EXPECT_EQ(split.lc_tpcs, 10);
  EXPECT_EQ(split.lc, tpcs[0] | tpcs[1] | tpcs[2] | tpcs[3] | tpcs[4] | tpcs[5] | tpcs[6] | tpcs[7] | tpcs[8] | tpcs[9]);
  EXPECT_EQ(split.lc.count(), 20);
  EXPECT_FALSE(split.lc.intersects(split.be));
  EXPECT_EQ(split.lc | split.be, dev.all_sms());
  // The same need gives the same sets (green contexts are cached per set).
  EXPECT_EQ(policy::tidal_split(tpcs, 10).be, split.be);
  // No LC work: BE on every SM.
  const auto idle = policy::tidal_split(tpcs, 0);
  EXPECT_TRUE(idle.lc.empty());
  EXPECT_EQ(idle.be, dev.all_sms());
}

TEST(Tidal, NeedsRoundUpToAFewSharesAndLeaveBeItsReserve) {
  // 66 TPCs in 8 steps: shares ceil(k * 66 / 8) = 9, 17, 25, 33, 42, 50, 58, 66 (66 capped to 65).
  EXPECT_EQ(policy::round_lc_need(0, 66, 8, 1), 0);
  EXPECT_EQ(policy::round_lc_need(1, 66, 8, 1), 9);
  EXPECT_EQ(policy::round_lc_need(9, 66, 8, 1), 9);
  EXPECT_EQ(policy::round_lc_need(10, 66, 8, 1), 17);
  EXPECT_EQ(policy::round_lc_need(58, 66, 8, 1), 58);
  EXPECT_EQ(policy::round_lc_need(59, 66, 8, 1), 65);
  EXPECT_EQ(policy::round_lc_need(66, 66, 8, 1), 65);
  EXPECT_EQ(policy::round_lc_need(66, 66, 8, 3), 63);
  EXPECT_EQ(policy::round_lc_need(200, 66, 8, 1), 65);
  // As many steps as TPCs: every need as it is.
  for (int n = 1; n < 66; ++n) EXPECT_EQ(policy::round_lc_need(n, 66, 66, 1), n);
  EXPECT_EQ(policy::lc_share_sizes(66, 8, 1), (std::vector<int>{9, 17, 25, 33, 42, 50, 58, 65}));
  EXPECT_EQ(policy::lc_share_sizes(66, 2, 1), (std::vector<int>{33, 65}));
}

TEST(Tidal, WindowNeedIsTheLargestNeedOfTheHeadAndTheNextW) {
  // One LC tenant: the head (3) and its queued launches.
  const std::vector<std::vector<int>> one{{3, 5, 9, 2}};
  EXPECT_EQ(policy::window_need(one, 0), 3);
  EXPECT_EQ(policy::window_need(one, 1), 5);
  EXPECT_EQ(policy::window_need(one, 2), 9);
  EXPECT_EQ(policy::window_need(one, 10), 9);
  // Two tenants served round robin from the head's: 4, 6, then 20, 1.
  const std::vector<std::vector<int>> two{{4, 20}, {6, 1}};
  EXPECT_EQ(policy::window_need(two, 0), 4);
  EXPECT_EQ(policy::window_need(two, 1), 6);
  EXPECT_EQ(policy::window_need(two, 2), 20);
  // A tenant with a shorter queue drops out of later rounds.
  const std::vector<std::vector<int>> uneven{{2}, {3, 4, 30}};
  EXPECT_EQ(policy::window_need(uneven, 2), 4);
  EXPECT_EQ(policy::window_need(uneven, 3), 30);
  EXPECT_EQ(policy::window_need({}, 4), 0);
  EXPECT_EQ(policy::window_need({{}, {}}, 4), 0);
}

TEST(Tidal, MinTpcsIsTheFewestWithinToleranceOfTheMinimum) {
  // Perfect scaling up to 24 TPCs, flat after.
  auto knee = [](int t) { return 1.0 / std::min(t, 24); };
  EXPECT_EQ(policy::min_tpcs(knee, 66, 0.0), 24);
  // Within 5%: 1/t <= 1.05/24, t >= 22.86.
  EXPECT_EQ(policy::min_tpcs(knee, 66, 0.05), 23);
  EXPECT_EQ(policy::min_tpcs(knee, 66, 0.5), 16);
  // The minimum in the middle: time rises again past 30 TPCs (more SMs cost more, e.g. a tail).
  auto dip = [](int t) { return t <= 30 ? 1.0 / t : 1.0 / 30 + (t - 30) * 0.001; };
  EXPECT_EQ(policy::min_tpcs(dip, 66, 0.0), 30);
  // A flat curve: one TPC is as fast as any.
  EXPECT_EQ(policy::min_tpcs([](int) { return 1.0; }, 66, 0.03), 1);
  // Binary search: after the scan for the minimum, about log2(66) probes, not another scan.
  int probes = 0;
  EXPECT_EQ(policy::min_tpcs([&](int t) { ++probes; return knee(t); }, 66, 0.0), 24);
  EXPECT_LE(probes, 66 + 6);
}


TEST(Tidal, KernelMinTpcsReadsTheEstimatorAndStopsAtTheGrid) {
  const DeviceSpec dev = h200_spec();
  const Estimator est(dev);
  const auto tpcs = policy::tpcs_in_order(dev);
  EXPECT_EQ(policy::kernel_min_tpcs(est, curve_kernel("k40", 40), 0, tpcs, 0.0), 20);
  EXPECT_EQ(policy::kernel_min_tpcs(est, curve_kernel("k132", 132), 0, tpcs, 0.0), 66);
  // The roofline keeps getting faster with SMs; a grid of 16 blocks fills at most 16 SMs.
  KernelSpec small = make_suite_kernel("tc_gemm", 1024).value();
  small.variants[static_cast<size_t>(small.default_variant)].logical_blocks = 16;
  EXPECT_LE(policy::kernel_min_tpcs(est, small, small.default_variant, tpcs, 0.0), 8);
}

// ---- the policy's decisions on hand-built queues ----

SgdrcOptions exact(int window = 4) {
  SgdrcOptions o;
  o.window = window;
  o.tolerance = 0.0;
  o.steps = 66;  // no rounding: the sets follow the needs exactly
  o.be_tlp = 0;
  return o;
}

SmSet first_tpcs(int n) { return policy::tidal_split(policy::tpcs_in_order(h200_spec()), n).lc; }

TEST(SgdrcDecisions, WithoutLcWorkBeRunsOnEverySmPersistent) {
  HandContext ctx;
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec k = curve_kernel("be", 132);
  SgdrcPolicy p(exact());
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  ASSERT_EQ(ctx.dispatched.size(), 1u);
  EXPECT_EQ(ctx.dispatched[0].second.sms, ctx.device().all_sms());
  EXPECT_EQ(ctx.dispatched[0].second.form, LaunchForm::persistent);
  EXPECT_EQ(ctx.dispatched[0].second.priority, 0);
}

TEST(SgdrcDecisions, LcArrivalShrinksRunningBeOnceToTheComplementOfTheWindowNeed) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec be_k = curve_kernel("be", 132);
  const KernelSpec small = curve_kernel("small", 10);  // 5 TPCs
  const KernelSpec mid = curve_kernel("mid", 24);      // 12 TPCs
  const KernelSpec big = curve_kernel("big", 60);      // 30 TPCs
  SgdrcPolicy p(exact(/*window=*/1));
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, be_k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  const DispatchId be_d = ctx.running_of(be)->id;

  // A request: small, then mid, then big. With W = 1 the window holds small and mid: 12 TPCs.
  ctx.make_ready(lc, small);
  ctx.queue(lc, mid);
  ctx.queue(lc, big);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  const RunningDispatch* lc_d = ctx.running_of(lc);
  ASSERT_NE(lc_d, nullptr);
  EXPECT_EQ(lc_d->placement.sms, first_tpcs(12));
  EXPECT_EQ(lc_d->placement.priority, 1);
  EXPECT_FALSE(lc_d->placement.l2_persist);  // off unless asked for
  ASSERT_EQ(ctx.resizes.size(), 1u);
  EXPECT_EQ(ctx.resizes[0].id, be_d);
  EXPECT_EQ(ctx.resizes[0].sms, ctx.device().all_sms().minus(first_tpcs(12)));
  // Nothing changed: no second resize to the same set.
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.resizes.size(), 1u);

  // small ends: mid is the head and big enters the window: 30 TPCs, one more resize.
  ASSERT_TRUE(ctx.finish(p, lc_d->id).is_ok());
  lc_d = ctx.running_of(lc);
  ASSERT_NE(lc_d, nullptr);
  EXPECT_EQ(lc_d->placement.sms, first_tpcs(30));
  ASSERT_EQ(ctx.resizes.size(), 2u);
  EXPECT_EQ(ctx.resizes[1].sms, ctx.device().all_sms().minus(first_tpcs(30)));
  EXPECT_FALSE(ctx.running_of(be)->placement.sms.intersects(lc_d->placement.sms));

  // mid ends: big is the head, alone in the window: still 30, no resize.
  ASSERT_TRUE(ctx.finish(p, lc_d->id).is_ok());
  lc_d = ctx.running_of(lc);
  ASSERT_NE(lc_d, nullptr);
  EXPECT_EQ(ctx.resizes.size(), 2u);

  // big ends, the LC queue is empty: BE grows back to every SM, once.
  ASSERT_TRUE(ctx.finish(p, lc_d->id).is_ok());
  ASSERT_EQ(ctx.resizes.size(), 3u);
  EXPECT_EQ(ctx.resizes[2].sms, ctx.device().all_sms());
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.resizes.size(), 3u);
  EXPECT_TRUE(ctx.tlps.empty());  // be_tlp = 0: not throttled
}

TEST(SgdrcDecisions, WindowZeroFollowsEachKernelsOwnNeed) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const KernelSpec small = curve_kernel("small", 10), big = curve_kernel("big", 60);
  SgdrcPolicy p(exact(/*window=*/0));
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(lc, small);
  ctx.queue(lc, big);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.running_of(lc)->placement.sms, first_tpcs(5));
  ASSERT_TRUE(ctx.finish(p, ctx.running_of(lc)->id).is_ok());
  EXPECT_EQ(ctx.running_of(lc)->placement.sms, first_tpcs(30));
}

TEST(SgdrcDecisions, RoundedNeedsUseTheStepSizes) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const KernelSpec k = curve_kernel("k", 24);  // 12 TPCs -> the 17-TPC share of 8 steps
  SgdrcOptions o = exact();
  o.steps = 8;
  SgdrcPolicy p(o);
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(lc, k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.running_of(lc)->placement.sms, first_tpcs(17));
}

TEST(SgdrcDecisions, OneLcAndOneBeInFlightRoundRobinWithinEachClass) {
  HandContext ctx;
  const TenantId lc0 = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be0 = ctx.add_tenant(TenantClass::best_effort);
  const TenantId lc1 = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be1 = ctx.add_tenant(TenantClass::best_effort);
  const TenantId be2 = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec k = curve_kernel("k", 20), be_k = curve_kernel("be", 132);
  SgdrcPolicy p(exact());
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  for (TenantId t : {lc0, lc1}) {
    ctx.make_ready(t, k);
    ctx.queue(t, k);
  }
  for (TenantId t : {be0, be1, be2}) {
    ctx.make_ready(t, be_k);
    ctx.queue(t, be_k);
  }
  std::vector<TenantId> lc_order, be_order;
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  for (int i = 0; i < 4; ++i) {
    // Exactly one of each class runs.
    int lc_running = 0, be_running = 0;
    const RunningDispatch *lc_d = nullptr, *be_d = nullptr;
    for (const auto& r : ctx.running()) {
      if (ctx.tenant(r.tenants.front()).info.cls == TenantClass::latency_critical) {
        ++lc_running;
        lc_d = &r;
      } else {
        ++be_running;
        be_d = &r;
      }
    }
    ASSERT_EQ(lc_running, 1);
    ASSERT_EQ(be_running, 1);
    lc_order.push_back(lc_d->tenants.front());
    be_order.push_back(be_d->tenants.front());
    const DispatchId lc_id = lc_d->id, be_id = be_d->id;
    ASSERT_TRUE(ctx.finish(p, lc_id).is_ok());
    ASSERT_TRUE(ctx.finish(p, be_id).is_ok());
  }
  EXPECT_EQ(lc_order, (std::vector<TenantId>{lc0, lc1, lc0, lc1}));
  EXPECT_EQ(be_order, (std::vector<TenantId>{be0, be1, be2, be0}));
}

TEST(SgdrcDecisions, OpaqueBeKeepsItsSmsAndTheNextBeLaunchGetsTheBeSide) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec opaque = curve_kernel("blas", 132, 4096, /*elastic=*/false);
  const KernelSpec k = curve_kernel("k", 20);
  SgdrcPolicy p(exact());
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, opaque);
  ctx.queue(be, opaque);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.running_of(be)->placement.form, LaunchForm::native);
  ctx.make_ready(lc, k);
  ctx.queue(lc, k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_TRUE(ctx.resizes.empty());
  EXPECT_EQ(ctx.running_of(be)->placement.sms, ctx.device().all_sms());
  EXPECT_EQ(ctx.running_of(lc)->placement.sms, first_tpcs(10));
  // The opaque launch ends while LC work is queued: the next one runs on the BE side.
  ASSERT_TRUE(ctx.finish(p, ctx.running_of(be)->id).is_ok());
  EXPECT_EQ(ctx.running_of(be)->placement.sms, ctx.device().all_sms().minus(first_tpcs(10)));
}

TEST(SgdrcDecisions, BeTlpThrottlesBeWhileLcWorkIsQueuedAndRestoresIt) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec k = curve_kernel("k", 20), be_k = curve_kernel("be", 132);
  SgdrcOptions o = exact();
  o.be_tlp = 2;
  SgdrcPolicy p(o);
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, be_k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.running_of(be)->placement.tlp, 0);
  ctx.make_ready(lc, k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  ASSERT_EQ(ctx.tlps.size(), 1u);
  EXPECT_EQ(ctx.tlps[0].tlp, 2);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.tlps.size(), 1u);
  // A BE launch dispatched while LC work is queued starts throttled.
  ASSERT_TRUE(ctx.finish(p, ctx.running_of(be)->id).is_ok());
  ctx.make_ready(be, be_k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.running_of(be)->placement.tlp, 2);
  // LC ends: full TLP again, once.
  ASSERT_TRUE(ctx.finish(p, ctx.running_of(lc)->id).is_ok());
  ASSERT_EQ(ctx.tlps.size(), 2u);
  EXPECT_EQ(ctx.tlps[1].tlp, 0);
  EXPECT_EQ(ctx.running_of(be)->placement.sms, ctx.device().all_sms());
}

// be_throttle=profile: a BE kernel of the other roofline profile than the LC kernel in flight
// keeps every resident block; one of the same profile is throttled; the LC kernel's change of
// profile moves the throttle (once per change).
TEST(SgdrcDecisions, ProfileThrottleSparesBeOfTheOtherProfile) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec lc_compute = curve_kernel("lc_compute", 20), be_compute = curve_kernel("be_compute", 132);
  KernelSpec lc_memory = curve_kernel("lc_memory", 20), be_memory = curve_kernel("be_memory", 132);
  for (KernelSpec* k : {&lc_memory, &be_memory}) {
    k->variants[0].flops_per_block = 1e3;
    k->variants[0].bytes_per_block = 1e5;
  }
  ASSERT_EQ(policy::orion_op(ctx.estimator(), lc_compute).profile, policy::OrionProfile::compute);
  ASSERT_EQ(policy::orion_op(ctx.estimator(), be_memory).profile, policy::OrionProfile::memory);
  SgdrcOptions o = exact();
  o.be_tlp = 2;
  o.be_throttle_by_profile = true;
  SgdrcPolicy p(o);
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, be_memory);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  ctx.make_ready(lc, lc_compute);
  ctx.queue(lc, lc_memory);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_TRUE(ctx.tlps.empty());  // memory-bound BE beside a compute-bound LC kernel: not throttled
  EXPECT_EQ(ctx.running_of(be)->placement.tlp, 0);
  // The LC request's next kernel is memory-bound: now the BE kernel shares its profile.
  ASSERT_TRUE(ctx.finish(p, ctx.running_of(lc)->id).is_ok());
  ASSERT_EQ(ctx.tlps.size(), 1u);
  EXPECT_EQ(ctx.tlps[0].tlp, 2);
  // A compute-bound BE kernel dispatched beside it starts unthrottled.
  ASSERT_TRUE(ctx.finish(p, ctx.running_of(be)->id).is_ok());
  ctx.make_ready(be, be_compute);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.running_of(be)->placement.tlp, 0);
  // The default throttles whatever the profiles.
  HandContext always;
  const TenantId lc2 = always.add_tenant(TenantClass::latency_critical);
  const TenantId be2 = always.add_tenant(TenantClass::best_effort);
  o.be_throttle_by_profile = false;
  SgdrcPolicy q(o);
  ASSERT_TRUE(q.on_start(always).is_ok());
  always.make_ready(lc2, lc_compute);
  always.make_ready(be2, be_memory);
  ASSERT_TRUE(q.on_tick(always).is_ok());
  EXPECT_EQ(always.running_of(be2)->placement.tlp, 2);
}

TEST(SgdrcDecisions, PreparesTheFewSetsOfTenantsWithNativeLaunches) {
  HandContext ctx;
  ctx.add_tenant(TenantClass::latency_critical);  // no hints: may launch opaque kernels
  ctx.add_tenant(TenantClass::best_effort);
  SgdrcOptions o;
  o.steps = 4;
  SgdrcPolicy p(o);
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  const auto sizes = policy::lc_share_sizes(66, 4, 1);
  ASSERT_EQ(ctx.prepared.size(), 2 * sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(ctx.prepared[i].second, first_tpcs(sizes[i]));
    EXPECT_EQ(ctx.prepared[sizes.size() + i].second, ctx.device().all_sms().minus(first_tpcs(sizes[i])));
  }
}

TEST(SgdrcParams, BadValuesAreRefusedByName) {
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"window", "-1"}, {"tolerance", "1.5"}, {"tolerance", "x"}, {"steps", "0"}, {"reserve", "0"}, {"be_tlp", "-2"}, {"l2_persist", "2"}, {"be_throttle", "some"}, {"nope", "1"}}) {
    auto p = builtin_policies().make("sgdrc", {{k, v}});
    ASSERT_FALSE(p.is_ok()) << k << "=" << v;
    EXPECT_NE(p.status().message().find(k), std::string::npos) << p.status().to_string();
  }
  EXPECT_TRUE(builtin_policies().make("sgdrc", {{"window", "0"}, {"be_tlp", "1"}, {"steps", "66"}}).is_ok());
}

// The deviations measured on the GPU: be_flights=tenant runs one BE kernel per BE tenant (all on
// the BE side, each shrunk once when LC work arrives); lc_sms=all puts the LC kernel on every SM;
// lc_form=persistent launches it in the persistent form on the LC side (native by default).
TEST(SgdrcDecisions, DeviationsPerTenantBeAllSmsAndPersistentLc) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be0 = ctx.add_tenant(TenantClass::best_effort);
  const TenantId be1 = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec k = curve_kernel("k", 20), be_k = curve_kernel("be", 132);
  SgdrcOptions o = exact();
  o.be_per_tenant = true;
  SgdrcPolicy p(o);
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be0, be_k);
  ctx.make_ready(be1, be_k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  ASSERT_NE(ctx.running_of(be0), nullptr);
  ASSERT_NE(ctx.running_of(be1), nullptr);
  EXPECT_EQ(ctx.running_of(be0)->placement.sms, ctx.device().all_sms());
  EXPECT_EQ(ctx.running_of(be1)->placement.sms, ctx.device().all_sms());
  ctx.make_ready(lc, k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  ASSERT_NE(ctx.running_of(lc), nullptr);
  EXPECT_EQ(ctx.running_of(lc)->placement.sms, first_tpcs(10));
  EXPECT_EQ(ctx.resizes.size(), 2u);  // each BE kernel once
  for (const auto& r : ctx.resizes) EXPECT_EQ(r.sms, ctx.device().all_sms().minus(first_tpcs(10)));
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  EXPECT_EQ(ctx.resizes.size(), 2u);

  for (const char* which : {"lc_sms", "lc_form"}) {
    HandContext c2;
    const TenantId l = c2.add_tenant(TenantClass::latency_critical);
    const TenantId b = c2.add_tenant(TenantClass::best_effort);
    SgdrcOptions o2 = exact();
    if (std::string(which) == "lc_sms") o2.lc_all_sms = true;
    else o2.lc_native = false;
    SgdrcPolicy p2(o2);
    ASSERT_TRUE(p2.on_start(c2).is_ok());
    c2.make_ready(b, be_k);
    c2.make_ready(l, k);
    ASSERT_TRUE(p2.on_tick(c2).is_ok());
    const RunningDispatch* d = c2.running_of(l);
    ASSERT_NE(d, nullptr) << which;
    if (std::string(which) == "lc_sms") {
      EXPECT_EQ(d->placement.sms, c2.device().all_sms());
      EXPECT_EQ(d->placement.form, LaunchForm::native);
    } else {
      EXPECT_EQ(d->placement.sms, first_tpcs(10));
      EXPECT_EQ(d->placement.form, LaunchForm::persistent);
    }
    // Only one BE kernel in flight by default, and BE keeps to its side either way.
    ASSERT_NE(c2.running_of(b), nullptr);
    EXPECT_EQ(c2.running_of(b)->placement.sms, c2.device().all_sms().minus(first_tpcs(10))) << which;
  }
  EXPECT_FALSE(builtin_policies().make("sgdrc", {{"lc_sms", "most"}}).is_ok());
  EXPECT_FALSE(builtin_policies().make("sgdrc", {{"lc_form", "elastic"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("sgdrc", {{"lc_sms", "all"}, {"lc_form", "persistent"}, {"be_flights", "tenant"}}).is_ok());
}

// Completions arrive in batches: when the LC kernel's completion comes first and the BE kernel
// has ended in the same batch, the policy must not resize the BE kernel (the engine no longer
// runs it) and must forget it once its own completion comes.
TEST(SgdrcDecisions, ABeKernelEndedInTheSameBatchIsNotResized) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec k = curve_kernel("k", 20), be_k = curve_kernel("be", 132);
  SgdrcPolicy p(exact());
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, be_k);
  ctx.make_ready(lc, k);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  const DispatchId be_d = ctx.running_of(be)->id, lc_d = ctx.running_of(lc)->id;
  ASSERT_EQ(ctx.resizes.size(), 0u);  // BE was dispatched on its side directly
  ctx.end_silently(be_d);
  const Status s = ctx.finish(p, lc_d);  // the LC queue empties: BE would grow back
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(ctx.resizes.size(), 0u);
  Completion c;
  c.dispatch = be_d;
  EXPECT_TRUE(p.on_complete(ctx, c).is_ok());
}

// l2_persist=1: LC launches carry the L2 persisting window, BE launches never do.
TEST(SgdrcDecisions, L2PersistMarksLcLaunchesOnly) {
  HandContext ctx;
  const TenantId lc = ctx.add_tenant(TenantClass::latency_critical);
  const TenantId be = ctx.add_tenant(TenantClass::best_effort);
  const KernelSpec be_k = curve_kernel("be", 132);
  const KernelSpec small = curve_kernel("small", 10);
  SgdrcOptions o = exact(/*window=*/1);
  o.lc_l2_persist = true;
  SgdrcPolicy p(o);
  ASSERT_TRUE(p.on_start(ctx).is_ok());
  ctx.make_ready(be, be_k);
  ctx.make_ready(lc, small);
  ASSERT_TRUE(p.on_tick(ctx).is_ok());
  ASSERT_NE(ctx.running_of(lc), nullptr);
  ASSERT_NE(ctx.running_of(be), nullptr);
  EXPECT_TRUE(ctx.running_of(lc)->placement.l2_persist);
  EXPECT_FALSE(ctx.running_of(be)->placement.l2_persist);
}

// ---- the simulator: one LC tenant beside two BE tenants ----

using testing::lc_beside_be;
using testing::LcBe;
using testing::measure;

TEST(SgdrcScenario, LcTailNearAloneAndBeAboveStaticPartition) {
  auto alone = testing::run_on_sim(lc_beside_be(false), "streams");
  ASSERT_TRUE(alone.is_ok()) << alone.status().to_string();
  const LcBe a = measure(*alone);
  std::map<std::string, LcBe> got;
  for (const char* name : {"streams", "static-partition"}) {
    auto run = testing::run_on_sim(lc_beside_be(true), name);
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    got[name] = measure(*run);
  }
  testing::LoggedSgdrc sgdrc{SgdrcOptions{}};
  auto run = testing::run_on_sim(lc_beside_be(true), sgdrc);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const LcBe s = measure(*run);

  // The LC tail: near its alone tail, far below streams'.
  EXPECT_LT(std::abs(s.p99 - a.p99), std::abs(got["streams"].p99 - a.p99));
  EXPECT_LT(s.p99, 2.0 * a.p99) << "alone " << a.p99 << " sgdrc " << s.p99;
  // BE gets what LC leaves: more than a fixed third each.
  EXPECT_GT(s.be_per_s, got["static-partition"].be_per_s);

  // The tidal sets, from the policy's own calls: LC on a prefix of the TPCs, every resize a
  // change, BE shrunk when LC work came and back on every SM when it ended.
  const DeviceSpec dev = h200_spec();
  for (const auto& e : sgdrc.log) {
    if (e.resize || run->tenants[static_cast<size_t>(e.tenant.value)].cls != TenantClass::latency_critical) continue;
    EXPECT_EQ(e.sms, dev.round_up_to_tpcs(e.sms));
    EXPECT_TRUE(e.sms.contains(0));
  }
  const testing::TidalResizes resizes = testing::tidal_resizes(sgdrc.log, dev.all_sms());
  EXPECT_EQ(resizes.repeats, 0);
  EXPECT_EQ(resizes.unknown, 0);
  EXPECT_GT(resizes.shrinks, 0);
  EXPECT_GT(resizes.grows, 0);
  // Disjoint while both run: check each BE set against the LC dispatch that ran beside it.
  for (const auto& lc_d : run->dispatches) {
    if (lc_d.placement.priority != 1) continue;
    for (const auto& be_d : run->dispatches) {
      if (be_d.placement.priority == 1 || be_d.start >= lc_d.end || be_d.end <= lc_d.start) continue;
      // BE dispatched while this LC kernel ran: on the other side from the start.
      if (be_d.dispatched >= lc_d.dispatched && be_d.dispatched < lc_d.end) {
        EXPECT_FALSE(be_d.placement.sms.intersects(lc_d.placement.sms));
      }
    }
  }
}

}  // namespace
}  // namespace concord
