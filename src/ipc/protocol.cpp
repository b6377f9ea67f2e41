#include "ipc/protocol.h"

#include "ipc/wire.h"

#include <bit>
#include <cstring>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace concord::ipc {
namespace {

using wire::Reader;
using wire::Writer;

// A tenant list entry at its largest (a 64-byte name): the list's limit keeps one frame enough.
constexpr size_t kMaxTenantEntryBytes = 8 + 4 + 4 + 1 + 8 + 4 + 8 + 8 + 8 + 8 + 1 + 1 + 4 + 4 + 4 + 2 + limits::kNameBytes + 2 +
                                         limits::kDeviceBytes;
static_assert(kHeaderBytes + 2 + limits::kTenantsPerList * kMaxTenantEntryBytes <= kMaxFrameBytes,
              "a full tenant list must fit one frame");


bool printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool channel_chars(std::string_view s) {
  if (s.empty() || s[0] != '/') return false;
  for (char c : s.substr(1)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return s.size() > 1;
}

// Checks of every field's range, shared by encode (refuse to send) and decode (refuse to take).
// `bad(field, reason)` makes the Status.
template <typename Bad>
Status check_name(const std::string& name, const char* field, Bad bad) {
  if (name.empty()) return bad(field, "is empty");
  if (name.size() > limits::kNameBytes) return bad(field, fmt::format("is {} bytes, over {}", name.size(), limits::kNameBytes));
  if (!printable(name)) return bad(field, "holds a byte that is not printable ASCII");
  return Status::ok();
}

// A device field may be empty (not known); else printable ASCII within its limit.
template <typename Bad>
Status check_device(const std::string& device, const char* field, Bad bad) {
  if (device.size() > limits::kDeviceBytes) return bad(field, fmt::format("is {} bytes, over {}", device.size(), limits::kDeviceBytes));
  if (!printable(device)) return bad(field, "holds a byte that is not printable ASCII");
  return Status::ok();
}

template <typename Bad>
Status check_class(uint8_t cls, const char* field, Bad bad) {
  if (cls > static_cast<uint8_t>(TenantClass::best_effort)) return bad(field, fmt::format("{} is not LC (0) or BE (1)", cls));
  return Status::ok();
}

template <typename Bad>
Status check_weight(uint32_t weight, Bad bad) {
  if (weight < 1 || weight > limits::kMaxWeight) return bad("weight", fmt::format("{} is outside 1..{}", weight, limits::kMaxWeight));
  return Status::ok();
}

template <typename Bad>
Status check_target(TenantClass cls, uint64_t target_ns, Bad bad) {
  if (cls == TenantClass::latency_critical && target_ns == 0) return bad("latency_target_ns", "is 0 for an LC tenant");
  if (cls == TenantClass::best_effort && target_ns != 0) return bad("latency_target_ns", "is set for a BE tenant");
  if (target_ns > limits::kMaxLatencyTargetNs) return bad("latency_target_ns", fmt::format("{} is over an hour", target_ns));
  return Status::ok();
}

template <typename Bad>
Status check_fields(const Message& m, Bad bad) {
  if (const auto* r = std::get_if<RegisterTenant>(&m)) {
    CONCORD_RETURN_IF_ERROR(check_class(static_cast<uint8_t>(r->cls), "class", bad));
    CONCORD_RETURN_IF_ERROR(check_target(r->cls, r->latency_target_ns, bad));
    CONCORD_RETURN_IF_ERROR(check_weight(r->weight, bad));
    if (r->pid <= 0) return bad("pid", fmt::format("{} is not a process id", r->pid));
    CONCORD_RETURN_IF_ERROR(check_device(r->device, "device", bad));
    if (static_cast<uint8_t>(r->on_lc_refused) > 1) {
      return bad("on_lc_refused", fmt::format("{} is not refuse (0) or best-effort (1)", static_cast<int>(r->on_lc_refused)));
    }
    return check_name(r->name, "name", bad);
  }
  if (const auto* g = std::get_if<GrantLc>(&m)) return check_name(g->label, "label", bad);
  if (const auto* l = std::get_if<LaunchNotice>(&m)) {
    if (l->seq == 0) return bad("seq", "is 0 (sequences start at 1)");
    if (l->graph) {
      if (l->grid != Dim3{0, 0, 0} || l->block != Dim3{0, 0, 0} || l->shared_mem != 0) {
        return bad("grid", "a graph launch carries no grid, block or shared memory (all must be 0)");
      }
      return Status::ok();
    }
    if (l->grid.x < 1 || l->grid.x > limits::kMaxGridX) return bad("grid.x", fmt::format("{} is outside 1..{}", l->grid.x, limits::kMaxGridX));
    if (l->grid.y < 1 || l->grid.y > limits::kMaxGridYZ) return bad("grid.y", fmt::format("{} is outside 1..{}", l->grid.y, limits::kMaxGridYZ));
    if (l->grid.z < 1 || l->grid.z > limits::kMaxGridYZ) return bad("grid.z", fmt::format("{} is outside 1..{}", l->grid.z, limits::kMaxGridYZ));
    if (l->block.x < 1 || l->block.x > limits::kMaxBlockThreads) return bad("block.x", fmt::format("{} is outside 1..{}", l->block.x, limits::kMaxBlockThreads));
    if (l->block.y < 1 || l->block.y > limits::kMaxBlockThreads) return bad("block.y", fmt::format("{} is outside 1..{}", l->block.y, limits::kMaxBlockThreads));
    if (l->block.z < 1 || l->block.z > limits::kMaxBlockZ) return bad("block.z", fmt::format("{} is outside 1..{}", l->block.z, limits::kMaxBlockZ));
    const uint64_t threads = uint64_t(l->block.x) * l->block.y * l->block.z;
    if (threads > limits::kMaxBlockThreads) return bad("block", fmt::format("{} threads, over {}", threads, limits::kMaxBlockThreads));
    if (l->shared_mem > limits::kMaxSharedMemBytes) return bad("shared_mem", fmt::format("{} bytes, over {}", l->shared_mem, limits::kMaxSharedMemBytes));
    return Status::ok();
  }
  if (const auto* d = std::get_if<Decision>(&m)) {
    if (d->seq == 0) return bad("seq", "is 0 (sequences start at 1)");
    if (static_cast<uint8_t>(d->verdict) > 1) return bad("verdict", fmt::format("{} is not release (0) or hold (1)", static_cast<int>(d->verdict)));
    if (static_cast<uint8_t>(d->priority) > 1) return bad("priority", fmt::format("{} is not normal (0) or high (1)", static_cast<int>(d->priority)));
    return Status::ok();
  }
  if (const auto* c = std::get_if<CompletionNotice>(&m)) {
    if (c->seq == 0) return bad("seq", "is 0 (sequences start at 1)");
    return Status::ok();
  }
  if (const auto* b = std::get_if<Bye>(&m)) {
    if (static_cast<uint8_t>(b->reason) > static_cast<uint8_t>(ByeReason::error)) {
      return bad("reason", fmt::format("{} is not exit (0), shutdown (1) or error (2)", static_cast<int>(b->reason)));
    }
    return Status::ok();
  }
  if (const auto* s = std::get_if<SetWeight>(&m)) return check_weight(s->weight, bad);
  if (const auto* a = std::get_if<SmSetAnnounce>(&m)) {
    if (a->handle == 0) return bad("handle", "is 0 (the whole GPU needs no announcement)");
    if (a->words.empty()) return bad("words", "is empty (an SM set has at least one SM)");
    if (a->words.size() > limits::kMaxSms / 64) return bad("words", fmt::format("{} words, over {} ({} SMs)", a->words.size(), limits::kMaxSms / 64, limits::kMaxSms));
    if (a->words.back() == 0) return bad("words", "ends with a zero word (not the shortest form)");
    return Status::ok();
  }
  if (const auto* r = std::get_if<RequestBoundary>(&m)) {
    if (static_cast<uint8_t>(r->edge) > 1) return bad("edge", fmt::format("{} is not begin (0) or end (1)", static_cast<int>(r->edge)));
    return Status::ok();
  }
  if (const auto* r = std::get_if<Registered>(&m)) {
    if (r->channel.size() > limits::kChannelBytes) return bad("channel", fmt::format("is {} bytes, over {}", r->channel.size(), limits::kChannelBytes));
    if (!channel_chars(r->channel)) return bad("channel", "is not '/' followed by letters, digits, '.', '_' or '-'");
    CONCORD_RETURN_IF_ERROR(check_class(static_cast<uint8_t>(r->cls), "class", bad));
    if (r->lc_refused.size() > limits::kErrorBytes) return bad("lc_refused", fmt::format("is {} bytes, over {}", r->lc_refused.size(), limits::kErrorBytes));
    if (!printable(r->lc_refused)) return bad("lc_refused", "holds a byte that is not printable ASCII");
    if (!r->lc_refused.empty() && r->cls != TenantClass::best_effort) return bad("lc_refused", "is set for a tenant admitted as LC");
    return Status::ok();
  }
  if (const auto* t = std::get_if<TenantList>(&m)) {
    if (t->tenants.size() > limits::kTenantsPerList) return bad("tenants", fmt::format("{} entries, over {}", t->tenants.size(), limits::kTenantsPerList));
    for (const TenantEntry& e : t->tenants) {
      CONCORD_RETURN_IF_ERROR(check_class(static_cast<uint8_t>(e.cls), "tenants.class", bad));
      CONCORD_RETURN_IF_ERROR(check_target(e.cls, e.latency_target_ns, bad));
      CONCORD_RETURN_IF_ERROR(check_weight(e.weight, bad));
      if (e.pid <= 0) return bad("tenants.pid", fmt::format("{} is not a process id", e.pid));
      if (static_cast<uint8_t>(e.lease.yield) > static_cast<uint8_t>(LeaseYield::per_launch)) {
        return bad("tenants.lease.yield", fmt::format("{} is not none, close, cap, room or per-launch (0-4)", static_cast<int>(e.lease.yield)));
      }
      if (e.lease.room_sms > limits::kMaxSms) return bad("tenants.lease.room_sms", fmt::format("{} is over {}", e.lease.room_sms, limits::kMaxSms));
      if (e.lease.room_blocks_per_sm > limits::kMaxRoomBlocksPerSm) {
        return bad("tenants.lease.room_blocks_per_sm", fmt::format("{} is over {}", e.lease.room_blocks_per_sm, limits::kMaxRoomBlocksPerSm));
      }
      CONCORD_RETURN_IF_ERROR(check_name(e.name, "tenants.name", bad));
      CONCORD_RETURN_IF_ERROR(check_device(e.device, "tenants.device", bad));
    }
    return Status::ok();
  }
  if (const auto* e = std::get_if<ErrorReply>(&m)) {
    const auto code = static_cast<uint8_t>(e->code);
    if (code == 0 || code > static_cast<uint8_t>(StatusCode::permission_denied)) {
      return bad("code", fmt::format("{} is not an error code", code));
    }
    if (e->message.size() > limits::kErrorBytes) return bad("message", fmt::format("is {} bytes, over {}", e->message.size(), limits::kErrorBytes));
    if (!printable(e->message)) return bad("message", "holds a byte that is not printable ASCII");
    return Status::ok();
  }
  return Status::ok();
}

void write_body(Writer& w, const Message& m) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, RegisterTenant>) {
          w.u8(static_cast<uint8_t>(v.cls));
          w.u64(v.latency_target_ns);
          w.u32(v.weight);
          w.i32(v.pid);
          w.str(v.name);
          w.str(v.device);
          w.u8(static_cast<uint8_t>(v.on_lc_refused));
        } else if constexpr (std::is_same_v<T, GrantLc>) {
          w.u32(v.uid);
          w.str(v.label);
        } else if constexpr (std::is_same_v<T, LaunchNotice>) {
          w.u64(v.seq);
          w.u64(v.stream);
          w.u64(v.kernel);
          w.dim3(v.grid);
          w.dim3(v.block);
          w.u32(v.shared_mem);
          w.u8(v.graph ? 1 : 0);
          w.u64(v.at_ns);
        } else if constexpr (std::is_same_v<T, Decision>) {
          w.u64(v.seq);
          w.u8(static_cast<uint8_t>(v.verdict));
          w.u8(static_cast<uint8_t>(v.priority));
          w.u32(v.sm_set);
        } else if constexpr (std::is_same_v<T, CompletionNotice>) {
          w.u64(v.seq);
          w.u64(v.stream);
          w.u8(v.ok ? 1 : 0);
          w.u64(v.at_ns);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          w.u64(v.sent_ns);
        } else if constexpr (std::is_same_v<T, Bye>) {
          w.u8(static_cast<uint8_t>(v.reason));
        } else if constexpr (std::is_same_v<T, SetWeight>) {
          w.u64(v.tenant);
          w.u32(v.weight);
        } else if constexpr (std::is_same_v<T, Registered>) {
          w.u64(v.tenant);
          w.str(v.channel);
          w.u8(static_cast<uint8_t>(v.cls));
          w.str(v.lc_refused);
        } else if constexpr (std::is_same_v<T, TenantList>) {
          w.u16(static_cast<uint16_t>(v.tenants.size()));
          for (const TenantEntry& e : v.tenants) {
            w.u64(e.id);
            w.u32(e.uid);
            w.i32(e.pid);
            w.u8(static_cast<uint8_t>(e.cls));
            w.u64(e.latency_target_ns);
            w.u32(e.weight);
            w.u64(e.launches);
            w.u64(e.completions);
            w.u64(e.p50_ns);
            w.u64(e.p99_ns);
            w.u8(static_cast<uint8_t>(e.lease.yield));
            w.u8(e.lease.yielding ? 1 : 0);
            w.u32(e.lease.in_flight_cap);
            w.u32(e.lease.room_sms);
            w.u32(e.lease.room_blocks_per_sm);
            w.str(e.name);
            w.str(e.device);
          }
        } else if constexpr (std::is_same_v<T, Stats>) {
          w.u64(v.tenants);
          w.u64(v.launches);
          w.u64(v.rejected);
          w.u64(v.dropped);
          w.u64(v.lc_refused);
        } else if constexpr (std::is_same_v<T, ErrorReply>) {
          w.u8(static_cast<uint8_t>(v.code));
          w.str(v.message);
        } else if constexpr (std::is_same_v<T, SmSetAnnounce>) {
          w.u32(v.handle);
          w.u8(static_cast<uint8_t>(v.words.size()));
          for (uint64_t word : v.words) w.u64(word);
        } else if constexpr (std::is_same_v<T, RequestBoundary>) {
          w.u8(static_cast<uint8_t>(v.edge));
          w.u64(v.last_seq);
          w.u64(v.at_ns);
        }
        // ListTenants, GetStats, Ack: no body.
      },
      m);
}

