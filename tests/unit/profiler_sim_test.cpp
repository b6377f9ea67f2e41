// The profiler on the simulator backend: the same sweeps the GPU runs, checked for structure and
// for agreement with the simulator's own model (not for timings), and its resumability.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "concord/device.h"
#include "concord/occupancy.h"
#include "concord/profile.h"
#include "concord/suite.h"
#include "concord/backend_factory.h"
#include "profile/profiler.h"
#include "policy/raise/raise_facet.h"

namespace concord {
namespace {

class ProfilerSim : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("profiler_sim_" + std::to_string(::getpid()) + "_" +
                                                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    config_.kind = "sim";
    config_.device = h200_spec();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  Result<profile::ProfileReport> run(ProfileStore& store, const std::vector<std::string>& kernels,
                                     std::map<std::string, int64_t> sizes = {}) {
    profile::ProfileOptions o;
    o.kernels = kernels;
    o.sizes = std::move(sizes);
    o.reps = 1;
    return profile::profile_kernels(store, config_, o, progress_);
  }
  KernelProfile only(ProfileStore& store) {
    auto all = store.all();
    EXPECT_TRUE(all.is_ok());
    EXPECT_TRUE(all->problems.empty());
    EXPECT_EQ(all->profiles.size(), 1u);
    return all->profiles.empty() ? KernelProfile{} : all->profiles.front();
  }

  std::filesystem::path dir_;
  BackendConfig config_;
  std::ostringstream progress_;
};

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(a), std::abs(b)); }

TEST_F(ProfilerSim, ElasticKernelGetsEveryFieldConsistentWithTheModel) {
  auto store = ProfileStore::open(path("p.db"));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto report = run(**store, {"hotspot"}, {{"hotspot", 2048}});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->measured, 1);
  EXPECT_EQ(report->fields, 5);
  const KernelProfile p = only(**store);
  const DeviceSpec dev = h200_spec();
  auto spec = make_suite_kernel("hotspot", 2048);
  ASSERT_TRUE(spec.is_ok());
  const KernelVariant& var = spec->variant(spec->default_variant);
  // Keyed by the backend's device: its name, and the backend's name for a device with no driver.
  EXPECT_EQ(p.key, (ProfileKey{dev.name, "sim", "hotspot", var.name, 2048}));
  EXPECT_EQ(measured_fields(p), ProfileFields::all());
  EXPECT_EQ(p.logical_blocks, var.logical_blocks);
  EXPECT_EQ(p.blocks_per_sm, max_resident_blocks(dev, var));

  // SM curve: strictly ascending SM counts ending at every SM, and never slower with more SMs.
  ASSERT_GE(p.sm_curve.size(), 5u);
  EXPECT_EQ(p.sm_curve.front().sms, 2);
  EXPECT_EQ(p.sm_curve.back().sms, dev.sm_count);
  for (size_t i = 1; i < p.sm_curve.size(); ++i) {
    EXPECT_GT(p.sm_curve[i].sms, p.sm_curve[i - 1].sms);
    EXPECT_LE(p.sm_curve[i].seconds, p.sm_curve[i - 1].seconds * (1 + 1e-9)) << "at " << p.sm_curve[i].sms << " SMs";
  }
  // Two SMs are far slower than all of them (the simulator scales with SMs until bandwidth binds).
  EXPECT_GT(p.sm_curve.front().seconds, 4 * p.all_sm_seconds());
  EXPECT_EQ(p.demand_sms, demand_sms(p.sm_curve));
  EXPECT_DOUBLE_EQ(p.demand, static_cast<double>(p.demand_sms) / dev.sm_count);
  EXPECT_NEAR(p.memory_utilization,
              var.bytes_per_block * static_cast<double>(var.logical_blocks) / p.all_sm_seconds() / dev.dram_bytes_per_s, 1e-12);

  // Cache policies: the all-SM normal time is the curve's last point (the same placement); losing
  // L1 costs the kernel at most its L1 sensitivity (nothing where DRAM alone binds it).
  EXPECT_LT(rel(p.cache_seconds[0], p.all_sm_seconds()), 1e-9);
  for (double t : p.cache_seconds) EXPECT_GT(t, 0);
  const double l1 = p.cache_seconds[1] / p.cache_seconds[0];
  EXPECT_GE(l1, 1.0 - 1e-9);
  EXPECT_LE(l1, 1.0 + spec->l1_sensitivity + 1e-9);
  // Beside the streaming co-runner every policy is slower than alone.
  for (size_t c = 0; c < 4; ++c) EXPECT_GT(p.cache_pressure_seconds[c], p.cache_seconds[c]) << "policy " << c;

  // TLP 1..occupancy: full TLP is the all-SM time; one block per SM is no faster.
  ASSERT_EQ(static_cast<int>(p.tlp_seconds.size()), p.blocks_per_sm);
  EXPECT_LT(rel(p.tlp_seconds.back(), p.cache_seconds[0]), 1e-9);
  EXPECT_GE(p.tlp_seconds.front(), p.tlp_seconds.back() * (1 - 1e-9));

  // Linear model: the simulator's duration is close to linear in logical blocks.
  EXPECT_GT(p.linear_slope, 0);
  EXPECT_LT(p.linear_fit_error, 0.05);
  EXPECT_LT(rel(p.linear_intercept + p.linear_slope * static_cast<double>(var.logical_blocks), p.cache_seconds[0]), 0.05);

  // A second run finds nothing missing.
  auto again = run(**store, {"hotspot"}, {{"hotspot", 2048}});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->measured, 0);
  EXPECT_EQ(again->skipped, 1);
  auto sessions = (*store)->sessions();
  ASSERT_TRUE(sessions.is_ok());
  EXPECT_EQ(sessions->size(), 1u) << "a run that measured nothing records no session";
}

