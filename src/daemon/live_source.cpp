#include "daemon/live_source.h"

#include <algorithm>

#include <fmt/format.h>

#include "concord/occupancy.h"
#include "daemon/log.h"
#include "daemon/registration.h"

namespace concord::daemon {

const KernelSpec* LiveSource::kernel_for(const ipc::LaunchNotice& n) {
  const KernelKey key{n.kernel, n.grid, n.block, n.shared_mem, n.graph};
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return it->second.get();
  if (kernels_.size() >= kMaxKernelShapes) {
    // Past the bound, every new shape is one kernel that fills the GPU (the demand policies read).
    if (!overflow_) {
      overflow_ = std::make_unique<KernelSpec>();
      overflow_->name = "shape-overflow";
      overflow_->elastic = false;
      KernelVariant v;
      v.name = "native";
      v.threads_per_block = 32;
      v.logical_blocks = 1;
      overflow_->variants.push_back(v);
      overflow_->sm_curve = {SmCurvePoint{device_.sm_count, kOpaqueNominalSeconds}};
      log_event(spdlog::level::warn, "kernel_shapes_full",
                {{"shapes", kernels_.size()}, {"then", "new shapes are taken as kernels that fill the GPU"}});
    }
    return overflow_.get();
  }
  auto k = std::make_unique<KernelSpec>();
  k->elastic = false;
  KernelVariant v;
  v.name = "native";
  if (n.graph) {
    // A graph is placed whole; its shape is none of one kernel's.
    k->name = fmt::format("graph:{:016x}", n.kernel);
    v.threads_per_block = 32;
    v.logical_blocks = 1;
  } else {
    k->name = fmt::format("{:016x}:{}x{}x{}/{}x{}x{}", n.kernel, n.grid.x, n.grid.y, n.grid.z, n.block.x,
                          n.block.y, n.block.z);
    v.threads_per_block = static_cast<int>(n.block.x * n.block.y * n.block.z);
    v.shared_bytes_per_block = static_cast<int>(n.shared_mem);
    v.logical_blocks = int64_t(n.grid.x) * n.grid.y * n.grid.z;
  }
  // Registers, FLOPs and bytes are not visible to interception: left at the defaults (32
  // registers; no work). The nominal curve says how many SMs one wave of the grid covers.
  int wave_sms = device_.sm_count;
  if (!n.graph) {
    const int per_sm = std::max(1, max_resident_blocks(device_, v));
    const int64_t sms = (v.logical_blocks + per_sm - 1) / per_sm;
    wave_sms = static_cast<int>(std::clamp<int64_t>(sms, 1, device_.sm_count));
  }
  k->sm_curve = {SmCurvePoint{wave_sms, kOpaqueNominalSeconds}};
  k->variants.push_back(v);
  return kernels_.emplace(key, std::move(k)).first->second.get();
}

std::string LiveSource::unrunnable(const ipc::LaunchNotice& n) const {
  if (n.graph) return "";
  if (n.shared_mem > static_cast<uint32_t>(device_.sm.max_shared_bytes_per_block)) {
    return fmt::format("{} bytes of shared memory per block, over the device's {}", n.shared_mem, device_.sm.max_shared_bytes_per_block);
  }
  const uint64_t threads = uint64_t(n.block.x) * n.block.y * n.block.z;
  if (threads > static_cast<uint64_t>(device_.sm.max_threads_per_block)) {
    return fmt::format("{} threads per block, over the device's {}", threads, device_.sm.max_threads_per_block);
  }
  return "";
}

Status LiveSource::join_new(TenantSink& sink) {
  for (TenantConn* conn : hub_.sync_registry()) {
    const ipc::RegisterTenant& r = conn->record.info;
    Result<TenantId> id = sink.join(tenant_info(conn->id, conn->record.owner, r), std::nullopt, {});
    if (!id.is_ok()) return id.status();
    hub_.bind(*conn, *id);
    joined_.emplace(conn->id, Joined{});
    log_event(spdlog::level::info, "tenant_joined",
              {{"tenant", conn->id}, {"name", r.name}, {"class", r.cls == TenantClass::latency_critical ? "lc" : "be"},
               {"target_ms", static_cast<double>(r.latency_target_ns) / 1e6}, {"weight", r.weight}, {"pid", r.pid},
               {"uid", conn->record.owner.uid}});
  }
  return Status::ok();
}

Status LiveSource::open(TenantSink& sink) { return join_new(sink); }

Status LiveSource::take_inbox(TenantSink& sink, TenantConn& conn, Joined& j) {
  const bool lc = conn.record.info.cls == TenantClass::latency_critical;
  while (!conn.inbox.empty()) {
    const UpEvent ev = conn.inbox.front();
    conn.inbox.pop_front();
    if (const auto* n = std::get_if<NoticeEvent>(&ev)) {
      // A launch the device cannot run would stop the engine (and every tenant with it): it ends
      // its tenant instead.
      if (const std::string bad = unrunnable(n->notice); !bad.empty()) {
        conn.state = ConnState::gone;
        conn.why = "noticed a launch the device cannot run: " + bad;
        conn.died = false;
        conn.inbox.clear();
        return Status::ok();
      }
      const KernelSpec* kernel = kernel_for(n->notice);
      LaunchSubmission s;
      s.kernel = kernel;
      if (j.in_boundary) {
        if (j.open_request < 0) {
          const Seconds at = std::clamp(hub_.seconds(j.begin_at), 0.0, sink.now());
          Result<int64_t> req = sink.arrive(conn.engine, at);
          if (!req.is_ok()) return req.status();
          j.open_request = *req;
        }
        s.request = j.open_request;
        s.last_of_request = false;
      } else {
        Result<int64_t> req = sink.arrive(conn.engine, sink.now());
        if (!req.is_ok()) return req.status();
        s.request = *req;
        s.last_of_request = true;
      }
      CONCORD_RETURN_IF_ERROR(sink.submit(conn.engine, s));
      CONCORD_RETURN_IF_ERROR(conn.launches.queue(n->notice.seq));
    } else if (const auto* b = std::get_if<BoundaryEvent>(&ev)) {
      if (!lc) continue;  // a BE tenant's launches are each their own request
      // An end closes the request that has launches; a begin inside an open request closes it too.
      if (j.open_request >= 0) CONCORD_RETURN_IF_ERROR(sink.end_request(conn.engine));
      j.open_request = -1;
      j.in_boundary = b->boundary.edge == ipc::RequestEdge::begin;
      if (j.in_boundary) j.begin_at = b->at;
    }
  }
  return Status::ok();
}

Status LiveSource::settle(TenantSink& sink, TenantConn& conn, Joined& j) {
  if (j.left) return Status::ok();
  if (conn.state == ConnState::leaving && conn.launches.outstanding() == 0) {
    // Launches that ran ahead of the engine (follow-on releases, free run) and have ended are
    // still in its queue: the tenant leaves once the engine has dispatched them (each ends at
    // once), or the engine would dispatch launches of a tenant the backend no longer knows.
    if (conn.launches.queued() > 0) return Status::ok();
    if (j.open_request >= 0) CONCORD_RETURN_IF_ERROR(sink.end_request(conn.engine));
    j.open_request = -1;
    CONCORD_RETURN_IF_ERROR(sink.leave(conn.engine));
    j.left = true;
    log_event(spdlog::level::info, "tenant_left", {{"tenant", conn.id}, {"name", conn.record.info.name}, {"why", conn.why}});
    return Status::ok();
  }
  if (conn.state == ConnState::live) return Status::ok();
  std::string why = conn.why;
  if (conn.state == ConnState::leaving) {
    why = fmt::format("{} with {} launches outstanding", conn.why, conn.launches.outstanding());
    conn.why = why;
  }
  CONCORD_RETURN_IF_ERROR(sink.drop(conn.engine, fmt::format("tenant '{}' (daemon tenant {}) {}", conn.record.info.name, conn.id, why)));
  j.left = true;
  conn.launches.drop();  // the engine dropped what it had not dispatched; what runs fails
  log_event(spdlog::level::warn, "tenant_dropped",
            {{"tenant", conn.id}, {"name", conn.record.info.name}, {"why", why}, {"running", conn.launches.running()}});
  conn.inbox.clear();
  j.open_request = -1;
  return Status::ok();
}

Result<Seconds> LiveSource::pump(TenantSink& sink) {
  CONCORD_RETURN_IF_ERROR(join_new(sink));
  std::vector<uint64_t> finished;
  for (auto& [id, conn] : hub_.conns()) {
    const auto it = joined_.find(id);
    if (!conn->engine.valid() || it == joined_.end()) continue;
    Joined& j = it->second;
    if (!j.left && conn->state != ConnState::gone) CONCORD_RETURN_IF_ERROR(take_inbox(sink, *conn, j));
    CONCORD_RETURN_IF_ERROR(settle(sink, *conn, j));
    if (j.left && conn->launches.running() == 0) finished.push_back(id);
  }
  for (uint64_t id : finished) {
    hub_.remove(id);
    joined_.erase(id);
  }
  return sink.now() + std::chrono::duration<double>(poll_).count();
}

}  // namespace concord::daemon
