#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "concord/profile.h"
#include "concord/suite.h"
#include "concord/workload.h"

namespace concord {
namespace {

TEST(ProfileAnalysis, SweepPlans) {
  EXPECT_EQ(plan_sm_sweep(132, 2, false), (std::vector<int>{2, 4, 8, 16, 32, 64, 128, 132}));
  const auto full = plan_sm_sweep(132, 2, true);
  EXPECT_EQ(full.size(), 66u);
  EXPECT_EQ(full.front(), 2);
  EXPECT_EQ(full.back(), 132);
}

std::vector<SmCurvePoint> compute_then_flat() {
  // Linear until 64 SMs, flat after (a kernel that saturates at 64 SMs).
  std::vector<SmCurvePoint> c;
  for (int s : {2, 4, 8, 16, 32, 64, 128, 132}) c.push_back({s, 64.0 / std::min(s, 64)});
  return c;
}

TEST(ProfileAnalysis, DemandIsFewestSmsWithinTenPercent) {
  EXPECT_EQ(demand_sms(compute_then_flat()), 64);
  std::vector<SmCurvePoint> c = {{2, 10}, {4, 5.4}, {8, 5.2}, {132, 5.0}};
  EXPECT_EQ(demand_sms(c), 4);  // 5.4 <= 5.5
  EXPECT_EQ(demand_sms(c, 0.01), 132);
}

TEST(ProfileAnalysis, RefinesBetweenThePointsAroundTheKnee) {
  std::vector<SmCurvePoint> c = {{2, 40}, {4, 20}, {8, 10}, {16, 5}, {32, 2.5}, {64, 1.2}, {128, 1.0}, {132, 1.0}};
  const auto extra = refine_near_knee(c, 2, 0.1, 3);  // knee between 64 (1.2 > 1.1) and 128
  ASSERT_EQ(extra.size(), 3u);
  for (int s : extra) {
    EXPECT_GT(s, 64);
    EXPECT_LT(s, 128);
    EXPECT_EQ(s % 2, 0);
  }
  EXPECT_TRUE(refine_near_knee({{132, 1.0}}, 2, 0.1, 3).empty());
}

TEST(ProfileAnalysis, LinearFit) {
  auto exact = fit_linear({1, 2, 3, 4}, {3, 5, 7, 9});
  ASSERT_TRUE(exact.is_ok());
  EXPECT_NEAR(exact->intercept, 1, 1e-12);
  EXPECT_NEAR(exact->slope, 2, 1e-12);
  EXPECT_NEAR(exact->mean_relative_error, 0, 1e-12);
  auto noisy = fit_linear({1, 2, 3, 4}, {3.1, 4.9, 7.2, 8.8});
  ASSERT_TRUE(noisy.is_ok());
  EXPECT_GT(noisy->mean_relative_error, 0);
  EXPECT_LT(noisy->mean_relative_error, 0.05);
  EXPECT_FALSE(fit_linear({1}, {1}).is_ok());
  EXPECT_FALSE(fit_linear({2, 2}, {1, 3}).is_ok());
}

TEST(ProfileAnalysis, CriticalKernelsAreTheTopSigma) {
  const std::vector<double> t = {1, 9, 3, 7, 5, 2, 8, 4, 6, 10};
  EXPECT_EQ(critical_kernels(t, 0.1), (std::vector<size_t>{9}));
  EXPECT_EQ(critical_kernels(t, 0.3), (std::vector<size_t>{9, 1, 6}));
  EXPECT_EQ(critical_kernels(t, 1.0).size(), 10u);
  EXPECT_EQ(critical_kernels({2.0}, 0.1), (std::vector<size_t>{0}));  // at least one when sigma > 0
}

KernelProfile sample(const std::string& kernel, int64_t size, const std::string& gpu = "H200") {
  KernelProfile p;
  p.key = {gpu, "580.159.04", kernel, "mid", size};
  p.logical_blocks = 1000;
  p.sm_curve = compute_then_flat();
  p.cache_seconds = {1, 1.1, 1.2, 1.3};
  p.tlp_seconds = {3, 2, 1.5};
  p.linear_intercept = 1e-5;
  p.linear_slope = 2e-9;
  p.demand_sms = 64;
  p.demand = 64.0 / 132;
  return p;
}

TEST(ProfileJson, RoundTrip) {
  const KernelProfile p = sample("bfs", 4096);
  auto back = profile_from_json(profile_to_json(p));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->key, p.key);
  EXPECT_EQ(back->sm_curve.size(), p.sm_curve.size());
  EXPECT_EQ(back->cache_seconds, p.cache_seconds);
  EXPECT_EQ(back->tlp_seconds, p.tlp_seconds);
  EXPECT_FALSE(profile_from_json("{\"key\": 3}").is_ok());
  // The timing under pressure round-trips; a profile written before it existed reads as unmeasured.
  KernelProfile q = sample("cfd_flux", 2048);
  q.cache_pressure_seconds = {2, 2.1, 3, 3.3};
  auto q_back = profile_from_json(profile_to_json(q));
  ASSERT_TRUE(q_back.is_ok()) << q_back.status().to_string();
  EXPECT_EQ(q_back->cache_pressure_seconds, q.cache_pressure_seconds);
  auto old_json = nlohmann::json::parse(profile_to_json(q));
  old_json.erase("cache_pressure_seconds");
  auto old_back = profile_from_json(old_json.dump());
  ASSERT_TRUE(old_back.is_ok()) << old_back.status().to_string();
  EXPECT_EQ(old_back->cache_pressure_seconds, (std::array<double, 4>{0, 0, 0, 0}));
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("store_" + std::to_string(::getpid()) + "_" +
                                                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::filesystem::path dir_;
};

TEST_F(StoreTest, PutGetFindAllAndSessions) {
  auto store = ProfileStore::open(path("p.db"));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->schema_version(), ProfileStore::kSchemaVersion);
  ASSERT_TRUE((*store)->put(sample("bfs", 4096)).is_ok());
  ASSERT_TRUE((*store)->put(sample("bfs", 8192)).is_ok());
  ASSERT_TRUE((*store)->put(sample("bfs", 4096)).is_ok());  // replaces
  auto all = (*store)->all();
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->profiles.size(), 2u);
  EXPECT_TRUE(all->problems.empty());
  auto got = (*store)->get(sample("bfs", 8192).key);
  ASSERT_TRUE(got.is_ok() && got->has_value());
  EXPECT_EQ((**got).key.size, 8192);
  auto none = (*store)->find("bfs", "mid", 1);
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE((*store)->record_session("H200", "580", 12.5, 2).is_ok());
  auto sessions = (*store)->sessions();
  ASSERT_TRUE(sessions.is_ok());
  ASSERT_EQ(sessions->size(), 1u);
  EXPECT_DOUBLE_EQ(sessions->front().seconds, 12.5);
}