TEST_F(ProfilerSim, KernelWithoutL1SensitivityLosesNothingWithoutL1) {
  auto store = ProfileStore::open(path("p.db"));
  ASSERT_TRUE(store.is_ok());
  ASSERT_TRUE(run(**store, {"vector_add"}, {{"vector_add", 1 << 22}}).is_ok());
  const KernelProfile p = only(**store);
  EXPECT_LT(rel(p.cache_seconds[1], p.cache_seconds[0]), 1e-9);
}

TEST_F(ProfilerSim, OpaqueKernelGetsWhatTheBackendCanApply) {
  auto store = ProfileStore::open(path("p.db"));
  ASSERT_TRUE(store.is_ok());
  auto report = run(**store, {"cublas_gemm"}, {{"cublas_gemm", 2048}});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const KernelProfile p = only(**store);
  EXPECT_FALSE(p.elastic);
  // Native launches: SM sets and the L2 window, no L1 bypass, no TLP, no sub-range.
  EXPECT_EQ(measured_fields(p), (ProfileFields{ProfileField::sm_curve, ProfileField::cache}));
  EXPECT_GT(p.cache_seconds[0], 0);
  EXPECT_EQ(p.cache_seconds[1], 0);
  EXPECT_GT(p.cache_seconds[2], 0);
  EXPECT_EQ(p.cache_seconds[3], 0);
  EXPECT_TRUE(p.tlp_seconds.empty());
  auto again = run(**store, {"cublas_gemm"}, {{"cublas_gemm", 2048}});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->skipped, 1) << "fields the backend cannot measure are not missing";
}

TEST_F(ProfilerSim, MeasuresMissingFieldsOfAnExistingRowAndKeepsTheRest) {
  auto store = ProfileStore::open(path("p.db"));
  ASSERT_TRUE(store.is_ok());
  auto spec = make_suite_kernel("vector_add", 1 << 22);
  ASSERT_TRUE(spec.is_ok());
  const ProfileKey key{h200_spec().name, "sim", "vector_add", spec->variant(spec->default_variant).name, 1 << 22};
  // A RAISE facet and a row that holds only cache times (as an earlier, interrupted run left it).
  RaiseVector v{};
  v.fill(4.0);
  ASSERT_TRUE((*store)->put_facet(key, policy::kRaiseFacetName, policy::raise_facet_to_json(v)).is_ok());
  KernelProfile partial;
  partial.key = key;
  partial.cache_seconds = {1, 2, 3, 4};
  ASSERT_TRUE((*store)->merge(partial, {ProfileField::cache}).is_ok());
  auto missing = (*store)->missing(key, ProfileFields::all());
  ASSERT_TRUE(missing.is_ok());
  EXPECT_EQ(*missing, ProfileFields::all().without({ProfileField::cache}));

  auto report = run(**store, {"vector_add"}, {{"vector_add", 1 << 22}});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->measured, 1);
  EXPECT_EQ(report->fields, 4);
  EXPECT_NE(progress_.str().find("sm_curve, cache_pressure, tlp, linear"), std::string::npos) << progress_.str();
  const KernelProfile p = only(**store);
  EXPECT_EQ(measured_fields(p), ProfileFields::all());
  EXPECT_EQ(p.cache_seconds, (std::array<double, 4>{1, 2, 3, 4})) << "a stored field is not measured again";
  auto facet = (*store)->get_facet(key, policy::kRaiseFacetName);
  ASSERT_TRUE(facet.is_ok() && facet->has_value());
  EXPECT_EQ(*policy::raise_facet_from_json(**facet), v);
}

