// The SQLite profile store (its schema and its history: store_schema.cpp).
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "concord/profile.h"
#include "concord/workload.h"
#include "concord/facet_codec.h"
#include "profile/sqlite_util.h"
#include "profile/store_schema.h"

namespace concord {

using sqlite_util::sql_error;
using sqlite_util::Stmt;
using sqlite_util::Transaction;
using sqlite_util::open_error;
using sqlite_util::pragma_int;
using sqlite_util::StoreHeader;
using sqlite_util::read_header;
using sqlite_util::file_uri;
using sqlite_util::quick_check;
using sqlite_util::joined;
using sqlite_util::key_of_row;
using sqlite_util::scan_rows;

namespace {

// Keys of a profile's JSON payload that each field owns; the rest is the static description.
std::vector<const char*> json_keys_of(ProfileField f) {
  switch (f) {
    case ProfileField::sm_curve: return {"sm_curve", "demand_sms", "demand", "compute_utilization", "memory_utilization"};
    case ProfileField::cache: return {"cache_seconds"};
    case ProfileField::cache_pressure: return {"cache_pressure_seconds"};
    case ProfileField::tlp: return {"tlp_seconds"};
    case ProfileField::linear: return {"linear"};
  }
  return {};
}
constexpr const char* kStaticKeys[] = {"key", "elastic", "logical_blocks", "flops_per_block", "bytes_per_block", "resources"};

}  // namespace

struct ProfileStore::Db {
  sqlite3* handle = nullptr;
  bool ready = false;  // connected, in WAL mode, schema up to date
  ~Db() {
    if (handle) sqlite3_close_v2(handle);
  }
};

namespace {

// Checks a facet's JSON: an object; a facet a policy folder registered a codec for also by it.
Status check_facet(const std::string& facet, const std::string& json) {
  if (facet.empty()) return Status::invalid_argument("facet name is empty");
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::invalid_argument("facet '" + facet + "': not a JSON object");
  if (const FacetCodec* codec = find_facet_codec(facet)) return codec->check(json);
  return Status::ok();
}

std::string key_text(const ProfileKey& k) { return k.kernel + " " + k.variant + " " + std::to_string(k.size) + " on " + k.gpu; }

}  // namespace

ProfileStore::~ProfileStore() = default;

Result<std::unique_ptr<ProfileStore>> ProfileStore::open(const std::string& path, bool read_only) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (std::filesystem::is_directory(path, ec)) return Status::invalid_argument(path + ": is a directory, not a profile store");
  std::unique_ptr<ProfileStore> store(new ProfileStore());
  store->path_ = path;
  store->db_ = std::make_unique<Db>();
  if (!exists) {
    if (read_only) return Status::not_found(path + ": no profile store");
    // Created by the first write; its directory must take the file (and the -wal, -shm files).
    const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
    if (!std::filesystem::is_directory(parent, ec)) return Status::not_found(path + ": directory " + parent.string() + " does not exist");
    if (::access(parent.c_str(), W_OK) != 0) {
      return Status::io_error(path + ": cannot create the profile store: directory " + parent.string() + " is read-only");
    }
    store->version_ = kSchemaVersion;
    return store;
  }
  if (!read_only) {
    const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
    if (::access(path.c_str(), W_OK) != 0) {
      return Status::io_error(path + ": read-only: no write permission on the file; open it for reading (show, export) or"
                              " fix its permissions");
    }
    if (::access(parent.c_str(), W_OK) != 0) {
      return Status::io_error(path + ": read-only: directory " + parent.string() +
                              " is not writable (the store's -wal and -shm files live there); open it for reading (show,"
                              " export) or fix the permissions");
    }
  }
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  sqlite3*& db = store->db_->handle;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) return open_error(db, path, read_only);
  sqlite3_busy_timeout(db, 5000);
  // Identify the file before writing anything to it.
  Result<int64_t> tables = pragma_int(db, path, "SELECT count(*) FROM sqlite_master");
  const int first_error = sqlite3_extended_errcode(db) & 0xFF;
  if (!tables && read_only &&
      (first_error == SQLITE_CANTOPEN || first_error == SQLITE_READONLY || first_error == SQLITE_PERM)) {
    // A store in WAL mode on a read-only medium or in a directory this user cannot write: its
    // -shm file cannot be made, so read the file as immutable (no locking; nothing writes it).
    sqlite3_close_v2(db);
    db = nullptr;
    if (sqlite3_open_v2(file_uri(path, "immutable=1").c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) !=
        SQLITE_OK) {
      return open_error(db, path, read_only);
    }
    tables = pragma_int(db, path, "SELECT count(*) FROM sqlite_master");
  }
  if (!tables) return open_error(db, path, read_only);
  if (!read_only && sqlite3_db_readonly(db, "main") == 1) {
    return Status::io_error(path + ": read-only: no write permission on the file; open it for reading (show, export) or"
                            " fix its permissions");
  }
  auto header = read_header(db, path);
  if (!header) return header.status();
  const int64_t version = header->version;
  const bool empty = header->tables == 0 && header->app == 0 && version == 0;
  if (!empty && header->app != kStoreApplicationId) {
    return Status::parse_error(path + ": not a Concord profile store (another application's database, application_id " +
                               std::to_string(header->app) + "); left untouched");
  }
  if (version > kSchemaVersion) {
    return Status::failed_precondition(path + ": schema version " + std::to_string(version) +
                                       " is newer than this Concord's " + std::to_string(kSchemaVersion));
  }
  store->version_ = static_cast<int>(version);
  std::vector<std::string> damage = quick_check(db);
  if (!damage.empty()) {
    if (!read_only) {
      return Status::parse_error(path + ": the profile store is damaged (PRAGMA quick_check: " + joined(damage, 3) +
                                 "); not opened for writing and left untouched; `concord profile export` reads what it"
                                 " can into a JSON file that `profile import` loads into a fresh store");
    }
    store->integrity_problems_ = std::move(damage);
  }
  if (read_only) {
    if (store->version_ < kSchemaVersion) {
      return Status::failed_precondition(path + ": schema version " + std::to_string(version) +
                                         " needs a migration; open it for writing once");
    }
    return store;
  }
  CONCORD_RETURN_IF_ERROR(store->ensure_created());
  return store;
}

