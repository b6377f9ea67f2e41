#include "daemon/memory_books.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace concord::daemon {

Status check_memory_policy(const MemoryPolicy& p) {
  if (p.total && (*p.total == 0 || *p.total > ipc::limits::kMaxMemoryBytes)) {
    return Status::invalid_argument(fmt::format("--memory-total: {} bytes is outside 1 B..{}", *p.total, format_bytes(ipc::limits::kMaxMemoryBytes)));
  }
  if (!std::isfinite(p.be_share) || p.be_share <= 0 || p.be_share > 1) {
    return Status::invalid_argument(fmt::format("--be-memory-share: {} is not a fraction in (0, 1]", p.be_share));
  }
  return Status::ok();
}

std::optional<uint64_t> MemoryBooks::total(const std::string& device) const {
  if (policy_.total) return policy_.total;
  const auto it = reported_.find(device);
  if (it == reported_.end()) return std::nullopt;
  return it->second;
}

HeldMemory MemoryBooks::held(const std::string& device, const std::map<uint64_t, ipc::TenantRecord>& registered) {
  HeldMemory h;
  for (const auto& [id, r] : registered) {
    if (r.device != device || !r.memory.limited()) continue;
    h.granted += r.memory.limit_bytes;
    h.reserved += r.memory.reserved_bytes;
    ++h.tenants;
  }
  return h;
}

Result<MemoryQuota> MemoryBooks::grant(const std::string& device, const ipc::RegisterTenant& asked,
                                       const std::map<uint64_t, ipc::TenantRecord>& registered) {
  if (asked.device_memory_bytes > 0) {
    // The smallest report wins: a tenant that claims more than its GPU has cannot enlarge the books.
    const auto [it, fresh] = reported_.emplace(device, asked.device_memory_bytes);
    if (!fresh) it->second = std::min(it->second, asked.device_memory_bytes);
  }
  const bool reservation = asked.cls == TenantClass::latency_critical && asked.memory_bytes > 0;
  const std::optional<uint64_t> size = total(device);
  if (!size) {
    if (reservation) {
      return Status::failed_precondition(fmt::format(
          "memory reservation {}: GPU {}'s memory size is not known (the tenant reported none; concordd --memory-total sets it)",
          format_bytes(asked.memory_bytes), device));
    }
    return MemoryQuota{};
  }
  const HeldMemory held = MemoryBooks::held(device, registered);
  const uint64_t left = held.granted >= *size ? 0 : *size - held.granted;
  if (reservation) {
    if (asked.memory_bytes > *size) {
      return Status::failed_precondition(fmt::format("memory reservation {} is more than GPU {} has ({})", format_bytes(asked.memory_bytes),
                                                     device, format_bytes(*size)));
    }
    if (asked.memory_bytes > left) {
      return Status::failed_precondition(fmt::format(
          "memory reservation {} does not fit GPU {}: {} tenants hold {} of its {} ({} of it reserved by LC tenants), {} left",
          format_bytes(asked.memory_bytes), device, held.tenants, format_bytes(held.granted), format_bytes(*size),
          format_bytes(held.reserved), format_bytes(left)));
    }
    return MemoryQuota{asked.memory_bytes, asked.memory_bytes};
  }
  const auto share = static_cast<uint64_t>(std::floor(policy_.be_share * static_cast<double>(left)));
  const uint64_t limit = asked.memory_bytes > 0 ? std::min(asked.memory_bytes, share) : share;
  return MemoryQuota{std::min(limit, left), 0};
}

}  // namespace concord::daemon