TEST_F(StoreTest, MigratesAVersionOneStoreKeepingItsProfiles) {
  const std::string p = path("v1.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    const std::string payload = profile_to_json(sample("hotspot", 512));
    const std::string sql =
        "CREATE TABLE profiles (gpu TEXT NOT NULL, driver TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL,"
        " size INTEGER NOT NULL, payload TEXT NOT NULL, measured_at TEXT NOT NULL DEFAULT (datetime('now')),"
        " PRIMARY KEY (gpu, driver, kernel, variant, size));"
        "INSERT INTO profiles (gpu, driver, kernel, variant, size, payload) VALUES ('H200', '580.159.04', 'hotspot', 'mid', 512, '" +
        payload + "'); PRAGMA application_id = 1129270851; PRAGMA user_version = 1;";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto ro = ProfileStore::open(p, /*read_only=*/true);
  EXPECT_FALSE(ro.is_ok()) << "a read-only open does not migrate";
  auto store = ProfileStore::open(p);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->schema_version(), ProfileStore::kSchemaVersion);
  auto got = (*store)->get(sample("hotspot", 512).key);
  ASSERT_TRUE(got.is_ok() && got->has_value());
  EXPECT_TRUE((*store)->record_session("H200", "580", 1, 1).is_ok());  // the v2 table exists
}

TEST_F(StoreTest, CorruptAndForeignFilesAreReportedAndLeftUntouched) {
  const std::string garbage = path("garbage.db");
  std::ofstream(garbage) << "this is not a database at all, just text that is long enough to look like a header......";
  const std::string before = read_bytes(garbage);
  auto a = ProfileStore::open(garbage);
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.status().message().find("not a Concord profile store"), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find(garbage), std::string::npos);
  EXPECT_EQ(read_bytes(garbage), before);

  const std::string foreign = path("foreign.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE customers (id INTEGER); INSERT INTO customers VALUES (7);", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string foreign_before = read_bytes(foreign);
  auto b = ProfileStore::open(foreign);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("another application's database"), std::string::npos) << b.status().message();
  EXPECT_EQ(read_bytes(foreign), foreign_before);

  const std::string newer = path("newer.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE x (y INTEGER); PRAGMA application_id = 1129270851; PRAGMA user_version = 99;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto c = ProfileStore::open(newer);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("newer"), std::string::npos);
  EXPECT_EQ(ProfileStore::open(path("missing.db"), true).status().code(), StatusCode::not_found);
}

