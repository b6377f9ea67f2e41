// The profile store's schema history:
//   v1: profiles(gpu, driver, kernel, variant, size, payload JSON, measured_at)
//   v2: sessions(gpu, driver, seconds, profiles, finished_at): how long profiling took
//   v3: facets(gpu, driver, kernel, variant, size, facet, payload JSON, measured_at): per-policy
//       data; RAISE's metrics move out of the profile payloads into "raise" facets, and the
//       payloads lose the fields no code reads any more (raise, raise_class, aker_class)
#include "profile/store_schema.h"

#include <iterator>

#include "concord/profile.h"

namespace concord {
namespace {

const char* const kMigrations[] = {
    // v1
    "CREATE TABLE profiles (gpu TEXT NOT NULL, driver TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL,"
    " size INTEGER NOT NULL, payload TEXT NOT NULL, measured_at TEXT NOT NULL DEFAULT (datetime('now')),"
    " PRIMARY KEY (gpu, driver, kernel, variant, size));",
    // v2
    "CREATE TABLE sessions (id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, driver TEXT NOT NULL, seconds REAL NOT NULL,"
    " profiles INTEGER NOT NULL, finished_at TEXT NOT NULL DEFAULT (datetime('now')));",
    // v3. Rows whose payload is not valid JSON are left as they are (reported when read).
    "CREATE TABLE facets (gpu TEXT NOT NULL, driver TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL,"
    " size INTEGER NOT NULL, facet TEXT NOT NULL, payload TEXT NOT NULL,"
    " measured_at TEXT NOT NULL DEFAULT (datetime('now')), PRIMARY KEY (gpu, driver, kernel, variant, size, facet));"
    "INSERT INTO facets (gpu, driver, kernel, variant, size, facet, payload, measured_at)"
    " SELECT gpu, driver, kernel, variant, size, 'raise',"
    " json_object('metrics', json_extract(payload, '$.raise'), 'class', json_extract(payload, '$.raise_class')), measured_at"
    " FROM profiles WHERE CASE WHEN json_valid(payload) THEN json_type(payload, '$.raise') = 'object' ELSE 0 END;"
    "UPDATE profiles SET payload = CASE WHEN json_valid(payload)"
    " THEN json_remove(payload, '$.raise', '$.raise_class', '$.aker_class') ELSE payload END;",
};
static_assert(std::size(kMigrations) == ProfileStore::kSchemaVersion);

}  // namespace

std::span<const char* const> store_migrations() { return kMigrations; }

}  // namespace concord
