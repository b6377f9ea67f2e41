// RAISE's vector, classes and scores; reading ncu CSV into vectors; storing them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "concord/profile.h"
#include "policy/raise/raise_metrics.h"
#include "policy/raise/raise_tasks.h"
#include "concord/suite.h"
#include "concord/workload.h"
#include "profile/ncu.h"
#include "policy/ncu_facets.h"
#include "policy/raise/raise_facet.h"
#include "policy/raise/raise_profiler.h"

namespace concord {
namespace {

using profile::NcuLaunch;

// What `concord profile raise` asks ncu for: every folder's facet metrics and the duration.
std::vector<std::string> ncu_metric_names() { return profile::ncu_metric_names(policy::ncu_facets()); }

profile::NcuFacet raise_facet() { return policy::raise_ncu_facets().front(); }

TEST(RaiseVector, ScalesNcuReadingsToZeroToTen) {
  EXPECT_DOUBLE_EQ(raise_scale(RaiseMetric::ipc, 2.0), 5.0);   // 2 of 4 instructions per cycle
  EXPECT_DOUBLE_EQ(raise_scale(RaiseMetric::du, 55.0), 5.5);   // 55% of peak DRAM throughput
  EXPECT_DOUBLE_EQ(raise_scale(RaiseMetric::aoc, 130.0), 10.0);  // clamped
  EXPECT_DOUBLE_EQ(raise_scale(RaiseMetric::spu, -1.0), 0.0);
  EXPECT_STREQ(raise_metric_info()[static_cast<size_t>(RaiseMetric::tu)].abbr, "TU");
}

TEST(RaiseVector, ClassesByIpcAndDu) {
  RaiseVector m{};
  at(m, RaiseMetric::ipc) = 6;
  at(m, RaiseMetric::du) = 2;
  EXPECT_EQ(raise_class(m), RaiseClass::com);
  at(m, RaiseMetric::du) = 8;
  EXPECT_EQ(raise_class(m), RaiseClass::mem);
  at(m, RaiseMetric::ipc) = 1;
  at(m, RaiseMetric::du) = 2.9;
  EXPECT_EQ(raise_class(m), RaiseClass::lat);
  EXPECT_EQ(raise_class(m, 2.5), RaiseClass::mem);  // a lower threshold admits it as MEM
  EXPECT_EQ(raise_class_from_string("MEM"), RaiseClass::mem);
  EXPECT_FALSE(raise_class_from_string("mem").has_value());
}

TEST(RaiseVector, TypeScoresFollowEquationsOneToThree) {
  // AOC SME IPC ISU SPU DU LSU TU
  const RaiseVector m{2, 4, 8, 6, 4, 1, 3, 0};
  // Eq. 1: 0.5 * IPC + 0.5 * mean of the other seven = 4 + 0.5 * 20/7.
  EXPECT_NEAR(raise_score(m, RaiseClass::com), 4 + 0.5 * 20.0 / 7, 1e-12);
  // Eq. 2: 0.5 * DU + 0.5 * mean of the other seven = 0.5 + 0.5 * 27/7.
  EXPECT_NEAR(raise_score(m, RaiseClass::mem), 0.5 + 0.5 * 27.0 / 7, 1e-12);
  // Eq. 3: the mean of all eight.
  EXPECT_NEAR(raise_score(m, RaiseClass::lat), 28.0 / 8, 1e-12);
  RaiseVector idle;
  idle.fill(10);
  for (RaiseClass c : {RaiseClass::com, RaiseClass::mem, RaiseClass::lat}) EXPECT_DOUBLE_EQ(raise_score(idle, c), 10);
}

// A raw-page CSV as `ncu --csv --page raw --print-units base` writes it: header, units row, one
// row per launch; the metric columns in any order; noise lines around it.
std::string raw_csv(const std::vector<std::tuple<int, std::string, double, double>>& rows) {
  std::string header = "\"ID\",\"Process ID\",\"Kernel Name\"";
  std::string units = "\"\",\"\",\"\"";
  for (const auto& m : ncu_metric_names()) {
    header += ",\"" + m + "\"";
    units += ",\"unit\"";
  }
  std::string out = "==PROF== Connected to process 12 (/x/concord)\n" + header + "\n" + units + "\n";
  for (const auto& [id, name, pct, ns] : rows) {
    out += "\"" + std::to_string(id) + "\",\"12\",\"" + name + "\"";
    for (const auto& m : ncu_metric_names()) {
      const double v = m == profile::kNcuDurationMetric ? ns : (m.find("per_cycle") != std::string::npos ? pct / 25 : pct);
      out += ",\"" + std::to_string(v) + "\"";
    }
    out += "\n";
  }
  return out + "==PROF== Disconnected from process 12\n";
}

TEST(NcuCsv, ParsesTheRawPageAndSplitsAtMarkers) {
  const std::string csv = raw_csv({{0, "concord_ncu_skip(int)", 1, 1000},
                                   {1, "fill_random(float*)", 50, 9000},
                                   {2, "concord_ncu_marker(int)", 1, 1000},
                                   {3, "void standalone_kernel<A>(A, long)", 80, 3000},
                                   {4, "concord_ncu_marker(int)", 1, 1000},
                                   {5, "gemm_part1", 20, 1000},
                                   {6, "gemm_part2", 60, 3000}});
  auto launches = profile::parse_ncu_csv(csv, ncu_metric_names(), "x.csv");
  ASSERT_TRUE(launches.is_ok()) << launches.status().to_string();
  ASSERT_EQ(launches->size(), 7u);
  EXPECT_DOUBLE_EQ((*launches)[3].metrics.at("dram__throughput.avg.pct_of_peak_sustained_elapsed"), 80);
  auto jobs = profile::split_at_markers(*launches, 2, "x.csv");
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ((*jobs)[0].size(), 1u);  // the set-up launch after the skip marker is dropped
  ASSERT_EQ((*jobs)[1].size(), 2u);
  auto v = policy::raise_vector((*jobs)[1], "job 1");
  ASSERT_TRUE(v.is_ok());
  // Time-weighted: (20 * 1000 + 60 * 3000) / 4000 = 50% -> 5; IPC 0.8 and 2.4 per cycle -> 2 of 4 -> 5.
  EXPECT_NEAR(at(*v, RaiseMetric::du), 5.0, 1e-9);
  EXPECT_NEAR(at(*v, RaiseMetric::ipc), 5.0, 1e-9);
  EXPECT_FALSE(profile::split_at_markers(*launches, 3, "x.csv").is_ok());
}

TEST(NcuCsv, ParsesTheLongLayoutWithThousandsSeparators) {
  std::string csv = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
  for (const auto& m : ncu_metric_names()) {
    csv += "\"0\",\"k\",\"" + m + "\",\"x\",\"" + (m == profile::kNcuDurationMetric ? "1,234,567" : "12.5") + "\"\n";
  }
  auto launches = profile::parse_ncu_csv(csv, ncu_metric_names(), "long.csv");
  ASSERT_TRUE(launches.is_ok()) << launches.status().to_string();
  ASSERT_EQ(launches->size(), 1u);
  EXPECT_DOUBLE_EQ((*launches)[0].metrics.at(profile::kNcuDurationMetric), 1234567);
}

TEST(NcuCsv, BadInputNamesTheFileAndLine) {
  auto bad = profile::parse_ncu_csv("\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
                                    "\"0\",\"k\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"n/a\"\n",
                                    ncu_metric_names(), "bad.csv");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad.csv:2"), std::string::npos) << bad.status().to_string();
  EXPECT_FALSE(profile::parse_ncu_csv("==PROF== nothing profiled\n", ncu_metric_names(), "empty.csv").is_ok());
  EXPECT_FALSE(profile::parse_ncu_csv("\"a\",\"b\"\n", ncu_metric_names(), "foreign.csv").is_ok());
  // A launch without the duration cannot be weighted.
  NcuLaunch l{1, "k", {}};
  EXPECT_FALSE(policy::raise_vector({l}, "job").is_ok());
}

TEST(SuiteJobs, EveryVariantOfEachDistinctKernelAndSizeRoundTrips) {
  auto a = make_suite_kernel("bfs", 4096);
  auto b = make_suite_kernel("srad", 512);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const auto jobs = suite_jobs({*a, *b, *a});
  ASSERT_EQ(jobs.size(), static_cast<size_t>(a->variant_count() + b->variant_count()));
  EXPECT_EQ(jobs[0], (SuiteJob{"bfs", 4096, a->variant(0).name}));
  auto back = suite_jobs_from_text(suite_jobs_to_text(jobs), "jobs.txt");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, jobs);
  // The same kernel and size at other block sizes: only the variants not seen yet.
  auto c = make_suite_kernel("bfs", 4096, BlockSizes{32, 256, 1024});
  ASSERT_TRUE(c.is_ok());
  const auto more = suite_jobs({*a, *c});
  ASSERT_EQ(more.size(), static_cast<size_t>(a->variant_count() + 1));
  EXPECT_EQ(more.back(), (SuiteJob{"bfs", 4096, "min@32"}));
  auto bad = suite_jobs_from_text("bfs 4096 mid\nsrad many mid\n", "jobs.txt");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("jobs.txt:2"), std::string::npos);
}

