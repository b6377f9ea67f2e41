// Registration: what the control thread does when a process registers, and what a registration
// becomes.
//   - tenant_info: the one place a registration becomes the TenantInfo the policies see (both lane
//     forms' books, and a lease policy's first lease);
//   - tenant_maker: the registry's maker of a new tenant's rings, lease page (with the memory quota
//     the books grant it) and board slot, in the lane of the GPU it names;
//   - LockedRegistry: the registry behind the shared mutex as the control server's handler, passing
//     the made descriptors with the reply and logging what was registered or refused;
//   - lc_access: who may register latency-critical tenants (--lc-users, --lc-groups).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concord/status.h"
#include "concord/tenant_source.h"
#include "daemon/memory_books.h"
#include "ipc/control_socket.h"
#include "ipc/tenant_registry.h"

namespace concord::daemon {

class Lane;
struct SharedRegistry;

// The tenant the policies see for registration `registration` of daemon tenant `tenant`, made by
// `owner`: its name, class and latency target, and as labels its weight, uid, pid and daemon id.
TenantInfo tenant_info(uint64_t tenant, const ipc::PeerCredentials& owner, const ipc::RegisterTenant& registration);

// The registry's channel maker (called on the control thread under shared.mu): the tenant goes to
// the lane of the GPU it names (lane_for), and gets sealed anonymous rings and a lease page with
// the lane's initial terms, passed with the reply (no names, nothing left behind by a crash, and
// the tenant cannot resize them under the daemon), and where its lane raises LC flags and it is
// LC, a slot on that lane's board. They wait in the lane's books until its thread takes them.
// The page carries the memory quota `memory` grants (memory_books.h). Refused while `stopping` (a
// lane that has ended would never serve it), when the board's slots are all held, and when an LC
// reservation does not fit. `prefix` labels the rings: "<prefix>.<daemon pid>.<tenant>".
ipc::TenantRegistry::ChannelMaker tenant_maker(SharedRegistry& shared, const std::vector<std::unique_ptr<Lane>>& lanes,
                                               MemoryBooks& memory, const std::atomic<bool>& stopping, std::string prefix);

// The registry behind the shared mutex, as the control server's handler. A Registered reply takes
// copies of the tenant's descriptors (up and down ring, lease page, board), so the lane's thread
// may take what was made (or drop it) meanwhile; the lease page is read-only for the tenant, the
// board too unless it is latency-critical.
class LockedRegistry final : public ipc::ControlHandler {
 public:
  // `labels`: each lane's device label, in lane order.
  LockedRegistry(SharedRegistry& shared, std::vector<std::string> labels) : shared_(shared), labels_(std::move(labels)) {}
  ~LockedRegistry() override { close_passed(); }
  ipc::Message handle(const ipc::PeerCredentials& peer, const ipc::Message& request) override;
  std::vector<int> reply_fds(const ipc::PeerCredentials& peer, const ipc::Message& reply) override;
  void disconnected(const ipc::PeerCredentials& peer) override;
  bool holds_tenant(const ipc::PeerCredentials& peer) override;

 private:
  void close_passed();
  SharedRegistry& shared_;
  std::vector<std::string> labels_;
  std::vector<int> passed_;  // descriptors of the last Registered reply (control thread only)
};

// concordd's --lc-users and --lc-groups: comma lists of names or numeric ids ("none": no group);
// empty `groups` is the daemon's group (`socket_gid`, else its own). Errors name the flag and entry.
Result<ipc::LcAccess> lc_access(const std::string& users, const std::string& groups, std::optional<uint32_t> socket_gid);

}  // namespace concord::daemon
