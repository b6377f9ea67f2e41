// The messages between an intercepted process (the tenant library) and the node daemon, and
// their byte encoding.
//
// Every message is one frame: a 12-byte header (magic, version, type, body length; little-endian)
// and a body whose layout the type fixes. The same frames travel through a tenant's shared-memory
// rings (launch notices and completions up, decisions down) and through the control socket
// (register, list, stats, steer, and their replies). decode() trusts nothing it reads: the header's
// magic, version and type, the body length against the bytes given, every string length against
// what is left, every enum against its range and every number against its limit; each failure is
// a Status that names the field. encode() refuses a message decode() would refuse, so a frame
// either side produced always decodes on the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord::ipc {

inline constexpr uint32_t kMagic = 0x44434e43;  // "CNCD" as little-endian bytes
// 3: leases (the registration's reply carries the lease page and the node board); notices,
// completions and request boundaries carry the tenant's clock; a completion covers every earlier
// launch of its stream; no tenant modes. 4: a tenant list entry carries its lease (TenantLease).
// 5: a registration names the tenant's GPU (its PCI bus id) and a list entry the daemon's device.
// 6: LC is granted, not claimed: a registration says what to do when LC is refused, the reply
// names the class granted and why LC was not; GrantLc (a Slurm step's grant, from root).
inline constexpr uint16_t kVersion = 6;
inline constexpr size_t kHeaderBytes = 12;
// The largest frame either side accepts (a tenant list of many tenants is the largest).
inline constexpr size_t kMaxFrameBytes = 64 * 1024;
// The slot size of a tenant's rings: every ring message fits one slot (an SM-set announcement of
// 1024 SMs, the largest, is 157 bytes with its header).
inline constexpr uint32_t kRingSlotBytes = 256;

// Limits a message must keep (CUDA's own limits where the field is a CUDA one).
namespace limits {
inline constexpr size_t kNameBytes = 64;         // tenant name: printable ASCII
inline constexpr size_t kDeviceBytes = 32;       // a GPU's PCI bus id, or the daemon's device label: printable ASCII
inline constexpr size_t kChannelBytes = 200;     // shared-memory name: '/' then [A-Za-z0-9._-]
inline constexpr size_t kErrorBytes = 1024;      // an error reply's message
inline constexpr size_t kTenantsPerList = 360;  // at the largest entry, one frame holds them (protocol.cpp)
inline constexpr uint32_t kMaxWeight = 1'000'000;
inline constexpr uint64_t kMaxLatencyTargetNs = 3'600'000'000'000;  // one hour
inline constexpr uint32_t kMaxGridX = 0x7fffffff;
inline constexpr uint32_t kMaxGridYZ = 65535;
inline constexpr uint32_t kMaxBlockThreads = 1024;
inline constexpr uint32_t kMaxBlockZ = 64;
inline constexpr uint32_t kMaxSharedMemBytes = 256 * 1024;
inline constexpr size_t kMaxSms = 1024;          // an SM-set announcement's bitmap: 16 words
inline constexpr uint32_t kMaxRoomBlocksPerSm = 64;  // a lease's residency cap (the hardware's most is 32)
}  // namespace limits

enum class MessageType : uint16_t {
  // tenant library -> daemon, control socket
  register_tenant = 1,
  // tenant library -> daemon, up ring
  launch_notice = 2,
  completion = 4,
  request = 9,
  // daemon -> tenant library, down ring
  decision = 3,
  sm_set = 7,
  // either way, rings; bye also on the control socket (the caller's tenants leave)
  heartbeat = 5,
  bye = 6,
  // client -> daemon, control socket
  list_tenants = 16,
  get_stats = 17,
  set_weight = 18,
  grant_lc = 19,
  // daemon -> client, control socket
  registered = 32,
  tenant_list = 33,
  stats = 34,
  ack = 35,
  error = 36,
};
const char* to_string(MessageType type);

// The path a message travels; each type belongs to one or two.
enum class Channel : uint8_t { up_ring, down_ring, control_request, control_reply };
const char* to_string(Channel channel);

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  auto operator<=>(const Dim3&) const = default;
};

