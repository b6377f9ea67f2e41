#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sqlite3.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "concord/profile.h"
#include "policy/raise/raise_tasks.h"
#include "concord/suite.h"
#include "concord/workload.h"
#include "policy/raise/raise_facet.h"

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


ProfileKey key_of(const std::string& kernel, int64_t size) { return {"H200", "580.159.04", kernel, "mid", size}; }

std::string raise_json(double v) {
  RaiseVector r{};
  r.fill(v);
  return policy::raise_facet_to_json(r);
}

TEST_F(StoreTest, FacetsRoundTripAndStayIndependentOfProfileFields) {
  auto store = ProfileStore::open(path("f.db"));
  ASSERT_TRUE(store.is_ok());
  const ProfileKey key = key_of("bfs", 4096);
  // Interleaved: a curve, a facet, cache times, another facet, a TLP sweep; nothing erases anything.
  KernelProfile curve;
  curve.key = key;
  curve.sm_curve = {{2, 4.0}, {132, 1.0}};
  ASSERT_TRUE((*store)->merge(curve, {ProfileField::sm_curve}).is_ok());
  ASSERT_TRUE((*store)->put_facet(key, policy::kRaiseFacetName, raise_json(3)).is_ok());
  KernelProfile cache;
  cache.key = key;
  cache.cache_seconds = {1, 1.5, 2, 2.5};
  cache.sm_curve = {{4, 9.0}};  // not among the fields written: ignored
  ASSERT_TRUE((*store)->merge(cache, {ProfileField::cache}).is_ok());
  ASSERT_TRUE((*store)->put_facet(key, "example", R"({"class": "memory-prefer"})").is_ok());
  KernelProfile tlp;
  tlp.key = key;
  tlp.tlp_seconds = {3, 2};
  ASSERT_TRUE((*store)->merge(tlp, {ProfileField::tlp}).is_ok());
  ASSERT_TRUE((*store)->put_facet(key, policy::kRaiseFacetName, raise_json(5)).is_ok());  // replaces its own facet only

  auto p = (*store)->get(key);
  ASSERT_TRUE(p.is_ok() && p->has_value());
  EXPECT_EQ((*p)->sm_curve.size(), 2u);
  EXPECT_EQ((*p)->sm_curve.front().seconds, 4.0);
  EXPECT_EQ((*p)->cache_seconds, cache.cache_seconds);
  EXPECT_EQ((*p)->tlp_seconds, tlp.tlp_seconds);
  EXPECT_EQ(measured_fields(**p), (ProfileFields{ProfileField::sm_curve, ProfileField::cache, ProfileField::tlp}));
  auto missing = (*store)->missing(key, ProfileFields::all());
  ASSERT_TRUE(missing.is_ok());
  EXPECT_EQ(*missing, (ProfileFields{ProfileField::cache_pressure, ProfileField::linear}));
  auto facets = (*store)->facets_of(key);
  ASSERT_TRUE(facets.is_ok());
  ASSERT_EQ(facets->size(), 2u);
  EXPECT_EQ(*policy::raise_facet_from_json(facets->at(policy::kRaiseFacetName)), (RaiseVector{5, 5, 5, 5, 5, 5, 5, 5}));
  EXPECT_EQ(nlohmann::json::parse(facets->at("example"))["class"], "memory-prefer");
  auto one = (*store)->get_facet(key, "example");
  ASSERT_TRUE(one.is_ok() && one->has_value());
  auto none = (*store)->get_facet(key_of("bfs", 8192), "example");
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  auto found = (*store)->find_facet("bfs", "mid", 4096, policy::kRaiseFacetName);
  ASSERT_TRUE(found.is_ok() && found->has_value());
  // Facets must be JSON objects; the raise facet must hold eight metrics within 0-10.
  EXPECT_FALSE((*store)->put_facet(key, "example", "[1, 2]").is_ok());
  EXPECT_FALSE((*store)->put_facet(key, "example", "{not json").is_ok());
  EXPECT_FALSE((*store)->put_facet(key, "", "{}").is_ok());
  auto bad_raise = (*store)->put_facet(key, policy::kRaiseFacetName, raise_json(11));
  ASSERT_FALSE(bad_raise.is_ok());
  EXPECT_NE(bad_raise.message().find("metrics.AOC"), std::string::npos) << bad_raise.message();
  auto listing = (*store)->all_facets();
  ASSERT_TRUE(listing.is_ok());
  EXPECT_EQ(listing->facets.size(), 2u);
  // Export and import carry the facets.
  auto skipped = (*store)->export_json(path("f.json"));
  ASSERT_TRUE(skipped.is_ok() && skipped->empty());
  auto copy = ProfileStore::open(path("copy.db"));
  ASSERT_TRUE(copy.is_ok());
  auto n = (*copy)->import_json(path("f.json"));
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_EQ(*n, 3);  // one profile, two facets
  auto copied = (*copy)->facets_of(key);
  ASSERT_TRUE(copied.is_ok());
  ASSERT_EQ(copied->size(), facets->size());
  for (const auto& [name, json] : *facets) EXPECT_EQ(nlohmann::json::parse(copied->at(name)), nlohmann::json::parse(json)) << name;
}

