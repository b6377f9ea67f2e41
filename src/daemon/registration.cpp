#include "daemon/registration.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/lane.h"
#include "daemon/log.h"
#include "daemon/tenant_hub.h"

namespace concord::daemon {

TenantInfo tenant_info(uint64_t tenant, const ipc::PeerCredentials& owner, const ipc::RegisterTenant& registration) {
  TenantInfo info;
  info.name = registration.name;
  info.cls = registration.cls;
  info.latency_target = static_cast<double>(registration.latency_target_ns) / 1e9;
  info.labels = {{"weight", std::to_string(registration.weight)},
                 {"uid", std::to_string(owner.uid)},
                 {"pid", std::to_string(registration.pid)},
                 {"daemon_tenant", std::to_string(tenant)}};
  return info;
}

ipc::TenantRegistry::ChannelMaker tenant_maker(SharedRegistry& shared, const std::vector<std::unique_ptr<Lane>>& lanes,
                                               MemoryBooks& memory, const std::atomic<bool>& stopping, std::string prefix) {
  std::vector<DeviceLane> devices;  // each lane's device, in lane order (lane_for's input)
  for (const auto& lane : lanes) devices.push_back(lane->device());
  const int pid = ::getpid();
  return [&shared, &lanes, &memory, &stopping, prefix = std::move(prefix), pid, devices = std::move(devices)](
             uint64_t tenant, const ipc::PeerCredentials& owner, const ipc::RegisterTenant& info) -> Result<ipc::TenantRegistry::Made> {
    if (stopping.load()) return Status::failed_precondition("the daemon is stopping");
    Result<size_t> at = lane_for(devices, info.device);
    if (!at.is_ok()) return at.status();
    const Lane& lane = *lanes[*at];
    DeviceBooks& books = shared.devices[*at];
    // The quota first: a reservation that does not fit refuses the registration before anything is made.
    Result<MemoryQuota> quota = memory.grant(lane.device().label, info, shared.registry->tenants());
    if (!quota.is_ok()) return quota.status();
    MadeTenant made;
    if (lane.raises_lc_flags() && info.cls == TenantClass::latency_critical) {
      made.lc_slot = books.take_slot();
      if (made.lc_slot == ipc::kNoLcSlot) {
        return Status::failed_precondition(
            fmt::format("{} latency-critical tenants hold every flag of GPU {}'s board", ipc::kLcSlots, lane.device().label));
      }
    }
    const auto give_back = [&] { books.free_slot(made.lc_slot); };
    const std::string base = fmt::format("{}.{}.{}", prefix, pid, tenant);
    // The up ring carries two messages per launch (notice, and now and then a completion): deep
    // enough that a daemon busy for a few milliseconds does not fill it.
    Result<ipc::TenantChannel> c = ipc::TenantChannel::create_sealed(base, {ipc::kRingSlotBytes, 4096});
    if (!c.is_ok()) {
      give_back();
      return c.status();
    }
    Result<ipc::LeasePage> page =
        ipc::LeasePage::create(base + ".lease", lane.initial_terms(tenant_info(tenant, owner, info), made.lc_slot), *quota);
    if (!page.is_ok()) {
      give_back();
      return page.status();
    }
    const uint64_t now = ipc::monotonic_ns();
    c->up().claim(ipc::RingSide::consumer, pid, 1, now);
    c->down().claim(ipc::RingSide::producer, pid, 1, now);
    made.channel = std::move(*c);
    made.lease = std::move(*page);
    books.made.emplace(tenant, std::move(made));
    return ipc::TenantRegistry::Made{base, lane.device().label, *quota};
  };
}

ipc::Message LockedRegistry::handle(const ipc::PeerCredentials& peer, const ipc::Message& request) {
  close_passed();
  std::lock_guard lock(shared_.mu);
  ipc::Message reply = shared_.registry->handle(peer, request);
  shared_.generation.fetch_add(1, std::memory_order_release);
  if (const auto* r = std::get_if<ipc::Registered>(&reply)) {
    const auto* info = std::get_if<ipc::RegisterTenant>(&request);
    const bool lc = r->cls == TenantClass::latency_critical;  // as admitted
    std::string device;
    for (size_t lane = 0; lane < shared_.devices.size(); ++lane) {
      DeviceBooks& books = shared_.devices[lane];
      const auto it = books.made.find(r->tenant);
      if (it == books.made.end()) continue;
      device = labels_[lane];
      for (int fd : it->second.channel.fds()) passed_.push_back(fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1);
      Result<int> lease = it->second.lease.reader_fd();
      Result<int> board = books.board.tenant_fd(lc);
      passed_.push_back(lease.is_ok() ? *lease : -1);
      passed_.push_back(board.is_ok() ? *board : -1);
    }
    MemoryQuota quota;
    if (const auto rec = shared_.registry->tenants().find(r->tenant); rec != shared_.registry->tenants().end()) quota = rec->second.memory;
    if (!r->lc_refused.empty()) {
      log_event(spdlog::level::warn, "lc_refused",
                {{"tenant", r->tenant}, {"uid", peer.uid}, {"pid", peer.pid}, {"why", r->lc_refused}, {"runs_as", "be"}});
    }
    log_event(spdlog::level::info, "tenant_registered",
              {{"tenant", r->tenant}, {"uid", peer.uid}, {"pid", peer.pid}, {"channel", r->channel}, {"device", device},
               {"class", lc ? "lc" : "be"}, {"bus_id", info != nullptr ? info->device : std::string()},
               {"memory_limit", quota.limited() ? nlohmann::json(quota.limit_bytes) : nlohmann::json(nullptr)},
               {"memory_reserved", quota.reserved_bytes}, {"memory_asked", info != nullptr ? info->memory_bytes : 0}});
  } else if (const auto* g = std::get_if<ipc::GrantLc>(&request); g != nullptr && std::holds_alternative<ipc::Ack>(reply)) {
    log_event(spdlog::level::info, "lc_granted", {{"uid", g->uid}, {"label", g->label}, {"by_pid", peer.pid}});
  } else if (const auto* e = std::get_if<ipc::ErrorReply>(&reply)) {
    log_event(spdlog::level::warn, "request_refused",
              {{"request", ipc::to_string(ipc::type_of(request))}, {"uid", peer.uid}, {"pid", peer.pid}, {"error", e->message}});
  }
  return reply;
}

std::vector<int> LockedRegistry::reply_fds(const ipc::PeerCredentials&, const ipc::Message& reply) {
  if (!std::holds_alternative<ipc::Registered>(reply)) return {};
  // All four or none: a tenant that gets fewer refuses the registration.
  if (std::find(passed_.begin(), passed_.end(), -1) != passed_.end()) return {};
  return passed_;
}

void LockedRegistry::disconnected(const ipc::PeerCredentials& peer) {
  std::lock_guard lock(shared_.mu);
  shared_.registry->disconnected(peer);
  shared_.generation.fetch_add(1, std::memory_order_release);
}

bool LockedRegistry::holds_tenant(const ipc::PeerCredentials& peer) {
  std::lock_guard lock(shared_.mu);
  return shared_.registry->holds_tenant(peer);
}

void LockedRegistry::close_passed() {
  for (int fd : passed_) {
    if (fd >= 0) ::close(fd);
  }
  passed_.clear();
}

namespace {

std::string group_name(uint32_t gid) {
  const group* g = ::getgrgid(gid);
  return g != nullptr ? g->gr_name : std::to_string(gid);
}

std::string user_name(uint32_t uid) {
  const passwd* p = ::getpwuid(uid);
  return p != nullptr ? p->pw_name : std::to_string(uid);
}

// A comma list's entries, each a name `lookup` resolves or a number.
Result<std::set<uint32_t>> id_list(const std::string& list, const char* flag, const std::function<std::optional<uint32_t>(const std::string&)>& lookup) {
  std::set<uint32_t> ids;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string entry = list.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) continue;
    if (std::optional<uint32_t> id = lookup(entry)) {
      ids.insert(*id);
      continue;
    }
    const bool digits = std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || entry.size() > 9) return Status::invalid_argument(fmt::format("{} '{}': '{}' is neither a known name nor a number", flag, list, entry));
    ids.insert(static_cast<uint32_t>(std::stoul(entry)));
  }
  return ids;
}

}  // namespace

