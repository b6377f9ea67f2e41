// `concord profile aker` on the simulator: the facet it stores, the store's check of it, and the
// aker policy reading the measured versions once attached.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "backend/sim/sim_backend.h"
#include "concord/backend.h"
#include "concord/profile.h"
#include "concord/spec_source.h"
#include "concord/suite.h"
#include "concord/workload.h"
#include "concord/placement_rule.h"
#include "concord/backend_factory.h"
#include "policy/aker/aker_facet.h"
#include "policy/aker/aker_policy.h"
#include "policy/aker/aker_profiler.h"
#include "profile/profiler.h"

namespace concord {
namespace {

class AkerProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("aker_profile_" + std::to_string(::getpid()) + "_" +
                                                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    config_.kind = "sim";
    config_.device = h200_spec();
    options_.kernels = {*make_suite_kernel("fma_loop", 1 << 22), *make_suite_kernel("stream_triad", 1 << 28)};
    options_.pairs = {{"fma_loop", "stream_triad"}};
    options_.reps = 1;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string db() const { return (dir_ / "p.db").string(); }
  ProfileKey key(const KernelSpec& k) const {
    return {"H200", "sim", k.name, k.variant(k.default_variant).name, k.size};
  }

  std::filesystem::path dir_;
  BackendConfig config_;
  profile::AkerProfileOptions options_;
  std::ostringstream progress_;
};

// Both segments of a fused version's model hold at least two measured points.
void expect_points_either_side_of_the_knee(const policy::AkerFusedEntry& e) {
  auto m = policy::AkerFusedModel::fit(e.points);
  ASSERT_TRUE(m) << m.status().to_string();
  const double knee = m->opportune_ratio();
  int below = 0, above = 0;
  for (size_t i = 0; i < e.points.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(e.points[i].x, e.points[i - 1].x);  // one point per ratio, ascending
    }
    (e.points[i].x < knee ? below : above) += 1;
  }
  EXPECT_GE(below, 2) << "knee at " << knee;
  EXPECT_GE(above, 2) << "knee at " << knee;
}

// The fused entries stored for `k` over all its variants, with the variant each is stored under.
std::vector<std::pair<std::string, policy::AkerFusedEntry>> fused_entries(ProfileStore& store, const KernelSpec& k) {
  std::vector<std::pair<std::string, policy::AkerFusedEntry>> out;
  for (const KernelVariant& v : k.variants) {
    auto facet = store.get_facet({"H200", "sim", k.name, v.name, k.size}, policy::kAkerFacetName);
    if (!facet || !*facet) continue;
    auto f = policy::aker_facet_from_json(**facet);
    if (!f) continue;
    for (const auto& e : f->fused) out.emplace_back(v.name, e);
  }
  return out;
}

TEST_F(AkerProfile, StoresClassesSoloLinesAndFusedVersions) {
  auto store = ProfileStore::open(db());
  ASSERT_TRUE(store) << store.status().to_string();
  auto report = profile::profile_aker(**store, config_, options_, progress_);
  ASSERT_TRUE(report) << report.status().to_string();
  EXPECT_GE(report->kernels, 2);  // the default variants, and the variants fused versions use
  EXPECT_GE(report->versions, 1) << progress_.str();

  auto fma = (*store)->get_facet(key(options_.kernels[0]), policy::kAkerFacetName);
  ASSERT_TRUE(fma && *fma);
  auto f = policy::aker_facet_from_json(**fma);
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->cls, policy::AkerClass::compute);
  EXPECT_EQ(f->solo.size(), 4u);  // 1/8, 1/4, 1/2 and all of the grid
  const auto entries = fused_entries(**store, options_.kernels[0]);
  ASSERT_FALSE(entries.empty()) << progress_.str();
  const DeviceSpec dev = h200_spec();
  const KernelSpec& triad_spec = options_.kernels[1];
  for (const auto& [self_variant, e] : entries) {
    SCOPED_TRACE(self_variant + " + " + e.partner_variant);
    EXPECT_EQ(e.partner, "stream_triad");
    expect_points_either_side_of_the_knee(e);
    // Stored in the variants best_fusion_shape chose for its ratio: several fused blocks per SM.
    const KernelSpec& fma_spec = options_.kernels[0];
    FusionShapeFilter ratio;
    ratio.parts_a = e.self_parts;
    ratio.parts_b = e.partner_parts;
    const auto shape = best_fusion_shape(dev, fma_spec, triad_spec, ratio);
    ASSERT_TRUE(shape);
    EXPECT_EQ(self_variant, fma_spec.variant(shape->variant_a).name);
    EXPECT_EQ(e.partner_variant, triad_spec.variant(shape->variant_b).name);
    EXPECT_GE(shape->blocks_per_sm, kMinFusedBlocksPerSm);
    // The variant's own solo line is stored beside it.
    auto own = (*store)->get_facet({"H200", "sim", "fma_loop", self_variant, fma_spec.size}, policy::kAkerFacetName);
    ASSERT_TRUE(own && *own);
    EXPECT_EQ(policy::aker_facet_from_json(**own)->solo.size(), 4u);
  }
  auto triad = (*store)->get_facet(key(options_.kernels[1]), policy::kAkerFacetName);
  ASSERT_TRUE(triad && *triad);
  EXPECT_EQ(policy::aker_facet_from_json(**triad)->cls, policy::AkerClass::memory);

