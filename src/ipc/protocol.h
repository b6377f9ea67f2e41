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
//
// Every message is declared once: its struct, with its fields in wire order, in ring_messages.h or
// control_messages.h, and its line in CONCORD_IPC_MESSAGES below (type number, printable name,
// channels). The enum of types, the variant, the names, which channel carries what, and each
// body's writing, reading and checking all follow from those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "concord/status.h"
#include "ipc/control_messages.h"
#include "ipc/ring_messages.h"

namespace concord::ipc {

inline constexpr uint32_t kMagic = 0x44434e43;  // "CNCD" as little-endian bytes
// 3: leases (the registration's reply carries the lease page and its GPU's board); notices,
// completions and request boundaries carry the tenant's clock; a completion covers every earlier
// launch of its stream; no tenant modes. 4: a tenant list entry carries its lease (TenantLease).
// 5: a registration names the tenant's GPU (its PCI bus id) and a list entry the daemon's device.
// 6: LC is granted, not claimed: a registration says what to do when LC is refused, the reply
// names the class granted and why LC was not; GrantLc (a Slurm step's grant, from root).
// 7: memory quotas: a registration asks for GPU memory and reports the GPU's total, the tenant
// reports its use up the ring (MemoryUsage), a tenant list entry carries its memory.
inline constexpr uint16_t kVersion = 7;
inline constexpr size_t kHeaderBytes = 12;
// The largest frame either side accepts (a tenant list of many tenants is the largest).
inline constexpr size_t kMaxFrameBytes = 64 * 1024;
// The slot size of a tenant's rings: every ring message fits one slot (an SM-set announcement of
// 1024 SMs, the largest, is 157 bytes with its header).
inline constexpr uint32_t kRingSlotBytes = 256;

// The path a message travels.
enum class Channel : uint8_t { up_ring, down_ring, control_request, control_reply };
const char* to_string(Channel channel);
constexpr uint8_t channel_bit(Channel c) { return uint8_t(1u << static_cast<uint8_t>(c)); }
inline constexpr uint8_t kUp = channel_bit(Channel::up_ring), kDown = channel_bit(Channel::down_ring),
                         kRequest = channel_bit(Channel::control_request), kReply = channel_bit(Channel::control_reply);

// Every message: X(type, number, struct, printable name, channels). Numbers are the wire's and
// never change meaning; the variant's alternatives follow this order.
#define CONCORD_IPC_MESSAGES(X)                                                          \
  X(register_tenant, 1, RegisterTenant, "register", kRequest)                            \
  X(launch_notice, 2, LaunchNotice, "launch notice", kUp)                                \
  X(decision, 3, Decision, "decision", kDown)                                            \
  X(completion, 4, CompletionNotice, "completion", kUp)                                  \
  X(heartbeat, 5, Heartbeat, "heartbeat", kUp | kDown)                                   \
  X(bye, 6, Bye, "bye", kUp | kDown | kRequest)                                          \
  X(sm_set, 7, SmSetAnnounce, "sm set", kDown)                                           \
  X(request, 9, RequestBoundary, "request boundary", kUp)                                \
  X(memory_usage, 10, MemoryUsage, "memory usage", kUp)                                  \
  X(list_tenants, 16, ListTenants, "list tenants", kRequest)                             \
  X(get_stats, 17, GetStats, "get stats", kRequest)                                      \
  X(set_weight, 18, SetWeight, "set weight", kRequest)                                   \
  X(grant_lc, 19, GrantLc, "grant lc", kRequest)                                         \
  X(registered, 32, Registered, "registered", kReply)                                    \
  X(tenant_list, 33, TenantList, "tenant list", kReply)                                  \
  X(stats, 34, Stats, "stats", kReply)                                                   \
  X(ack, 35, Ack, "ack", kReply)                                                         \
  X(error, 36, ErrorReply, "error", kReply)

enum class MessageType : uint16_t {
#define CONCORD_IPC_TYPE(type, number, S, name, channels) type = number,
  CONCORD_IPC_MESSAGES(CONCORD_IPC_TYPE)
#undef CONCORD_IPC_TYPE
};
const char* to_string(MessageType type);

namespace detail {
template <typename Void, typename... Messages>
struct MessageVariant {
  using type = std::variant<Messages...>;
};
}  // namespace detail
#define CONCORD_IPC_ALTERNATIVE(type, number, S, name, channels) , S
using Message = detail::MessageVariant<void CONCORD_IPC_MESSAGES(CONCORD_IPC_ALTERNATIVE)>::type;
#undef CONCORD_IPC_ALTERNATIVE

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
