// Orion's admission rule and per-kernel profile (src/mechanism/orion_gate.h) on hand-built cases.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "concord/occupancy.h"
#include "concord/suite.h"
#include "mechanism/orion_gate.h"

namespace concord::policy {
namespace {

constexpr OrionProfile kCompute = OrionProfile::compute;
constexpr OrionProfile kMemory = OrionProfile::memory;
constexpr OrionProfile kUnknown = OrionProfile::unknown;

OrionOp op(int64_t sms, Seconds seconds, OrionProfile profile) { return OrionOp{sms, seconds, profile}; }

TEST(OrionRule, SmNeedIsGridOverResidentBlocksUncapped) {
  EXPECT_EQ(orion_sm_need(1, 8), 1);
  EXPECT_EQ(orion_sm_need(16, 8), 2);
  EXPECT_EQ(orion_sm_need(17, 8), 3);
  EXPECT_EQ(orion_sm_need(100000, 8), 12500);  // far above any device's SM count: not capped
  EXPECT_EQ(orion_sm_need(5, 0), std::numeric_limits<int64_t>::max());
}

TEST(OrionRule, ProfileByArithmeticIntensityAgainstTheKnee) {
  const DeviceSpec h200 = h200_spec();
  const double knee = h200.fp32_flops / h200.dram_bytes_per_s;
  EXPECT_EQ(orion_profile(h200, ComputeUnit::fp32, knee * 1.01e6, 1e6, 1e-3), kCompute);
  EXPECT_EQ(orion_profile(h200, ComputeUnit::fp32, knee * 0.99e6, 1e6, 1e-3), kMemory);
  EXPECT_EQ(orion_profile(h200, ComputeUnit::fp32, 1e6, 0, 1e-3), kCompute);
  // Tensor kernels are measured against the tensor peak: compute-bound for FP32 is memory-bound here.
  EXPECT_EQ(orion_profile(h200, ComputeUnit::tensor, knee * 2e6, 1e6, 1e-3), kMemory);
  // Without FLOPs the DRAM share decides: 60% of peak or more is memory-bound, less unknown.
  const double peak = h200.dram_bytes_per_s;
  EXPECT_EQ(orion_profile(h200, ComputeUnit::fp32, 0, 0.61 * peak * 1e-3, 1e-3), kMemory);
  EXPECT_EQ(orion_profile(h200, ComputeUnit::fp32, 0, 0.59 * peak * 1e-3, 1e-3), kUnknown);
}

TEST(OrionRule, SuiteKernelsGetTheirRooflineClassAndWholeGridSmNeed) {
  const Estimator e(h200_spec());
  const KernelSpec compute = *make_suite_kernel("fma_loop", 60 << 20);
  const KernelSpec memory = *make_suite_kernel("stream_triad", 1 << 24);
  const OrionOp c = orion_op(e, compute);
  const OrionOp m = orion_op(e, memory);
  EXPECT_EQ(c.profile, kCompute);
  EXPECT_EQ(m.profile, kMemory);
  EXPECT_DOUBLE_EQ(m.seconds, e.seconds(memory, memory.default_variant, 132));
  const KernelVariant& v = memory.variant(memory.default_variant);
  EXPECT_EQ(m.sm_need, (v.logical_blocks + max_resident_blocks(h200_spec(), v) - 1) / max_resident_blocks(h200_spec(), v));
  EXPECT_GT(m.sm_need, 132);
}

const OrionRule kRule{132, 100e-6};

TEST(OrionRule, BeLaunchesWhenNoLcRequestIsActive) {
  OrionView idle;
  idle.lc_has_work = true;
  // Too many SMs and the LC's last profile would both refuse it if a request were active.
  const std::vector<OrionProfile> lc{kMemory};
  idle.lc_kernels = lc;
  const OrionDecision d = orion_admit(kRule, OrionBeState{}, idle, op(5000, 10e-6, kMemory));
  EXPECT_EQ(d.verdict, OrionVerdict::launch);
  EXPECT_EQ(d.state.pass_sms, 5000);
  EXPECT_DOUBLE_EQ(d.state.since_drain, 10e-6);
  EXPECT_FALSE(d.state.gated);
}

TEST(OrionRule, WithAnActiveLcRequestBeMustFitTheSmThreshold) {
  const std::vector<OrionProfile> lc{kCompute};
  OrionView v;
  v.lc_active = true;
  v.lc_has_work = true;
  v.lc_kernels = lc;
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(133, 1e-6, kMemory)).verdict, OrionVerdict::wait_sms);
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(132, 1e-6, kMemory)).verdict, OrionVerdict::launch);
  // With the SMs of BE kernels launched earlier in the same pass.
  OrionBeState pass;
  pass.pass_sms = 100;
  EXPECT_EQ(orion_admit(kRule, pass, v, op(33, 1e-6, kMemory)).verdict, OrionVerdict::wait_sms);
  const OrionDecision d = orion_admit(kRule, pass, v, op(32, 1e-6, kMemory));
  EXPECT_EQ(d.verdict, OrionVerdict::launch);
  EXPECT_EQ(d.state.pass_sms, 132);
  EXPECT_EQ(orion_admit(kRule, pass, v, op(std::numeric_limits<int64_t>::max(), 1e-6, kMemory)).verdict, OrionVerdict::wait_sms);
}

