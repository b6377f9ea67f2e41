// How much more memory this process may take: the tightest of the machine's available memory,
// its address-space and data limits (RLIMIT_AS, RLIMIT_DATA, less what it uses of each) and its
// cgroup's memory.max (less memory.current, at every level of the cgroup path). `concord run`
// refuses up front a run whose records would not fit it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace concord::cli {

struct MemoryRoom {
  uint64_t bytes = 0;
  std::string what;  // which limit it is, for messages ("the process's address-space limit (RLIMIT_AS 3814 MiB)")
};

// The tightest limit found; nullopt when none can be read.
std::optional<MemoryRoom> memory_room();

}  // namespace concord::cli
