// Decision tests: what a policy decides on hand-built cases whose right answer is worked out
// independently (by hand, or by the paper's algorithm run again on the same state), so that a
// policy that runs but decides wrongly fails.
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "policy/fedcm/fedcm_policy.h"
#include "policy/raise/raise_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using policy::RaiseCandidate;
using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

RaiseVector vec(double aoc, double sme, double ipc, double isu, double spu, double du, double lsu, double tu) {
  return {aoc, sme, ipc, isu, spu, du, lsu, tu};
}

// Step 5 admits a task only when its score is strictly below the GPU's: a task that would take
// exactly what is left waits.
TEST(RaiseDecisions, ATaskScoringExactlyTheGpusScoreWaits) {
  // IPC and DU used up: LAT is the type. S_g^lat is the mean of M_g: (4+4+2+4+4+2+4+4)/8 = 3.5.
  const RaiseVector g = vec(4, 4, 2, 4, 4, 2, 4, 4);
  const std::vector<RaiseVector> equal{vec(3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5)};  // S_t = 3.5
  const std::vector<RaiseVector> below{vec(3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.4)};  // S_t = 3.4875
  EXPECT_DOUBLE_EQ(raise_score(g, RaiseClass::lat), 3.5);
  EXPECT_DOUBLE_EQ(raise_score(equal[0], RaiseClass::lat), 3.5);
  EXPECT_FALSE(policy::raise_decide(g, {{&equal, RaiseClass::lat}}, 3, 3, -1, 0).has_value());
  auto pick = policy::raise_decide(g, {{&below, RaiseClass::lat}}, 3, 3, -1, 0);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 0u);
}

// The threshold tests are strict too: IPC left exactly alpha does not admit COM.
TEST(RaiseDecisions, ComNeedsMoreIpcLeftThanAlpha) {
  const std::vector<RaiseVector> com{vec(1, 1, 1, 1, 1, 0, 0, 0)};
  const std::vector<RaiseVector> lat{vec(1, 1, 0, 0, 0, 0, 0, 1)};
  const std::vector<RaiseCandidate> tasks{{&com, RaiseClass::com}, {&lat, RaiseClass::lat}};
  RaiseVector g = vec(10, 10, 3, 10, 10, 3, 10, 10);  // IPC left 3 = alpha, DU left 3 = beta
  auto pick = policy::raise_decide(g, tasks, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 1u);  // LAT, not COM
  g = vec(10, 10, 3.01, 10, 10, 3, 10, 10);
  pick = policy::raise_decide(g, tasks, 3, 3, -1);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->first, 0u);  // COM
}

// The L1 bypass needs the chosen partner on the same GPCs (FEDCM's shader arrays); L2 evict-first
// needs a set over every GPC.
TEST(FedcmDecisions, BypassNeedsTheSameGpcsAsThePartner) {
  const Workload w = workload({tenant("a", {step("stream_triad", 1 << 24)})});
  std::map<std::string, CachePolicy> got;
  testing::ScriptedPolicy p([&](SchedContext& ctx) -> Status {
    if (ctx.ready().empty() || !got.empty()) return Status::ok();
    const ReadyLaunch r = ctx.ready().front();
    const KernelSpec& k = *r.kernel;
    const SmSet g0 = ctx.device().sms_of_gpc(0), g1 = ctx.device().sms_of_gpc(1);
    got["same"] = policy::fedcm_cache(ctx, k, k.default_variant, g0, g0, 1.1);
    got["other"] = policy::fedcm_cache(ctx, k, k.default_variant, g0, g1, 1.1);
    got["none"] = policy::fedcm_cache(ctx, k, k.default_variant, g0, std::nullopt, 1.1);
    got["all-with-partner-on-all"] = policy::fedcm_cache(ctx, k, k.default_variant, ctx.device().all_sms(), ctx.device().all_sms(), 1.1);
    got["all-with-partner-on-one"] = policy::fedcm_cache(ctx, k, k.default_variant, ctx.device().all_sms(), g0, 1.1);
    return ctx.dispatch(r.id, testing::whole(ctx)).status();
  });
  ASSERT_TRUE(run_on_sim(w, p).is_ok());
  EXPECT_EQ(got["same"], CachePolicy::l1_bypass);
  EXPECT_EQ(got["other"], CachePolicy::normal);
  EXPECT_EQ(got["none"], CachePolicy::normal);
  EXPECT_EQ(got["all-with-partner-on-all"], CachePolicy::both);
  EXPECT_EQ(got["all-with-partner-on-one"], CachePolicy::l2_evict_first);
}

