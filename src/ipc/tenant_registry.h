// The daemon's table of tenants and who owns them, answering the control socket's requests.
//
// A tenant is owned by the uid that registered it. A client sees and steers only its own uid's
// tenants; root (uid 0) sees and steers all. Another user's tenant is answered exactly like a
// tenant that does not exist (not_found), so a client cannot even learn which ids are taken. A
// register must name the caller's own pid (as the kernel reports it), unless the caller is root.
// A tenant library keeps its connection open for its process's life: a goodbye (Bye) removes the
// caller's tenants, and a connection that ends without one drops them (counted as dropped: the
// process crashed or was killed).
//
// Latency-critical is a privilege (LcAccess): an LC registration from anyone else is answered with
// the reason, as an error or, where the registration asks for it, by a best-effort tenant.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ipc/control_socket.h"
#include "ipc/protocol.h"

namespace concord::ipc {

struct TenantRecord {
  uint64_t id = 0;
  PeerCredentials owner;  // as the kernel reported it at registration
  RegisterTenant info;
  std::string channel;    // base name of its rings
  std::string device;     // the daemon's label of the GPU it was placed on, shown by list
  // Its memory quota, granted with its registration: the daemon's books are these (a tenant that
  // leaves, or whose connection ends, takes its quota with it at once).
  MemoryQuota memory;
  uint64_t memory_live = 0;  // what its library last reported (note_memory)
  uint64_t memory_peak = 0;
  uint64_t launches = 0;
  uint64_t completions = 0;
  uint64_t p50_ns = 0;  // LC request latency (the daemon's window)
  uint64_t p99_ns = 0;
  TenantLease lease;  // as the daemon last published it
};

// Tenants one user (other than root) may have registered at once.
inline constexpr int kTenantsPerUser = 64;

// Who may register latency-critical tenants (an LC tenant's flag closes every BE gate of its GPU):
// root; these uids; members of these groups (primary or supplementary, as the kernel reported
// them when the client connected); and processes of user U that descend from a process holding a
// GrantLc for U on an open connection (a Slurm step's slurmstepd, whose plugin checked the job
// against the cluster's policy).
struct LcAccess {
  std::set<uint32_t> uids;
  std::set<uint32_t> gids;
  std::string described;  // who may, for refusals ("root, group concord")
};

// Whether process `pid` descends from process `ancestor` (its parent, its parent's parent, ...),
// from /proc/<pid>/stat; false for a pid that is gone.
bool descends_from(int32_t pid, int32_t ancestor);

class TenantRegistry final : public ControlHandler {
 public:
  // What the maker made of a registration: the base name of the tenant's rings, the label of the
  // GPU it was placed on and the memory quota written into its lease page.
  struct Made {
    std::string channel;
    std::string device;
    MemoryQuota memory;
  };
  // Makes a new tenant's rings (and lease page); an error refuses the registration.
  using ChannelMaker = std::function<Result<Made>(uint64_t tenant, const PeerCredentials& owner, const RegisterTenant& info)>;
  TenantRegistry(ChannelMaker make_channel, LcAccess lc) : make_channel_(std::move(make_channel)), lc_(std::move(lc)) {}

  Message handle(const PeerCredentials& peer, const Message& request) override;
  void disconnected(const PeerCredentials& peer) override;
  bool holds_tenant(const PeerCredentials& peer) override;

  // The daemon's side (not reachable through the socket): what the rings told it.
  Status note_launch(uint64_t tenant);
  void note_rejected() { ++rejected_; }
  // What the daemon's engine counted for the tenant (shown by list).
  Status note_progress(uint64_t tenant, uint64_t launches, uint64_t completions, uint64_t p50_ns, uint64_t p99_ns,
                       const TenantLease& lease = {});
  // What a tenant's library last reported of its memory (shown by list).
  Status note_memory(uint64_t tenant, uint64_t live, uint64_t peak);
  // Removes a tenant whose process died (counted as dropped) or said goodbye.
  Status drop(uint64_t tenant, bool died);

  const std::map<uint64_t, TenantRecord>& tenants() const { return tenants_; }
  uint64_t rejected() const { return rejected_; }
  uint64_t dropped() const { return dropped_; }
  // LC registrations refused (with an error, or admitted as BE).
  uint64_t lc_refused() const { return lc_refused_; }
  // Why `peer` may not register an LC tenant (empty: it may).
  std::string lc_refusal(const PeerCredentials& peer) const;

 private:
  static bool may_see(const PeerCredentials& peer, const TenantRecord& tenant);
  Message register_tenant(const PeerCredentials& peer, const RegisterTenant& request);
  Message list(const PeerCredentials& peer) const;
  Message stats(const PeerCredentials& peer) const;
  Message set_weight(const PeerCredentials& peer, const SetWeight& request);
  Message grant_lc(const PeerCredentials& peer, const GrantLc& request);
  // Removes the tenants `peer`'s process registered; how many.
  uint64_t remove_registered_by(const PeerCredentials& peer);

  struct Grant {
    PeerCredentials holder;  // its connection: the grant ends with it
    GrantLc grant;
  };
  ChannelMaker make_channel_;
  LcAccess lc_;
  std::vector<Grant> grants_;
  std::map<uint64_t, TenantRecord> tenants_;
  uint64_t next_id_ = 1;
  uint64_t rejected_ = 0;
  uint64_t dropped_ = 0;
  uint64_t lc_refused_ = 0;
};

}  // namespace concord::ipc
