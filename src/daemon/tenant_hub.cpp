#include "daemon/tenant_hub.h"

#include <fmt/format.h>

namespace concord::daemon {

uint32_t DeviceBooks::take_slot() {
  for (uint32_t s = 0; s < ipc::kLcSlots; ++s) {
    if ((slots_used & (uint64_t{1} << s)) == 0) {
      slots_used |= uint64_t{1} << s;
      return s;
    }
  }
  return ipc::kNoLcSlot;
}

void DeviceBooks::free_slot(uint32_t slot) {
  if (slot < ipc::kLcSlots) slots_used &= ~(uint64_t{1} << slot);
}

TenantConn* TenantHub::find(uint64_t id) {
  const auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second.get();
}

TenantConn* TenantHub::by_engine(TenantId id) {
  const auto it = by_engine_.find(id.value);
  return it == by_engine_.end() ? nullptr : find(it->second);
}

void TenantHub::mark_gone(TenantConn& conn, std::string why, bool died) {
  if (conn.state == ConnState::gone) return;
  conn.state = ConnState::gone;
  conn.why = std::move(why);
  conn.died = died;
}

std::vector<TenantConn*> TenantHub::sync_registry() {
  std::vector<TenantConn*> fresh;
  const uint64_t generation = shared_.generation.load(std::memory_order_acquire);
  if (generation == seen_generation_) return fresh;
  std::lock_guard lock(shared_.mu);
  seen_generation_ = generation;
  const auto& records = shared_.registry->tenants();
  for (auto it = books_.made.begin(); it != books_.made.end();) {
    const auto rec = records.find(it->first);
    if (rec == records.end()) {
      // Registered and gone before the engine saw it: its rings go now, its slot with them.
      if (it->second.lc_slot != ipc::kNoLcSlot) {
        (void)books_.board.clear(uint64_t{1} << it->second.lc_slot);
        books_.free_slot(it->second.lc_slot);
      }
      it = books_.made.erase(it);
      continue;
    }
    auto conn = std::make_unique<TenantConn>();
    conn->id = it->first;
    conn->record = rec->second;
    conn->channel = std::move(it->second.channel);
    conn->lease = std::move(it->second.lease);
    conn->lc_slot = it->second.lc_slot;
    conn->free_run = free_run_(conn->record);
    conn->launches = LaunchBook(ipc::kMaxOutstandingLaunches, !lease_form_);
    fresh.push_back(conn.get());
    conns_.emplace(it->first, std::move(conn));
    it = books_.made.erase(it);
  }
  for (auto& [id, conn] : conns_) {
    if (conn->state != ConnState::live) continue;
    // The registry removed it: a goodbye on the socket, or its connection closed. A tenant says
    // goodbye up its ring before the socket's, so the next poll that empties its ring tells.
    if (records.count(id) == 0) conn->deregistered = true;
  }
  return fresh;
}

void TenantHub::reject(TenantConn& conn, const std::string& why) {
  ++counters_.rejected;
  {
    std::lock_guard lock(shared_.mu);
    shared_.registry->note_rejected();
  }
  mark_gone(conn, "broke the protocol: " + why, true);
}

bool TenantHub::poll(std::vector<Ended>& done) {
  bool any = false;
  uint8_t buf[ipc::kRingSlotBytes];
  const uint64_t now = ipc::monotonic_ns();
  // Liveness (a kill(pid, 0) per tenant) every few milliseconds, not on every poll.
  const bool check_peers = now - last_peer_check_ns_ >= kPeerCheckNs;
  if (check_peers) last_peer_check_ns_ = now;
  for (auto& [id, conn_ptr] : conns_) {
    TenantConn& conn = *conn_ptr;
    if (conn.state == ConnState::gone) continue;
    ipc::SpscRing& up = conn.channel.up();
    // At most a ring's worth per tenant per poll: one that refills its ring as fast as the daemon
    // reads cannot keep the others (and the heartbeats) waiting.
    bool drained = false;
    for (uint32_t taken = 0; taken < up.geometry().capacity; ++taken) {
      Result<size_t> n = up.try_pop(buf);
      if (!n.is_ok()) {
        reject(conn, "up ring: " + n.status().message());
        break;
      }
      if (*n == 0) {
        drained = true;
        break;
      }
      Result<ipc::Message> m = ipc::decode_on({buf, *n}, ipc::Channel::up_ring);
      if (!m.is_ok()) {
        reject(conn, m.status().message());
        break;
      }
      any = true;
      if (const auto* l = std::get_if<ipc::LaunchNotice>(&*m)) {
        if (Status s = conn.launches.notice(l->seq, l->stream, conn.free_run); !s.is_ok()) {
          reject(conn, s.message());
          break;
        }
        ++conn.stats.launches;
        conn.inbox.push_back(NoticeEvent{*l});
      } else if (const auto* c = std::get_if<ipc::CompletionNotice>(&*m)) {
        Result<std::vector<uint64_t>> ended = conn.launches.end(c->seq, c->stream);
        if (!ended.is_ok()) {
          reject(conn, ended.status().message());
          break;
        }
        conn.stats.completions += ended->size();
        for (uint64_t seq : *ended) done.push_back(Ended{id, seq, c->ok, c->at_ns});
        if (lease_form_ && !ended->empty()) conn.inbox.push_back(CompletionEvent{*ended, c->ok, c->at_ns});
        if (!c->ok) {
          ++conn.stats.failed;
          mark_gone(conn, fmt::format("reported launch {} failed on the device", c->seq), false);
          any = true;
          break;
        }
      } else if (const auto* b = std::get_if<ipc::RequestBoundary>(&*m)) {
        if (b->last_seq != conn.launches.last_noticed()) {
          reject(conn, fmt::format("request boundary: field last_seq: {}, but the last notice was {}", b->last_seq,
                                   conn.launches.last_noticed()));
          break;
        }
        conn.launches.request_edge(b->edge == ipc::RequestEdge::begin);
        conn.inbox.push_back(BoundaryEvent{*b, std::chrono::steady_clock::now()});
      } else if (const auto* u = std::get_if<ipc::MemoryUsage>(&*m)) {
        conn.stats.memory_live = u->live_bytes;
        conn.stats.memory_peak = u->peak_bytes;
      } else if (std::holds_alternative<ipc::Bye>(*m)) {
        if (conn.state == ConnState::live) {
          conn.state = ConnState::leaving;
          conn.why = "said goodbye";
        }
      }
    }
    if (conn.state == ConnState::gone) {
      any = true;
      continue;
    }
    if (conn.deregistered && drained && conn.state == ConnState::live) {
      // Everything it sent before its connection ended is read, and no goodbye was among it.
      const ipc::PeerStatus peer = up.peer(ipc::RingSide::producer, now, liveness_.stale_after_ns);
      if (peer.state == ipc::PeerState::closed) {
        conn.state = ConnState::leaving;
        conn.why = "said goodbye";
      } else {
        mark_gone(conn, "its control connection ended", true);
      }
      any = true;
      continue;
    }
    if (!check_peers && conn.unlinked) continue;
    const ipc::PeerStatus peer = up.peer(ipc::RingSide::producer, now, liveness_.stale_after_ns);
    if (peer.state != ipc::PeerState::absent && !conn.unlinked) {
      // Attached: the names are no longer needed, and nothing is left in /dev/shm if both die.
      (void)conn.channel.unlink();
      conn.unlinked = true;
    }
    if (peer.state == ipc::PeerState::dead) {
      mark_gone(conn, "its process died: " + peer.reason, true);
      any = true;
    } else if (peer.state == ipc::PeerState::closed && conn.state == ConnState::live) {
      conn.state = ConnState::leaving;
      conn.why = "closed its ring";
      any = true;
    }
  }
  return any;
}

void TenantHub::beat() {
  const uint64_t now = ipc::monotonic_ns();
  for (auto& [id, conn] : conns_) {
    conn->channel.up().beat(ipc::RingSide::consumer, now);
    conn->channel.down().beat(ipc::RingSide::producer, now);
  }
}

void TenantHub::send(TenantConn& conn, const ipc::Message& m) {
  if (conn.state == ConnState::gone) return;
  Result<std::span<uint8_t>> slot = conn.channel.down().reserve();
  if (!slot.is_ok() || slot->empty()) {
    // A tenant that reads nothing for a whole ring of decisions is not waiting for any.
    mark_gone(conn, slot.is_ok() ? "its down ring is full (it reads no decisions)" : slot.status().message(), true);
    return;
  }
  Result<size_t> n = ipc::encode_into(m, *slot);
  if (!n.is_ok()) {
    mark_gone(conn, "encode: " + n.status().message(), false);
    return;
  }
  (void)conn.channel.down().commit(*n);
}

void TenantHub::remove(uint64_t id) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  TenantConn& conn = *it->second;
  conn.channel.down().close(ipc::RingSide::producer);
  conn.channel.up().close(ipc::RingSide::consumer);
  if (conn.engine.valid()) by_engine_.erase(conn.engine.value);
  {
    std::lock_guard lock(shared_.mu);
    if (conn.lc_slot != ipc::kNoLcSlot) {
      // A killed LC tenant never lowers its flag: BE gates that yield to it open now.
      (void)books_.board.clear(uint64_t{1} << conn.lc_slot);
      books_.free_slot(conn.lc_slot);
    }
    // Still registered when the rings told first (a dead peer, a broken protocol); the registry
    // counts the drop (it counted those whose connection ended itself).
    if (shared_.registry->tenants().count(id)) (void)shared_.registry->drop(id, conn.died);
  }
  conns_.erase(it);
}

void TenantHub::say_goodbye(ipc::ByeReason reason) {
  for (auto& [id, conn] : conns_) {
    send(*conn, ipc::Bye{reason});
    conn->channel.down().close(ipc::RingSide::producer);
  }
}

}  // namespace concord::daemon
