// PBS's facet from Nsight Compute (concord profile raise|ncu): a job's four metrics become the
// "pbs" facet of its kernel variant, attached to workloads; a pass without them leaves the
// variant without a facet and says so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "concord/profile.h"
#include "concord/suite.h"
#include "concord/workload.h"
#include "policy/ncu_facets.h"
#include "policy/pbs/pbs_facet.h"
#include "policy/pbs/pbs_profiler.h"
#include "profile/ncu.h"

namespace concord {
namespace {

using profile::NcuLaunch;

NcuLaunch launch(double ld, double st, double l1_hit, double l2_hit, double ns) {
  return {0, "k", {{policy::kNcuGlobalLoadBytes, ld}, {policy::kNcuGlobalStoreBytes, st}, {policy::kNcuL1HitRate, l1_hit},
                   {policy::kNcuL2HitRate, l2_hit}, {profile::kNcuDurationMetric, ns}}};
}

TEST(PbsNcu, TheMetricListAsksForThePbsMetrics) {
  const auto names = profile::ncu_metric_names(policy::ncu_facets());
  for (const char* m : {policy::kNcuGlobalLoadBytes, policy::kNcuGlobalStoreBytes, policy::kNcuL1HitRate, policy::kNcuL2HitRate}) {
    EXPECT_NE(std::find(names.begin(), names.end(), m), names.end()) << m;
  }
}

TEST(PbsNcu, JobFacetSumsBytesAndWeighsHitRatesByDuration) {
  // Two launches: 3000 + 1000 bytes over 100 blocks; L1 hit 20% for 1 us and 60% for 3 us -> 50%.
  auto f = policy::pbs_facet_of_job({{launch(2000, 1000, 20, 10, 1000), launch(1000, 0, 60, 50, 3000)}}, 100, "job");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_DOUBLE_EQ(f->requested_bytes_per_block, 40);
  EXPECT_NEAR(f->l1_miss_rate, 0.5, 1e-12);
  EXPECT_NEAR(f->l2_miss_rate, 0.6, 1e-12);
  // Two passes: the mean of each field.
  auto two = policy::pbs_facet_of_job({{launch(4000, 0, 20, 20, 1)}, {launch(2000, 0, 40, 20, 1)}}, 100, "job");
  ASSERT_TRUE(two.is_ok());
  EXPECT_DOUBLE_EQ(two->requested_bytes_per_block, 30);
  EXPECT_NEAR(two->l1_miss_rate, 0.7, 1e-12);
  NcuLaunch no_l2 = launch(1, 1, 1, 1, 1);
  no_l2.metrics.erase(policy::kNcuL2HitRate);
  auto missing = policy::pbs_facet_of_job({{no_l2}}, 1, "job 3");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find(policy::kNcuL2HitRate), std::string::npos);
  EXPECT_NE(missing.status().message().find("job 3"), std::string::npos);
}

TEST(PbsNcu, StoresTheFacetAndAttachesItOrNamesWhatIsMissing) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("pbs_store_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = ProfileStore::open((dir / "p.db").string());
  ASSERT_TRUE(store.is_ok());
  auto kmeans = make_suite_kernel("kmeans", 1 << 16);
  ASSERT_TRUE(kmeans.is_ok());
  const auto jobs = suite_jobs({*kmeans});
  ASSERT_GE(jobs.size(), 2u);
  profile::NcuPass pass;
  for (size_t i = 0; i < jobs.size(); ++i) pass.push_back({launch(1e6, 1e5, 25, 50, 1000)});
  pass.back().front().metrics.erase(policy::kNcuL1HitRate);  // the last variant's pass lacks a metric
  auto stored = profile::store_ncu_facet(**store, policy::pbs_ncu_facets().front(), "NVIDIA H100", "580", jobs, {pass}, "t.csv");
  ASSERT_TRUE(stored.is_ok()) << stored.status().to_string();
  EXPECT_EQ(stored->written, static_cast<int>(jobs.size()) - 1);
  ASSERT_EQ(stored->missing.size(), 1u);
  EXPECT_NE(stored->missing.front().find(policy::kNcuL1HitRate), std::string::npos);
  auto w = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: kmeans, size: 65536}]}\n", "w.yaml");
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE(attach_profiles(*w, **store).is_ok());
  const KernelSpec& k = w->tenants[0].steps[0].kernel;
  for (const KernelVariant& v : k.variants) {
    const bool last = v.name == jobs.back().variant;
    EXPECT_EQ(policy::has_pbs_facet(v), !last) << v.name;
    if (last) continue;
    auto f = policy::pbs_facet_of(v);
    ASSERT_TRUE(f.is_ok());
    EXPECT_NEAR(f->l1_miss_rate, 0.75, 1e-12);
    EXPECT_NEAR(f->l2_miss_rate, 0.5, 1e-12);
    EXPECT_DOUBLE_EQ(f->requested_bytes_per_block, 1.1e6 / static_cast<double>(v.logical_blocks));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace concord