// FEDCM's decisions checked against Algorithm 1 run again on the same state: a policy wrapped in
// a spy that, whenever one launch is waiting, copies the run's random generator, asks
// fedcm_candidates for the ranking the policy should see, and then checks the SM set the policy
// dispatched: the best-ranked candidate for a critical kernel, the tenant's last set for a
// non-critical one.
class FedcmSpy final : public Policy {
 public:
  explicit FedcmSpy(std::unique_ptr<Policy> inner, std::vector<std::vector<bool>> critical)
      : inner_(std::move(inner)), critical_(std::move(critical)) {}
  std::string name() const override { return inner_->name(); }
  Status on_start(SchedContext& ctx) override { return inner_->on_start(ctx); }
  Status on_tenant_joined(SchedContext& ctx, TenantId t) override { return inner_->on_tenant_joined(ctx, t); }
  Status on_ready(SchedContext& ctx, LaunchId l) override {
    return around(ctx, [&] { return inner_->on_ready(ctx, l); });
  }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    return around(ctx, [&] { return inner_->on_complete(ctx, c); });
  }
  Status on_tick(SchedContext& ctx) override {
    return around(ctx, [&] { return inner_->on_tick(ctx); });
  }

  int critical_checked = 0;
  int reused_checked = 0;
  int ranked_apart = 0;  // critical decisions whose best and worst candidates differ
  std::vector<std::string> mismatches;

 private:
  template <typename F>
  Status around(SchedContext& ctx, F&& hook) {
    std::vector<ReadyLaunch> waiting;
    for (const ReadyLaunch& r : ctx.ready()) {
      if (!r.has_running_dispatch) waiting.push_back(r);
    }
    std::optional<SmSet> expected;
    bool is_critical = false;
    if (waiting.size() == 1) {
      const ReadyLaunch& r = waiting.front();
      const auto t = static_cast<size_t>(r.tenant.value);
      masks_.resize(ctx.tenants().size());
      is_critical = critical_[t][static_cast<size_t>(r.index)] || !masks_[t];
      if (is_critical) {
        std::mt19937_64 copy = ctx.rng();
        const auto candidates = policy::fedcm_candidates(ctx, r, masks_, copy);
        if (!candidates.empty()) {
          expected = candidates.front().sms;
          ranked_apart += candidates.front().sms != candidates.back().sms &&
                          candidates.front().estimate < candidates.back().estimate;
        }
      } else {
        expected = masks_[t];
      }
    }
    const size_t before = ctx.running().size();
    CONCORD_RETURN_IF_ERROR(hook());
    for (const RunningDispatch& d : ctx.running().subspan(std::min(before, ctx.running().size()))) {
      masks_.resize(ctx.tenants().size());
      masks_[static_cast<size_t>(d.tenants[0].value)] = d.placement.sms;
      if (!expected || waiting.size() != 1 || d.launches[0] != waiting.front().id) continue;
      (is_critical ? critical_checked : reused_checked)++;
      if (d.placement.sms != *expected) {
        mismatches.push_back(std::string(is_critical ? "critical" : "non-critical") + " launch " +
                             std::to_string(d.launches[0].value) + ": dispatched " + d.placement.sms.to_string() +
                             ", expected " + expected->to_string());
      }
    }
    return Status::ok();
  }

  std::unique_ptr<Policy> inner_;
  std::vector<std::vector<bool>> critical_;  // per tenant, by launch index: critical by the hint
  std::vector<std::optional<SmSet>> masks_;
};