TEST_F(ProfilerSim, ARowMigratedFromARaiseOnlyProfileGetsItsCurve) {
  // Schema v2: `profile raise` wrote a profile with the static description and RAISE metrics only.
  const std::string db_path = path("v2.db");
  auto spec = make_suite_kernel("vector_add", 1 << 22);
  ASSERT_TRUE(spec.is_ok());
  const std::string variant = spec->variant(spec->default_variant).name;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    const std::string payload =
        R"({"key":{"gpu":"H200","driver":"sim","kernel":"vector_add","variant":")" + variant +
        R"(","size":4194304},"elastic":true,"logical_blocks":1,"flops_per_block":0,"bytes_per_block":0,)"
        R"("resources":{"threads_per_block":256,"registers_per_thread":16,"shared_bytes_per_block":0,"blocks_per_sm":0},)"
        R"("sm_curve":[],"cache_seconds":[0,0,0,0],"tlp_seconds":[],"linear":{"intercept":0,"slope":0,"fit_error":0},)"
        R"("demand_sms":0,"demand":0,"compute_utilization":0,"memory_utilization":0,"aker_class":"neutral",)"
        R"("profile_seconds":0,"raise":{"AOC":1,"SME":2,"IPC":3,"ISU":4,"SPU":5,"DU":6,"LSU":7,"TU":8},"raise_class":"MEM"})";
    const std::string sql =
        "CREATE TABLE profiles (gpu TEXT NOT NULL, driver TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL,"
        " size INTEGER NOT NULL, payload TEXT NOT NULL, measured_at TEXT NOT NULL DEFAULT (datetime('now')),"
        " PRIMARY KEY (gpu, driver, kernel, variant, size));"
        "CREATE TABLE sessions (id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, driver TEXT NOT NULL, seconds REAL NOT NULL,"
        " profiles INTEGER NOT NULL, finished_at TEXT NOT NULL DEFAULT (datetime('now')));"
        "INSERT INTO profiles (gpu, driver, kernel, variant, size, payload) VALUES ('H200', 'sim', 'vector_add', '" +
        variant + "', 4194304, '" + payload + "'); PRAGMA application_id = 1129270851; PRAGMA user_version = 2;";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = ProfileStore::open(db_path);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto report = run(**store, {"vector_add"}, {{"vector_add", 1 << 22}});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->measured, 1) << "the row's SM curve is missing, so it is measured";
  const KernelProfile p = only(**store);
  EXPECT_FALSE(p.sm_curve.empty());
  auto facet = (*store)->get_facet(p.key, policy::kRaiseFacetName);
  ASSERT_TRUE(facet.is_ok() && facet->has_value());
  EXPECT_EQ(*policy::raise_facet_from_json(**facet), (RaiseVector{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(ProfilerSim, NoBackendMeansNoStoreFile) {
  const std::string db_path = path("never.db");
  auto store = ProfileStore::open(db_path);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  config_.kind = "no-such-backend";
  auto report = run(**store, {"vector_add"});
  ASSERT_FALSE(report.is_ok());
  EXPECT_NE(report.status().message().find("no-such-backend"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(db_path)) << "nothing was written, so no file was made";
  auto unknown = run(**store, {"no_such_kernel"});
  EXPECT_EQ(unknown.status().code(), StatusCode::not_found);
  EXPECT_FALSE(std::filesystem::exists(db_path));
}

}  // namespace
}  // namespace concord
