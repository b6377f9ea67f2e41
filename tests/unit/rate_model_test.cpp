#include <gtest/gtest.h>

#include <numeric>

#include "backend/sim/rate_model.h"
#include "concord/occupancy.h"
#include "concord/suite.h"

namespace concord::sim {
namespace {

TEST(WaterFill, SmallDemandsAreMetAndTheRestSplitByWeight) {
  const std::vector<double> demand = {0.1, 5, 5};
  const std::vector<double> weight = {1, 1, 3};
  const auto a = water_fill(demand, weight, 1.0);
  EXPECT_DOUBLE_EQ(a[0], 0.1);
  EXPECT_NEAR(a[1], 0.9 / 4, 1e-12);
  EXPECT_NEAR(a[2], 0.9 * 3 / 4, 1e-12);
  const auto under = water_fill(std::vector<double>{0.2, 0.3}, std::vector<double>{1, 1}, 1.0);
  EXPECT_DOUBLE_EQ(under[0], 0.2);
  EXPECT_DOUBLE_EQ(under[1], 0.3);
}

Entity entity_of(const RateModel& m, const KernelSpec& k) {
  const KernelVariant& v = k.variant(k.default_variant);
  Entity e;
  e.compute_seconds_per_block = m.compute_seconds_per_block(k, v);
  e.bytes_per_block = v.bytes_per_block;
  e.warps_per_block = v.warps_per_block();
  return e;
}

double alone_rate(const RateModel& m, const DeviceSpec& d, const KernelSpec& k, int sms) {
  const Entity e = entity_of(m, k);
  const SmGroup g{sms, {{0, max_resident_blocks(d, k.variant(k.default_variant))}}};
  return m.solve(std::span<const Entity>(&e, 1), std::span<const SmGroup>(&g, 1))[0];
}

TEST(RateModel, ComputeBoundScalesWithSmsMemoryBoundSaturates) {
  const DeviceSpec d = h200_spec();
  const RateModel m(d, ModelParams{});
  const KernelSpec compute = *make_suite_kernel("fma_loop", 1 << 24);
  const KernelSpec memory = *make_suite_kernel("stream_triad", 1 << 26);
  EXPECT_NEAR(alone_rate(m, d, compute, 66) / alone_rate(m, d, compute, 132), 0.5, 1e-9);
  // A streaming kernel saturates DRAM on about a third of the SMs.
  EXPECT_NEAR(alone_rate(m, d, memory, 66) / alone_rate(m, d, memory, 132), 1.0, 1e-6);
  EXPECT_LT(alone_rate(m, d, memory, 22) / alone_rate(m, d, memory, 132), 0.6);
  const double bytes_per_s = alone_rate(m, d, memory, 132) * memory.variant(memory.default_variant).bytes_per_block;
  EXPECT_NEAR(bytes_per_s, d.dram_bytes_per_s * ModelParams{}.dram_efficiency, 1e6);
}

TEST(RateModel, SharedDramIsNeverOversubscribed) {
  const DeviceSpec d = h200_spec();
  const RateModel m(d, ModelParams{});
  const KernelSpec a = *make_suite_kernel("stream_triad", 1 << 26);
  const KernelSpec b = *make_suite_kernel("vector_add", 1 << 26);
  const std::vector<Entity> e = {entity_of(m, a), entity_of(m, b)};
  const std::vector<SmGroup> g = {{66, {{0, 2}}}, {66, {{1, 2}}}, {0, {}}};
  const auto r = m.solve(e, g);
  const double traffic = r[0] * e[0].bytes_per_block + r[1] * e[1].bytes_per_block;
  EXPECT_LE(traffic, d.dram_bytes_per_s * ModelParams{}.dram_efficiency * (1 + 1e-6));
  EXPECT_GT(traffic, d.dram_bytes_per_s * ModelParams{}.dram_efficiency * 0.99);
}

// A bound per SM (a measured curve slower than the roofline) caps the part at its measured rate and
// its DRAM traffic with it: its neighbour on the other half of the GPU gets the bandwidth it leaves.
TEST(RateModel, ABoundPartDrawsOnlyItsMeasuredTrafficAndLeavesTheRest) {
  const DeviceSpec d = h200_spec();
  const RateModel m(d, ModelParams{});
  const KernelSpec a = *make_suite_kernel("stream_triad", 1 << 26);
  const KernelSpec b = *make_suite_kernel("vector_add", 1 << 26);
  std::vector<Entity> e = {entity_of(m, a), entity_of(m, b)};
  const std::vector<SmGroup> g = {{66, {{0, 8}}}, {66, {{1, 8}}}};
  const auto free_run = m.solve(e, g);
  // Alone on its half, triad at a fifth of its modelled alone rate there.
  const SmGroup half{66, {{0, 8}}};
  const double alone = m.solve(std::span<const Entity>(&e[0], 1), std::span<const SmGroup>(&half, 1))[0];
  e[0].max_rate_per_sm = 0.2 * alone / 66;
  const double bound_alone = m.solve(std::span<const Entity>(&e[0], 1), std::span<const SmGroup>(&half, 1))[0];
  EXPECT_NEAR(bound_alone, 0.2 * alone, 1e-6 * alone);
  const auto bound = m.solve(e, g);
  EXPECT_LE(bound[0], 0.2 * alone * (1 + 1e-9));
  EXPECT_GT(bound[1], free_run[1] * 1.2) << "the neighbour did not get the bandwidth the bound part left";
  const double traffic = bound[0] * e[0].bytes_per_block + bound[1] * e[1].bytes_per_block;
  EXPECT_LE(traffic, d.dram_bytes_per_s * ModelParams{}.dram_efficiency * (1 + 1e-6));
}

TEST(RateModel, L1PollutionHurtsASensitiveNeighbourUnlessTheOtherBypasses) {
  const DeviceSpec d = h200_spec();
  const RateModel m(d, ModelParams{});
  const KernelSpec sensitive = *make_suite_kernel("kmeans", 1 << 20);
  const KernelSpec other = *make_suite_kernel("fma_loop", 1 << 20);
  std::vector<Entity> e = {entity_of(m, sensitive), entity_of(m, other)};
  e[0].l1_sensitivity = sensitive.l1_sensitivity;
  // On few SMs the sensitive kernel is bound by its SMs' memory pipes, not by DRAM.
  const std::vector<SmGroup> g = {{24, {{0, 2}, {1, 2}}}};
  const double polluted = m.solve(e, g)[0];
  e[1].cache = CachePolicy::l1_bypass;
  const double protected_rate = m.solve(e, g)[0];
  EXPECT_GT(protected_rate, polluted * 1.05);
}

// L2: a sensitive kernel beside a streaming neighbour loses part of its reuse to the neighbour's
// traffic (more DRAM bytes per block); placed with l2_persist it loses none and runs as it would
// beside a neighbour that evicts first, while the neighbour is not sped up by it.
TEST(RateModel, L2PersistingKeepsASensitiveKernelsReuseAgainstItsNeighbour) {
  const DeviceSpec d = h200_spec();
  const RateModel m(d, ModelParams{});
  const KernelSpec lc = *make_suite_kernel("vector_add", 1 << 24);
  const KernelSpec be = *make_suite_kernel("stream_triad", 1 << 26);
  std::vector<Entity> e = {entity_of(m, lc), entity_of(m, be)};
  e[0].l2_sensitivity = 0.5;
  const std::vector<SmGroup> g = {{66, {{0, 2}}}, {66, {{1, 2}}}};
  const auto shared = m.solve(e, g);
  e[0].l2_persist = true;
  const auto persisting = m.solve(e, g);
  EXPECT_GT(persisting[0], shared[0] * 1.05);
  e[0].l2_persist = false;
  e[1].cache = CachePolicy::l2_evict_first;
  const auto neighbour_streams = m.solve(e, g);
  EXPECT_NEAR(persisting[0], neighbour_streams[0], persisting[0] * 1e-6);
}

}  // namespace
}  // namespace concord::sim
