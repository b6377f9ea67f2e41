// The profile store's schema: the SQLite application id that marks a Concord store, and the
// migrations that take a store from each schema version to the next (src/profile/store.cpp runs them).
#pragma once

#include <span>

namespace concord {

inline constexpr int kStoreApplicationId = 0x434F4E43;  // "CONC"
// Migration i takes a store from version i to i + 1 (one SQL script each).
std::span<const char* const> store_migrations();

}  // namespace concord