// What a registration asks for when the daemon does not admit it as latency-critical (LC is a
// privilege: docs/daemon.md, "Security"): an error reply, or a best-effort tenant.
enum class LcRefusal : uint8_t { refuse = 0, best_effort = 1 };
const char* to_string(LcRefusal refusal);

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
  bool operator==(const RegisterTenant&) const = default;
};

// One kernel launch (or CUDA graph launch, placed as one unit) the process makes (under a lease:
// has made) or wants to make (per-launch decisions).
struct LaunchNotice {
  uint64_t seq = 0;     // 1, 2, ... per tenant, in the order the process launched
  uint64_t stream = 0;  // the process's stream handle, as an opaque id (stream order is per id)
  uint64_t kernel = 0;  // the function's id: a hash of its name, or the graph's
  Dim3 grid, block;     // zero for a graph launch (a graph has no one shape)
  uint32_t shared_mem = 0;
  bool graph = false;
  uint64_t at_ns = 0;   // CLOCK_MONOTONIC when the process launched it (or noticed it, per launch)
  bool operator==(const LaunchNotice&) const = default;
};

enum class Verdict : uint8_t { release = 0, hold = 1 };
const char* to_string(Verdict verdict);
// Placement's two stream priority levels: the device's least and greatest.
enum class Priority : uint8_t { normal = 0, high = 1 };

// The daemon's answer to a launch notice: release it now (on a stream of the priority, in the SM
// set the handle names; 0: the whole GPU) or hold it until a later decision releases it.
struct Decision {
  uint64_t seq = 0;
  Verdict verdict = Verdict::release;
  Priority priority = Priority::normal;
  uint32_t sm_set = 0;
  bool operator==(const Decision&) const = default;
};

// A released launch ended on the device, and with it every earlier launch of the same stream
// (stream order: the library learns of ends from markers it records now and then and from the
// application's synchronisations, not from an event per launch). ok: no error reported for it.
// A launch ended before (by an earlier completion) may be named again: it changes nothing.
struct CompletionNotice {
  uint64_t seq = 0;
  uint64_t stream = 0;  // seq's stream, as its notice named it
  bool ok = true;
  uint64_t at_ns = 0;   // CLOCK_MONOTONIC when the library learned of the end
  bool operator==(const CompletionNotice&) const = default;
};

struct Heartbeat {
  uint64_t sent_ns = 0;  // CLOCK_MONOTONIC of the sender
  bool operator==(const Heartbeat&) const = default;
};

enum class ByeReason : uint8_t { exit = 0, shutdown = 1, error = 2 };
struct Bye {
  ByeReason reason = ByeReason::exit;
  bool operator==(const Bye&) const = default;
};

// The SM set a handle names, sent down before any decision uses the handle (the library builds
// its green context then, so no launch waits for one). Handles are >= 1 (0 is the whole GPU) and
// never change meaning for the tenant's life. The bitmap: 64-bit words, SM s is bit s % 64 of
// word s / 64; at least one SM, no trailing zero word, at most limits::kMaxSms SMs.
struct SmSetAnnounce {
  uint32_t handle = 1;
  std::vector<uint64_t> words;
  bool operator==(const SmSetAnnounce&) const = default;
};
// SM ids <-> an announcement's bitmap (ids outside 0..kMaxSms-1 are an invalid_argument).
Result<std::vector<uint64_t>> sm_words(const std::vector<int>& sms);
std::vector<int> sm_ids(const std::vector<uint64_t>& words);

// An LC request's boundary, posted by the library when the application calls
// concord_request_begin() / concord_request_end(): the launches noticed between a begin and its
// end are one request, whose latency runs from the begin to the end of its last launch.
// `last_seq` is the last launch noticed before the boundary (0: none yet), so the daemon can
// check the ring's order.
enum class RequestEdge : uint8_t { begin = 0, end = 1 };
struct RequestBoundary {
  RequestEdge edge = RequestEdge::begin;
  uint64_t last_seq = 0;
  uint64_t at_ns = 0;  // CLOCK_MONOTONIC when the application marked it
  bool operator==(const RequestBoundary&) const = default;
};