// A boolean byte: 0 or 1, nothing else.
Status read_bool(Reader& r, bool& out, const char* field) {
  uint8_t b = 0;
  CONCORD_RETURN_IF_ERROR(r.u8(b, field));
  if (b > 1) return r.fail(field, fmt::format("{} is not 0 or 1", b));
  out = b == 1;
  return Status::ok();
}

Status read_class(Reader& r, TenantClass& out, const char* field) {
  uint8_t b = 0;
  CONCORD_RETURN_IF_ERROR(r.u8(b, field));
  if (b > static_cast<uint8_t>(TenantClass::best_effort)) return r.fail(field, fmt::format("{} is not LC (0) or BE (1)", b));
  out = static_cast<TenantClass>(b);
  return Status::ok();
}

Result<Message> read_body(Reader& r, MessageType type) {
  switch (type) {
    case MessageType::register_tenant: {
      RegisterTenant v;
      CONCORD_RETURN_IF_ERROR(read_class(r, v.cls, "class"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.latency_target_ns, "latency_target_ns"));
      CONCORD_RETURN_IF_ERROR(r.u32(v.weight, "weight"));
      CONCORD_RETURN_IF_ERROR(r.i32(v.pid, "pid"));
      CONCORD_RETURN_IF_ERROR(r.str(v.name, limits::kNameBytes, "name"));
      CONCORD_RETURN_IF_ERROR(r.str(v.device, limits::kDeviceBytes, "device"));
      uint8_t refusal = 0;
      CONCORD_RETURN_IF_ERROR(r.u8(refusal, "on_lc_refused"));
      if (refusal > 1) return r.fail("on_lc_refused", fmt::format("{} is not refuse (0) or best-effort (1)", refusal));
      v.on_lc_refused = static_cast<LcRefusal>(refusal);
      return Message(std::move(v));
    }
    case MessageType::grant_lc: {
      GrantLc v;
      CONCORD_RETURN_IF_ERROR(r.u32(v.uid, "uid"));
      CONCORD_RETURN_IF_ERROR(r.str(v.label, limits::kNameBytes, "label"));
      return Message(std::move(v));
    }
    case MessageType::launch_notice: {
      LaunchNotice v;
      CONCORD_RETURN_IF_ERROR(r.u64(v.seq, "seq"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.stream, "stream"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.kernel, "kernel"));
      CONCORD_RETURN_IF_ERROR(r.dim3(v.grid, "grid"));
      CONCORD_RETURN_IF_ERROR(r.dim3(v.block, "block"));
      CONCORD_RETURN_IF_ERROR(r.u32(v.shared_mem, "shared_mem"));
      CONCORD_RETURN_IF_ERROR(read_bool(r, v.graph, "graph"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.at_ns, "at_ns"));
      return Message(v);
    }
    case MessageType::decision: {
      Decision v;
      uint8_t verdict = 0, priority = 0;
      CONCORD_RETURN_IF_ERROR(r.u64(v.seq, "seq"));
      CONCORD_RETURN_IF_ERROR(r.u8(verdict, "verdict"));
      if (verdict > 1) return r.fail("verdict", fmt::format("{} is not release (0) or hold (1)", verdict));
      CONCORD_RETURN_IF_ERROR(r.u8(priority, "priority"));
      if (priority > 1) return r.fail("priority", fmt::format("{} is not normal (0) or high (1)", priority));
      CONCORD_RETURN_IF_ERROR(r.u32(v.sm_set, "sm_set"));
      v.verdict = static_cast<Verdict>(verdict);
      v.priority = static_cast<Priority>(priority);
      return Message(v);
    }
    case MessageType::completion: {
      CompletionNotice v;
      CONCORD_RETURN_IF_ERROR(r.u64(v.seq, "seq"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.stream, "stream"));
      CONCORD_RETURN_IF_ERROR(read_bool(r, v.ok, "ok"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.at_ns, "at_ns"));
      return Message(v);
    }
    case MessageType::heartbeat: {
      Heartbeat v;
      CONCORD_RETURN_IF_ERROR(r.u64(v.sent_ns, "sent_ns"));
      return Message(v);
    }
    case MessageType::bye: {
      uint8_t reason = 0;
      CONCORD_RETURN_IF_ERROR(r.u8(reason, "reason"));
      if (reason > static_cast<uint8_t>(ByeReason::error)) {
        return r.fail("reason", fmt::format("{} is not exit (0), shutdown (1) or error (2)", reason));
      }
      return Message(Bye{static_cast<ByeReason>(reason)});
    }
    case MessageType::list_tenants: return Message(ListTenants{});
    case MessageType::get_stats: return Message(GetStats{});
    case MessageType::ack: return Message(Ack{});
    case MessageType::set_weight: {
      SetWeight v;
      CONCORD_RETURN_IF_ERROR(r.u64(v.tenant, "tenant"));
      CONCORD_RETURN_IF_ERROR(r.u32(v.weight, "weight"));
      return Message(v);
    }
    case MessageType::registered: {
      Registered v;
      CONCORD_RETURN_IF_ERROR(r.u64(v.tenant, "tenant"));
      CONCORD_RETURN_IF_ERROR(r.str(v.channel, limits::kChannelBytes, "channel"));
      CONCORD_RETURN_IF_ERROR(read_class(r, v.cls, "class"));
      CONCORD_RETURN_IF_ERROR(r.str(v.lc_refused, limits::kErrorBytes, "lc_refused"));
      return Message(std::move(v));
    }
    case MessageType::tenant_list: {
      TenantList v;
      uint16_t n = 0;
      CONCORD_RETURN_IF_ERROR(r.u16(n, "tenants"));
      if (n > limits::kTenantsPerList) return r.fail("tenants", fmt::format("{} entries, over {}", n, limits::kTenantsPerList));
      // The smallest entry is 80 bytes: a count the frame cannot hold is refused before any
      // allocation it would cause.
      constexpr size_t kMinEntryBytes = 8 + 4 + 4 + 1 + 8 + 4 + 8 + 8 + 8 + 8 + 1 + 1 + 4 + 4 + 4 + 2 + 1 + 2;
      if (size_t(n) * kMinEntryBytes > r.left()) {
        return r.fail("tenants", fmt::format("{} entries cannot fit in the {} bytes left", n, r.left()));
      }
      v.tenants.resize(n);
      for (TenantEntry& e : v.tenants) {
        CONCORD_RETURN_IF_ERROR(r.u64(e.id, "tenants.id"));
        CONCORD_RETURN_IF_ERROR(r.u32(e.uid, "tenants.uid"));
        CONCORD_RETURN_IF_ERROR(r.i32(e.pid, "tenants.pid"));
        CONCORD_RETURN_IF_ERROR(read_class(r, e.cls, "tenants.class"));
        CONCORD_RETURN_IF_ERROR(r.u64(e.latency_target_ns, "tenants.latency_target_ns"));
        CONCORD_RETURN_IF_ERROR(r.u32(e.weight, "tenants.weight"));
        CONCORD_RETURN_IF_ERROR(r.u64(e.launches, "tenants.launches"));
        CONCORD_RETURN_IF_ERROR(r.u64(e.completions, "tenants.completions"));
        CONCORD_RETURN_IF_ERROR(r.u64(e.p50_ns, "tenants.p50_ns"));
        CONCORD_RETURN_IF_ERROR(r.u64(e.p99_ns, "tenants.p99_ns"));
        uint8_t yield = 0;
        CONCORD_RETURN_IF_ERROR(r.u8(yield, "tenants.lease.yield"));
        if (yield > static_cast<uint8_t>(LeaseYield::per_launch)) {
          return r.fail("tenants.lease.yield", fmt::format("{} is not none, close, cap, room or per-launch (0-4)", yield));
        }
        e.lease.yield = static_cast<LeaseYield>(yield);
        CONCORD_RETURN_IF_ERROR(read_bool(r, e.lease.yielding, "tenants.lease.yielding"));
        CONCORD_RETURN_IF_ERROR(r.u32(e.lease.in_flight_cap, "tenants.lease.in_flight_cap"));
        CONCORD_RETURN_IF_ERROR(r.u32(e.lease.room_sms, "tenants.lease.room_sms"));
        CONCORD_RETURN_IF_ERROR(r.u32(e.lease.room_blocks_per_sm, "tenants.lease.room_blocks_per_sm"));
        if (e.lease.room_sms > limits::kMaxSms) return r.fail("tenants.lease.room_sms", fmt::format("{} is over {}", e.lease.room_sms, limits::kMaxSms));
        if (e.lease.room_blocks_per_sm > limits::kMaxRoomBlocksPerSm) {
          return r.fail("tenants.lease.room_blocks_per_sm", fmt::format("{} is over {}", e.lease.room_blocks_per_sm, limits::kMaxRoomBlocksPerSm));
        }
        CONCORD_RETURN_IF_ERROR(r.str(e.name, limits::kNameBytes, "tenants.name"));
        CONCORD_RETURN_IF_ERROR(r.str(e.device, limits::kDeviceBytes, "tenants.device"));
      }
      return Message(std::move(v));
    }
    case MessageType::stats: {
      Stats v;
      CONCORD_RETURN_IF_ERROR(r.u64(v.tenants, "tenants"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.launches, "launches"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.rejected, "rejected"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.dropped, "dropped"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.lc_refused, "lc_refused"));
      return Message(v);
    }
    case MessageType::sm_set: {
      SmSetAnnounce v;
      uint8_t n = 0;
      CONCORD_RETURN_IF_ERROR(r.u32(v.handle, "handle"));
      CONCORD_RETURN_IF_ERROR(r.u8(n, "words"));
      if (n > limits::kMaxSms / 64) return r.fail("words", fmt::format("{} words, over {} ({} SMs)", n, limits::kMaxSms / 64, limits::kMaxSms));
      v.words.resize(n);
      for (uint64_t& word : v.words) CONCORD_RETURN_IF_ERROR(r.u64(word, "words"));
      return Message(std::move(v));
    }
    case MessageType::request: {
      RequestBoundary v;
      uint8_t edge = 0;
      CONCORD_RETURN_IF_ERROR(r.u8(edge, "edge"));
      if (edge > 1) return r.fail("edge", fmt::format("{} is not begin (0) or end (1)", edge));
      v.edge = static_cast<RequestEdge>(edge);
      CONCORD_RETURN_IF_ERROR(r.u64(v.last_seq, "last_seq"));
      CONCORD_RETURN_IF_ERROR(r.u64(v.at_ns, "at_ns"));
      return Message(v);
    }
    case MessageType::error: {
      ErrorReply v;
      uint8_t code = 0;
      CONCORD_RETURN_IF_ERROR(r.u8(code, "code"));
      if (code == 0 || code > static_cast<uint8_t>(StatusCode::permission_denied)) {
        return r.fail("code", fmt::format("{} is not an error code", code));
      }
      v.code = static_cast<StatusCode>(code);
      CONCORD_RETURN_IF_ERROR(r.str(v.message, limits::kErrorBytes, "message"));
      return Message(std::move(v));
    }
  }
  return r.fail("type", "unknown");
}

