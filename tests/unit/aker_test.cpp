// Aker's pure pieces: kernel classes (5.1), the duration models and their refits (6.3, 7), the
// facet's JSON, the QoS headroom (8.3) and the opportune split.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "policy/aker/aker_class.h"
#include "policy/aker/aker_facet.h"
#include "policy/aker/aker_model.h"
#include "policy/aker/aker_rule.h"

namespace concord::policy {
namespace {

TEST(AkerClass, FollowsTheFiftyPercentRules) {
  EXPECT_EQ(aker_class({true, 0.9, 0.9}), AkerClass::tensor);
  EXPECT_EQ(aker_class({false, 0.2, 0.86}), AkerClass::memory);   // memory-prefer
  EXPECT_EQ(aker_class({false, 0.8, 0.6}), AkerClass::memory);    // busy cores too: still memory
  EXPECT_EQ(aker_class({false, 0.805, 0.03}), AkerClass::compute);
  EXPECT_EQ(aker_class({false, 0.4, 0.4}), AkerClass::neutral);
  EXPECT_EQ(aker_class({false, 0.5, 0.5}), AkerClass::neutral);   // "exceeding 50%"
  EXPECT_EQ(aker_class({false, 0.51, 0.5}), AkerClass::compute);
}

TEST(AkerClass, PairOrder) {
  using C = AkerClass;
  EXPECT_EQ(aker_pair_rank(C::tensor, C::compute), 0);
  EXPECT_EQ(aker_pair_rank(C::neutral, C::tensor), 0);
  EXPECT_EQ(aker_pair_rank(C::compute, C::memory), 1);
  EXPECT_EQ(aker_pair_rank(C::memory, C::compute), 1);
  EXPECT_EQ(aker_pair_rank(C::compute, C::neutral), 2);
  EXPECT_EQ(aker_pair_rank(C::neutral, C::memory), 2);
  EXPECT_FALSE(aker_pair_rank(C::tensor, C::tensor));
  EXPECT_FALSE(aker_pair_rank(C::memory, C::memory));
  EXPECT_FALSE(aker_pair_rank(C::compute, C::compute));
  EXPECT_FALSE(aker_pair_rank(C::neutral, C::neutral));
  for (C c : {C::tensor, C::compute, C::memory, C::neutral}) EXPECT_EQ(aker_class_from_string(to_string(c)), c);
  EXPECT_FALSE(aker_class_from_string("TC"));
}

TEST(AkerModel, LineFitIsLeastSquares) {
  const std::vector<AkerPoint> pts{{1, 3}, {2, 5}, {3, 7.5}, {4, 8.5}};
  auto l = aker_fit_line(pts);
  ASSERT_TRUE(l);
  EXPECT_NEAR(l->slope, 1.9, 1e-12);
  EXPECT_NEAR(l->intercept, 1.25, 1e-12);
  EXPECT_FALSE(aker_fit_line(std::vector<AkerPoint>{{1, 1}}));
  EXPECT_FALSE(aker_fit_line(std::vector<AkerPoint>{{2, 1}, {2, 3}}));
}

TEST(AkerModel, SoloModelRefitsOnlyPastTenPercent) {
  auto m = AkerSoloModel::fit({{128, 1.1e-3}, {256, 2.1e-3}, {512, 4.1e-3}, {1024, 8.1e-3}});
  ASSERT_TRUE(m) << m.status().to_string();
  EXPECT_NEAR(m->seconds(2048), 16.1e-3, 1e-9);
  EXPECT_NEAR(m->blocks_within(4.1e-3), 512, 1e-6);
  // 5% off: kept.
  EXPECT_NEAR(m->observe(1024, 8.1e-3 * 1.05), 0.05 / 1.05, 1e-9);
  EXPECT_EQ(m->refits(), 0);
  EXPECT_NEAR(m->seconds(1024), 8.1e-3, 1e-12);
  // The kernel became 1.5x slower: the first miss refits, and repeated observations pull the line
  // until the prediction is within 10%.
  int observations = 0;
  while (aker_relative_error(m->seconds(1024), 8.1e-3 * 1.5) > kAkerRefitError) {
    m->observe(1024, 8.1e-3 * 1.5);
    ASSERT_LT(++observations, 20) << "the refits never brought the error within 10%";
  }
  EXPECT_GE(m->refits(), 1);
  EXPECT_GT(m->seconds(1024), 8.1e-3 * 1.35);
  EXPECT_FALSE(AkerSoloModel::fit({{128, 1e-3}}));
  EXPECT_FALSE(AkerSoloModel::fit({{0, 1e-3}, {128, 2e-3}}));
}

TEST(AkerModel, ProportionalModelFromAWholeGridEstimate) {
  const AkerSoloModel m = AkerSoloModel::proportional(1000, 2e-3);
  EXPECT_NEAR(m.seconds(500), 1e-3, 1e-15);
  EXPECT_NEAR(m.blocks_within(0.5e-3), 250, 1e-9);
}

// A fused version measured at the paper's four ratios: co-run segment y = 1 + 0.2 R, solo-run
// segment y = 1.2 R + 0.25 (its solo stage slower than the kernel alone, Section 7); they meet at
// R* = 0.75 (y = 1.15).
std::vector<AkerPoint> paper_points() {
  std::vector<AkerPoint> p;
  for (double r : kAkerProfileRatios) p.push_back({r, r < 1 ? 1 + 0.2 * r : 1.2 * r + 0.25});
  return p;
}

TEST(AkerModel, TwoSegmentFitFindsTheOpportuneRatio) {
  auto m = AkerFusedModel::fit(paper_points());
  ASSERT_TRUE(m) << m.status().to_string();
  EXPECT_NEAR(m->opportune_ratio(), 0.75, 1e-9);
  EXPECT_NEAR(m->normalized(0.5), 1.1, 1e-9);
  EXPECT_NEAR(m->normalized(1.5), 2.05, 1e-9);
  EXPECT_NEAR(m->makespan_reduction(), 1 + 0.75 - 1.15, 1e-9);
}

// A sweep (as `concord profile aker` measures): many points, most of them before a knee at 1.5.
// The split into halves would put co-run points on the solo-run line; the segmented fit finds
// the knee and both lines exactly.
TEST(AkerModel, TwoSegmentFitOfASweepSplitsAtTheKnee) {
  std::vector<AkerPoint> sweep;
  for (double r : {0.3, 0.05, 0.5, 0.8, 1.0, 1.2, 1.4, 2.0, 2.6, 0.1}) sweep.push_back({r, r < 1.5 ? 1 + 0.1 * r : r - 0.35});
  auto m = AkerFusedModel::fit(sweep);
  ASSERT_TRUE(m) << m.status().to_string();
  EXPECT_NEAR(m->opportune_ratio(), 1.5, 1e-9);
  EXPECT_NEAR(m->left().slope, 0.1, 1e-9);
  EXPECT_NEAR(m->right().slope, 1.0, 1e-9);
  // Noise on the points moves the knee little.
  for (size_t i = 0; i < sweep.size(); ++i) sweep[i].y *= 1 + (i % 2 ? 0.01 : -0.01);
  auto noisy = AkerFusedModel::fit(sweep);
  ASSERT_TRUE(noisy);
  EXPECT_NEAR(noisy->opportune_ratio(), 1.5, 0.15);
  // A flat sweep has no split with a steeper right segment.
  std::vector<AkerPoint> flat;
  for (double r : {0.1, 0.4, 0.8, 1.2, 1.6, 2.0}) flat.push_back({r, 2 - 0.1 * r});
  auto none = AkerFusedModel::fit(flat);
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("no inflection"), std::string::npos) << none.status().message();
}

TEST(AkerModel, TwoSegmentFitRefusesShapesWithoutAnInflection) {
  EXPECT_FALSE(AkerFusedModel::fit({{0.1, 1}, {0.2, 1.1}, {1.8, 2}}));  // three points
  auto flat = AkerFusedModel::fit({{0.1, 1}, {0.2, 1.2}, {1.8, 1.3}, {1.9, 1.31}});
  ASSERT_FALSE(flat);
  EXPECT_NE(flat.status().message().find("no inflection"), std::string::npos) << flat.status().message();
}

TEST(AkerModel, TwoSegmentRefitMovesTowardObservations) {
  auto m = AkerFusedModel::fit(paper_points());
  ASSERT_TRUE(m);
  // Within 10%: no refit.
  m->observe(0.75, 1.15 * 1.08);
  EXPECT_EQ(m->refits(), 0);
  // At the opportune ratio the pair runs 30% slower than modelled: both segments refit, and
  // repeated observations bring the prediction within 10%.
  int n = 0;
  while (aker_relative_error(m->normalized(0.75), 1.15 * 1.3) > kAkerRefitError) {
    m->observe(0.75, 1.15 * 1.3);
    ASSERT_LT(++n, 20);
  }
  EXPECT_GE(m->refits(), 2);
  // Far on the co-run side only the left segment moves.
  auto k = AkerFusedModel::fit(paper_points());
  const AkerLine right = k->right();
  k->observe(0.15, 2.0);
  EXPECT_EQ(k->right().slope, right.slope);
  EXPECT_EQ(k->right().intercept, right.intercept);
  EXPECT_GT(k->normalized(0.15), 1 + 0.2 * 0.15);
}

TEST(AkerModel, EstimatedVersionAndContention) {
  const AkerFusedModel overlap = AkerFusedModel::estimated(0);
  EXPECT_NEAR(overlap.opportune_ratio(), 1, 1e-12);
  EXPECT_NEAR(overlap.normalized(1), 1, 1e-12);
  EXPECT_NEAR(overlap.makespan_reduction(), 1, 1e-12);
  const AkerFusedModel serial = AkerFusedModel::estimated(1);
  EXPECT_NEAR(serial.normalized(1), 2, 1e-12);
  EXPECT_NEAR(serial.makespan_reduction(), 0, 1e-12);
  // A TC kernel and a memory-bound CD kernel share only DRAM.
  EXPECT_NEAR(aker_contention({true, 0.9, 0.2}, {false, 0.3, 0.9}), 0.1, 1e-12);
  // Two CD kernels share the cores as well.
  EXPECT_NEAR(aker_contention({false, 0.8, 0.1}, {false, 0.7, 0.2}), 0.5, 1e-12);
  EXPECT_EQ(aker_contention({false, 0.2, 0.1}, {false, 0.3, 0.2}), 0);
}

TEST(AkerModel, BestVersionHasTheLargestReduction) {
  auto a = AkerFusedModel::fit(paper_points());  // reduction 0.6
  std::vector<AkerPoint> better;
  for (double r : kAkerProfileRatios) better.push_back({r, r < 1 ? 1 + 0.1 * r : r + 0.2});  // meets at 0.889
  auto b = AkerFusedModel::fit(better);
  ASSERT_TRUE(a && b);
  const std::vector<AkerFusedModel> versions{*a, *b};
  EXPECT_EQ(aker_best_version(versions), 1u);
  EXPECT_FALSE(aker_best_version(std::span<const AkerFusedModel>{}));
}

TEST(AkerHeadroom, SubtractsQueueingRemainingWorkAndOlderQueries) {
  // One query: 10 ms target, arrived 2 ms ago, 3 ms of its kernels left, 1 ms running now.
  const std::vector<AkerQuery> one{{0.010, 0.010, 0.003}};
  EXPECT_NEAR(aker_headroom(one, 0.012, 0.001), 0.010 - 0.002 - 0.001 - 0.003, 1e-15);
  // An older query with 2 ms left comes first: the newer one loses that too, and the older one's
  // own headroom (target 5 ms, 4 ms gone) is the smaller.
  const std::vector<AkerQuery> two{{0.008, 0.005, 0.002}, {0.010, 0.010, 0.003}};
  EXPECT_NEAR(aker_headroom(two, 0.012, 0), 0.005 - 0.004 - 0.002, 1e-15);
  // A late query: negative headroom.
  EXPECT_LT(aker_headroom(std::vector<AkerQuery>{{0, 0.001, 0.002}}, 0.0005, 0), 0);
  EXPECT_TRUE(std::isinf(aker_headroom({}, 1, 0)));
}

TEST(AkerPlan, SplitsAtTheOpportuneRatio) {
  auto version = AkerFusedModel::fit(paper_points());  // R* = 0.75, y* = 1.15
  const AkerSoloModel be = AkerSoloModel::proportional(10000, 10e-3);  // 1 us a block
  auto plan = aker_plan_opportune(2e-3, be, 10000, *version);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->partner_blocks, 1500);  // 0.75 x 2 ms of 1 us blocks
  EXPECT_NEAR(plan->ratio, 0.75, 1e-9);
  EXPECT_NEAR(plan->fused, 2.3e-3, 1e-12);
  EXPECT_NEAR(plan->extra(), 0.3e-3, 1e-12);
  EXPECT_NEAR(plan->gain(), 1.5e-3 - 0.3e-3, 1e-12);
  EXPECT_TRUE(aker_fits(*plan, 0.31e-3));
  EXPECT_FALSE(aker_fits(*plan, 0.3e-3));  // Eq. 4 is strict
  // A short BE kernel: all of it, at a lower ratio.
  auto small = aker_plan_opportune(2e-3, be, 500, *version);
  EXPECT_EQ(small->partner_blocks, 500);
  EXPECT_NEAR(small->ratio, 0.25, 1e-9);
  // Tacker's whole kernel: well past the inflection, so the gain is gone.
  auto whole = aker_plan_whole(2e-3, be, 10000, *version);
  EXPECT_NEAR(whole->ratio, 5, 1e-9);
  EXPECT_NEAR(whole->fused, 2e-3 * 6.25, 1e-12);
  EXPECT_LT(whole->gain(), plan->gain());
  EXPECT_FALSE(aker_plan_opportune(0, be, 10, *version));
}