// Connects to (creating) the file when no connection is open yet, and brings its schema up to
// date. Each migration step is its own transaction and re-reads the version inside it, so
// processes opening one store at once migrate it once.
Status ProfileStore::ensure_created() {
  if (db_->ready) return Status::ok();
  sqlite3*& db = db_->handle;
  if (!db) {
    if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
      return open_error(db, path_, false);
    }
    sqlite3_busy_timeout(db, 5000);
    auto header = read_header(db, path_);
    if (!header) return open_error(db, path_, false);
    if (header->app != kStoreApplicationId && (header->app != 0 || header->tables != 0 || header->version != 0)) {
      return Status::parse_error(path_ + ": not a Concord profile store (made by another program meanwhile); left untouched");
    }
  }
  char* err = nullptr;
  // Switching to WAL needs the file to itself: while another process holds it (or rolls back the
  // journal of one that was killed) SQLite may answer busy without waiting, so try again for the
  // busy timeout's length.
  for (int tries = 0;; ++tries) {
    const int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err);
    if (rc == SQLITE_OK) break;
    const std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    err = nullptr;
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || tries >= 500) return Status::io_error(path_ + ": cannot enable WAL: " + msg);
    sqlite3_sleep(10);
  }
  auto current = pragma_int(db, path_, "PRAGMA user_version");
  if (!current) return current.status();
  for (int v = static_cast<int>(*current) + 1; v <= kSchemaVersion; ++v) {
    Transaction tx(db, path_);
    CONCORD_RETURN_IF_ERROR(tx.begin("migration to schema v" + std::to_string(v)));
    auto have = pragma_int(db, path_, "PRAGMA user_version");
    if (!have) return have.status();
    if (*have >= v) continue;
    const std::string sql = std::string(store_migrations()[static_cast<size_t>(v - 1)]) + " PRAGMA application_id = " + std::to_string(kStoreApplicationId) +
                            "; PRAGMA user_version = " + std::to_string(v) + ";";
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : sqlite3_errmsg(db);
      sqlite3_free(err);
      return Status::io_error(path_ + ": migration to schema v" + std::to_string(v) + " failed: " + msg);
    }
    CONCORD_RETURN_IF_ERROR(tx.commit("migration to schema v" + std::to_string(v)));
  }
  version_ = kSchemaVersion;
  db_->ready = true;
  return Status::ok();
}