// Schema v2 as the previous Concord wrote it, with RAISE metrics and Aker's class in the payloads.
void make_v2_store(const std::string& p, const std::vector<std::pair<std::string, std::string>>& kernel_payloads) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
  std::string sql =
      "CREATE TABLE profiles (gpu TEXT NOT NULL, driver TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL,"
      " size INTEGER NOT NULL, payload TEXT NOT NULL, measured_at TEXT NOT NULL DEFAULT (datetime('now')),"
      " PRIMARY KEY (gpu, driver, kernel, variant, size));"
      "CREATE TABLE sessions (id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, driver TEXT NOT NULL, seconds REAL NOT NULL,"
      " profiles INTEGER NOT NULL, finished_at TEXT NOT NULL DEFAULT (datetime('now')));"
      "INSERT INTO sessions (gpu, driver, seconds, profiles) VALUES ('H200', '580.159.04', 7.5, 2);";
  for (const auto& [kernel, payload] : kernel_payloads) {
    sql += "INSERT INTO profiles (gpu, driver, kernel, variant, size, payload) VALUES ('H200', '580.159.04', '" + kernel +
           "', 'mid', 512, '" + payload + "');";
  }
  sql += "PRAGMA application_id = 1129270851; PRAGMA user_version = 2;";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

std::string v2_payload(const std::string& kernel, bool with_raise) {
  nlohmann::json j = nlohmann::json::parse(profile_to_json(sample(kernel, 512)));
  j["aker_class"] = "memory-prefer";
  if (with_raise) {
    j["raise"] = {{"AOC", 1}, {"SME", 2}, {"IPC", 3}, {"ISU", 4}, {"SPU", 5}, {"DU", 6}, {"LSU", 7}, {"TU", 8}};
    j["raise_class"] = "MEM";
  }
  return j.dump();
}