TEST(NcuStore, StoresFacetsKeepsMeasuredCurvesAndAttachesPerVariant) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("raise_store_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = ProfileStore::open((dir / "p.db").string());
  ASSERT_TRUE(store.is_ok());
  auto bfs = make_suite_kernel("bfs", 4096);
  ASSERT_TRUE(bfs.is_ok());
  // The default variant already has a measured curve; the others have no profile yet.
  KernelProfile have;
  have.key = {"NVIDIA H200", "580", "bfs", bfs->variant(bfs->default_variant).name, 4096};
  have.sm_curve = {{2, 1e-3}, {132, 1e-4}};
  ASSERT_TRUE((*store)->put(have).is_ok());
  const auto jobs = suite_jobs({*bfs});
  std::vector<std::vector<NcuLaunch>> launches;
  for (size_t i = 0; i < jobs.size(); ++i) {
    NcuLaunch l{static_cast<int64_t>(i), "k", {}};
    for (const auto& m : ncu_metric_names()) l.metrics[m] = 10.0 * static_cast<double>(i + 1);
    l.metrics[profile::kNcuDurationMetric] = 1000;
    launches.push_back({l});
  }
  auto n = profile::store_ncu_facet(**store, raise_facet(), "NVIDIA H200", "580", jobs, {launches}, "t.csv");
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_EQ(n->written, static_cast<int>(jobs.size()));
  EXPECT_TRUE(n->missing.empty());
  // The metrics are the "raise" facet; the profile's measured curve is untouched.
  auto kept = (*store)->get(have.key);
  ASSERT_TRUE(kept.is_ok() && kept->has_value());
  EXPECT_EQ((*kept)->sm_curve.size(), 2u);
  auto kept_facet = (*store)->get_facet(have.key, policy::kRaiseFacetName);
  ASSERT_TRUE(kept_facet.is_ok() && kept_facet->has_value());
  const ProfileKey fresh_key{"NVIDIA H200", "580", "bfs", bfs->variant(0).name, 4096};
  auto fresh = (*store)->get_facet(fresh_key, policy::kRaiseFacetName);
  ASSERT_TRUE(fresh.is_ok() && fresh->has_value());
  auto fresh_metrics = policy::raise_facet_from_json(**fresh);
  ASSERT_TRUE(fresh_metrics.is_ok()) << fresh_metrics.status().to_string();
  EXPECT_NEAR(at(*fresh_metrics, RaiseMetric::du), 1.0, 1e-9);  // 10% -> 1
  EXPECT_EQ(*policy::raise_facet_class(**fresh), RaiseClass::com);  // IPC 10 per cycle clamps to 10, DU 1
  auto no_profile = (*store)->get(fresh_key);
  ASSERT_TRUE(no_profile.is_ok());
  EXPECT_FALSE(no_profile->has_value()) << "a facet write makes no profile row";
  // attach_profiles gives every variant its vector.
  auto w = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: bfs, size: 4096}]}\n", "w.yaml");
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE(attach_profiles(*w, **store).is_ok());
  for (const KernelVariant& v : w->tenants[0].steps[0].kernel.variants) EXPECT_TRUE(policy::measured_raise_vector(v).has_value()) << v.name;
  // Two passes: each job's vector is the mean of the two (DU 10% and 30% of peak -> 2).
  std::vector<std::vector<NcuLaunch>> second = launches;
  for (auto& job : second) {
    for (auto& [name, v] : job[0].metrics) {
      if (name != profile::kNcuDurationMetric) v *= 3;
    }
  }
  ASSERT_TRUE(profile::store_ncu_facet(**store, raise_facet(), "NVIDIA H200", "580", jobs, {launches, second}, "t.csv").is_ok());
  auto mean = (*store)->get_facet(fresh_key, policy::kRaiseFacetName);
  ASSERT_TRUE(mean.is_ok() && mean->has_value());
  EXPECT_NEAR(at(*policy::raise_facet_from_json(**mean), RaiseMetric::du), 2.0, 1e-9);
  // Mismatched counts, in any pass, and no pass at all are refused.
  second.pop_back();
  EXPECT_FALSE(profile::store_ncu_facet(**store, raise_facet(), "NVIDIA H200", "580", jobs, {launches, second}, "t.csv").is_ok());
  launches.pop_back();
  EXPECT_FALSE(profile::store_ncu_facet(**store, raise_facet(), "NVIDIA H200", "580", jobs, {launches}, "t.csv").is_ok());
  EXPECT_FALSE(profile::store_ncu_facet(**store, raise_facet(), "NVIDIA H200", "580", jobs, {}, "t.csv").is_ok());
  std::filesystem::remove_all(dir);
}