bool known_type(uint16_t t) {
  switch (static_cast<MessageType>(t)) {
    case MessageType::register_tenant:
    case MessageType::launch_notice:
    case MessageType::decision:
    case MessageType::completion:
    case MessageType::heartbeat:
    case MessageType::bye:
    case MessageType::list_tenants:
    case MessageType::get_stats:
    case MessageType::set_weight:
    case MessageType::grant_lc:
    case MessageType::registered:
    case MessageType::tenant_list:
    case MessageType::stats:
    case MessageType::ack:
    case MessageType::error:
    case MessageType::sm_set:
    case MessageType::request: return true;
  }
  return false;
}

uint32_t read_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint16_t read_u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

}  // namespace

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::register_tenant: return "register";
    case MessageType::launch_notice: return "launch notice";
    case MessageType::decision: return "decision";
    case MessageType::completion: return "completion";
    case MessageType::heartbeat: return "heartbeat";
    case MessageType::bye: return "bye";
    case MessageType::list_tenants: return "list tenants";
    case MessageType::get_stats: return "get stats";
    case MessageType::set_weight: return "set weight";
    case MessageType::grant_lc: return "grant lc";
    case MessageType::registered: return "registered";
    case MessageType::tenant_list: return "tenant list";
    case MessageType::stats: return "stats";
    case MessageType::ack: return "ack";
    case MessageType::error: return "error";
    case MessageType::sm_set: return "sm set";
    case MessageType::request: return "request boundary";
  }
  return "unknown";
}