Status ProfileStore::put(const KernelProfile& p) {
  if (Status s = validate_profile(p); !s) return Status::invalid_argument(path_ + ": " + key_text(p.key) + ": " + s.message());
  CONCORD_RETURN_IF_ERROR(ensure_created());
  sqlite3* db = db_->handle;
  Stmt s(db,
         "INSERT OR REPLACE INTO profiles (gpu, driver, kernel, variant, size, payload, measured_at)"
         " VALUES (?, ?, ?, ?, ?, ?, datetime('now'))");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare insert");
  s.key(1, p.key);
  s.text(6, profile_to_json(p));
  if (s.step() != SQLITE_DONE) return sql_error(db, path_, "cannot store profile " + p.key.to_string());
  return Status::ok();
}

Status ProfileStore::merge(const KernelProfile& p, ProfileFields fields) {
  if (Status s = validate_profile(p); !s) return Status::invalid_argument(path_ + ": " + key_text(p.key) + ": " + s.message());
  CONCORD_RETURN_IF_ERROR(ensure_created());
  sqlite3* db = db_->handle;
  const std::string what = "update of " + p.key.to_string() + " (" + fields.to_string() + ")";
  Transaction tx(db, path_);
  CONCORD_RETURN_IF_ERROR(tx.begin(what));
  nlohmann::json stored = nlohmann::json::object();
  {
    Stmt s(db, "SELECT payload FROM profiles WHERE gpu = ? AND driver = ? AND kernel = ? AND variant = ? AND size = ?");
    if (!s.ok()) return sql_error(db, path_, "cannot prepare " + what);
    s.key(1, p.key);
    const int rc = s.step();
    if (rc == SQLITE_ROW) {
      // A payload that cannot be read is replaced (missing() reported all its fields missing).
      auto j = nlohmann::json::parse(s.column_text(0), nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded() && j.is_object() && profile_from_json(s.column_text(0))) stored = std::move(j);
    } else if (rc != SQLITE_DONE) {
      return sql_error(db, path_, "cannot read for " + what);
    }
  }
  const nlohmann::json fresh = nlohmann::json::parse(profile_to_json(p));
  const double seconds_before = stored.value("profile_seconds", 0.0);
  for (const char* k : kStaticKeys) stored[k] = fresh.at(k);
  for (ProfileField f : kAllProfileFields) {
    if (!fields.contains(f)) continue;
    for (const char* k : json_keys_of(f)) stored[k] = fresh.at(k);
  }
  stored["profile_seconds"] = seconds_before + p.profile_seconds;
  Stmt w(db,
         "INSERT INTO profiles (gpu, driver, kernel, variant, size, payload, measured_at) VALUES (?, ?, ?, ?, ?, ?,"
         " datetime('now')) ON CONFLICT (gpu, driver, kernel, variant, size) DO UPDATE SET payload = excluded.payload,"
         " measured_at = excluded.measured_at");
  if (!w.ok()) return sql_error(db, path_, "cannot prepare " + what);
  w.key(1, p.key);
  w.text(6, stored.dump());
  if (w.step() != SQLITE_DONE) return sql_error(db, path_, "cannot write " + what);
  return tx.commit(what);
}

Result<ProfileFields> ProfileStore::missing(const ProfileKey& key, ProfileFields wanted) const {
  auto p = get(key);
  if (!p) {
    if (p.status().code() == StatusCode::parse_error) return wanted;  // a damaged row: measure it afresh
    return p.status();
  }
  if (!p->has_value()) return wanted;
  return wanted.without(measured_fields(**p));
}

Result<std::optional<KernelProfile>> ProfileStore::get(const ProfileKey& key) const {
  sqlite3* db = db_->handle;
  if (!db) return std::optional<KernelProfile>();
  Stmt s(db, "SELECT payload FROM profiles WHERE gpu = ? AND driver = ? AND kernel = ? AND variant = ? AND size = ?");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare lookup");
  s.key(1, key);
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
  if (!db) return std::optional<KernelProfile>();
  Stmt s(db,
         "SELECT payload, gpu, driver FROM profiles WHERE kernel = ? AND variant = ? AND size = ? AND (? = '' OR gpu = ?)"
         " ORDER BY measured_at DESC, rowid DESC LIMIT 1");
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
  if (!p) {
    return Status(p.status().code(), path_ + ": " + s.column_text(1) + "/" + s.column_text(2) + "/" + kernel + "/" + variant +
                                         "/" + std::to_string(size) + ": " + p.status().message());
  }
  return std::optional<KernelProfile>(std::move(*p));
}

