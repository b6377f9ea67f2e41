// SQLite plumbing for the profile store (src/profile/store.cpp): errors that name the file,
// prepared statements and write transactions that clean up after themselves, the store's header
// read from one snapshot, file: URIs, the integrity check, and a row scan that survives damaged
// pages. Nothing here knows what the store keeps.
#pragma once

#include <sqlite3.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "concord/profile.h"
#include "concord/status.h"

namespace concord::sqlite_util {

// "<path>: <what>: <SQLite's message>".
inline Status sql_error(sqlite3* db, const std::string& path, const std::string& what) {
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
  void key(int first, const ProfileKey& k) {
    text(first, k.gpu);
    text(first + 1, k.driver);
    text(first + 2, k.kernel);
    text(first + 3, k.variant);
    integer(first + 4, k.size);
  }
  int step() { return sqlite3_step(s_); }
  std::string column_text(int i) const {
    const auto* t = sqlite3_column_text(s_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t column_int(int i) const { return sqlite3_column_int64(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

// An explicit write transaction (BEGIN IMMEDIATE: takes the write lock at once, waiting up to the
// busy timeout), rolled back unless committed.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {}
  ~Transaction() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Status begin(const std::string& what) {
    if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return sql_error(db_, path_, "cannot begin " + what);
    }
    open_ = true;
    return Status::ok();
  }
  Status commit(const std::string& what) {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return sql_error(db_, path_, "cannot commit " + what);
    open_ = false;
    return Status::ok();
  }

 private:
  sqlite3* db_;
  std::string path_;
  bool open_ = false;
};

// A read that failed before anything was known about the file, explained by SQLite's code.
inline Status open_error(sqlite3* db, const std::string& path, bool read_only) {
  const int code = db ? (sqlite3_extended_errcode(db) & 0xFF) : SQLITE_CANTOPEN;
  const std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
  switch (code) {
    case SQLITE_NOTADB:
      return Status::parse_error(path + ": not a Concord profile store (not an SQLite database: " + msg + "); left untouched");
    case SQLITE_CORRUPT:
      return Status::parse_error(path + ": the profile store is damaged (" + msg + "); left untouched");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      return Status::io_error(path + ": " + (read_only ? "cannot read" : "read-only") +
                              ": no permission on the file or on its directory (a store in WAL mode needs its -wal and"
                              " -shm files there) (" + msg + ")");
    default:
      return Status::io_error(path + ": cannot read the profile store: " + msg);
  }
}

inline Result<int64_t> pragma_int(sqlite3* db, const std::string& path, const char* sql) {
  Stmt s(db, sql);
  if (!s.ok()) return sql_error(db, path, std::string("cannot read ") + sql);
  if (s.step() != SQLITE_ROW) return sql_error(db, path, std::string("cannot read ") + sql);
  return s.column_int(0);
}

// A file's identity (application id, schema version, number of schema objects), read in one
// statement and so from one snapshot: read apart, another process's first migration (tables, id
// and version in one transaction) could commit between the reads, and the file would look like
// another program's (tables or a version but no id yet).
struct StoreHeader {
  int64_t app = 0;
  int64_t version = 0;
  int64_t tables = 0;
};
inline Result<StoreHeader> read_header(sqlite3* db, const std::string& path) {
  Stmt s(db,
         "SELECT (SELECT application_id FROM pragma_application_id()), (SELECT user_version FROM pragma_user_version()),"
         " (SELECT count(*) FROM sqlite_master)");
  if (!s.ok() || s.step() != SQLITE_ROW) return sql_error(db, path, "cannot read the store's application id and version");
  return StoreHeader{s.column_int(0), s.column_int(1), s.column_int(2)};
}

// A file: URI for `path` (reserved characters percent-encoded).
inline std::string file_uri(const std::string& path, const std::string& query) {
  std::string out = "file:";
  for (unsigned char c : std::filesystem::absolute(path).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out + "?" + query;
}

// PRAGMA quick_check's findings (empty when the store is intact).
inline std::vector<std::string> quick_check(sqlite3* db) {
  std::vector<std::string> out;
  Stmt s(db, "PRAGMA quick_check(20)");
  if (!s.ok()) return {std::string("PRAGMA quick_check: ") + sqlite3_errmsg(db)};
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    const std::string line = s.column_text(0);
    if (line != "ok") out.push_back(line);
  }
  if (rc != SQLITE_DONE) out.push_back(std::string("PRAGMA quick_check stopped: ") + sqlite3_errmsg(db));
  return out;
}

inline std::string joined(const std::vector<std::string>& lines, size_t max) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max; ++i) out += (i ? "; " : "") + lines[i];
  if (lines.size() > max) out += "; ...";
  return out;
}

inline ProfileKey key_of_row(const Stmt& s, int first) {
  return {s.column_text(first), s.column_text(first + 1), s.column_text(first + 2), s.column_text(first + 3),
          s.column_int(first + 4)};
}

// Reads every row of `table` (columns: rowid, then `columns`) in rowid order, handing each to
// `row`. A damaged page stops SQLite's scan; the rows after it are then read one rowid at a time,
// so only the rows on damaged pages are lost, each range named in `problems`.
template <typename RowFn>
Status scan_rows(sqlite3* db, const std::string& path, const std::string& table, const std::string& columns,
                 std::vector<std::string>& problems, RowFn&& row) {
  const std::string scan_sql = "SELECT rowid, " + columns + " FROM " + table + " ORDER BY rowid";
  Stmt scan(db, scan_sql.c_str());
  if (!scan.ok()) return sql_error(db, path, "cannot list " + table);
  int64_t last = 0;
  int rc;
  while ((rc = scan.step()) == SQLITE_ROW) {
    last = scan.column_int(0);
    row(scan);
  }
  if (rc == SQLITE_DONE) return Status::ok();
  const std::string scan_error = sqlite3_errmsg(db);
  // The highest rowid comes from the table's rightmost pages; if they are damaged too, what was
  // read so far is all there is.
  const std::string max_sql = "SELECT max(rowid) FROM " + table;
  Stmt max_stmt(db, max_sql.c_str());
  if (!max_stmt.ok() || max_stmt.step() != SQLITE_ROW) {
    problems.push_back(path + ": " + table + ": rows after rowid " + std::to_string(last) + " unreadable (" + scan_error + ")");
    return Status::ok();
  }
  const int64_t max_rowid = max_stmt.column_int(0);
  constexpr int64_t kMaxProbes = 1'000'000;
  const int64_t end = std::min(max_rowid, last + kMaxProbes);
  const std::string one_sql = "SELECT rowid, " + columns + " FROM " + table + " WHERE rowid = ?";
  int64_t bad_from = -1;
  std::string bad_error = scan_error;
  auto close_bad = [&](int64_t to) {
    if (bad_from < 0) return;
    problems.push_back(path + ": " + table + ": rows " + std::to_string(bad_from) + ".." + std::to_string(to) +
                       " (rowids) unreadable, skipped (" + bad_error + ")");
    bad_from = -1;
  };
  for (int64_t id = last + 1; id <= end; ++id) {
    Stmt one(db, one_sql.c_str());
    if (!one.ok()) return sql_error(db, path, "cannot read " + table);
    one.integer(1, id);
    const int r = one.step();
    if (r == SQLITE_ROW) {
      close_bad(id - 1);
      row(one);
    } else if (r != SQLITE_DONE) {
      if (bad_from < 0) {
        bad_from = id;
        bad_error = sqlite3_errmsg(db);
      }
    }
  }
  close_bad(end);
  if (end < max_rowid) {
    problems.push_back(path + ": " + table + ": rows after rowid " + std::to_string(end) + " not read (too many to probe)");
  }
  return Status::ok();
}

}  // namespace concord::sqlite_util