const char* to_string(Channel channel) {
  switch (channel) {
    case Channel::up_ring: return "up ring";
    case Channel::down_ring: return "down ring";
    case Channel::control_request: return "control request";
    case Channel::control_reply: return "control reply";
  }
  return "unknown";
}

const char* to_string(LeaseYield yield) {
  switch (yield) {
    case LeaseYield::none: return "none";
    case LeaseYield::close: return "close";
    case LeaseYield::cap: return "cap";
    case LeaseYield::room: return "room";
    case LeaseYield::per_launch: return "per-launch";
  }
  return "unknown";
}

const char* to_string(LcRefusal refusal) { return refusal == LcRefusal::refuse ? "refuse" : "best-effort"; }

const char* to_string(Verdict verdict) { return verdict == Verdict::release ? "release" : "hold"; }

Result<std::vector<uint64_t>> sm_words(const std::vector<int>& sms) {
  std::vector<uint64_t> words;
  for (int sm : sms) {
    if (sm < 0 || sm >= static_cast<int>(limits::kMaxSms)) {
      return Status::invalid_argument(fmt::format("sm set: SM {} is outside 0..{}", sm, limits::kMaxSms - 1));
    }
    const auto w = static_cast<size_t>(sm) / 64;
    if (words.size() <= w) words.resize(w + 1, 0);
    words[w] |= uint64_t{1} << (sm % 64);
  }
  return words;
}

