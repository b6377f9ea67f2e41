// PBS's arithmetic and search (PBS paper, Section III-B, IV, V): EB from the facet and the
// block rate; EB-WS/FI/HS; the search's decisions on synthetic EB surfaces with known optima.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "policy/pbs/pbs_facet.h"
#include "policy/pbs/pbs_objective.h"
#include "policy/pbs/pbs_search.h"

namespace concord {
namespace {

using policy::PbsObjective;
using policy::PbsSearch;

TEST(PbsEb, EffectiveBandwidthIsDramBandwidthOverCombinedMissRate) {
  const policy::PbsFacet f{1024, 0.5, 0.25};  // 1 KiB requested per block; L1 and L2 miss rates
  const auto e = policy::effective_bandwidth(f, 1000);  // 1000 blocks/s
  EXPECT_DOUBLE_EQ(e.cmr, 0.125);
  EXPECT_DOUBLE_EQ(e.bw, 1024 * 0.125 * 1000);  // only the misses of both levels reach DRAM
  EXPECT_DOUBLE_EQ(e.eb, e.bw / e.cmr);
  EXPECT_DOUBLE_EQ(e.eb, 1024.0 * 1000);        // the bytes the cores received
}

TEST(PbsEb, FacetRoundTripsAndRejectsBadFields) {
  const policy::PbsFacet f{4096, 0.8, 0.3};
  auto back = policy::pbs_facet_from_json(policy::pbs_facet_to_json(f));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_DOUBLE_EQ(back->requested_bytes_per_block, 4096);
  EXPECT_DOUBLE_EQ(back->l1_miss_rate, 0.8);
  EXPECT_DOUBLE_EQ(back->l2_miss_rate, 0.3);
  for (const char* bad : {"[]", "{}", R"({"requested_bytes_per_block": 1, "l1_miss_rate": 0, "l2_miss_rate": 1})",
                          R"({"requested_bytes_per_block": -1, "l1_miss_rate": 1, "l2_miss_rate": 1})",
                          R"({"requested_bytes_per_block": 1, "l1_miss_rate": 1.5, "l2_miss_rate": 1})",
                          R"({"requested_bytes_per_block": 1, "l1_miss_rate": 1})"}) {
    EXPECT_FALSE(policy::pbs_facet_from_json(bad).is_ok()) << bad;
  }
}

TEST(PbsEb, FacetFromNsightComputeMetrics) {
  std::map<std::string, double> m = {{policy::kNcuGlobalLoadBytes, 3e6}, {policy::kNcuGlobalStoreBytes, 1e6},
                                     {policy::kNcuL1HitRate, 75}, {policy::kNcuL2HitRate, 40}};
  auto f = policy::pbs_facet_from_ncu(m, 1000);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_DOUBLE_EQ(f->requested_bytes_per_block, 4000);
  EXPECT_DOUBLE_EQ(f->l1_miss_rate, 0.25);
  EXPECT_DOUBLE_EQ(f->l2_miss_rate, 0.6);
  m[policy::kNcuL1HitRate] = 100;  // every sector hit: kept finite
  EXPECT_GT(policy::pbs_facet_from_ncu(m, 1000)->l1_miss_rate, 0);
  m.erase(policy::kNcuL2HitRate);
  auto missing = policy::pbs_facet_from_ncu(m, 1000);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find(policy::kNcuL2HitRate), std::string::npos);
  EXPECT_FALSE(policy::pbs_facet_from_ncu(m, 0).is_ok());
}

TEST(PbsEb, UnprofiledVariantUsesItsSpecBytes) {
  KernelVariant v;
  v.bytes_per_block = 512;
  auto f = policy::pbs_facet_of(v);
  ASSERT_TRUE(f.is_ok());
  EXPECT_DOUBLE_EQ(f->requested_bytes_per_block, 512);
  EXPECT_DOUBLE_EQ(f->l1_miss_rate * f->l2_miss_rate, 1);
  v.facets[policy::kPbsFacetName] = policy::pbs_facet_to_json({2048, 0.5, 0.5});
  EXPECT_DOUBLE_EQ(policy::pbs_facet_of(v)->requested_bytes_per_block, 2048);
  v.facets[policy::kPbsFacetName] = "{}";
  EXPECT_FALSE(policy::pbs_facet_of(v).is_ok());
}

TEST(PbsEb, MetricsFollowTableThree) {
  const std::vector<double> eb = {2, 6};
  const std::vector<double> alone = {4, 8};
  EXPECT_DOUBLE_EQ(*policy::eb_metric(PbsObjective::ws, eb, {}), 8);
  // Scaled: 0.5 and 0.75.
  EXPECT_DOUBLE_EQ(*policy::eb_metric(PbsObjective::fi, eb, alone), 0.5 / 0.75);
  EXPECT_DOUBLE_EQ(*policy::eb_metric(PbsObjective::hs, eb, alone), 2 / (1 / 0.5 + 1 / 0.75));
  EXPECT_FALSE(policy::eb_metric(PbsObjective::fi, eb, {}).is_ok());
  EXPECT_FALSE(policy::eb_metric(PbsObjective::fi, eb, std::vector<double>{4, 0}).is_ok());
  EXPECT_FALSE(policy::eb_metric(PbsObjective::ws, {}, {}).is_ok());
}

TEST(PbsSearchTest, LevelsDoubleUpToTheMaximum) {
  EXPECT_EQ(policy::tlp_levels(1), (std::vector<int>{1}));
  EXPECT_EQ(policy::tlp_levels(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(policy::tlp_levels(24), (std::vector<int>{1, 2, 4, 8, 16, 24}));
}

using Surface = std::function<std::vector<double>(const std::vector<int>&)>;

// Runs a search to the end on `surface`; the combinations it sampled, in order.
std::vector<std::vector<int>> drive(PbsSearch& s, const Surface& surface) {
  std::vector<std::vector<int>> sampled;
  for (int guard = 0; guard < 1000 && s.next(); ++guard) {
    sampled.push_back(*s.next());
    const Status st = s.observe(surface(*s.next()));
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    if (!st.is_ok()) break;
  }
  EXPECT_TRUE(s.settled());
  return sampled;
}

// Every combination of the levels.
std::vector<std::vector<int>> all_combinations(const std::vector<std::vector<int>>& levels) {
  std::vector<std::vector<int>> out = {{}};
  for (const auto& l : levels) {
    std::vector<std::vector<int>> next;
    for (const auto& prefix : out) {
      for (int v : l) {
        auto c = prefix;
        c.push_back(v);
        next.push_back(c);
      }
    }
    out = next;
  }
  return out;
}

std::vector<int> brute_force(const std::vector<std::vector<int>>& levels, const Surface& surface, PbsObjective o,
                             const std::vector<double>& alone) {
  std::vector<int> best;
  double best_m = -1;
  for (const auto& c : all_combinations(levels)) {
    const double m = *policy::eb_metric(o, surface(c), alone);
    if (m > best_m) {
      best_m = m;
      best = c;
    }
  }
  return best;
}

// The paper's BLK_TRD pattern (Fig. 6): application A's EB peaks at TLP 2 and drops sharply above
// it whatever B does (A is critical); B's contention hurts A a little. The optimum is (2, 8).
std::vector<double> blk_trd(const std::vector<int>& t) {
  const double a_own = t[0] <= 2 ? 1.0 * t[0] : 2.0 / (1 + 0.6 * std::log2(t[0] / 2.0));  // sharp drop above 2
  const double b_own = t[1] <= 8 ? 0.2 * t[1] : 1.6 / (1 + 0.1 * std::log2(t[1] / 8.0));  // gentle drop above 8
  const double contention_on_a = 1.0 - 0.02 * std::log2(t[1]);
  const double contention_on_b = 1.0 - 0.03 * std::log2(t[0]);
  return {a_own * contention_on_a, b_own * contention_on_b};
}

TEST(PbsSearchTest, FindsTheKnownWsOptimumWithFewSamples) {
  const std::vector<std::vector<int>> levels = {{1, 2, 4, 8, 16, 24}, {1, 2, 4, 8, 16, 24}};
  auto s = PbsSearch::make(levels, {PbsObjective::ws, 0.03});
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const auto sampled = drive(*s, blk_trd);
  EXPECT_EQ(s->ranking().front(), 0) << "A's TLP moves EB-WS most: A is critical";
  EXPECT_EQ(s->choice(), (std::vector<int>{2, 8}));
  EXPECT_EQ(s->choice(), brute_force(levels, blk_trd, PbsObjective::ws, {}));
  EXPECT_LT(sampled.size(), all_combinations(levels).size() / 2) << "PBS samples a fraction of the 36 combinations";
  std::set<std::vector<int>> unique(sampled.begin(), sampled.end());
  EXPECT_EQ(unique.size(), sampled.size()) << "no combination is sampled twice";
}

TEST(PbsSearchTest, CriticalTenantFollowsTheDropNotTheOrder) {
  // The same surface with the tenants swapped: the search must pick tenant 1 as critical.
  const Surface swapped = [](const std::vector<int>& t) {
    auto eb = blk_trd({t[1], t[0]});
    return std::vector<double>{eb[1], eb[0]};
  };
  auto s = PbsSearch::make({{1, 2, 4, 8, 16, 24}, {1, 2, 4, 8, 16, 24}}, {PbsObjective::ws, 0.03});
  ASSERT_TRUE(s.is_ok());
  drive(*s, swapped);
  EXPECT_EQ(s->ranking().front(), 1);
  EXPECT_EQ(s->choice(), (std::vector<int>{8, 2}));
}

TEST(PbsSearchTest, FiBalancesScaledEbAndUsesAloneEstimates) {
  // A fast tenant (alone EB 10) and a slow one (alone 2): each one's EB shrinks with the other's
  // TLP. FI balances the scaled EBs.
  const Surface s2 = [](const std::vector<int>& t) {
    const double a = 10.0 * t[0] / (t[0] + 1.0) / (1 + 0.15 * t[1]);
    const double b = 2.0 * t[1] / (t[1] + 1.0) / (1 + 0.15 * t[0]);
    return std::vector<double>{a, b};
  };
  const std::vector<std::vector<int>> levels = {{1, 2, 4, 8}, {1, 2, 4, 8}};
  auto s = PbsSearch::make(levels, {PbsObjective::fi, 0.03});
  ASSERT_TRUE(s.is_ok());
  drive(*s, s2);
  // The alone estimates: each at its highest TLP with the other at 1.
  EXPECT_DOUBLE_EQ(s->alone_eb()[0], s2({8, 1})[0]);
  EXPECT_DOUBLE_EQ(s->alone_eb()[1], s2({1, 8})[1]);
  const auto oracle = brute_force(levels, s2, PbsObjective::fi, s->alone_eb());
  EXPECT_DOUBLE_EQ(*s->metric_at(s->choice()), *policy::eb_metric(PbsObjective::fi, s2(oracle), s->alone_eb()));
  // Unscaled, the slow tenant would look starved everywhere; the scaled choice is fair.
  EXPECT_GT(*s->metric_at(s->choice()), 0.9);
}

TEST(PbsSearchTest, FiOnAnH100TraceSettlesOnTheBestSampledCombination) {
  // The EBs (bytes/s) PBS-FI sampled for kmeans (TLP 1-8) and srad (1-6) on an H100 with the SMs
  // split (bench/results/gpu-h100/pbs-e72f9e7.tar.xz, kmeans-srad/pbs-fi.trace.jsonl, first
  // search). The search asks only for these.
  const std::map<std::vector<int>, std::vector<double>> h100 = {
      {{8, 1}, {1.24e12, 3.41e11}}, {{1, 6}, {6.59e11, 1.51e12}}, {{2, 6}, {9.8e11, 1.46e12}}, {{4, 6}, {1.17e12, 1.4e12}},
      {{8, 6}, {1.17e12, 1.4e12}},  {{8, 2}, {1.24e12, 6.43e11}}, {{8, 4}, {1.24e12, 9.72e11}}};
  const Surface surface = [&](const std::vector<int>& t) {
    auto it = h100.find(t);
    EXPECT_NE(it, h100.end()) << "the search asked for a combination the trace did not sample";
    return it == h100.end() ? std::vector<double>{1, 1} : it->second;
  };
  auto s = PbsSearch::make({{1, 2, 4, 8}, {1, 2, 4, 6}}, {PbsObjective::fi, 0.03});
  ASSERT_TRUE(s.is_ok());
  const auto sampled = drive(*s, surface);
  EXPECT_EQ(sampled.size(), h100.size());
  double best = 0;
  for (const auto& [c, eb] : h100) best = std::max(best, *policy::eb_metric(PbsObjective::fi, eb, s->alone_eb()));
  EXPECT_DOUBLE_EQ(*s->metric_at(s->choice()), best);
  EXPECT_EQ(s->choice(), (std::vector<int>{8, 6}));
}

TEST(PbsSearchTest, FiOnTheMeasuredShapeBalancesWithoutStarvingBoth) {
  // The shape the H100 measured with split SMs: a compute tenant whose EB depends only on its own
  // TLP (saturating by 4) and a memory tenant whose EB grows with its TLP and loses a little to
  // the co-runner's; scaled, the memory tenant is the one behind at the highest TLPs. The
  // highest EB-FI of all (0.996) is at (2, 2), where both run at half their alone EB; the search
  // sweeps each tenant with the others at their highest (Section V-B), so it balances the
  // compute tenant down to its knee (4, 8) instead: FI 0.91 at far more EB.
  const Surface measured = [](const std::vector<int>& t) {
    const double compute = 1e11 * std::min(t[0], 4) / 4.0;
    const double memory = 2.4e12 * (1 - std::exp(-t[1] / 3.0)) / (1 + 0.05 * std::log2(t[0]));
    return std::vector<double>{compute, memory};
  };
  const std::vector<std::vector<int>> levels = {{1, 2, 4, 8}, {1, 2, 4, 8}};
  auto s = PbsSearch::make(levels, {PbsObjective::fi, 0.03});
  ASSERT_TRUE(s.is_ok());
  drive(*s, measured);
  const auto oracle = brute_force(levels, measured, PbsObjective::fi, s->alone_eb());
  EXPECT_EQ(oracle, (std::vector<int>{2, 2}));
  EXPECT_EQ(s->choice(), (std::vector<int>{4, 8}));
  EXPECT_GT(*s->metric_at(s->choice()), 0.9);
  auto scaled_sum = [&](const std::vector<int>& t) {
    return measured(t)[0] / s->alone_eb()[0] + measured(t)[1] / s->alone_eb()[1];
  };
  EXPECT_GT(scaled_sum(s->choice()), 1.5 * scaled_sum(oracle));
}

TEST(PbsSearchTest, HsOnThreeTenantsMatchesBruteForce) {
  // Three tenants: each one's EB rises with its own TLP to a knee and falls with the total TLP.
  const std::vector<int> knee = {2, 8, 4};
  const Surface s3 = [&](const std::vector<int>& t) {
    std::vector<double> eb;
    int total = 0;
    for (int v : t) total += v;
    for (size_t i = 0; i < t.size(); ++i) {
      const double own = std::min(t[i], knee[i]) - 0.1 * std::max(0, t[i] - knee[i]);
      eb.push_back(std::max(0.01, own) / (1 + 0.02 * (total - t[i])));
    }
    return eb;
  };
  const std::vector<std::vector<int>> levels(3, std::vector<int>{1, 2, 4, 8, 16});
  auto s = PbsSearch::make(levels, {PbsObjective::hs, 0.01});
  ASSERT_TRUE(s.is_ok());
  const auto sampled = drive(*s, s3);
  EXPECT_EQ(s->choice(), brute_force(levels, s3, PbsObjective::hs, s->alone_eb()));
  EXPECT_LT(sampled.size(), 40u) << "O(N x k) samples, not the 125 combinations";
}

TEST(PbsSearchTest, DoesNotSettleOnADecoyAtMaximumTlp) {
  // Tenant 0 hogs bandwidth at high TLP: its own EB keeps rising, the other's collapses. The sum
  // is best at (4, 16); the all-maximum corner, which maximizes tenant 0 alone, is a decoy.
  const Surface hog = [](const std::vector<int>& t) {
    const double a = 1.0 * t[0];
    const double b = 30.0 / (1 + 0.02 * t[0] * t[0]) * t[1] / (t[1] + 2.0);
    return std::vector<double>{a, b};
  };
  const std::vector<std::vector<int>> levels = {{1, 2, 4, 8, 16}, {1, 2, 4, 8, 16}};
  auto s = PbsSearch::make(levels, {PbsObjective::ws, 0.0});
  ASSERT_TRUE(s.is_ok());
  drive(*s, hog);
  EXPECT_NE(s->choice(), (std::vector<int>{16, 16}));
  EXPECT_EQ(s->choice(), brute_force(levels, hog, PbsObjective::ws, {}));
}

TEST(PbsSearchTest, KeepsTheHighestTlpOnAFlatSurface) {
  // Neither tenant's TLP moves the metric by more than the tolerance (the shape measured on the
  // H100 with SMs split: memory-bound kernels saturate their share at one or two blocks per SM):
  // no tenant is throttled for what is noise.
  const Surface flat = [](const std::vector<int>& t) {
    return std::vector<double>{1.0 + 0.004 * std::sin(t[0] + 2.0 * t[1]), 0.8 + 0.005 * std::cos(3.0 * t[0] + t[1])};
  };
  for (PbsObjective o : {PbsObjective::ws, PbsObjective::fi, PbsObjective::hs}) {
    auto s = PbsSearch::make({{1, 2, 4, 8}, {1, 2, 4, 8}}, {o, 0.03});
    ASSERT_TRUE(s.is_ok());
    drive(*s, flat);
    EXPECT_EQ(s->choice(), (std::vector<int>{8, 8})) << to_string(o) << ": every tenant keeps its highest TLP";
  }
}

TEST(PbsSearchTest, RejectsBadInput) {
  EXPECT_FALSE(PbsSearch::make({}, {}).is_ok());
  EXPECT_FALSE(PbsSearch::make({{}}, {}).is_ok());
  EXPECT_FALSE(PbsSearch::make({{2, 1}}, {}).is_ok());
  EXPECT_FALSE(PbsSearch::make({{0, 1}}, {}).is_ok());
  EXPECT_FALSE(PbsSearch::make({{1}}, {PbsObjective::ws, 1.5}).is_ok());
  auto s = PbsSearch::make({{1, 2}, {1, 2}}, {});
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(s->observe(std::vector<double>{1}).is_ok());
  EXPECT_FALSE(s->observe(std::vector<double>{1, -1}).is_ok());
}

}  // namespace
}  // namespace concord