std::string raw_payload(const std::string& db_path, const std::string& kernel) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT payload FROM profiles WHERE kernel = ?", -1, &s, nullptr);
  sqlite3_bind_text(s, 1, kernel.c_str(), -1, SQLITE_TRANSIENT);
  std::string out;
  if (sqlite3_step(s) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

TEST_F(StoreTest, MigratesAVersionTwoStoreMovingRaiseMetricsIntoFacets) {
  const std::string p = path("v2.db");
  make_v2_store(p, {{"hotspot", v2_payload("hotspot", true)}, {"srad", v2_payload("srad", false)}, {"broken", "{not json"}});
  auto ro = ProfileStore::open(p, /*read_only=*/true);
  EXPECT_FALSE(ro.is_ok()) << "a read-only open does not migrate";
  auto store = ProfileStore::open(p);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->schema_version(), ProfileStore::kSchemaVersion);
  auto facet = (*store)->get_facet(key_of("hotspot", 512), policy::kRaiseFacetName);
  ASSERT_TRUE(facet.is_ok() && facet->has_value());
  EXPECT_EQ(*policy::raise_facet_from_json(**facet), (RaiseVector{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(*policy::raise_facet_class(**facet), RaiseClass::mem);
  auto srad_facet = (*store)->get_facet(key_of("srad", 512), policy::kRaiseFacetName);
  ASSERT_TRUE(srad_facet.is_ok());
  EXPECT_FALSE(srad_facet->has_value());
  // The profiles keep their measurements and lose the fields that moved or went away.
  auto hotspot = (*store)->get(key_of("hotspot", 512));
  ASSERT_TRUE(hotspot.is_ok() && hotspot->has_value());
  EXPECT_EQ((*hotspot)->sm_curve.size(), sample("hotspot", 512).sm_curve.size());
  const auto payload = nlohmann::json::parse(raw_payload(p, "hotspot"));
  EXPECT_FALSE(payload.contains("raise"));
  EXPECT_FALSE(payload.contains("raise_class"));
  EXPECT_FALSE(payload.contains("aker_class"));
  // The row that was never JSON is kept as it was and named when read.
  EXPECT_EQ(raw_payload(p, "broken"), "{not json");
  auto all = (*store)->all();
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->profiles.size(), 2u);
  ASSERT_EQ(all->problems.size(), 1u);
  EXPECT_NE(all->problems[0].find("broken"), std::string::npos) << all->problems[0];
  auto sessions = (*store)->sessions();
  ASSERT_TRUE(sessions.is_ok());
  EXPECT_EQ(sessions->size(), 1u);
  // attach_profiles reads the migrated facet into the kernel's variant, as before.
  auto w = parse_workload("tenants:\n  - {name: a, kernels: [{kernel: hotspot, size: 512}]}\n", "w.yaml");
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE(attach_profiles(*w, **store).is_ok());
  const KernelSpec& k = w->tenants[0].steps[0].kernel;
  auto mid = k.find_variant("mid");
  ASSERT_TRUE(mid.has_value());
  const auto measured = policy::measured_raise_vector(k.variant(*mid));
  ASSERT_TRUE(measured.has_value());
  EXPECT_EQ((*measured)[5], 6.0);
}

void exec_sql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

TEST_F(StoreTest, BadRowsAreSkippedAndNamedByShowAndExport) {
  const std::string p = path("bad.db");
  {
    auto store = ProfileStore::open(p);
    ASSERT_TRUE(store.is_ok());
    ASSERT_TRUE((*store)->put(sample("bfs", 1024)).is_ok());
    ASSERT_TRUE((*store)->put(sample("srad", 512)).is_ok());
    ASSERT_TRUE((*store)->put_facet(key_of("bfs", 1024), policy::kRaiseFacetName, raise_json(2)).is_ok());
  }
  auto negative = nlohmann::json::parse(profile_to_json(sample("kmeans", 64)));
  negative["tlp_seconds"] = {1.0, -2.0};
  exec_sql(p, "INSERT INTO profiles (gpu, driver, kernel, variant, size, payload) VALUES"
              " ('H200', '580', 'garbled', 'mid', 1, 'not json'),"
              " ('H200', '580', 'kmeans', 'mid', 64, '" + negative.dump() + "');"
              "INSERT INTO facets (gpu, driver, kernel, variant, size, facet, payload) VALUES"
              " ('H200', '580', 'bfs', 'mid', 1024, 'aker', '[]');");
  auto store = ProfileStore::open(p, /*read_only=*/true);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto all = (*store)->all();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  EXPECT_EQ(all->profiles.size(), 2u);
  ASSERT_EQ(all->problems.size(), 2u);
  const std::string problems = all->problems[0] + "\n" + all->problems[1];
  EXPECT_NE(problems.find("garbled"), std::string::npos) << problems;
  EXPECT_NE(problems.find("tlp_seconds[1]"), std::string::npos) << problems;
  auto facets = (*store)->all_facets();
  ASSERT_TRUE(facets.is_ok());
  EXPECT_EQ(facets->facets.size(), 1u);
  ASSERT_EQ(facets->problems.size(), 1u);
  EXPECT_NE(facets->problems[0].find("aker"), std::string::npos);
  auto skipped = (*store)->export_json(path("out.json"));
  ASSERT_TRUE(skipped.is_ok()) << skipped.status().to_string();
  EXPECT_EQ(skipped->size(), 3u);
  std::ifstream in(path("out.json"));
  const auto exported = nlohmann::json::parse(in);
  EXPECT_EQ(exported["profiles"].size(), 2u);
  EXPECT_EQ(exported["facets"].size(), 1u);
  // The one damaged row does not stop the profiler: it reads as missing everything.
  auto writer = ProfileStore::open(p);
  ASSERT_TRUE(writer.is_ok());
  auto missing = (*writer)->missing(key_of("kmeans", 64), ProfileFields::all());
  ASSERT_TRUE(missing.is_ok());
  EXPECT_EQ(*missing, ProfileFields::all());
}

// The offset of the b-tree page holding `marker` in a table's leaf (page type 0x0D), or -1.
int64_t table_leaf_page_with(const std::string& bytes, const std::string& marker, size_t page_size) {
  for (size_t at = bytes.find(marker); at != std::string::npos; at = bytes.find(marker, at + 1)) {
    const size_t page = at / page_size * page_size;
    const size_t header = page == 0 ? 100 : page;
    if (static_cast<unsigned char>(bytes[header]) == 0x0D) return static_cast<int64_t>(page);
  }
  return -1;
}

TEST_F(StoreTest, ADamagedPageLosesOnlyItsRowsAndBlocksWriting) {
  const std::string p = path("damaged.db");
  {
    auto store = ProfileStore::open(p);
    ASSERT_TRUE(store.is_ok());
    for (int i = 0; i < 300; ++i) {
      KernelProfile k = sample("k" + std::to_string(i), 64);
      k.key.gpu = "GPU-" + std::to_string(i) + "-MARK";  // also in the index; the leaf test tells them apart
      ASSERT_TRUE((*store)->put(k).is_ok());
    }
  }
  ASSERT_FALSE(std::filesystem::exists(p + "-wal") && std::filesystem::file_size(p + "-wal") > 0)
      << "closing the store checkpoints its WAL into the file";
  std::string bytes = read_bytes(p);
  const size_t page_size = (static_cast<unsigned char>(bytes[16]) << 8) | static_cast<unsigned char>(bytes[17]);
  const int64_t page = table_leaf_page_with(bytes, "GPU-150-MARK", page_size);
  ASSERT_GE(page, 0);
  bytes[static_cast<size_t>(page)] = 0x00;  // no valid b-tree page type
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  // For writing: refused with quick_check's finding, file untouched.
  auto w = ProfileStore::open(p);
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("damaged (PRAGMA quick_check"), std::string::npos) << w.status().message();
  EXPECT_EQ(read_bytes(p), bytes);
  // For reading: every row on the other pages, the lost rowids named.
  auto r = ProfileStore::open(p, /*read_only=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE((*r)->integrity_problems().empty());
  auto all = (*r)->all();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  EXPECT_LT(all->profiles.size(), 300u);
  EXPECT_GT(all->profiles.size(), 280u);
  ASSERT_FALSE(all->problems.empty());
  EXPECT_NE(all->problems[0].find("unreadable"), std::string::npos) << all->problems[0];
  EXPECT_TRUE(std::none_of(all->profiles.begin(), all->profiles.end(),
                           [](const KernelProfile& k) { return k.key.gpu == "GPU-150-MARK"; }));
  EXPECT_TRUE(std::any_of(all->profiles.begin(), all->profiles.end(),
                          [](const KernelProfile& k) { return k.key.gpu == "GPU-299-MARK"; }))
      << "rows after the damaged page are read";
  auto skipped = (*r)->export_json(path("rescued.json"));
  ASSERT_TRUE(skipped.is_ok()) << skipped.status().to_string();
  EXPECT_FALSE(skipped->empty());
  auto fresh = ProfileStore::open(path("fresh.db"));
  ASSERT_TRUE(fresh.is_ok());
  auto n = (*fresh)->import_json(path("rescued.json"));
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_EQ(*n, static_cast<int>(all->profiles.size()));
}

// Runs `check` as an unprivileged user when this process is root (root ignores permissions), and
// returns what it reported ("" when every check passed).
std::string as_unprivileged(const std::function<std::string()>& check) {
  if (::geteuid() != 0) return check();
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out = ::setgid(65534) == 0 && ::setuid(65534) == 0 ? check() : "setuid failed";
    if (::write(fds[1], out.data(), out.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out += " (checker exited abnormally)";
  return out;
}

TEST_F(StoreTest, AReadOnlyStoreIsReportedAsReadOnlyAndStillReads) {
  const std::string p = path("ro.db");
  {
    auto store = ProfileStore::open(p);
    ASSERT_TRUE(store.is_ok());
    ASSERT_TRUE((*store)->put(sample("bfs", 1024)).is_ok());
  }
  ::chmod(p.c_str(), 0444);
  ::chmod(dir_.c_str(), 0555);
  const std::string report = as_unprivileged([&]() -> std::string {
    std::string out;
    auto w = ProfileStore::open(p);
    if (w.is_ok()) {
      out += "opened a read-only store for writing; ";
    } else if (w.status().message().find("read-only") == std::string::npos ||
               w.status().message().find("not a Concord") != std::string::npos) {
      out += "writing: " + w.status().message() + "; ";
    }
    auto r = ProfileStore::open(p, /*read_only=*/true);
    if (!r.is_ok()) return out + "reading: " + r.status().message();
    auto all = (*r)->all();
    if (!all.is_ok() || all->profiles.size() != 1) out += "reading listed " + (all.is_ok() ? std::to_string(all->profiles.size()) : all.status().message());
    auto create = ProfileStore::open((dir_ / "new.db").string());
    if (create.is_ok() || create.status().message().find("read-only") == std::string::npos) {
      out += "creating in a read-only directory: " + (create.is_ok() ? std::string("accepted") : create.status().message());
    }
    return out;
  });
  ::chmod(dir_.c_str(), 0755);
  ::chmod(p.c_str(), 0644);
  EXPECT_EQ(report, "");
}