  // A second run with other ratios keeps the versions of the first.
  options_.ratios = {{3, 1}};
  ASSERT_TRUE(profile::profile_aker(**store, config_, options_, progress_));
  EXPECT_GT(fused_entries(**store, options_.kernels[0]).size(), entries.size());

  // The store refuses a malformed aker facet and names the field.
  const Status bad = (*store)->put_facet(key(options_.kernels[0]), policy::kAkerFacetName, R"({"class":"fast"})");
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("field 'class'"), std::string::npos) << bad.message();
}

// Another pair, in the default variants when asked (`--variants default`): the sweep places two
// points or more on each side of the knee it finds, and the versions are stored under the
// default variants.
TEST_F(AkerProfile, TheSweepPlacesPointsEitherSideOfTheKneeInTheDefaultVariants) {
  options_.kernels = {*make_suite_kernel("vector_add", 1 << 22), *make_suite_kernel("lbm", 1 << 22)};
  options_.pairs = {{"vector_add", "lbm"}};
  options_.default_variants = true;
  auto store = ProfileStore::open(db());
  ASSERT_TRUE(store);
  auto report = profile::profile_aker(**store, config_, options_, progress_);
  ASSERT_TRUE(report) << report.status().to_string();
  EXPECT_EQ(report->kernels, 2);
  const auto entries = fused_entries(**store, options_.kernels[0]);
  ASSERT_FALSE(entries.empty()) << progress_.str();
  for (const auto& [self_variant, e] : entries) {
    EXPECT_EQ(self_variant, "mid");
    EXPECT_EQ(e.partner_variant, "mid");
    expect_points_either_side_of_the_knee(e);
  }
}

TEST_F(AkerProfile, RefusesPairsOfKernelsNotProfiled) {
  auto store = ProfileStore::open(db());
  ASSERT_TRUE(store);
  options_.pairs = {{"fma_loop", "tc_gemm"}};
  EXPECT_FALSE(profile::profile_aker(**store, config_, options_, progress_));
  options_.pairs = {{"fma_loop", "fma_loop"}};
  EXPECT_FALSE(profile::profile_aker(**store, config_, options_, progress_));
  options_.pairs = {};
  options_.ratios = {{0, 1}};
  EXPECT_FALSE(profile::profile_aker(**store, config_, options_, progress_));
}

TEST_F(AkerProfile, ThePolicyUsesTheAttachedVersions) {
  auto store = ProfileStore::open(db());
  ASSERT_TRUE(store);
  ASSERT_TRUE(profile::profile_aker(**store, config_, options_, progress_));
  TenantSpec lc;
  lc.name = "infer";
  lc.cls = TenantClass::latency_critical;
  lc.steps = {KernelStep{options_.kernels[0], 1}};
  lc.requests = 10;
  lc.arrival.kind = ArrivalProcess::Kind::poisson;
  lc.arrival.rate_per_s = 1000;
  lc.latency_target = 20e-3;
  TenantSpec be;
  be.name = "train";
  be.steps = {KernelStep{options_.kernels[1], 1}};
  be.requests = 40;
  Workload w;
  w.name = "aker";
  w.tenants = {lc, be};
  auto attached = attach_profiles(w, **store);
  ASSERT_TRUE(attached) << attached.status().to_string();
  EXPECT_EQ(*attached, 2);
  const KernelSpec& k = w.tenants[0].steps[0].kernel;
  EXPECT_TRUE(k.variant(k.default_variant).facets.count(policy::kAkerFacetName));
  policy::AkerPolicy aker({});
  sim::SimBackend backend(h200_spec());
  auto run = run_workload(w, backend, aker, EngineOptions{});
  ASSERT_TRUE(run) << run.status().to_string();
  const auto stats = aker.stats();
  EXPECT_GE(stats.at("kernels_measured"), 2);
  EXPECT_GE(stats.at("versions_measured"), 1);
  EXPECT_GT(stats.at("fused_lc_be"), 0);
  EXPECT_TRUE(stats.count("fused_error_median"));
}

}  // namespace
}  // namespace concord
