// A kernel's id in launch notices: the 64-bit FNV-1a hash of its (mangled) name, the same in every
// process and every run, so the daemon can keep per-kernel state across a tenant's restarts.
#pragma once

#include <cstdint>
#include <string_view>

namespace concord::intercept {

constexpr uint64_t kernel_id_of(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// The id of something without a name (a graph, a function whose name the driver does not give):
// its handle mixed so that nearby pointers give unrelated ids.
constexpr uint64_t handle_id_of(uint64_t handle) {
  uint64_t z = handle + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace concord::intercept