struct ListTenants {
  bool operator==(const ListTenants&) const = default;
};
struct GetStats {
  bool operator==(const GetStats&) const = default;
};
struct SetWeight {
  uint64_t tenant = 0;
  uint32_t weight = 1;
  bool operator==(const SetWeight&) const = default;
};
// Root only (a Slurm step's plugin in slurmstepd, docs/cluster.md): processes of user `uid` that
// descend from the sender may register as LC while the sender's connection stays open.
struct GrantLc {
  uint32_t uid = 0;
  std::string label;  // who is granted, for the log ("slurm-42.0")
  bool operator==(const GrantLc&) const = default;
};

struct Registered {
  uint64_t tenant = 0;
  std::string channel;  // the base name of the tenant's shared-memory rings
  TenantClass cls = TenantClass::best_effort;  // the class granted
  std::string lc_refused{};  // why LC was refused, where it was asked and the tenant runs as BE (else empty)
  bool operator==(const Registered&) const = default;
};

// What a tenant's lease does while LC work it yields to is in flight, as `concord top` shows it.
enum class LeaseYield : uint8_t { none = 0, close = 1, cap = 2, room = 3, per_launch = 4 };
const char* to_string(LeaseYield yield);
struct TenantLease {
  LeaseYield yield = LeaseYield::none;  // none: it yields to nobody (or is LC)
  bool yielding = false;                // an LC flag it yields to is up now
  uint32_t in_flight_cap = 0;           // with cap: launches in flight at most then
  uint32_t room_sms = 0;                // with room (or cap and room): SMs each launch may use (0: all)
  uint32_t room_blocks_per_sm = 0;      // and blocks per SM (0: no cap)
  bool operator==(const TenantLease&) const = default;
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
  std::string name;
  std::string device;  // the daemon's label of the tenant's GPU ("0", "1", ...; empty: not placed yet)
  bool operator==(const TenantEntry&) const = default;
};
struct TenantList {
  std::vector<TenantEntry> tenants;
  bool operator==(const TenantList&) const = default;
};

struct Stats {
  uint64_t tenants = 0;    // registered now
  uint64_t launches = 0;   // launch notices taken
  uint64_t rejected = 0;   // messages refused (malformed, foreign, out of sequence)
  uint64_t dropped = 0;    // tenants dropped because their process ended without a goodbye
  uint64_t lc_refused = 0; // LC registrations refused (answered with an error, or admitted as BE)
  bool operator==(const Stats&) const = default;
};

struct Ack {
  bool operator==(const Ack&) const = default;
};

struct ErrorReply {
  StatusCode code = StatusCode::internal;  // never ok
  std::string message;
  bool operator==(const ErrorReply&) const = default;
};

using Message = std::variant<RegisterTenant, LaunchNotice, Decision, CompletionNotice, Heartbeat, Bye,
                             ListTenants, GetStats, SetWeight, Registered, TenantList, Stats, Ack, ErrorReply,
                             SmSetAnnounce, RequestBoundary, GrantLc>;

MessageType type_of(const Message& message);
// Whether a message of `type` may travel on `channel`.
bool allowed_on(MessageType type, Channel channel);

// The frame of a message, or invalid_argument naming the field that breaks a limit.
Result<std::vector<uint8_t>> encode(const Message& message);
// Encodes into `out` (for the rings' fixed slots, without allocating); returns the frame's size.
Result<size_t> encode_into(const Message& message, std::span<uint8_t> out);
// The message of exactly one frame, or parse_error naming the field that is wrong.
Result<Message> decode(std::span<const uint8_t> frame);
// decode(), and the type must be one `channel` carries.
Result<Message> decode_on(std::span<const uint8_t> frame, Channel channel);
// The body length a frame header announces (the header's magic, version and type checked, and
// the length against kMaxFrameBytes): how much a stream reader must read next.
Result<size_t> body_length(std::span<const uint8_t, kHeaderBytes> header);

// Launches one tenant may have noticed and not completed (a process can queue thousands ahead
// of the GPU); past it, a notice is refused.
inline constexpr size_t kMaxOutstandingLaunches = 65536;

}  // namespace concord::ipc