// The profile layer stores whatever facet a folder gives it, by name, and names no policy: the
// generated list holds RAISE's and PBS's; the metric list has each name once; a required facet
// that cannot fill a job fails the store, an optional one leaves the job out and names it.
TEST(NcuFacets, TheProfileLayerStoresAnyFolderFacet) {
  std::vector<std::string> names;
  for (const profile::NcuFacet& f : policy::ncu_facets()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{policy::kRaiseFacetName, "pbs"}));
  profile::NcuFacet a{"raise", {"m1", "m2"}, nullptr, true};
  profile::NcuFacet b{"pbs", {"m2", "m3"}, nullptr, false};
  EXPECT_EQ(profile::ncu_metric_names({a, b}),
            (std::vector<std::string>{"m1", "m2", "m3", profile::kNcuDurationMetric}));

  const auto dir = std::filesystem::path(::testing::TempDir()) / ("ncu_facet_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = ProfileStore::open((dir / "p.db").string());
  ASSERT_TRUE(store.is_ok());
  const std::vector<SuiteJob> jobs{{"bfs", 4096, "b64"}, {"bfs", 4096, "b128"}};
  const profile::NcuPass pass{{NcuLaunch{0, "k", {}}}, {NcuLaunch{1, "k", {}}}};
  RaiseVector v{};
  v.fill(5);
  // Fills the first job, fails the second (the reader is the folder's; the store checks its JSON).
  auto first_only = [&](const SuiteJob& job, const std::vector<std::vector<NcuLaunch>>&, const std::string& where) -> Result<std::string> {
    if (job.variant == "b128") return Status::parse_error(where + ": no metric m1");
    return policy::raise_facet_to_json(v);
  };
  profile::NcuFacet required{policy::kRaiseFacetName, {"m1"}, first_only, true};
  auto refused = profile::store_ncu_facet(**store, required, "NVIDIA H200", "580", jobs, {pass}, "t.csv");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("bfs/b128/4096"), std::string::npos) << refused.status().message();
  profile::NcuFacet optional = required;
  optional.required = false;
  auto kept = profile::store_ncu_facet(**store, optional, "NVIDIA H200", "580", jobs, {pass}, "t.csv");
  ASSERT_TRUE(kept.is_ok()) << kept.status().to_string();
  EXPECT_EQ(kept->written, 1);
  ASSERT_EQ(kept->missing.size(), 1u);
  EXPECT_NE(kept->missing.front().find("no metric m1"), std::string::npos);
  auto stored = (*store)->get_facet({"NVIDIA H200", "580", "bfs", "b64", 4096}, policy::kRaiseFacetName);
  ASSERT_TRUE(stored.is_ok() && stored->has_value());
  // A facet whose JSON its codec refuses is not stored.
  profile::NcuFacet bad{policy::kRaiseFacetName, {}, [](const SuiteJob&, const std::vector<std::vector<NcuLaunch>>&,
                                                        const std::string&) -> Result<std::string> { return std::string("{}"); },
                        true};
  EXPECT_FALSE(profile::store_ncu_facet(**store, bad, "NVIDIA H200", "580", jobs, {pass}, "t.csv").is_ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace concord
