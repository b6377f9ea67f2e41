// The manual policy: hand placements are honoured, fusion pairs two tenants, bad parameters fail.
#include <gtest/gtest.h>

#include "policy/manual/manual_policy.h"
#include "test_support.h"

namespace concord {
namespace {

using testing::run_on_sim;
using testing::step;
using testing::tenant;
using testing::workload;

Workload pair() { return workload({tenant("c", {step("fma_loop", 1 << 22)}, 2), tenant("m", {step("stream_triad", 1 << 26)}, 2)}); }

TEST(ManualPolicy, ParsesSmLists) {
  auto s = policy::parse_sm_list("0-3,10,12-13");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->ids(), (std::vector<int>{0, 1, 2, 3, 10, 12, 13}));
  EXPECT_FALSE(policy::parse_sm_list("5-2").is_ok());
  EXPECT_FALSE(policy::parse_sm_list("x").is_ok());
  EXPECT_FALSE(policy::parse_sm_list("0-300").is_ok());
}

TEST(ManualPolicy, HonoursPerTenantPlacements) {
  auto run = run_on_sim(pair(), "manual", 1,
                        {{"form", "persistent"}, {"sms.0", "0-95"}, {"sms.1", "96-131"}, {"tlp.1", "2"}, {"cache.1", "both"}});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  for (const auto& d : run->dispatches) {
    const bool compute = d.tenants.front().value == 0;
    EXPECT_EQ(d.placement.sms, compute ? SmSet::range(0, 96) : SmSet::range(96, 36));
    EXPECT_EQ(d.placement.tlp, compute ? 0 : 2);
    EXPECT_EQ(d.placement.cache, compute ? CachePolicy::normal : CachePolicy::both);
  }
}

TEST(ManualPolicy, FusesTheNamedTenants) {
  auto run = run_on_sim(pair(), "manual", 1, {{"fuse", "0+1"}, {"ratio", "2:1"}});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->dispatches.size(), 2u);  // two requests each, fused pairwise
  for (const auto& d : run->dispatches) {
    ASSERT_TRUE(d.placement.fusion.has_value());
    EXPECT_EQ(d.placement.fusion->self_parts, 2);
    EXPECT_EQ(d.launches.size(), 2u);
  }
}

TEST(ManualPolicy, RejectsBadParameters) {
  for (const PolicyParams& p : std::vector<PolicyParams>{{{"sms.0", ""}}, {{"tlp.0", "2"}}, {{"form", "odd"}},
                                                        {{"fuse", "0"}}, {{"cache.0", "sideways"}}, {{"colour", "red"}}}) {
    EXPECT_FALSE(builtin_policies().make("manual", p).is_ok()) << p.begin()->first;
  }
  auto run = run_on_sim(pair(), "manual", 1, {{"sms.5", "0-3"}});
  EXPECT_FALSE(run.is_ok());
}

}  // namespace
}  // namespace concord