Result<ProfileListing> ProfileStore::all() const {
  ProfileListing out;
  sqlite3* db = db_->handle;
  if (!db) return out;
  CONCORD_RETURN_IF_ERROR(scan_rows(db, path_, "profiles", "gpu, driver, kernel, variant, size, payload", out.problems,
                                    [&](const Stmt& s) {
                                      const ProfileKey key = key_of_row(s, 1);
                                      auto p = profile_from_json(s.column_text(6));
                                      if (!p) {
                                        out.problems.push_back(path_ + ": profile " + key.to_string() +
                                                               ": unreadable, skipped: " + p.status().message());
                                      } else {
                                        out.profiles.push_back(std::move(*p));
                                      }
                                    }));
  std::sort(out.profiles.begin(), out.profiles.end(), [](const KernelProfile& a, const KernelProfile& b) {
    return std::tie(a.key.gpu, a.key.kernel, a.key.variant, a.key.size, a.key.driver) <
           std::tie(b.key.gpu, b.key.kernel, b.key.variant, b.key.size, b.key.driver);
  });
  return out;
}

Status ProfileStore::put_facet(const ProfileKey& key, const std::string& facet, const std::string& json) {
  if (Status s = check_facet(facet, json); !s) return Status::invalid_argument(path_ + ": " + key_text(key) + ": " + s.message());
  CONCORD_RETURN_IF_ERROR(ensure_created());
  sqlite3* db = db_->handle;
  Stmt s(db,
         "INSERT INTO facets (gpu, driver, kernel, variant, size, facet, payload, measured_at) VALUES (?, ?, ?, ?, ?, ?, ?,"
         " datetime('now')) ON CONFLICT (gpu, driver, kernel, variant, size, facet) DO UPDATE SET payload = excluded.payload,"
         " measured_at = excluded.measured_at");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare facet insert");
  s.key(1, key);
  s.text(6, facet);
  s.text(7, json);
  if (s.step() != SQLITE_DONE) return sql_error(db, path_, "cannot store facet '" + facet + "' of " + key.to_string());
  return Status::ok();
}

Result<std::optional<std::string>> ProfileStore::get_facet(const ProfileKey& key, const std::string& facet) const {
  sqlite3* db = db_->handle;
  if (!db) return std::optional<std::string>();
  Stmt s(db, "SELECT payload FROM facets WHERE gpu = ? AND driver = ? AND kernel = ? AND variant = ? AND size = ? AND facet = ?");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare facet lookup");
  s.key(1, key);
  s.text(6, facet);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return sql_error(db, path_, "cannot read facet '" + facet + "' of " + key.to_string());
  return std::optional<std::string>(s.column_text(0));
}

Result<std::map<std::string, std::string>> ProfileStore::facets_of(const ProfileKey& key) const {
  std::map<std::string, std::string> out;
  sqlite3* db = db_->handle;
  if (!db) return out;
  Stmt s(db, "SELECT facet, payload FROM facets WHERE gpu = ? AND driver = ? AND kernel = ? AND variant = ? AND size = ?");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare facet lookup");
  s.key(1, key);
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out[s.column_text(0)] = s.column_text(1);
  if (rc != SQLITE_DONE) return sql_error(db, path_, "cannot read the facets of " + key.to_string());
  return out;
}

Result<std::optional<std::string>> ProfileStore::find_facet(const std::string& kernel, const std::string& variant, int64_t size,
                                                            const std::string& facet, const std::string& gpu) const {
  sqlite3* db = db_->handle;
  if (!db) return std::optional<std::string>();
  Stmt s(db,
         "SELECT payload FROM facets WHERE kernel = ? AND variant = ? AND size = ? AND facet = ? AND (? = '' OR gpu = ?)"
         " ORDER BY measured_at DESC, rowid DESC LIMIT 1");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare facet lookup");
  s.text(1, kernel);
  s.text(2, variant);
  s.integer(3, size);
  s.text(4, facet);
  s.text(5, gpu);
  s.text(6, gpu);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return sql_error(db, path_, "cannot read facets");
  return std::optional<std::string>(s.column_text(0));
}