TEST_F(StoreTest, ImportedValuesAreValidatedNamingFileKernelAndField) {
  auto store = ProfileStore::open(path("v.db"));
  ASSERT_TRUE(store.is_ok());
  ASSERT_TRUE((*store)->put(sample("keep", 8)).is_ok());
  struct Case {
    std::string field;
    std::function<void(nlohmann::json&)> spoil;
  };
  const std::vector<Case> cases = {
      {"sm_curve[1]", [](nlohmann::json& j) { j["sm_curve"] = {{8, 2.0}, {4, 3.0}}; }},                    // unsorted
      {"sm_curve[1]", [](nlohmann::json& j) { j["sm_curve"] = {{8, 2.0}, {8, 2.0}}; }},                    // duplicate
      {"sm_curve[0]", [](nlohmann::json& j) { j["sm_curve"] = {{8, -2.0}}; }},                             // negative
      {"sm_curve[0]", [](nlohmann::json& j) { j["sm_curve"] = {{0, 2.0}}; }},                              // no SMs
      {"cache_seconds[2]", [](nlohmann::json& j) { j["cache_seconds"] = {1, 1, -1, 1}; }},
      {"demand", [](nlohmann::json& j) { j["demand"] = 1.5; }},
      {"tlp_seconds", [](nlohmann::json& j) { j["tlp_seconds"] = "fast"; }},
      {"key.size", [](nlohmann::json& j) { j["key"]["size"] = -4; }},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json good = nlohmann::json::parse(profile_to_json(sample("fine", 16)));
    nlohmann::json bad = nlohmann::json::parse(profile_to_json(sample("spoilt", 32)));
    cases[i].spoil(bad);
    const std::string file = path("bad" + std::to_string(i) + ".json");
    std::ofstream(file) << nlohmann::json{{"profiles", {good, bad}}}.dump();
    auto n = (*store)->import_json(file);
    ASSERT_FALSE(n.is_ok()) << cases[i].field;
    const std::string m = n.status().message();
    EXPECT_NE(m.find(file), std::string::npos) << m;
    EXPECT_NE(m.find("profiles[1]"), std::string::npos) << m;
    EXPECT_NE(m.find("field '" + cases[i].field), std::string::npos) << m;
    EXPECT_NE(m.find("spoilt"), std::string::npos) << m;
  }
  // A facet with a metric out of range, and a session with negative seconds.
  const nlohmann::json facet_key = {{"gpu", "H200"}, {"driver", "580"}, {"kernel", "spoilt"}, {"variant", "mid"}, {"size", 32}};
  std::ofstream(path("badfacet.json")) << nlohmann::json{
      {"profiles", nlohmann::json::array()},
      {"facets", {{{"key", facet_key}, {"facet", "raise"}, {"payload", nlohmann::json::parse(raise_json(12))}}}}}.dump();
  auto f = (*store)->import_json(path("badfacet.json"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("facets[0]"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("spoilt"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("metrics.AOC"), std::string::npos) << f.status().message();
  std::ofstream(path("badsession.json")) << R"({"profiles": [], "sessions": [{"gpu": "H200", "seconds": -3}]})";
  auto s = (*store)->import_json(path("badsession.json"));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("sessions[0]"), std::string::npos) << s.status().message();
  // Nothing of the refused files got in.
  auto all = (*store)->all();
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all->profiles.size(), 1u);
  EXPECT_EQ(all->profiles[0].key.kernel, "keep");
  EXPECT_TRUE((*store)->all_facets()->facets.empty());
  EXPECT_TRUE((*store)->sessions()->empty());
}

TEST_F(StoreTest, ImportsAnOlderExportWithRaiseMetricsInItsProfiles) {
  // `profile export` of schema v2: RAISE's metrics and class inside each profile.
  nlohmann::json with = nlohmann::json::parse(v2_payload("hotspot", true));
  nlohmann::json without = nlohmann::json::parse(v2_payload("srad", false));
  std::ofstream(path("old.json")) << nlohmann::json{{"concord_profiles", 2}, {"profiles", {with, without}}}.dump();
  auto store = ProfileStore::open(path("o.db"));
  ASSERT_TRUE(store.is_ok());
  auto n = (*store)->import_json(path("old.json"));
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_EQ(*n, 3);  // two profiles, one facet
  auto facet = (*store)->get_facet(key_of("hotspot", 512), policy::kRaiseFacetName);
  ASSERT_TRUE(facet.is_ok() && facet->has_value());
  EXPECT_EQ(*policy::raise_facet_from_json(**facet), (RaiseVector{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(*policy::raise_facet_class(**facet), RaiseClass::mem);
  EXPECT_FALSE((*store)->get_facet(key_of("srad", 512), policy::kRaiseFacetName)->has_value());
  // A metric out of range in such an export is refused, naming the entry, kernel and field.
  with["raise"]["DU"] = 40;
  std::ofstream(path("old-bad.json")) << nlohmann::json{{"profiles", {with}}}.dump();
  auto bad = (*store)->import_json(path("old-bad.json"));
  ASSERT_FALSE(bad.is_ok());
  const std::string m = bad.status().message();
  EXPECT_NE(m.find("profiles[0] (hotspot"), std::string::npos) << m;
  EXPECT_NE(m.find("metrics.DU"), std::string::npos) << m;
}

TEST_F(StoreTest, AStoreIsCreatedByItsFirstWrite) {
  const std::string p = path("lazy.db");
  auto store = ProfileStore::open(p);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_TRUE((*store)->all()->profiles.empty());
  EXPECT_FALSE((*store)->get(key_of("bfs", 1))->has_value());
  EXPECT_FALSE((*store)->find("bfs", "mid", 1)->has_value());
  EXPECT_TRUE((*store)->facets_of(key_of("bfs", 1))->empty());
  EXPECT_EQ(*(*store)->missing(key_of("bfs", 1), ProfileFields::all()), ProfileFields::all());
  EXPECT_FALSE(std::filesystem::exists(p));
  ASSERT_TRUE((*store)->put_facet(key_of("bfs", 1), "example", "{}").is_ok());
  EXPECT_TRUE(std::filesystem::exists(p));
  auto again = ProfileStore::open(p, /*read_only=*/true);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->schema_version(), ProfileStore::kSchemaVersion);
  auto no_dir = ProfileStore::open(path("no/such/dir/p.db"));
  ASSERT_FALSE(no_dir.is_ok());
  EXPECT_NE(no_dir.status().message().find("does not exist"), std::string::npos);
  auto a_dir = ProfileStore::open(dir_.string());
  ASSERT_FALSE(a_dir.is_ok());
  EXPECT_NE(a_dir.status().message().find("directory"), std::string::npos);
}

TEST(ProfileFieldsTest, SetOperationsAndNames) {
  const ProfileFields a{ProfileField::sm_curve, ProfileField::tlp};
  EXPECT_TRUE(a.contains(ProfileField::tlp));
  EXPECT_FALSE(a.contains(ProfileField::cache));
  EXPECT_EQ(a.to_string(), "sm_curve, tlp");
  EXPECT_EQ(ProfileFields().to_string(), "none");
  EXPECT_EQ(ProfileFields::all().without(a), (ProfileFields{ProfileField::cache, ProfileField::cache_pressure, ProfileField::linear}));
  EXPECT_EQ((a & ProfileFields{ProfileField::tlp}), ProfileFields{ProfileField::tlp});
  KernelProfile p;
  EXPECT_TRUE(measured_fields(p).empty());
  p.linear_intercept = -1e-6;  // a fit may cross zero: still a measurement
  EXPECT_EQ(measured_fields(p), ProfileFields{ProfileField::linear});
}

}  // namespace
}  // namespace concord
