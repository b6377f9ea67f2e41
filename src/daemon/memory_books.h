// The daemon's books of GPU memory (docs/daemon.md, "Memory"): what each tenant may hold of its
// GPU's memory, decided once, when it registers, and written into its lease page. The books are
// the registry's records (each holds the quota it was granted), so a tenant that leaves, or whose
// connection ends, takes its quota out of them at once; what is kept here is each GPU's size.
//
// The quotas of one GPU's tenants never add up to more than the GPU has, so a quota is both a cap
// and a guarantee:
//   - an LC tenant that asks for a reservation (CONCORD_MEMORY_RESERVE) gets exactly it, or is
//     refused at registration with the numbers when it does not fit;
//   - any other tenant (BE, or LC without a reservation) gets a limit: --be-memory-share of what is
//     left on its GPU when it registers, or less where it asked for less (CONCORD_MEMORY_LIMIT; a
//     request above that share is clamped to it).
// A GPU's size is --memory-total where given, else the smallest total its tenants reported; while
// it is not known no quota is set (and a reservation is refused: it could not be kept).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "concord/memory_quota.h"
#include "concord/status.h"
#include "ipc/tenant_registry.h"

namespace concord::daemon {

struct MemoryPolicy {
  std::optional<uint64_t> total;  // --memory-total: every GPU's size for the books (else the tenants' reports)
  double be_share = 0.5;          // --be-memory-share: of what is left, what a tenant without a reservation gets
};
// An error naming the flag whose value is out of range.
Status check_memory_policy(const MemoryPolicy& policy);

// What the tenants registered on one GPU hold.
struct HeldMemory {
  uint64_t granted = 0;   // their quotas, in all
  uint64_t reserved = 0;  // of which LC reservations
  uint64_t tenants = 0;   // tenants with a quota
};

class MemoryBooks {
 public:
  explicit MemoryBooks(MemoryPolicy policy) : policy_(policy) {}
  // The quota of a tenant registering on GPU `device` (the lane's label) as `asked` (its class as
  // admitted), beside `registered` (the registry's records now). An LC reservation that cannot be
  // kept is failed_precondition with the GPU's numbers.
  Result<MemoryQuota> grant(const std::string& device, const ipc::RegisterTenant& asked,
                            const std::map<uint64_t, ipc::TenantRecord>& registered);
  // The GPU's size as the books take it (nullopt: not known yet).
  std::optional<uint64_t> total(const std::string& device) const;
  static HeldMemory held(const std::string& device, const std::map<uint64_t, ipc::TenantRecord>& registered);

 private:
  MemoryPolicy policy_;
  std::map<std::string, uint64_t> reported_;  // per GPU, the smallest total a tenant reported
};

}  // namespace concord::daemon
