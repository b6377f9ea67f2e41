#include "ipc/tenant_registry.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace concord::ipc {
namespace {

ErrorReply refuse(StatusCode code, std::string message) { return ErrorReply{code, std::move(message)}; }

ErrorReply no_such_tenant(uint64_t tenant, const PeerCredentials& peer) {
  return refuse(StatusCode::not_found, fmt::format("tenant {}: no such tenant of uid {}", tenant, peer.uid));
}

// The parent of `pid` (0 when it is gone or unreadable): the field after the command, whose
// parentheses may hold anything, spaces and ')' included.
int32_t parent_of(int32_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t end = stat.rfind(')');
  if (end == std::string::npos) return 0;
  std::istringstream rest(stat.substr(end + 1));
  std::string state;
  int32_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace

bool descends_from(int32_t pid, int32_t ancestor) {
  if (pid <= 1 || ancestor <= 0) return false;
  // A process tree is shallow; the bound keeps a loop (pid reuse mid-walk) from running on.
  for (int depth = 0; depth < 128 && pid > 1; ++depth) {
    pid = parent_of(pid);
    if (pid == ancestor) return true;
  }
  return false;
}

std::string TenantRegistry::lc_refusal(const PeerCredentials& peer) const {
  if (peer.uid == 0 || lc_.uids.count(peer.uid)) return "";
  for (uint32_t g : lc_.gids) {
    if (peer.in_group(g)) return "";
  }
  for (const Grant& g : grants_) {
    if (g.grant.uid == peer.uid && descends_from(peer.pid, g.holder.pid)) return "";
  }
  return fmt::format("uid {} may not register latency-critical tenants (allowed: {})", peer.uid,
                     lc_.described.empty() ? "root" : lc_.described);
}

bool TenantRegistry::may_see(const PeerCredentials& peer, const TenantRecord& tenant) {
  return peer.uid == 0 || peer.uid == tenant.owner.uid;
}

Message TenantRegistry::handle(const PeerCredentials& peer, const Message& request) {
  if (const auto* r = std::get_if<RegisterTenant>(&request)) return register_tenant(peer, *r);
  if (std::holds_alternative<ListTenants>(request)) return list(peer);
  if (std::holds_alternative<GetStats>(request)) return stats(peer);
  if (const auto* s = std::get_if<SetWeight>(&request)) return set_weight(peer, *s);
  if (const auto* g = std::get_if<GrantLc>(&request)) return grant_lc(peer, *g);
  if (std::holds_alternative<Bye>(request)) {
    remove_registered_by(peer);
    return Ack{};
  }
  ++rejected_;
  return refuse(StatusCode::invalid_argument, fmt::format("a {} message is not a control request", to_string(type_of(request))));
}

Message TenantRegistry::grant_lc(const PeerCredentials& peer, const GrantLc& request) {
  if (peer.uid != 0) {
    ++rejected_;
    return refuse(StatusCode::permission_denied, fmt::format("grant lc: uid {} is not root", peer.uid));
  }
  grants_.push_back(Grant{peer, request});
  return Ack{};
}

Message TenantRegistry::register_tenant(const PeerCredentials& peer, const RegisterTenant& asked) {
  if (peer.uid != 0 && asked.pid != peer.pid) {
    ++rejected_;
    return refuse(StatusCode::permission_denied,
                  fmt::format("register: field pid: {} is not the caller's process ({})", asked.pid, peer.pid));
  }
  RegisterTenant request = asked;
  std::string lc_refused;
  if (request.cls == TenantClass::latency_critical) {
    lc_refused = lc_refusal(peer);
    if (!lc_refused.empty()) {
      ++lc_refused_;
      if (request.on_lc_refused == LcRefusal::refuse) return refuse(StatusCode::permission_denied, "register: " + lc_refused);
      request.cls = TenantClass::best_effort;
      request.latency_target_ns = 0;
    }
  }
  if (peer.uid != 0) {
    // Each tenant costs the daemon two shared-memory rings: one user cannot make them without end.
    const auto owned = std::count_if(tenants_.begin(), tenants_.end(), [&](const auto& t) { return t.second.owner.uid == peer.uid; });
    if (owned >= kTenantsPerUser) {
      ++rejected_;
      return refuse(StatusCode::failed_precondition,
                    fmt::format("register: user {} already has {} tenants, the limit", peer.uid, kTenantsPerUser));
    }
  }
  const uint64_t id = next_id_;
  Result<Made> made = make_channel_(id, peer, request);
  if (!made.is_ok()) {
    ++rejected_;
    return ErrorReply{made.status().code(), fmt::format("register: {}", made.status().message())};
  }
  ++next_id_;
  // Owned by the caller's uid, also when root registers on behalf of another process.
  TenantRecord record;
  record.id = id;
  record.owner = peer;
  record.info = request;
  record.channel = made->channel;
  record.device = made->device;
  record.memory = made->memory;
  tenants_.emplace(id, std::move(record));
  return Registered{id, made->channel, request.cls, lc_refused};
}

Message TenantRegistry::list(const PeerCredentials& peer) const {
  TenantList out;
  for (const auto& [id, t] : tenants_) {
    if (!may_see(peer, t)) continue;
    if (out.tenants.size() == limits::kTenantsPerList) break;
    out.tenants.push_back(TenantEntry{id, t.owner.uid, t.info.pid, t.info.cls, t.info.latency_target_ns, t.info.weight,
                                      t.launches, t.completions, t.p50_ns, t.p99_ns, t.lease,
                                      TenantMemory{t.memory.limit_bytes, t.memory.reserved_bytes, t.memory_live, t.memory_peak}, t.info.name, t.device});
  }
  return out;
}

Message TenantRegistry::stats(const PeerCredentials& peer) const {
  Stats s;
  for (const auto& [id, t] : tenants_) {
    if (!may_see(peer, t)) continue;
    ++s.tenants;
    s.launches += t.launches;
  }
  // Rejections and drops are the daemon's, not any one user's: root sees them.
  if (peer.uid == 0) {
    s.rejected = rejected_;
    s.dropped = dropped_;
    s.lc_refused = lc_refused_;
  }
  return s;
}

Message TenantRegistry::set_weight(const PeerCredentials& peer, const SetWeight& request) {
  const auto it = tenants_.find(request.tenant);
  if (it == tenants_.end() || !may_see(peer, it->second)) {
    ++rejected_;
    return no_such_tenant(request.tenant, peer);
  }
  it->second.info.weight = request.weight;
  return Ack{};
}

uint64_t TenantRegistry::remove_registered_by(const PeerCredentials& peer) {
  std::erase_if(grants_, [&](const Grant& g) { return g.holder == peer; });
  uint64_t removed = 0;
  for (auto it = tenants_.begin(); it != tenants_.end();) {
    if (it->second.owner == peer) {
      it = tenants_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

void TenantRegistry::disconnected(const PeerCredentials& peer) { dropped_ += remove_registered_by(peer); }

bool TenantRegistry::holds_tenant(const PeerCredentials& peer) {
  // A grant's connection is as silent as a tenant's, and as long-lived.
  if (std::any_of(grants_.begin(), grants_.end(), [&](const Grant& g) { return g.holder == peer; })) return true;
  return std::any_of(tenants_.begin(), tenants_.end(), [&](const auto& t) { return t.second.owner == peer; });
}

Status TenantRegistry::note_launch(uint64_t tenant) {
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return Status::not_found(fmt::format("tenant {}: not registered", tenant));
  ++it->second.launches;
  return Status::ok();
}

Status TenantRegistry::note_progress(uint64_t tenant, uint64_t launches, uint64_t completions, uint64_t p50_ns,
                                     uint64_t p99_ns, const TenantLease& lease) {
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return Status::not_found(fmt::format("tenant {}: not registered", tenant));
  it->second.launches = launches;
  it->second.completions = completions;
  it->second.p50_ns = p50_ns;
  it->second.p99_ns = p99_ns;
  it->second.lease = lease;
  return Status::ok();
}

Status TenantRegistry::note_memory(uint64_t tenant, uint64_t live, uint64_t peak) {
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return Status::not_found(fmt::format("tenant {}: not registered", tenant));
  it->second.memory_live = live;
  it->second.memory_peak = peak;
  return Status::ok();
}

Status TenantRegistry::drop(uint64_t tenant, bool died) {
  if (tenants_.erase(tenant) == 0) return Status::not_found(fmt::format("tenant {}: not registered", tenant));
  if (died) ++dropped_;
  return Status::ok();
}

}  // namespace concord::ipc