TEST(OrionRule, WithAnActiveLcRequestBeMustDifferInProfile) {
  const std::vector<OrionProfile> lc{kCompute};
  OrionView v;
  v.lc_active = true;
  v.lc_has_work = true;
  v.lc_kernels = lc;
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(4, 1e-6, kCompute)).verdict, OrionVerdict::wait_profile);
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(4, 1e-6, kMemory)).verdict, OrionVerdict::launch);
  // An unknown profile on either side counts as different.
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(4, 1e-6, kUnknown)).verdict, OrionVerdict::launch);
  const std::vector<OrionProfile> unknown_lc{kUnknown};
  v.lc_kernels = unknown_lc;
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(4, 1e-6, kCompute)).verdict, OrionVerdict::launch);
  // Two LC requests active: the BE kernel must differ from both.
  const std::vector<OrionProfile> two{kMemory, kCompute};
  v.lc_kernels = two;
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(4, 1e-6, kCompute)).verdict, OrionVerdict::wait_profile);
  EXPECT_EQ(orion_admit(kRule, OrionBeState{}, v, op(4, 1e-6, kMemory)).verdict, OrionVerdict::wait_profile);
}

TEST(OrionRule, OutstandingBeDurationClosesTheGateUntilBeDrains) {
  OrionView v;
  v.lc_has_work = true;
  // 60 + 40 us: at the threshold, not over it.
  OrionDecision d = orion_admit(kRule, OrionBeState{}, v, op(1, 60e-6, kMemory));
  d = orion_admit(kRule, d.state, v, op(1, 40e-6, kMemory));
  EXPECT_EQ(d.verdict, OrionVerdict::launch);
  EXPECT_FALSE(d.state.gated);
  // One more goes over: it still launches, and closes the gate behind it.
  d = orion_admit(kRule, d.state, v, op(1, 1e-6, kMemory));
  EXPECT_EQ(d.verdict, OrionVerdict::launch);
  EXPECT_TRUE(d.state.gated);
  // While BE work runs, the next BE kernel waits, with or without an active LC request.
  v.be_running = true;
  const OrionDecision held = orion_admit(kRule, d.state, v, op(1, 1e-6, kMemory));
  EXPECT_EQ(held.verdict, OrionVerdict::wait_duration);
  EXPECT_TRUE(held.state.gated);
  EXPECT_DOUBLE_EQ(held.state.since_drain, d.state.since_drain);
  // Once BE has drained, it launches and the count starts again from its own duration.
  v.be_running = false;
  const OrionDecision reopened = orion_admit(kRule, d.state, v, op(1, 5e-6, kMemory));
  EXPECT_EQ(reopened.verdict, OrionVerdict::launch);
  EXPECT_FALSE(reopened.state.gated);
  EXPECT_DOUBLE_EQ(reopened.state.since_drain, 5e-6);
}

TEST(OrionRule, NoDurationGateOnceNoLcTenantHasWork) {
  OrionView v;
  v.lc_has_work = false;
  const OrionDecision d = orion_admit(kRule, OrionBeState{}, v, op(1, 1.0, kMemory));
  EXPECT_EQ(d.verdict, OrionVerdict::launch);
  EXPECT_FALSE(d.state.gated);
}

TEST(OrionRule, ARefusedKernelLeavesTheStateAsItWas) {
  const std::vector<OrionProfile> lc{kMemory};
  OrionView v;
  v.lc_active = true;
  v.lc_has_work = true;
  v.lc_kernels = lc;
  OrionBeState s;
  s.pass_sms = 7;
  s.since_drain = 3e-6;
  const OrionDecision d = orion_admit(kRule, s, v, op(4, 1e-6, kMemory));
  EXPECT_EQ(d.verdict, OrionVerdict::wait_profile);
  EXPECT_EQ(d.state.pass_sms, 7);
  EXPECT_DOUBLE_EQ(d.state.since_drain, 3e-6);
}

}  // namespace
}  // namespace concord::policy
