// A tenant's share of its GPU's memory, in one vocabulary from the daemon that decides it
// (src/daemon/memory_books.h) through the lease page that carries it (src/ipc/lease_page.h) to the
// interception library that enforces it (src/intercept/memory_book.h). No policy here: the IPC
// layer, the library and the Slurm plugin include it too.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "concord/status.h"

namespace concord {

// No quota: the daemon knows no total for the GPU, or there is no daemon; the library then counts
// and enforces nothing beyond what the driver does.
inline constexpr uint64_t kNoMemoryLimit = std::numeric_limits<uint64_t>::max();

// What a tenant may hold of its GPU's memory. The daemon hands quotas out of the GPU's total and
// never more than it has, so a quota is also what the tenant is sure to get: an LC tenant's is its
// reservation (`reserved_bytes == limit_bytes`), a BE tenant's a limit (`reserved_bytes == 0`).
struct MemoryQuota {
  uint64_t limit_bytes = kNoMemoryLimit;  // device memory allocated at once, at most
  uint64_t reserved_bytes = 0;            // of which an LC reservation
  bool limited() const { return limit_bytes != kNoMemoryLimit; }
  bool operator==(const MemoryQuota&) const = default;
};

// A size as people write one: a whole number of bytes ("4096") or a number with a binary unit
// ("512M", "8G", "1.5GiB", "2T"; K, M, G, T are powers of 1024, optionally followed by "iB" or
// "B"). Negative numbers, fractions of a byte, anything else after the number, and sizes over
// 2^63 are an invalid_argument saying what was wrong (the caller names the setting).
Result<uint64_t> parse_bytes(std::string_view text);

// A size for people: "0", "512 B", "1.5 KiB", "8.0 GiB", "1.2 TiB" (one decimal from KiB up).
std::string format_bytes(uint64_t bytes);

}  // namespace concord
