// The vocabulary a protocol message declares its fields in (ring_messages.h, control_messages.h).
// Each message struct has one `fields(f, m)` that names its fields in wire order with what each
// may hold: a range for a number, a kind for a string, a count for a list; an enum's range comes
// from its EnumRange. src/ipc/protocol.cpp walks that one list to write a body, to read one, and
// to check one before it is sent and after it is read, so the three cannot disagree. A check that
// spans fields (an LC tenant's target, a graph launch's empty shape) is the message's
// `check(m, bad)`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord::ipc {

// Limits a message must keep (CUDA's own limits where the field is a CUDA one).
namespace limits {
inline constexpr size_t kNameBytes = 64;         // tenant name: printable ASCII
inline constexpr size_t kDeviceBytes = 32;       // a GPU's PCI bus id, or the daemon's device label: printable ASCII
inline constexpr size_t kChannelBytes = 200;     // shared-memory name: '/' then [A-Za-z0-9._-]
inline constexpr size_t kErrorBytes = 1024;      // an error reply's message
inline constexpr size_t kTenantsPerList = 300;  // at the largest entry, one frame holds them (protocol.cpp)
inline constexpr uint32_t kMaxWeight = 1'000'000;
inline constexpr uint64_t kMaxLatencyTargetNs = 3'600'000'000'000;  // one hour
inline constexpr uint32_t kMaxGridX = 0x7fffffff;
inline constexpr uint32_t kMaxGridYZ = 65535;
inline constexpr uint32_t kMaxBlockThreads = 1024;
inline constexpr uint32_t kMaxBlockZ = 64;
inline constexpr uint32_t kMaxSharedMemBytes = 256 * 1024;
inline constexpr size_t kMaxSms = 1024;          // an SM-set announcement's bitmap: 16 words
inline constexpr uint32_t kMaxRoomBlocksPerSm = 64;  // a lease's residency cap (the hardware's most is 32)
inline constexpr uint64_t kMaxMemoryBytes = uint64_t{1} << 50;  // a GPU memory size: 1 PiB
}  // namespace limits

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  auto operator<=>(const Dim3&) const = default;
};

// What a number may hold: lo..hi. Outside, the reason is `why` formatted with the value, hi and lo
// ({0}, {1}, {2}); by default "{0} is outside {2}..{1}".
struct Range {
  uint64_t lo = 0;
  uint64_t hi = std::numeric_limits<uint64_t>::max();
  const char* why = "{0} is outside {2}..{1}";
};
inline constexpr Range kAny{};
inline constexpr Range kSeq{1, std::numeric_limits<uint64_t>::max(), "is {0} (sequences start at 1)"};
inline constexpr Range kPid{1, static_cast<uint64_t>(std::numeric_limits<int32_t>::max()), "{0} is not a process id"};
inline constexpr Range kWeight{1, limits::kMaxWeight};
inline constexpr Range kTarget{0, limits::kMaxLatencyTargetNs, "{0} is over an hour"};
// An upper bound alone: "{0} is over {1}".
constexpr Range at_most(uint64_t hi) { return Range{0, hi, "{0} is over {1}"}; }

// What a string may hold (all on the wire: a u16 length, then the bytes).
enum class Text : uint8_t {
  name,     // 1..kNameBytes of printable ASCII
  device,   // 0..kDeviceBytes of printable ASCII (empty: not known)
  message,  // 0..kErrorBytes of printable ASCII
  channel,  // '/' then 1..kChannelBytes-1 of [A-Za-z0-9._-]
};
constexpr size_t max_bytes(Text t) {
  switch (t) {
    case Text::name: return limits::kNameBytes;
    case Text::device: return limits::kDeviceBytes;
    case Text::message: return limits::kErrorBytes;
    case Text::channel: return limits::kChannelBytes;
  }
  return 0;
}

// A list: its count's width on the wire, the most entries, and the fewest bytes an entry takes
// (a count the frame cannot hold is refused before anything is allocated for it); over the most,
// the reason is `why` formatted with the count and the most ({0}, {1}).
struct Count {
  uint8_t width_bytes = 1;  // 1 or 2
  size_t most = 0;
  size_t min_entry_bytes = 1;
  const char* why = "{0} entries, over {1}";
};

// An enum field's values on the wire (one byte): lo..hi, and how an error names them.
template <typename E>
struct EnumRange;
template <>
struct EnumRange<TenantClass> {
  static constexpr uint8_t lo = 0, hi = 1;
  static constexpr const char* names = "LC (0) or BE (1)";
};
template <>
struct EnumRange<StatusCode> {  // an error reply's code: never ok
  static constexpr uint8_t lo = 1, hi = static_cast<uint8_t>(StatusCode::permission_denied);
  static constexpr const char* names = "an error code";
};

}  // namespace concord::ipc