Result<FacetListing> ProfileStore::all_facets() const {
  FacetListing out;
  sqlite3* db = db_->handle;
  if (!db) return out;
  CONCORD_RETURN_IF_ERROR(scan_rows(db, path_, "facets", "gpu, driver, kernel, variant, size, facet, payload, measured_at",
                                    out.problems, [&](const Stmt& s) {
                                      ProfileFacet f{key_of_row(s, 1), s.column_text(6), s.column_text(7), s.column_text(8)};
                                      if (Status c = check_facet(f.name, f.json); !c) {
                                        out.problems.push_back(path_ + ": facet '" + f.name + "' of " + f.key.to_string() +
                                                               ": unreadable, skipped: " + c.message());
                                      } else {
                                        out.facets.push_back(std::move(f));
                                      }
                                    }));
  std::sort(out.facets.begin(), out.facets.end(), [](const ProfileFacet& a, const ProfileFacet& b) {
    return std::tie(a.key.gpu, a.key.kernel, a.key.variant, a.key.size, a.key.driver, a.name) <
           std::tie(b.key.gpu, b.key.kernel, b.key.variant, b.key.size, b.key.driver, b.name);
  });
  return out;
}

Status ProfileStore::record_session(const std::string& gpu, const std::string& driver, double seconds, int profiles) {
  if (!std::isfinite(seconds) || seconds < 0 || profiles < 0) {
    return Status::invalid_argument(path_ + ": session: seconds and profiles must be finite and >= 0");
  }
  CONCORD_RETURN_IF_ERROR(ensure_created());
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
  std::vector<Session> out;
  sqlite3* db = db_->handle;
  if (!db) return out;
  Stmt s(db, "SELECT gpu, driver, seconds, profiles, finished_at FROM sessions ORDER BY id");
  if (!s.ok()) return sql_error(db, path_, "cannot prepare session listing");
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    out.push_back({s.column_text(0), s.column_text(1), s.column_text(4), sqlite3_column_double(s.get(), 2),
                   sqlite3_column_int(s.get(), 3)});
  }
  if (rc != SQLITE_DONE) return sql_error(db, path_, "cannot list sessions");
  return out;
}

namespace {

nlohmann::json key_json(const ProfileKey& k) {
  return {{"gpu", k.gpu}, {"driver", k.driver}, {"kernel", k.kernel}, {"variant", k.variant}, {"size", k.size}};
}

}  // namespace

