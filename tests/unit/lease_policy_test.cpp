// The lease forms of the policies (include/concord/lease.h), on hand-built views: who yields to
// whom, at which priority, under which caps; and their parameters.
#include <gtest/gtest.h>

#include "concord/lease.h"
#include "mechanism/lc_yield.h"

namespace concord {
namespace {

LeaseTenant tenant(uint64_t id, TenantClass cls, std::optional<double> share = std::nullopt) {
  LeaseTenant t;
  t.id = id;
  t.info.name = "t" + std::to_string(id);
  t.info.cls = cls;
  t.gpu_bound_share = share;
  return t;
}

std::vector<Lease> decide(const std::string& spec, const std::vector<LeaseTenant>& tenants) {
  Result<PolicySpec> s = parse_policy_spec(spec);
  EXPECT_TRUE(s.is_ok());
  Result<std::unique_ptr<LeasePolicy>> p = builtin_lease_policies().make(s->name, s->params);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  const DeviceSpec dev = h100_sxm_spec();
  const std::vector<Lease> leases = (*p)->decide(LeaseView{0, &dev, tenants});
  EXPECT_EQ(leases.size(), tenants.size());
  return leases;
}

constexpr auto LC = TenantClass::latency_critical;
constexpr auto BE = TenantClass::best_effort;

TEST(LeasePolicy, StreamsAndPriorityStreamsNeverHoldAnyoneBack) {
  const std::vector<LeaseTenant> ts = {tenant(1, LC), tenant(2, BE)};
  for (const Lease& l : decide("streams", ts)) {
    EXPECT_EQ(l.gate, LeaseGate::open);
    EXPECT_EQ(l.priority, 0);
    EXPECT_TRUE(l.yield_to.empty());
    EXPECT_FALSE(l.signal_lc);
  }
  const auto p = decide("priority-streams", ts);
  EXPECT_EQ(p[0].priority, 1);
  EXPECT_EQ(p[1].priority, 0);
  EXPECT_TRUE(p[1].yield_to.empty());
}

TEST(LeasePolicy, OrionClosesBeGatesForGpuBoundLcTenantsOnly) {
  // 1: not measured yet (counts as GPU-bound); 2: launch-bound; 3: GPU-bound.
  const std::vector<LeaseTenant> ts = {tenant(1, LC), tenant(2, LC, 0.03), tenant(3, LC, 0.9), tenant(4, BE)};
  const auto l = decide("orion", ts);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(l[i].priority, 1);
    EXPECT_TRUE(l[i].signal_lc);
    EXPECT_TRUE(l[i].yield_to.empty()) << "LC tenants yield to nobody";
  }
  EXPECT_EQ(l[3].priority, 0);
  EXPECT_EQ(l[3].yield_to, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(l[3].on_lc, LcYield::close);
  EXPECT_EQ(l[3].max_in_flight, 0);
  // bound_share=0: every LC tenant holds BE back; be_depth caps BE at all times.
  const auto all = decide("orion:bound_share=0;be_depth=4", ts);
  EXPECT_EQ(all[3].yield_to, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(all[3].max_in_flight, 4);
  // Only launch-bound LC tenants: BE runs freely.
  const auto free = decide("orion", {tenant(2, LC, 0.03), tenant(4, BE)});
  EXPECT_TRUE(free[1].yield_to.empty());
  EXPECT_EQ(free[1].on_lc, LcYield::run);
}

TEST(LeasePolicy, SgdrcCapsBeInFlightBesideGpuBoundLcWork) {
  const auto l = decide("sgdrc:be_in_flight=3", {tenant(1, LC, 0.8), tenant(2, BE), tenant(3, BE)});
  EXPECT_TRUE(l[0].signal_lc);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(l[i].yield_to, std::vector<uint64_t>{1});
    EXPECT_EQ(l[i].on_lc, LcYield::cap);
    EXPECT_EQ(l[i].be_in_flight_cap, 3);
    EXPECT_EQ(l[i].gate, LeaseGate::open);
  }
}

TEST(LeasePolicy, WithRoomOrionAndSgdrcConfineBeInsteadOfHoldingIt) {
  const std::vector<LeaseTenant> ts = {tenant(1, LC, 0.9), tenant(2, BE)};
  const auto o = decide("orion:be_sms=66;be_blocks_per_sm=2", ts);
  EXPECT_EQ(o[1].yield_to, std::vector<uint64_t>{1});
  EXPECT_EQ(o[1].on_lc, LcYield::run) << "the gate stays open";
  EXPECT_EQ(o[1].be_sm_cap, 66);
  EXPECT_EQ(o[1].be_blocks_per_sm_cap, 2);
  EXPECT_EQ(o[0].be_sm_cap, 0) << "an LC lease is never confined";
  const auto held = decide("orion", ts);
  EXPECT_EQ(held[1].on_lc, LcYield::close);
  EXPECT_EQ(held[1].be_sm_cap, 0);
  const auto s = decide("sgdrc:be_in_flight=4;be_blocks_per_sm=1", ts);
  EXPECT_EQ(s[1].on_lc, LcYield::cap);
  EXPECT_EQ(s[1].be_in_flight_cap, 4);
  EXPECT_EQ(s[1].be_blocks_per_sm_cap, 1);
  EXPECT_EQ(s[1].be_sm_cap, 0);
  // Beside a launch-bound LC tenant nothing is confined.
  const auto free = decide("orion:be_sms=66", {tenant(1, LC, 0.05), tenant(2, BE)});
  EXPECT_TRUE(free[1].yield_to.empty());
  for (const char* bad : {"orion:be_sms=-1", "orion:be_sms=2000", "sgdrc:be_blocks_per_sm=65"}) {
    Result<PolicySpec> spec = parse_policy_spec(bad);
    ASSERT_TRUE(spec.is_ok());
    EXPECT_FALSE(builtin_lease_policies().make(spec->name, spec->params).is_ok()) << bad;
  }
}

TEST(LeasePolicy, BudgetsInMicrosecondsBecomeLaunchCountsOnceMeasured) {
  LeaseTenant lc = tenant(1, LC, 0.9), be = tenant(2, BE), slow = tenant(3, BE);
  be.launch_us = 100.0;
  slow.launch_us = 4000.0;
  const auto s = decide("sgdrc:be_in_flight=2;be_in_flight_us=500", {lc, be, slow, tenant(4, BE)});
  EXPECT_EQ(s[1].be_in_flight_cap, 5) << "500 us of 100 us launches";
  EXPECT_EQ(s[2].be_in_flight_cap, 1) << "at least one launch";
  EXPECT_EQ(s[3].be_in_flight_cap, 2) << "not measured yet: the count";
  const auto o = decide("orion:be_depth=8;be_depth_us=1000", {lc, be, tenant(4, BE)});
  EXPECT_EQ(o[1].max_in_flight, 10);
  EXPECT_EQ(o[2].max_in_flight, 8);
  EXPECT_EQ(o[0].max_in_flight, 0) << "an LC lease is never capped";
  EXPECT_EQ(policy::launches_for_us(std::nullopt, 100, 3), 3);
  EXPECT_EQ(policy::launches_for_us(250.0, 0, 3), 3);
  EXPECT_EQ(policy::launches_for_us(250.0, 1000, 3), 4);
}

// concord: time (the gate) beside GPU-bound LC work, room beside launch-bound LC work.
TEST(LeasePolicy, ConcordHoldsBesideGpuBoundLcAndYieldsRoomBesideLaunchBoundLc) {
  // A GPU-bound LC tenant (share 0.9), or one not measured yet: BE waits while its work runs.
  for (std::optional<double> share : {std::optional<double>(0.9), std::optional<double>()}) {
    const auto l = decide("concord", {tenant(1, LC, share), tenant(2, BE)});
    EXPECT_TRUE(l[0].signal_lc);
    EXPECT_EQ(l[0].priority, 1);
    EXPECT_EQ(l[1].yield_to, (std::vector<uint64_t>{1}));
    EXPECT_EQ(l[1].on_lc, LcYield::close);
    EXPECT_EQ(l[1].be_sm_cap, 0);
  }
  // A launch-bound one (share 0.1): BE runs on, on 0.75 of the H100's 132 SMs while its work runs.
  auto l = decide("concord", {tenant(1, LC, 0.1), tenant(2, BE), tenant(3, BE)});
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(l[i].yield_to, (std::vector<uint64_t>{1}));
    EXPECT_EQ(l[i].on_lc, LcYield::run);
    EXPECT_EQ(l[i].be_sm_cap, 99);
    EXPECT_EQ(l[i].be_blocks_per_sm_cap, 0);
  }
  l = decide("concord:room_share=0.5", {tenant(1, LC, 0.1), tenant(2, BE)});
  EXPECT_EQ(l[1].be_sm_cap, 66);
  // Both kinds: the gate, for the GPU-bound one.
  l = decide("concord", {tenant(1, LC, 0.1), tenant(4, LC, 0.95), tenant(2, BE)});
  EXPECT_EQ(l[2].yield_to, (std::vector<uint64_t>{4}));
  EXPECT_EQ(l[2].on_lc, LcYield::close);
  // bound_share 0: every LC tenant counts as GPU-bound. No LC tenant: nothing to yield to.
  l = decide("concord:bound_share=0", {tenant(1, LC, 0.1), tenant(2, BE)});
  EXPECT_EQ(l[1].on_lc, LcYield::close);
  l = decide("concord", {tenant(2, BE), tenant(3, BE)});
  EXPECT_TRUE(l[0].yield_to.empty());
  EXPECT_TRUE(l[1].yield_to.empty());
}

TEST(LeasePolicy, TheInitialLeaseNeedsNoView) {
  Result<std::unique_ptr<LeasePolicy>> p = builtin_lease_policies().make("orion", {});
  ASSERT_TRUE(p.is_ok());
  TenantInfo lc;
  lc.cls = LC;
  EXPECT_TRUE((*p)->initial(lc).signal_lc);
  EXPECT_EQ((*p)->initial(lc).priority, 1);
  EXPECT_TRUE((*p)->initial(TenantInfo{}).yield_to.empty()) << "BE yields once the policy has seen the LC tenants";
}

TEST(LeasePolicy, BadParametersAreNamedAndOnlyFivePoliciesHaveALeaseForm) {
  const auto& r = builtin_lease_policies();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"streams", "priority-streams", "orion", "sgdrc", "concord"}));
  for (const char* name : {"streams", "priority-streams", "orion", "sgdrc", "concord"}) EXPECT_TRUE(builtin_policies().contains(name)) << name;
  for (const char* bad : {"0", "1.5", "-1"}) {
    Result<std::unique_ptr<LeasePolicy>> c = r.make("concord", {{"room_share", bad}});
    ASSERT_FALSE(c.is_ok()) << bad;
    EXPECT_NE(c.status().message().find("room_share"), std::string::npos);
  }
  Result<std::unique_ptr<LeasePolicy>> p = r.make("orion", {{"bound_share", "1.5"}});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("bound_share"), std::string::npos);
  p = r.make("sgdrc", {{"be_in_flight", "0"}});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("be_in_flight"), std::string::npos);
  p = r.make("orion", {{"sm_threshold", "10"}});
  ASSERT_FALSE(p.is_ok()) << "a per-launch parameter has no meaning for the lease form";
  EXPECT_NE(p.status().message().find("sm_threshold"), std::string::npos);
  p = r.make("serial", {});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("with a lease form"), std::string::npos);
}

}  // namespace
}  // namespace concord
