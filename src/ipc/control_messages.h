// The messages of the daemon's control socket: a tenant's registration and its reply, and a
// client's requests (list, stats, weight, a Slurm step's LC grant) with their replies. Each
// declares its fields once (message_fields.h); protocol.h lists them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "concord/memory_quota.h"
#include "ipc/message_fields.h"

namespace concord::ipc {

// What a registration asks for when the daemon does not admit it as latency-critical (LC is a
// privilege: docs/daemon.md, "Security"): an error reply, or a best-effort tenant.
enum class LcRefusal : uint8_t { refuse = 0, best_effort = 1 };
const char* to_string(LcRefusal refusal);
template <>
struct EnumRange<LcRefusal> {
  static constexpr uint8_t lo = 0, hi = 1;
  static constexpr const char* names = "refuse (0) or best-effort (1)";
};

// An LC tenant has a target, a BE tenant none; at most an hour.
template <typename Bad>
Status check_target(TenantClass cls, uint64_t target_ns, const char* field, Bad bad) {
  if (cls == TenantClass::latency_critical && target_ns == 0) return bad(field, "is 0 for an LC tenant");
  if (cls == TenantClass::best_effort && target_ns != 0) return bad(field, "is set for a BE tenant");
  return Status::ok();
}

struct RegisterTenant {
  TenantClass cls = TenantClass::best_effort;
  uint64_t latency_target_ns = 0;  // LC: > 0; BE: 0
  uint32_t weight = 1;             // >= 1
  int32_t pid = 0;                 // the registering process, as the caller sees itself
  std::string name;
  // The GPU the tenant launches on, as its driver names it (cuDeviceGetPCIBusId: "0000:18:00.0");
  // empty when the tenant could not tell. A daemon that manages several GPUs places the tenant on
  // this one's engine.
  std::string device;
  LcRefusal on_lc_refused = LcRefusal::refuse;  // with cls LC
  // The GPU memory the tenant asks for (CONCORD_MEMORY_RESERVE for an LC tenant: its reservation;
  // CONCORD_MEMORY_LIMIT for a BE tenant: its own limit), 0 when it asks for none; the daemon's
  // books decide what it gets (docs/daemon.md, "Memory").
  uint64_t memory_bytes = 0;
  // The GPU's total memory as the tenant's driver reports it (cuDeviceTotalMem), 0 when unknown.
  uint64_t device_memory_bytes = 0;
  bool operator==(const RegisterTenant&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.cls, "class");
    f(m.latency_target_ns, "latency_target_ns", kTarget);
    f(m.weight, "weight", kWeight);
    f(m.pid, "pid", kPid);
    f(m.name, "name", Text::name);
    f(m.device, "device", Text::device);
    f(m.on_lc_refused, "on_lc_refused");
    f(m.memory_bytes, "memory_bytes", at_most(limits::kMaxMemoryBytes));
    f(m.device_memory_bytes, "device_memory_bytes", at_most(limits::kMaxMemoryBytes));
  }
  template <typename Bad>
  static Status check(const RegisterTenant& r, Bad bad) {
    return check_target(r.cls, r.latency_target_ns, "latency_target_ns", bad);
  }
};

struct ListTenants {
  bool operator==(const ListTenants&) const = default;
  template <typename F, typename M>
  static void fields(F&, M&) {}
};
struct GetStats {
  bool operator==(const GetStats&) const = default;
  template <typename F, typename M>
  static void fields(F&, M&) {}
};
struct SetWeight {
  uint64_t tenant = 0;
  uint32_t weight = 1;
  bool operator==(const SetWeight&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.tenant, "tenant");
    f(m.weight, "weight", kWeight);
  }
};
// Root only (a Slurm step's plugin in slurmstepd, docs/cluster.md): processes of user `uid` that
// descend from the sender may register as LC while the sender's connection stays open.
struct GrantLc {
  uint32_t uid = 0;
  std::string label;  // who is granted, for the log ("slurm-42.0")
  bool operator==(const GrantLc&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.uid, "uid");
    f(m.label, "label", Text::name);
  }
};

struct Registered {
  uint64_t tenant = 0;
  std::string channel;  // the base name of the tenant's shared-memory rings
  TenantClass cls = TenantClass::best_effort;  // the class granted
  std::string lc_refused{};  // why LC was refused, where it was asked and the tenant runs as BE (else empty)
  bool operator==(const Registered&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.tenant, "tenant");
    f(m.channel, "channel", Text::channel);
    f(m.cls, "class");
    f(m.lc_refused, "lc_refused", Text::message);
  }
  template <typename Bad>
  static Status check(const Registered& r, Bad bad) {
    if (!r.lc_refused.empty() && r.cls != TenantClass::best_effort) return bad("lc_refused", "is set for a tenant admitted as LC");
    return Status::ok();
  }
};

