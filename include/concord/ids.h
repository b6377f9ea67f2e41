// Strongly typed ids and the time unit.
#pragma once

#include <cstdint>
#include <functional>

namespace concord {

// Time in seconds since the start of a run (simulated or wall clock).
using Seconds = double;

template <typename Tag>
struct Id {
  int64_t value = -1;
  constexpr bool valid() const { return value >= 0; }
  constexpr auto operator<=>(const Id&) const = default;
};

struct TenantTag {};
struct LaunchTag {};
struct DispatchTag {};
using TenantId = Id<TenantTag>;      // index of the tenant in the workload
using LaunchId = Id<LaunchTag>;      // one kernel invocation of a tenant, unique in a run
using DispatchId = Id<DispatchTag>;  // one placement handed to the backend, unique in a run

}  // namespace concord

template <typename Tag>
struct std::hash<concord::Id<Tag>> {
  size_t operator()(const concord::Id<Tag>& id) const noexcept { return std::hash<int64_t>{}(id.value); }
};