Result<ipc::LcAccess> lc_access(const std::string& users, const std::string& groups, std::optional<uint32_t> socket_gid) {
  ipc::LcAccess a;
  Result<std::set<uint32_t>> uids = id_list(users, "--lc-users", [](const std::string& n) -> std::optional<uint32_t> {
    const passwd* p = ::getpwnam(n.c_str());
    return p != nullptr ? std::optional<uint32_t>(p->pw_uid) : std::nullopt;
  });
  if (!uids.is_ok()) return uids.status();
  a.uids = *uids;
  a.uids.insert(0);
  if (groups.empty()) {
    a.gids = {socket_gid.value_or(::getgid())};
  } else if (groups != "none") {
    Result<std::set<uint32_t>> gids = id_list(groups, "--lc-groups", [](const std::string& n) -> std::optional<uint32_t> {
      Result<uint32_t> g = ipc::group_id(n);
      return g.is_ok() ? std::optional<uint32_t>(*g) : std::nullopt;
    });
    if (!gids.is_ok()) return gids.status();
    a.gids = *gids;
  }
  std::vector<std::string> who;
  for (uint32_t u : a.uids) who.push_back(u == 0 ? "root" : "user " + user_name(u));
  for (uint32_t g : a.gids) who.push_back("group " + group_name(g));
  a.described = fmt::format("{}", fmt::join(who, ", "));
  return a;
}

}  // namespace concord::daemon