TEST_F(StoreTest, ConcurrentReadersSeeConsistentDataWhileOneWrites) {
  const std::string p = path("wal.db");
  {
    auto store = ProfileStore::open(p);
    ASSERT_TRUE(store.is_ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE((*store)->put(sample("k" + std::to_string(i), 64)).is_ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      auto store = ProfileStore::open(p, /*read_only=*/true);
      if (!store) {
        ++failures;
        return;
      }
      while (!stop) {
        auto all = (*store)->all();
        if (!all || all->profiles.size() < 20 || !all->problems.empty()) ++failures;
        ++reads;
      }
    });
  }
  auto writer = ProfileStore::open(p);
  ASSERT_TRUE(writer.is_ok());
  for (int i = 20; i < 120; ++i) ASSERT_TRUE((*writer)->put(sample("k" + std::to_string(i), 64)).is_ok());
  while (reads < 40) std::this_thread::yield();
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GE(reads, 40);
}

TEST_F(StoreTest, ExportImportRoundTripAndAllOrNothingImport) {
  auto a = ProfileStore::open(path("a.db"));
  ASSERT_TRUE(a.is_ok());
  ASSERT_TRUE((*a)->put(sample("bfs", 1024)).is_ok());
  ASSERT_TRUE((*a)->put(sample("srad", 512)).is_ok());
  ASSERT_TRUE((*a)->record_session("H200", "580", 3.5, 2).is_ok());
  auto skipped = (*a)->export_json(path("export.json"));
  ASSERT_TRUE(skipped.is_ok()) << skipped.status().to_string();
  EXPECT_TRUE(skipped->empty());
  auto b = ProfileStore::open(path("b.db"));
  ASSERT_TRUE(b.is_ok());
  auto n = (*b)->import_json(path("export.json"));
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ((*b)->all()->profiles.size(), 2u);
  EXPECT_EQ((*b)->sessions()->size(), 1u);
  std::ofstream(path("bad.json")) << R"({"profiles": [)" << profile_to_json(sample("x", 1)) << R"(, {"key": 1}]})";
  auto c = ProfileStore::open(path("c.db"));
  ASSERT_TRUE(c.is_ok());
  auto bad = (*c)->import_json(path("bad.json"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("profiles[1]"), std::string::npos);
  EXPECT_TRUE((*c)->all()->profiles.empty());
}

TEST_F(StoreTest, AttachProfilesGivesSimulatorCurves) {
  auto store = ProfileStore::open(path("attach.db"));
  ASSERT_TRUE(store.is_ok());
  auto w = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: bfs, size: 4096}, {kernel: srad, size: 512}]}\n", "w.yaml");
  ASSERT_TRUE(w.is_ok());
  KernelProfile p = sample("bfs", 4096);
  p.key.variant = w->tenants[0].steps[0].kernel.variant(w->tenants[0].steps[0].kernel.default_variant).name;
  ASSERT_TRUE((*store)->put(p).is_ok());
  const std::string before = tenant_fingerprint(w->tenants[0]);
  auto n = attach_profiles(*w, **store);
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(w->tenants[0].steps[0].kernel.sm_curve.size(), p.sm_curve.size());
  EXPECT_TRUE(w->tenants[0].steps[1].kernel.sm_curve.empty());
  EXPECT_NE(tenant_fingerprint(w->tenants[0]), before) << "alone-time caches must see the curve";
  // Slowdowns against normal caching, alone and under pressure (0: not measured).
  const auto& k = w->tenants[0].steps[0].kernel;
  EXPECT_NEAR(k.cache_slowdown[2], 1.2, 1e-12);
  EXPECT_EQ(k.cache_slowdown_pressure, (std::array<double, 4>{0, 0, 0, 0}));
  p.cache_pressure_seconds = {2, 2.2, 3, 0};
  ASSERT_TRUE((*store)->put(p).is_ok());
  ASSERT_TRUE(attach_profiles(*w, **store).is_ok());
  EXPECT_NEAR(w->tenants[0].steps[0].kernel.cache_slowdown_pressure[1], 1.1, 1e-12);
  EXPECT_NEAR(w->tenants[0].steps[0].kernel.cache_slowdown_pressure[2], 1.5, 1e-12);
  EXPECT_EQ(w->tenants[0].steps[0].kernel.cache_slowdown_pressure[3], 0.0);
}

}  // namespace
}  // namespace concord