// What a tenant's lease does while LC work it yields to is in flight, as `concord top` shows it.
enum class LeaseYield : uint8_t { none = 0, close = 1, cap = 2, room = 3, per_launch = 4 };
const char* to_string(LeaseYield yield);
template <>
struct EnumRange<LeaseYield> {
  static constexpr uint8_t lo = 0, hi = 4;
  static constexpr const char* names = "none, close, cap, room or per-launch (0-4)";
};
struct TenantLease {
  LeaseYield yield = LeaseYield::none;  // none: it yields to nobody (or is LC)
  bool yielding = false;                // an LC flag it yields to is up now
  uint32_t in_flight_cap = 0;           // with cap: launches in flight at most then
  uint32_t room_sms = 0;                // with room (or cap and room): SMs each launch may use (0: all)
  uint32_t room_blocks_per_sm = 0;      // and blocks per SM (0: no cap)
  bool operator==(const TenantLease&) const = default;
};

// A tenant's GPU memory as the daemon's books have it: its quota (kNoMemoryLimit: none; of it, an
// LC reservation) and what its library last reported in use and at its peak.
struct TenantMemory {
  uint64_t limit_bytes = kNoMemoryLimit;
  uint64_t reserved_bytes = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
  bool operator==(const TenantMemory&) const = default;
};

struct TenantEntry {
  uint64_t id = 0;
  uint32_t uid = 0;
  int32_t pid = 0;
  TenantClass cls = TenantClass::best_effort;
  uint64_t latency_target_ns = 0;
  uint32_t weight = 1;
  uint64_t launches = 0;
  uint64_t completions = 0;
  uint64_t p50_ns = 0;  // LC request latency over the daemon's recent window (0: none yet)
  uint64_t p99_ns = 0;
  TenantLease lease;
  TenantMemory memory;
  std::string name;
  std::string device;  // the daemon's label of the tenant's GPU ("0", "1", ...; empty: not placed yet)
  bool operator==(const TenantEntry&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.id, "tenants.id");
    f(m.uid, "tenants.uid");
    f(m.pid, "tenants.pid", kPid);
    f(m.cls, "tenants.class");
    f(m.latency_target_ns, "tenants.latency_target_ns", kTarget);
    f(m.weight, "tenants.weight", kWeight);
    f(m.launches, "tenants.launches");
    f(m.completions, "tenants.completions");
    f(m.p50_ns, "tenants.p50_ns");
    f(m.p99_ns, "tenants.p99_ns");
    f(m.lease.yield, "tenants.lease.yield");
    f(m.lease.yielding, "tenants.lease.yielding");
    f(m.lease.in_flight_cap, "tenants.lease.in_flight_cap");
    f(m.lease.room_sms, "tenants.lease.room_sms", at_most(limits::kMaxSms));
    f(m.lease.room_blocks_per_sm, "tenants.lease.room_blocks_per_sm", at_most(limits::kMaxRoomBlocksPerSm));
    f(m.memory.limit_bytes, "tenants.memory.limit_bytes");
    f(m.memory.reserved_bytes, "tenants.memory.reserved_bytes");
    f(m.memory.live_bytes, "tenants.memory.live_bytes");
    f(m.memory.peak_bytes, "tenants.memory.peak_bytes");
    f(m.name, "tenants.name", Text::name);
    f(m.device, "tenants.device", Text::device);
  }
  template <typename Bad>
  static Status check(const TenantEntry& e, Bad bad) {
    return check_target(e.cls, e.latency_target_ns, "tenants.latency_target_ns", bad);
  }
};
// A tenant list entry's fewest bytes on the wire (a one-byte name, no device) and most (a full name
// and device): the list's limit keeps one frame enough (protocol.cpp).
inline constexpr size_t kMinTenantEntryBytes = 8 + 4 + 4 + 1 + 8 + 4 + 8 + 8 + 8 + 8 + 1 + 1 + 4 + 4 + 4 + 8 + 8 + 8 + 8 + 2 + 1 + 2;
inline constexpr size_t kMaxTenantEntryBytes =
    kMinTenantEntryBytes - 1 + limits::kNameBytes + limits::kDeviceBytes;
struct TenantList {
  std::vector<TenantEntry> tenants;
  bool operator==(const TenantList&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.tenants, "tenants", Count{2, limits::kTenantsPerList, kMinTenantEntryBytes});
  }
};

struct Stats {
  uint64_t tenants = 0;    // registered now
  uint64_t launches = 0;   // launch notices taken
  uint64_t rejected = 0;   // messages refused (malformed, foreign, out of sequence)
  uint64_t dropped = 0;    // tenants dropped because their process ended without a goodbye
  uint64_t lc_refused = 0; // LC registrations refused (answered with an error, or admitted as BE)
  bool operator==(const Stats&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.tenants, "tenants");
    f(m.launches, "launches");
    f(m.rejected, "rejected");
    f(m.dropped, "dropped");
    f(m.lc_refused, "lc_refused");
  }
};

struct Ack {
  bool operator==(const Ack&) const = default;
  template <typename F, typename M>
  static void fields(F&, M&) {}
};

struct ErrorReply {
  StatusCode code = StatusCode::internal;  // never ok
  std::string message;
  bool operator==(const ErrorReply&) const = default;

  template <typename F, typename M>
  static void fields(F& f, M& m) {
    f(m.code, "code");
    f(m.message, "message", Text::message);
  }
};

}  // namespace concord::ipc