TEST(AkerFacet, RoundTripsAndNamesBadFields) {
  AkerFacet f;
  f.cls = AkerClass::tensor;
  f.utilisation = {true, 0.7, 0.2};
  f.solo = {{128, 1e-3}, {1024, 7e-3}};
  f.fused.push_back({"stream_triad", "default", 1 << 20, 2, 1, 3e-3, paper_points()});
  auto back = aker_facet_from_json(aker_facet_to_json(f));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->cls, AkerClass::tensor);
  EXPECT_EQ(back->solo.size(), 2u);
  ASSERT_EQ(back->fused.size(), 1u);
  EXPECT_EQ(back->fused[0].self_parts, 2);
  EXPECT_EQ(back->fused[0].points.size(), 4u);
  EXPECT_DOUBLE_EQ(back->fused[0].points[2].y, paper_points()[2].y);

  auto error_of = [](const std::string& json) {
    auto r = aker_facet_from_json(json);
    return r ? std::string() : r.status().message();
  };
  const std::string good = aker_facet_to_json(f);
  EXPECT_NE(error_of("[1]").find("not a JSON object"), std::string::npos);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE(error_of(with("\"class\":\"tensor\"", "\"class\":\"TC\"")).find("field 'class'"), std::string::npos);
  EXPECT_NE(error_of(with("\"class\":\"tensor\"", "\"class\":\"memory\"")).find("does not agree"), std::string::npos);
  EXPECT_NE(error_of(with("\"memory_utilization\":0.2", "\"memory_utilization\":-1")).find("field 'memory_utilization'"),
            std::string::npos);
  EXPECT_NE(error_of(with("\"self_parts\":2", "\"self_parts\":0")).find("field 'fused[0].self_parts'"), std::string::npos);
  EXPECT_NE(error_of(with("\"self_seconds\":0.003", "\"self_seconds\":0")).find("field 'fused[0].self_seconds'"),
            std::string::npos);
  EXPECT_NE(error_of(with("[[128.0,0.001]", "[[128.0,-0.001]")).find("field 'solo[0]'"), std::string::npos);
  EXPECT_NE(error_of(with("\"partner\":\"stream_triad\"", "\"partner\":3")).find("field 'fused[0].partner'"),
            std::string::npos);
}

}  // namespace
}  // namespace concord::policy
