#include <gtest/gtest.h>

#include "concord/estimator.h"
#include "concord/profile.h"
#include "concord/suite.h"

namespace concord {
namespace {

TEST(Estimator, RooflineScalesComputeAndSaturatesMemory) {
  const Estimator e(h200_spec());
  const KernelSpec compute = *make_suite_kernel("fma_loop", 60 << 20);
  const KernelSpec memory = *make_suite_kernel("stream_triad", 800 << 20);
  const int v = compute.default_variant;
  EXPECT_NEAR(e.seconds(compute, v, 66) / e.seconds(compute, v, 132), 2.0, 1e-9);
  EXPECT_NEAR(e.seconds(memory, memory.default_variant, 66) / e.seconds(memory, memory.default_variant, 132), 1.0, 1e-9);
  EXPECT_GT(e.seconds(memory, memory.default_variant, 22), e.seconds(memory, memory.default_variant, 132) * 1.5);
  EXPECT_NEAR(e.seconds(compute, v, 132) * 1e3, 2.1, 0.2);  // the compute + memory pair's compute kernel
  EXPECT_EQ(e.demand_sms(compute, v), 120);                // linear scaling: within 10% at 120 of 132
  EXPECT_LE(e.demand_sms(memory, memory.default_variant), 46);
  EXPECT_FALSE(e.measured(compute, v));
}

// Without a measured curve, each cache policy costs the roofline time its own sensitivity: L1
// bypass 1 + l1_sensitivity, L2 evict-first 1 + l2_sensitivity, both the product.
TEST(Estimator, RooflineCachePoliciesCostTheirOwnSensitivity) {
  const Estimator e(h200_spec());
  KernelSpec k = *make_suite_kernel("stream_triad", 1 << 24);
  k.l1_sensitivity = 0.2;
  k.l2_sensitivity = 0.5;
  const int v = k.default_variant;
  const double base = e.seconds(k, v, 66);
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 66, CachePolicy::l1_bypass), base * 1.2);
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 66, CachePolicy::l2_evict_first), base * 1.5);
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 66, CachePolicy::both), base * 1.2 * 1.5);
}

TEST(Estimator, UsesMeasuredCurvesAndCacheSlowdowns) {
  const Estimator e(h200_spec());
  KernelSpec k = *make_suite_kernel("bfs", 1 << 20);
  k.sm_curve = {{2, 40e-3}, {4, 20e-3}, {8, 10e-3}, {64, 2e-3}, {132, 1.9e-3}};
  k.cache_slowdown = {1.0, 1.3, 1.1, 1.4};
  const int v = k.default_variant;
  EXPECT_TRUE(e.measured(k, v));
  EXPECT_FALSE(e.measured(k, (v + 1) % k.variant_count()));
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 4), 20e-3);
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 6), 15e-3);  // interpolated
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 1), 80e-3);  // perfect scaling below the first point
  EXPECT_DOUBLE_EQ(e.seconds(k, v, 132, CachePolicy::l1_bypass), 1.9e-3 * 1.3);
  // 62 SMs interpolate to 2.29 ms (> 1.1 x 1.9 ms); 64 SMs measure 2.0 ms: d = 64, as the
  // profile analysis computes it from the same curve.
  EXPECT_EQ(e.demand_sms(k, v), 64);
  EXPECT_EQ(demand_sms(k.sm_curve), 64);
}

}  // namespace
}  // namespace concord
