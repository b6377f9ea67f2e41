#include <gtest/gtest.h>

#include <set>

#include "concord/policy.h"
#include "concord/suggest.h"
#include "policy/static_partition/static_partition_policy.h"

namespace concord {
namespace {

class NamedPolicy final : public Policy {
 public:
  std::string name() const override { return "named"; }
};

TEST(PolicyRegistry, DuplicateNameIsAnError) {
  PolicyRegistry r;
  auto factory = [](const PolicyParams&) -> Result<std::unique_ptr<Policy>> {
    return std::unique_ptr<Policy>(std::make_unique<NamedPolicy>());
  };
  ASSERT_TRUE(r.add("named", "a test policy", factory).is_ok());
  const Status dup = r.add("named", "again", factory);
  EXPECT_EQ(dup.code(), StatusCode::already_exists);
  EXPECT_EQ(r.list().size(), 1u);
  EXPECT_TRUE(r.make("named", {}).is_ok());
  EXPECT_EQ(r.make("other", {}).status().code(), StatusCode::not_found);
}

TEST(PolicyRegistry, BuiltinsAreAllThere) {
  for (const char* n : {"serial", "streams", "static-partition", "round-robin", "random"}) {
    auto p = builtin_policies().make(n, {});
    ASSERT_TRUE(p.is_ok()) << n << ": " << p.status().to_string();
    EXPECT_EQ((*p)->name(), n);
  }
}

// Under concordd a policy that repeats its decisions gets follow-on releases (a launch released
// ahead of its predecessor's end); one that decides launch by launch must not, or the releases
// undo its decisions. Only the policies whose decisions stand until LC work changes them say so.
TEST(PolicyRegistry, OnlyPoliciesWhoseDecisionsStandSayTheyRepeatThem) {
  const std::set<std::string> repeating = {"streams", "priority-streams", "orion", "concord", "static-partition", "manual"};
  size_t checked = 0;
  for (const auto& e : builtin_policies().list()) {
    auto p = builtin_policies().make(e.name, {});
    if (!p.is_ok()) continue;  // needs parameters (manual's placements)
    ++checked;
    EXPECT_EQ((*p)->repeats_decisions(), repeating.count(e.name) == 1) << e.name;
  }
  EXPECT_GE(checked, 20u);
}

TEST(PolicyRegistry, BadParametersAreRejected) {
  EXPECT_EQ(builtin_policies().make("serial", {{"streams", "2"}}).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(builtin_policies().make("round-robin", {{"streams", "0"}}).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(builtin_policies().make("random", {{"streams", "x"}}).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(builtin_policies().make("static-partition", {{"weights", "1,-2"}}).status().code(),
            StatusCode::invalid_argument);
  EXPECT_TRUE(builtin_policies().make("static-partition", {{"weights", "2,1.5"}}).is_ok());
  EXPECT_TRUE(builtin_policies().make("static-partition", {{"weights", "2/1.5/1"}}).is_ok());
  EXPECT_FALSE(builtin_policies().make("static-partition", {{"weights", "2/x"}}).is_ok());
}

TEST(StaticPartition, WeightedSharesAreDisjointAndCoverTheGpu) {
  const DeviceSpec d = h200_spec();
  for (const std::vector<double>& w : {std::vector<double>{1, 1}, {2, 1}, {1, 1, 1}, {5, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1}}) {
    auto shares = policy::weighted_tpc_shares(d, w);
    ASSERT_EQ(shares.size(), w.size());
    SmSet all;
    int total = 0;
    for (const SmSet& s : shares) {
      EXPECT_FALSE(s.empty());
      EXPECT_FALSE(all.intersects(s));
      EXPECT_EQ(d.round_up_to_tpcs(s), s) << "shares are TPC-granular";
      all = all | s;
      total += s.count();
    }
    EXPECT_EQ(total, d.sm_count);
  }
  auto two_to_one = policy::weighted_tpc_shares(d, {2, 1});
  EXPECT_EQ(two_to_one[0].count(), 88);
  EXPECT_EQ(two_to_one[1].count(), 44);
}


// Largest remainder, worked by hand on the H200's 66 TPCs: weights 1, 1, 5 ask 9.43, 9.43 and
// 47.14 TPCs; the floors give 65 and the one left over goes to the largest fraction (0.43, the
// first share): 10, 9 and 47 TPCs.
TEST(StaticPartition, LeftoverTpcsGoToTheLargestRemainders) {
  const auto shares = policy::weighted_tpc_shares(h200_spec(), {1, 1, 5});
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_EQ(shares[0].count(), 20);
  EXPECT_EQ(shares[1].count(), 18);
  EXPECT_EQ(shares[2].count(), 94);
}

// A tiny weight still gets a TPC while another share can spare one: weights 1 and 1000 ask 0.07
// and 65.93 TPCs, which round to 0 and 66; the first then takes one from the second.
TEST(StaticPartition, NoShareIsEmptyWhileAnotherCanSpareATpc) {
  const auto shares = policy::weighted_tpc_shares(h200_spec(), {1, 1000});
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].count(), 2);
  EXPECT_EQ(shares[1].count(), 130);
  EXPECT_FALSE(shares[0].intersects(shares[1]));
}
}  // namespace
}  // namespace concord

namespace concord {
namespace {

TEST(Suggest, TheClosestNameIsOfferedForATypo) {
  const std::vector<std::string> names = {"orion", "sgdrc", "streams", "priority-streams", "serial"};
  EXPECT_EQ(closest_name("orin", names), "orion");
  EXPECT_EQ(closest_name("Streams", names), "streams");
  EXPECT_EQ(closest_name("prio-streams", names), "priority-streams") << "within a third of its length";
  EXPECT_EQ(closest_name("fedcm", names), "") << "nothing close";
  EXPECT_EQ(did_you_mean("sgdr", names), " (did you mean 'sgdrc'?)");
  EXPECT_EQ(did_you_mean("zzzz", names), "");
}

TEST(Suggest, PoliciesAndTheirParametersSuggestAndListWhatIsKnown) {
  Result<std::unique_ptr<Policy>> p = builtin_policies().make("orin", {});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("did you mean 'orion'?"), std::string::npos) << p.status().message();
  p = builtin_policies().make("orion", {{"dur_fractoin", "0.1"}});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("did you mean 'dur_fraction'?"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("its parameters: sm_threshold, dur_fraction, ahead"), std::string::npos) << p.status().message();
  p = builtin_policies().make("serial", {{"x", "1"}});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("it takes none"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace concord
