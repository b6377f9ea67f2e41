// Each baseline's defining property, on the simulator.
#include <gtest/gtest.h>

#include <algorithm>

#include "policy/static_partition/static_partition_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

Workload three_tenants() {
  return workload({tenant("a", {step("vector_add", 1 << 22), step("hotspot", 2048)}, 3),
                   tenant("b", {step("kmeans", 1 << 18)}, 4), tenant("c", {step("bfs", 1 << 20), step("srad", 1024)}, 2)});
}

TEST(Baselines, SerialNeverOverlapsAndUsesTheWholeGpu) {
  auto run = run_on_sim(three_tenants(), "serial");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  auto d = run->dispatches;
  std::sort(d.begin(), d.end(), [](auto& x, auto& y) { return x.start < y.start; });
  for (size_t i = 1; i < d.size(); ++i) EXPECT_GE(d[i].start, d[i - 1].end);
  for (const auto& x : d) EXPECT_EQ(x.placement.sms.count(), 132);
}

TEST(Baselines, StreamsDispatchesEveryTenantAtOnce) {
  auto run = run_on_sim(three_tenants(), "streams");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  int at_zero = 0;
  for (const auto& d : run->dispatches) at_zero += d.dispatched == 0 ? 1 : 0;
  EXPECT_EQ(at_zero, 3);
  // No launch waits in the policy: each is dispatched the moment it is ready.
  for (const auto& l : run->launches) {
    const auto it = std::find_if(run->dispatches.begin(), run->dispatches.end(),
                                 [&](const DispatchRecord& d) { return d.launches.front() == l.id; });
    ASSERT_NE(it, run->dispatches.end());
    EXPECT_EQ(it->dispatched, l.ready);
  }
}

TEST(Baselines, StaticPartitionNeverLeavesItsShare) {
  const Workload w = three_tenants();
  auto run = run_on_sim(w, "static-partition");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const auto shares = policy::weighted_tpc_shares(h200_spec(), {1, 1, 1});
  for (const auto& d : run->dispatches) {
    const SmSet& share = shares[static_cast<size_t>(d.tenants.front().value)];
    EXPECT_TRUE(d.placement.sms.is_subset_of(share)) << d.placement.sms.to_string();
  }
}

TEST(Baselines, RoundRobinServesTenantsInTurn) {
  // Each tenant always has a next kernel ready, so turns must cycle a, b, c, a, b, c, ...
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}, 4), tenant("b", {step("vector_add", 1 << 20)}, 4),
                               tenant("c", {step("vector_add", 1 << 20)}, 4)});
  auto run = run_on_sim(w, "round-robin");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->dispatches.size(), 12u);
  for (size_t i = 0; i < run->dispatches.size(); ++i) {
    EXPECT_EQ(run->dispatches[i].tenants.front().value, static_cast<int64_t>(i % 3)) << "dispatch " << i;
  }
  auto d = run->dispatches;
  for (size_t i = 1; i < d.size(); ++i) EXPECT_GE(d[i].start, d[i - 1].end);
}

TEST(Baselines, RoundRobinSkipsTenantsWithNothingReady) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}, 1), tenant("b", {step("vector_add", 1 << 20)}, 3)});
  auto run = run_on_sim(w, "round-robin");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  std::vector<int64_t> order;
  for (const auto& d : run->dispatches) order.push_back(d.tenants.front().value);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 1, 1}));
}

TEST(Baselines, RandomIsSeededAndOneAtATime) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}, 6), tenant("b", {step("bfs", 1 << 18)}, 6),
                               tenant("c", {step("hotspot", 512)}, 6)});
  auto order_for = [&](uint64_t seed) {
    auto run = run_on_sim(w, "random", seed);
    EXPECT_TRUE(run.is_ok());
    std::vector<int64_t> order;
    for (size_t i = 0; i < run->dispatches.size(); ++i) {
      order.push_back(run->dispatches[i].tenants.front().value);
      if (i > 0) {
        EXPECT_GE(run->dispatches[i].start, run->dispatches[i - 1].end);
      }
    }
    return order;
  };
  EXPECT_EQ(order_for(3), order_for(3));
  bool differs = false;
  for (uint64_t s = 4; s < 10 && !differs; ++s) differs = order_for(s) != order_for(3);
  EXPECT_TRUE(differs);
}

TEST(Baselines, StreamsParamAllowsConcurrency) {
  const Workload w = three_tenants();
  auto run = run_on_sim(w, "round-robin", 1, {{"streams", "3"}});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  int at_zero = 0;
  for (const auto& d : run->dispatches) at_zero += d.dispatched == 0 ? 1 : 0;
  EXPECT_EQ(at_zero, 3);
}


// Serial runs one launch at a time in the order they became ready: three tenants ready at once
// go in tenant order.
TEST(Baselines, SerialRunsLaunchesInReadyOrder) {
  const Workload w = workload({tenant("a", {step("vector_add", 1 << 20)}), tenant("b", {step("bfs", 1 << 18)}),
                               tenant("c", {step("hotspot", 512)})});
  auto run = run_on_sim(w, "serial");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  std::vector<int64_t> order;
  for (const auto& d : run->dispatches) order.push_back(d.tenants.front().value);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2}));
}
}  // namespace
}  // namespace concord