std::vector<int> sm_ids(const std::vector<uint64_t>& words) {
  std::vector<int> ids;
  for (size_t w = 0; w < words.size(); ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) ids.push_back(static_cast<int>(w * 64) + std::countr_zero(bits));
  }
  return ids;
}

MessageType type_of(const Message& message) {
  static constexpr MessageType kTypes[] = {
      MessageType::register_tenant, MessageType::launch_notice, MessageType::decision, MessageType::completion,
      MessageType::heartbeat,       MessageType::bye,           MessageType::list_tenants, MessageType::get_stats,
      MessageType::set_weight,      MessageType::registered,    MessageType::tenant_list, MessageType::stats,
      MessageType::ack,             MessageType::error,         MessageType::sm_set,      MessageType::request,
      MessageType::grant_lc};
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[message.index()];
}

bool allowed_on(MessageType type, Channel channel) {
  switch (channel) {
    case Channel::up_ring:
      return type == MessageType::launch_notice || type == MessageType::completion || type == MessageType::request ||
             type == MessageType::heartbeat || type == MessageType::bye;
    case Channel::down_ring:
      return type == MessageType::decision || type == MessageType::sm_set || type == MessageType::heartbeat ||
             type == MessageType::bye;
    case Channel::control_request:
      return type == MessageType::register_tenant || type == MessageType::list_tenants ||
             type == MessageType::get_stats || type == MessageType::set_weight || type == MessageType::bye ||
             type == MessageType::grant_lc;
    case Channel::control_reply:
      return type == MessageType::registered || type == MessageType::tenant_list || type == MessageType::stats ||
             type == MessageType::ack || type == MessageType::error;
  }
  return false;
}

