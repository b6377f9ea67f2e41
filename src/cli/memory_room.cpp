#include "cli/memory_room.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <fmt/format.h>

namespace concord::cli {
namespace {

// MemAvailable of /proc/meminfo in bytes, 0 when it cannot be read.
uint64_t available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// /proc/self/statm's size (the address space) and data (data + stack) in bytes.
std::pair<uint64_t, uint64_t> address_space_and_data() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0, shared = 0, text = 0, lib = 0, data = 0;
  if (!(in >> size >> resident >> shared >> text >> lib >> data)) return {0, 0};
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return {size * page, data * page};
}

// A cgroup file's number ("max", or unreadable: nullopt).
std::optional<uint64_t> cgroup_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void keep_tighter(std::optional<MemoryRoom>& room, uint64_t bytes, std::string what) {
  if (!room || bytes < room->bytes) room = MemoryRoom{bytes, std::move(what)};
}

std::string mib(uint64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

}  // namespace

std::optional<MemoryRoom> memory_room() {
  std::optional<MemoryRoom> room;
  if (const uint64_t avail = available_bytes(); avail > 0) keep_tighter(room, avail, "the machine's available memory");
  const auto [used_as, used_data] = address_space_and_data();
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    const uint64_t limit = r.rlim_cur;
    keep_tighter(room, limit > used_as ? limit - used_as : 0,
                 fmt::format("the process's address-space limit (RLIMIT_AS {}, {} in use)", mib(limit), mib(used_as)));
  }
  if (::getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    const uint64_t limit = r.rlim_cur;
    keep_tighter(room, limit > used_data ? limit - used_data : 0,
                 fmt::format("the process's data limit (RLIMIT_DATA {}, {} in use)", mib(limit), mib(used_data)));
  }
  // cgroup v2 ("0::/path"), every level of the path: a parent's memory.max bounds its children.
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string path = line.substr(3);
    for (;;) {
      const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
      const std::optional<uint64_t> max = cgroup_number(dir + "/memory.max");
      if (max) {
        const uint64_t current = cgroup_number(dir + "/memory.current").value_or(0);
        keep_tighter(room, *max > current ? *max - current : 0,
                     fmt::format("its cgroup's memory.max ({}: {}, {} in use)", path, mib(*max), mib(current)));
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return room;
}

}  // namespace concord::cli