Result<std::vector<std::string>> ProfileStore::export_json(const std::string& path) const {
  auto profiles = all();
  if (!profiles) return profiles.status();
  auto facets = all_facets();
  if (!facets) return facets.status();
  std::vector<std::string> problems = integrity_problems_;
  problems.insert(problems.end(), profiles->problems.begin(), profiles->problems.end());
  problems.insert(problems.end(), facets->problems.begin(), facets->problems.end());
  auto sess = sessions();
  if (!sess) {
    problems.push_back(sess.status().message() + " (sessions not exported)");
    sess = std::vector<Session>();
  }
  nlohmann::json j;
  j["concord_profiles"] = kSchemaVersion;
  j["profiles"] = nlohmann::json::array();
  for (const auto& p : profiles->profiles) j["profiles"].push_back(nlohmann::json::parse(profile_to_json(p)));
  j["facets"] = nlohmann::json::array();
  for (const auto& f : facets->facets) {
    j["facets"].push_back(
        {{"key", key_json(f.key)}, {"facet", f.name}, {"payload", nlohmann::json::parse(f.json)}, {"measured_at", f.measured_at}});
  }
  j["sessions"] = nlohmann::json::array();
  for (const auto& s : *sess) {
    j["sessions"].push_back({{"gpu", s.gpu}, {"driver", s.driver}, {"seconds", s.seconds}, {"profiles", s.profiles},
                             {"finished_at", s.finished_at}});
  }
  // Written beside the target and renamed over it, so a failed write never leaves half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return Status::io_error(path + ": cannot write the export (" + std::strerror(errno) + ")");
    out << j.dump(1) << "\n";
    out.close();
    if (!out) {
      std::filesystem::remove(tmp);
      return Status::io_error(path + ": writing the export failed (" + std::strerror(errno) + ")");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    return Status::io_error(path + ": cannot write the export: " + ec.message());
  }
  return problems;
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
  // Everything is validated before anything is written: a bad entry leaves the store as it was.
  std::vector<KernelProfile> parsed;
  std::vector<ProfileFacet> facets;
  for (size_t i = 0; i < j["profiles"].size(); ++i) {
    const std::string where = path + ": profiles[" + std::to_string(i) + "]";
    auto p = profile_from_json(j["profiles"][i].dump());
    if (!p) return Status::parse_error(where + ": " + p.status().message());
    // Exports of schema v2 and older carry some facets inside the profile: they become facets.
    const auto& entry = j["profiles"][i];
    for (const FacetCodec& codec : builtin_facet_codecs()) {
      if (codec.legacy_field.empty() || !entry.contains(codec.legacy_field)) continue;
      auto facet = codec.from_legacy(entry.dump());
      if (!facet) return Status::parse_error(where + " (" + key_text(p->key) + "): " + facet.status().message());
      facets.push_back({p->key, codec.name, *facet, ""});
    }
    parsed.push_back(std::move(*p));
  }
  if (j.contains("facets")) {
    if (!j["facets"].is_array()) return Status::parse_error(path + ": field 'facets': not a list");
    for (size_t i = 0; i < j["facets"].size(); ++i) {
      const auto& f = j["facets"][i];
      const std::string where = path + ": facets[" + std::to_string(i) + "]";
      if (!f.is_object() || !f.contains("key") || !f.contains("facet") || !f.contains("payload") || !f["facet"].is_string()) {
        return Status::parse_error(where + ": expected {\"key\": {...}, \"facet\": NAME, \"payload\": {...}}");
      }
      // A facet's key reads like a profile's.
      auto key = profile_from_json(nlohmann::json{{"key", f["key"]}}.dump());
      if (!key) return Status::parse_error(where + ": " + key.status().message());
      ProfileFacet facet{key->key, f["facet"].get<std::string>(), f["payload"].dump(), ""};
      if (Status s = check_facet(facet.name, facet.json); !s) {
        return Status::parse_error(where + " (" + key_text(facet.key) + "): " + s.message());
      }
      facets.push_back(std::move(facet));
    }
  }
  std::vector<Session> sessions_in;
  if (j.contains("sessions")) {
    if (!j["sessions"].is_array()) return Status::parse_error(path + ": field 'sessions': not a list");
    for (size_t i = 0; i < j["sessions"].size(); ++i) {
      const auto& s = j["sessions"][i];
      const std::string where = path + ": sessions[" + std::to_string(i) + "]";
      if (!s.is_object()) return Status::parse_error(where + ": not an object");
      Session out;
      try {
        out.gpu = s.value("gpu", "");
        out.driver = s.value("driver", "");
        out.seconds = s.value("seconds", 0.0);
        out.profiles = s.value("profiles", 0);
      } catch (const nlohmann::json::exception& e) {
        return Status::parse_error(where + ": " + e.what());
      }
      if (!std::isfinite(out.seconds) || out.seconds < 0 || out.profiles < 0) {
        return Status::parse_error(where + ": field 'seconds'/'profiles': must be finite and >= 0");
      }
      sessions_in.push_back(out);
    }
  }
  CONCORD_RETURN_IF_ERROR(ensure_created());
  sqlite3* db = db_->handle;
  Transaction tx(db, path_);
  CONCORD_RETURN_IF_ERROR(tx.begin("import of " + path));
  for (const auto& p : parsed) CONCORD_RETURN_IF_ERROR(put(p));
  for (const auto& f : facets) CONCORD_RETURN_IF_ERROR(put_facet(f.key, f.name, f.json));
  for (const auto& s : sessions_in) CONCORD_RETURN_IF_ERROR(record_session(s.gpu, s.driver, s.seconds, s.profiles));
  CONCORD_RETURN_IF_ERROR(tx.commit("import of " + path));
  return static_cast<int>(parsed.size() + facets.size());
}

Result<int> attach_profiles(Workload& workload, const ProfileStore& store, const std::string& gpu) {
  int attached = 0;
  for (TenantSpec& t : workload.tenants) {
    for (KernelStep& s : t.steps) {
      KernelSpec& k = s.kernel;
      bool any = false;
      // Every registered facet of every variant that has one, checked as its policy reads it.
      for (const FacetCodec& codec : builtin_facet_codecs()) {
        for (KernelVariant& v : k.variants) {
          auto facet = store.find_facet(k.name, v.name, k.size, codec.name, gpu);
          if (!facet) return facet.status();
          if (!*facet) continue;
          if (Status read = codec.check(**facet); !read) {
            return Status(read.code(), k.name + " " + v.name + " " + std::to_string(k.size) + ": " + read.message());
          }
          v.facets[codec.name] = **facet;
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