Result<size_t> encode_into(const Message& message, std::span<uint8_t> out) {
  const MessageType type = type_of(message);
  CONCORD_RETURN_IF_ERROR(check_fields(message, [type](const char* field, const std::string& reason) {
    return Status::invalid_argument(fmt::format("{} message: field {}: {}", to_string(type), field, reason));
  }));
  Writer w(out);
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(static_cast<uint16_t>(type));
  w.u32(0);  // body length, patched below
  write_body(w, message);
  if (w.overflowed() || w.size() > kMaxFrameBytes) {
    return Status::invalid_argument(fmt::format("{} message: its frame does not fit in {} bytes", to_string(type),
                                                std::min(out.size(), kMaxFrameBytes)));
  }
  w.patch_u32(8, static_cast<uint32_t>(w.size() - kHeaderBytes));
  return w.size();
}

Result<std::vector<uint8_t>> encode(const Message& message) {
  std::vector<uint8_t> frame(kMaxFrameBytes);
  Result<size_t> n = encode_into(message, frame);
  if (!n.is_ok()) return n.status();
  frame.resize(*n);
  return frame;
}

Result<size_t> body_length(std::span<const uint8_t, kHeaderBytes> header) {
  const uint32_t magic = read_u32(header.data());
  if (magic != kMagic) return Status::parse_error(fmt::format("frame: field magic: 0x{:08x} is not Concord's (0x{:08x})", magic, kMagic));
  const uint16_t version = read_u16(header.data() + 4);
  if (version != kVersion) {
    return Status::parse_error(fmt::format("frame: field version: protocol {} is not this side's {} (a Concord client and daemon of "
                                           "different releases: run one release on the node)", version, kVersion));
  }
  const uint16_t type = read_u16(header.data() + 6);
  if (!known_type(type)) return Status::parse_error(fmt::format("frame: field type: {} is not a message type", type));
  const uint32_t length = read_u32(header.data() + 8);
  if (length > kMaxFrameBytes - kHeaderBytes) {
    return Status::parse_error(fmt::format("frame: field length: {} is over the limit of {} bytes", length, kMaxFrameBytes - kHeaderBytes));
  }
  return size_t(length);
}

