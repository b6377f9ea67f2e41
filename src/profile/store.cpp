// The SQLite profile store. Schema history:
//   v1: profiles(gpu, driver, kernel, variant, size, payload JSON, measured_at)
//   v2: sessions(gpu, driver, seconds, profiles, finished_at): how long profiling took
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "concord/profile.h"
#include "concord/workload.h"

namespace concord {
namespace {

constexpr int kApplicationId = 0x434F4E43;  // "CONC"

const char* const kMigrations[] = {
    // v1
    "CREATE TABLE profiles (gpu TEXT NOT NULL, driver TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL,"
    " size INTEGER NOT NULL, payload TEXT NOT NULL, measured_at TEXT NOT NULL DEFAULT (datetime('now')),"
    " PRIMARY KEY (gpu, driver, kernel, variant, size));",
    // v2
    "CREATE TABLE sessions (id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, driver TEXT NOT NULL, seconds REAL NOT NULL,"
    " profiles INTEGER NOT NULL, finished_at TEXT NOT NULL DEFAULT (datetime('now')));",
};
static_assert(std::size(kMigrations) == ProfileStore::kSchemaVersion);

}  // namespace

struct ProfileStore::Db {
  sqlite3* handle = nullptr;
  ~Db() {
    if (handle) sqlite3_close_v2(handle);
  }
};

namespace {

Status sql_error(sqlite3* db, const std::string& path, const std::string& what) {
  return Status::io_error(path + ": " + what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

// A prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() const { return s_; }
  void text(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.c_str(), -1, SQLITE_TRANSIENT); }
  void integer(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void real(int i, double v) { sqlite3_bind_double(s_, i, v); }
  int step() { return sqlite3_step(s_); }
  std::string column_text(int i) const {
    const auto* t = sqlite3_column_text(s_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

Result<int64_t> pragma_int(sqlite3* db, const std::string& path, const char* sql) {
  Stmt s(db, sql);
  if (!s.ok()) return sql_error(db, path, std::string("cannot read ") + sql);
  if (s.step() != SQLITE_ROW) return sql_error(db, path, std::string("cannot read ") + sql);
  return static_cast<int64_t>(sqlite3_column_int64(s.get(), 0));
}

}  // namespace

ProfileStore::~ProfileStore() = default;

Result<std::unique_ptr<ProfileStore>> ProfileStore::open(const std::string& path, bool read_only) {
  const bool exists = std::filesystem::exists(path);
  if (!exists && read_only) return Status::not_found(path + ": no profile store");
  std::unique_ptr<ProfileStore> store(new ProfileStore());
  store->path_ = path;
  store->db_ = std::make_unique<Db>();
  const int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (sqlite3_open_v2(path.c_str(), &store->db_->handle, flags, nullptr) != SQLITE_OK) {
    return sql_error(store->db_->handle, path, "cannot open profile store");
  }
  sqlite3* db = store->db_->handle;
  sqlite3_busy_timeout(db, 5000);
  // Identify the file before writing anything to it.
  auto tables = pragma_int(db, path, "SELECT count(*) FROM sqlite_master");
  if (!tables) {
    return Status::parse_error(path + ": not a Concord profile store (not an SQLite database, or corrupt); left untouched");
  }
  auto app = pragma_int(db, path, "PRAGMA application_id");
  auto version = pragma_int(db, path, "PRAGMA user_version");
  if (!app || !version) return app ? version.status() : app.status();
  const bool empty = *tables == 0 && *app == 0 && *version == 0;
  if (!empty && *app != kApplicationId) {
    return Status::parse_error(path + ": not a Concord profile store (another application's database, application_id " +
                               std::to_string(*app) + "); left untouched");
  }
  if (*version > kSchemaVersion) {
    return Status::failed_precondition(path + ": schema version " + std::to_string(*version) +
                                       " is newer than this Concord's " + std::to_string(kSchemaVersion));
  }
  store->version_ = static_cast<int>(*version);
  if (read_only) {
    if (store->version_ < kSchemaVersion) {
      return Status::failed_precondition(path + ": schema version " + std::to_string(*version) +
                                         " needs a migration; open it for writing once");
    }
    return store;
  }
  char* err = nullptr;
  if (sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "?";
    sqlite3_free(err);
    return Status::io_error(path + ": cannot enable WAL: " + msg);
  }
  for (int v = store->version_ + 1; v <= kSchemaVersion; ++v) {
    const std::string sql = std::string("BEGIN IMMEDIATE; ") + kMigrations[v - 1] + " PRAGMA application_id = " +
                            std::to_string(kApplicationId) + "; PRAGMA user_version = " + std::to_string(v) + "; COMMIT;";
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : "?";
      sqlite3_free(err);
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return Status::io_error(path + ": migration to schema v" + std::to_string(v) + " failed: " + msg);
    }
    store->version_ = v;
  }
  return store;
}

Status ProfileStore::put(const KernelProfile& p) {
  sqlite3* db = db_->handle;
  Stmt s(db,
         "INSERT OR REPLACE INTO profiles (gpu, driver, kernel, variant, size, payload, measured_at)"
         " VALUES (?, ?, ?, ?, ?, ?, datetime('now'))");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare insert");
  s.text(1, p.key.gpu);
  s.text(2, p.key.driver);
  s.text(3, p.key.kernel);
  s.text(4, p.key.variant);
  s.integer(5, p.key.size);
  s.text(6, profile_to_json(p));
  if (s.step() != SQLITE_DONE) return sql_error(db, path_, "cannot store profile " + p.key.to_string());
  return Status::ok();
}

Result<std::optional<KernelProfile>> ProfileStore::get(const ProfileKey& key) const {
  sqlite3* db = db_->handle;
  Stmt s(db, "SELECT payload FROM profiles WHERE gpu = ? AND driver = ? AND kernel = ? AND variant = ? AND size = ?");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare lookup");
  s.text(1, key.gpu);
  s.text(2, key.driver);
  s.text(3, key.kernel);
  s.text(4, key.variant);
  s.integer(5, key.size);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<KernelProfile>();
  if (rc != SQLITE_ROW) return sql_error(db, path_, "cannot read profile " + key.to_string());
  auto p = profile_from_json(s.column_text(0));
  if (!p) return Status(p.status().code(), path_ + ": " + key.to_string() + ": " + p.status().message());
  return std::optional<KernelProfile>(std::move(*p));
}

Result<std::optional<KernelProfile>> ProfileStore::find(const std::string& kernel, const std::string& variant, int64_t size,
                                                        const std::string& gpu) const {
  sqlite3* db = db_->handle;
  Stmt s(db,
         "SELECT payload FROM profiles WHERE kernel = ? AND variant = ? AND size = ? AND (? = '' OR gpu = ?)"
         " ORDER BY measured_at DESC LIMIT 1");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare lookup");
  s.text(1, kernel);
  s.text(2, variant);
  s.integer(3, size);
  s.text(4, gpu);
  s.text(5, gpu);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<KernelProfile>();
  if (rc != SQLITE_ROW) return sql_error(db, path_, "cannot read profiles");
  auto p = profile_from_json(s.column_text(0));
  if (!p) return p.status();
  return std::optional<KernelProfile>(std::move(*p));
}

Result<std::vector<KernelProfile>> ProfileStore::all() const {
  sqlite3* db = db_->handle;
  Stmt s(db, "SELECT payload FROM profiles ORDER BY gpu, kernel, variant, size");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare listing");
  std::vector<KernelProfile> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    auto p = profile_from_json(s.column_text(0));
    if (!p) return Status(p.status().code(), path_ + ": " + p.status().message());
    out.push_back(std::move(*p));
  }
  if (rc != SQLITE_DONE) return sql_error(db, path_, "cannot list profiles");
  return out;
}

Status ProfileStore::record_session(const std::string& gpu, const std::string& driver, double seconds, int profiles) {
  sqlite3* db = db_->handle;
  Stmt s(db, "INSERT INTO sessions (gpu, driver, seconds, profiles) VALUES (?, ?, ?, ?)");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare session insert");
  s.text(1, gpu);
  s.text(2, driver);
  s.real(3, seconds);
  s.integer(4, profiles);
  if (s.step() != SQLITE_DONE) return sql_error(db, path_, "cannot record session");
  return Status::ok();
}

Result<std::vector<ProfileStore::Session>> ProfileStore::sessions() const {
  sqlite3* db = db_->handle;
  Stmt s(db, "SELECT gpu, driver, seconds, profiles, finished_at FROM sessions ORDER BY id");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare session listing");
  std::vector<Session> out;
  while (s.step() == SQLITE_ROW) {
    out.push_back({s.column_text(0), s.column_text(1), s.column_text(4), sqlite3_column_double(s.get(), 2),
                   sqlite3_column_int(s.get(), 3)});
  }
  return out;
}

Status ProfileStore::export_json(const std::string& path) const {
  auto profiles = all();
  if (!profiles) return profiles.status();
  auto sess = sessions();
  if (!sess) return sess.status();
  nlohmann::json j;
  j["concord_profiles"] = kSchemaVersion;
  j["profiles"] = nlohmann::json::array();
  for (const auto& p : *profiles) j["profiles"].push_back(nlohmann::json::parse(profile_to_json(p)));
  j["sessions"] = nlohmann::json::array();
  for (const auto& s : *sess) {
    j["sessions"].push_back({{"gpu", s.gpu}, {"driver", s.driver}, {"seconds", s.seconds}, {"profiles", s.profiles},
                             {"finished_at", s.finished_at}});
  }
  std::ofstream out(path);
  if (!out) return Status::not_found(path + ": cannot write export");
  out << j.dump(1) << "\n";
  return out ? Status::ok() : Status::internal(path + ": write failed");
}

Result<int> ProfileStore::import_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found(path + ": cannot open profile export");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::parse_error(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("profiles") || !j["profiles"].is_array()) {
    return Status::parse_error(path + ": field 'profiles': missing or not a list (not a Concord profile export)");
  }
  // All or nothing: a bad entry leaves the store as it was.
  std::vector<KernelProfile> parsed;
  for (size_t i = 0; i < j["profiles"].size(); ++i) {
    auto p = profile_from_json(j["profiles"][i].dump());
    if (!p) return Status::parse_error(path + ": field 'profiles[" + std::to_string(i) + "]': " + p.status().message());
    parsed.push_back(std::move(*p));
  }
  sqlite3* db = db_->handle;
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) return sql_error(db, path_, "cannot begin import");
  for (const auto& p : parsed) {
    if (Status s = put(p); !s) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
  }
  if (j.contains("sessions") && j["sessions"].is_array()) {
    for (const auto& s : j["sessions"]) {
      if (Status st = record_session(s.value("gpu", ""), s.value("driver", ""), s.value("seconds", 0.0), s.value("profiles", 0));
          !st) {
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        return st;
      }
    }
  }
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return sql_error(db, path_, "cannot commit import");
  return static_cast<int>(parsed.size());
}

Result<int> attach_profiles(Workload& workload, const ProfileStore& store, const std::string& gpu) {
  int attached = 0;
  for (TenantSpec& t : workload.tenants) {
    for (KernelStep& s : t.steps) {
      KernelSpec& k = s.kernel;
      bool any = false;
      // RAISE metrics of every variant that has them.
      for (KernelVariant& v : k.variants) {
        auto pv = store.find(k.name, v.name, k.size, gpu);
        if (!pv) return pv.status();
        if (*pv && (*pv)->raise) {
          v.raise_metrics = *(*pv)->raise;
          any = true;
        }
      }
      auto p = store.find(k.name, k.variant(k.default_variant).name, k.size, gpu);
      if (!p) return p.status();
      if (*p && !(*p)->sm_curve.empty()) {
        k.sm_curve = (*p)->sm_curve;
        const auto& c = (*p)->cache_seconds;
        for (size_t i = 0; i < c.size(); ++i) k.cache_slowdown[i] = c[0] > 0 && c[i] > 0 ? c[i] / c[0] : 1.0;
        const auto& q = (*p)->cache_pressure_seconds;
        for (size_t i = 0; i < q.size(); ++i) k.cache_slowdown_pressure[i] = q[0] > 0 && q[i] > 0 ? q[i] / q[0] : 0.0;
        any = true;
      }
      if (any) ++attached;
    }
  }
  return attached;
}

}  // namespace concord