TEST(FedcmDecisions, CriticalKernelsTakeAlgorithmOnesBestSetAndOthersReuseTheLastOne) {
  // Two tenants of elastic kernels that each leave the other room; every kernel runs alone on
  // the GPU only briefly, so decisions are taken beside the other tenant's running kernel.
  // A request of five kernels: with sigma 0.4, the two longest (the 1<<24 ones) are critical.
  const Workload w = workload(
      {tenant("compute", {step("fma_loop", 1 << 24), step("fma_loop", 1 << 20, 3), step("fma_loop", 1 << 24)}, 3),
       tenant("memory", {step("stream_triad", 1 << 26), step("stream_triad", 1 << 22, 3), step("stream_triad", 1 << 26)}, 3)});
  const std::vector<std::vector<bool>> critical = {{true, false, false, false, true}, {true, false, false, false, true}};
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    auto inner = builtin_policies().make("fedcm", {{"sigma", "0.4"}});
    ASSERT_TRUE(inner.is_ok());
    FedcmSpy spy(std::move(*inner), critical);
    auto r = run_on_sim(w, spy, seed);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (const auto& m : spy.mismatches) ADD_FAILURE() << m;
    EXPECT_GE(spy.critical_checked, 4);
    EXPECT_GE(spy.reused_checked, 4);
    EXPECT_GE(spy.ranked_apart, 1) << "no decision had candidates that Algorithm 1 ranks apart";
  }
}


// Without a hint, FEDCM ranks a tenant's kernels from the last whole request it saw: until then
// (the first request) every kernel is decided afresh by Algorithm 1, none reuses the last set.
TEST(FedcmDecisions, WithoutAHintTheFirstRequestIsDecidedKernelByKernel) {
  const Workload w = workload(
      {tenant("compute", {step("fma_loop", 1 << 24), step("fma_loop", 1 << 20, 3), step("fma_loop", 1 << 24)}),
       tenant("memory", {step("stream_triad", 1 << 26), step("stream_triad", 1 << 22, 3), step("stream_triad", 1 << 26)})});
  const std::vector<std::vector<bool>> all(2, std::vector<bool>(5, true));
  for (uint64_t seed : {1, 2}) {
    SCOPED_TRACE(seed);
    auto inner = builtin_policies().make("fedcm", {{"sigma", "0.2"}});
    ASSERT_TRUE(inner.is_ok());
    FedcmSpy spy(std::move(*inner), all);
    sim::SimBackend backend(h200_spec());
    EngineOptions o;
    o.seed = seed;
    SpecSourceOptions no_hints;
    no_hints.hints = false;
    auto r = run_workload(w, backend, spy, o, no_hints);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (const auto& m : spy.mismatches) ADD_FAILURE() << m;
    EXPECT_GE(spy.critical_checked, 6);
  }
}

// A non-critical kernel takes its tenant's last critical decision whole: SM set and cache policy.
// Here the critical kernel's set spans every GPC, so it runs with L2 evict-first (no slowdown
// alone for this compute-bound kernel), and so do the three small kernels after it.
TEST(FedcmDecisions, NonCriticalKernelsKeepTheLastCriticalCachePolicy) {
  const Workload w = workload({tenant("a", {step("fma_loop", 1 << 24), step("fma_loop", 1 << 16, 3)}, 2)});
  auto r = testing::run_on_sim(w, "fedcm", 1, {{"sigma", "0.25"}});  // 1 of 4 launches is critical
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->dispatches.size(), 8u);
  for (size_t q = 0; q < 2; ++q) {
    const DispatchRecord& critical = r->dispatches[4 * q];
    ASSERT_TRUE(h200_spec().spans_all_gpcs(critical.placement.sms)) << critical.placement.sms.to_string();
    EXPECT_EQ(critical.placement.cache, CachePolicy::l2_evict_first);
    for (size_t i = 1; i < 4; ++i) {
      const DispatchRecord& d = r->dispatches[4 * q + i];
      EXPECT_EQ(d.placement.sms, critical.placement.sms) << "request " << q << " launch " << i;
      EXPECT_EQ(d.placement.cache, critical.placement.cache) << "request " << q << " launch " << i;
    }
  }
}
}  // namespace
}  // namespace concord