Result<Message> decode(std::span<const uint8_t> frame) {
  if (frame.size() < kHeaderBytes) {
    return Status::parse_error(fmt::format("frame: field header: {} bytes, a header is {}", frame.size(), kHeaderBytes));
  }
  Result<size_t> length = body_length(frame.first<kHeaderBytes>());
  if (!length.is_ok()) return length.status();
  const auto type = static_cast<MessageType>(read_u16(frame.data() + 6));
  if (*length != frame.size() - kHeaderBytes) {
    return Status::parse_error(fmt::format("{} message: field length: {} bytes announced, {} given", to_string(type),
                                           *length, frame.size() - kHeaderBytes));
  }
  Reader r(frame.subspan(kHeaderBytes), type);
  Result<Message> message = read_body(r, type);
  if (!message.is_ok()) return message;
  if (r.left() != 0) return r.fail("length", fmt::format("{} bytes after the body's end", r.left()));
  CONCORD_RETURN_IF_ERROR(check_fields(*message, [&r](const char* field, const std::string& reason) { return r.fail(field, reason); }));
  return message;
}

Result<Message> decode_on(std::span<const uint8_t> frame, Channel channel) {
  Result<Message> message = decode(frame);
  if (!message.is_ok()) return message;
  const MessageType type = type_of(*message);
  if (!allowed_on(type, channel)) {
    return Status::parse_error(fmt::format("{} message: field type: not carried on the {}", to_string(type), to_string(channel)));
  }
  return message;
}

}  // namespace concord::ipc
