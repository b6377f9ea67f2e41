#include "ipc/protocol.h"

#include <concepts>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "ipc/wire.h"

namespace concord::ipc {
namespace {

using wire::Reader;
using wire::Writer;

static_assert(kHeaderBytes + 2 + limits::kTenantsPerList * kMaxTenantEntryBytes <= kMaxFrameBytes,
              "a full tenant list must fit one frame");

bool printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool channel_chars(std::string_view s) {
  if (s.size() < 2 || s[0] != '/') return false;
  for (char c : s.substr(1)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

template <typename T>
concept Number = std::integral<T> && !std::same_as<T, bool>;
template <typename T>
concept Enum = std::is_enum_v<T>;
template <typename T>
concept HasFields = requires(T& m, int& f) { T::fields(f, m); };

// The three walks over a message's fields (message_fields.h): write, read, check.

struct Write {
  Writer& w;
  template <Number T>
  void operator()(const T& v, const char*, Range = kAny) {
    if constexpr (sizeof(T) == 1) w.u8(static_cast<uint8_t>(v));
    else if constexpr (sizeof(T) == 2) w.u16(static_cast<uint16_t>(v));
    else if constexpr (sizeof(T) == 4) w.u32(static_cast<uint32_t>(v));
    else w.u64(static_cast<uint64_t>(v));
  }
  void operator()(const bool& v, const char*) { w.u8(v ? 1 : 0); }
  template <Enum E>
  void operator()(const E& v, const char*) { w.u8(static_cast<uint8_t>(v)); }
  void operator()(const Dim3& d, const char*) { w.dim3(d); }
  void operator()(const std::string& s, const char*, Text) { w.str(s); }
  template <typename T>
  void operator()(const std::vector<T>& v, const char* field, Count c) {
    if (c.width_bytes == 1) w.u8(static_cast<uint8_t>(v.size()));
    else w.u16(static_cast<uint16_t>(v.size()));
    for (const T& e : v) {
      if constexpr (HasFields<T>) T::fields(*this, e);
      else (*this)(e, field);
    }
  }
};

struct Read {
  Reader& r;
  Status status = Status::ok();
  template <Number T>
  void operator()(T& v, const char* field, Range = kAny) {
    if (!status.is_ok()) return;
    if constexpr (sizeof(T) == 1) {
      uint8_t b = 0;
      status = r.u8(b, field);
      v = static_cast<T>(b);
    } else if constexpr (sizeof(T) == 2) {
      uint16_t b = 0;
      status = r.u16(b, field);
      v = static_cast<T>(b);
    } else if constexpr (sizeof(T) == 4) {
      uint32_t b = 0;
      status = r.u32(b, field);
      v = static_cast<T>(b);
    } else {
      uint64_t b = 0;
      status = r.u64(b, field);
      v = static_cast<T>(b);
    }
  }
  void operator()(bool& v, const char* field) {
    uint8_t b = 0;
    (*this)(b, field);
    if (status.is_ok() && b > 1) status = r.fail(field, fmt::format("{} is not 0 or 1", b));
    v = b == 1;
  }
  template <Enum E>
  void operator()(E& v, const char* field) {
    uint8_t b = 0;
    (*this)(b, field);
    if (!status.is_ok()) return;
    if (b < EnumRange<E>::lo || b > EnumRange<E>::hi) {
      status = r.fail(field, fmt::format("{} is not {}", b, EnumRange<E>::names));
      return;
    }
    v = static_cast<E>(b);
  }
  void operator()(Dim3& d, const char* field) {
    if (status.is_ok()) status = r.dim3(d, field);
  }
  void operator()(std::string& s, const char* field, Text t) {
    if (status.is_ok()) status = r.str(s, max_bytes(t), field);
  }
  template <typename T>
  void operator()(std::vector<T>& v, const char* field, Count c) {
    size_t n = 0;
    if (c.width_bytes == 1) {
      uint8_t b = 0;
      (*this)(b, field);
      n = b;
    } else {
      uint16_t b = 0;
      (*this)(b, field);
      n = b;
    }
    if (!status.is_ok()) return;
    if (n > c.most) {
      status = r.fail(field, fmt::format(fmt::runtime(c.why), n, c.most));
      return;
    }
    if (n * c.min_entry_bytes > r.left()) {
      status = r.fail(field, fmt::format("{} entries cannot fit in the {} bytes left", n, r.left()));
      return;
    }
    v.resize(n);
    for (T& e : v) {
      if constexpr (HasFields<T>) T::fields(*this, e);
      else (*this)(e, field);
    }
  }
};

// `bad(field, reason)` makes the Status: invalid_argument before sending, parse_error after reading.
template <typename Bad>
struct Check {
  Bad& bad;
  Status status = Status::ok();
  void fail(const char* field, const std::string& reason) {
    if (status.is_ok()) status = bad(field, reason);
  }
  template <Number T>
  void operator()(const T& v, const char* field, Range range = kAny) {
    const bool below = std::is_signed_v<T> ? static_cast<int64_t>(v) < static_cast<int64_t>(range.lo) : static_cast<uint64_t>(v) < range.lo;
    const bool above = std::is_signed_v<T> ? v > 0 && static_cast<uint64_t>(v) > range.hi : static_cast<uint64_t>(v) > range.hi;
    if (!below && !above) return;
    fail(field, fmt::format(fmt::runtime(range.why), v, range.hi, range.lo));
  }
  void operator()(const bool&, const char*) {}
  template <Enum E>
  void operator()(const E& v, const char* field) {
    const auto b = static_cast<uint8_t>(v);
    if (b < EnumRange<E>::lo || b > EnumRange<E>::hi) fail(field, fmt::format("{} is not {}", b, EnumRange<E>::names));
  }
  void operator()(const Dim3&, const char*) {}
  void operator()(const std::string& s, const char* field, Text t) {
    if (t == Text::name && s.empty()) return fail(field, "is empty");
    if (s.size() > max_bytes(t)) return fail(field, fmt::format("is {} bytes, over {}", s.size(), max_bytes(t)));
    if (t == Text::channel) {
      if (!channel_chars(s)) fail(field, "is not '/' followed by letters, digits, '.', '_' or '-'");
      return;
    }
    if (!printable(s)) fail(field, "holds a byte that is not printable ASCII");
  }
  template <typename T>
  void operator()(const std::vector<T>& v, const char* field, Count c) {
    if (v.size() > c.most) return fail(field, fmt::format(fmt::runtime(c.why), v.size(), c.most));
    for (const T& e : v) {
      if constexpr (HasFields<T>) message(e);
      else (*this)(e, field);
    }
  }
  // Every field's own limits, then the checks across fields the message declares.
  template <typename T>
  void message(const T& m) {
    T::fields(*this, m);
    if constexpr (requires { T::check(m, bad); }) {
      if (status.is_ok()) status = T::check(m, bad);
    }
  }
};

template <typename Bad>
Status check_fields(const Message& m, Bad bad) {
  Check<Bad> c{bad};
  std::visit([&c](const auto& v) { c.message(v); }, m);
  return c.status;
}

template <typename S>
Result<Message> read_as(Reader& r) {
  S v;
  Read read{r};
  S::fields(read, v);
  if (!read.status.is_ok()) return read.status;
  return Message(std::move(v));
}

Result<Message> read_body(Reader& r, MessageType type) {
  switch (type) {
#define CONCORD_IPC_READ(t, number, S, name, channels) \
  case MessageType::t: return read_as<S>(r);
    CONCORD_IPC_MESSAGES(CONCORD_IPC_READ)
#undef CONCORD_IPC_READ
  }
  return r.fail("type", "unknown");
}

bool known_type(uint16_t t) {
  switch (static_cast<MessageType>(t)) {
#define CONCORD_IPC_KNOWN(type, number, S, name, channels) case MessageType::type:
    CONCORD_IPC_MESSAGES(CONCORD_IPC_KNOWN)
#undef CONCORD_IPC_KNOWN
    return true;
  }
  return false;
}

uint8_t channels_of(MessageType type) {
  switch (type) {
#define CONCORD_IPC_CHANNELS(t, number, S, name, channels) \
  case MessageType::t: return channels;
    CONCORD_IPC_MESSAGES(CONCORD_IPC_CHANNELS)
#undef CONCORD_IPC_CHANNELS
  }
  return 0;
}

uint32_t read_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint16_t read_u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

}  // namespace

const char* to_string(MessageType type) {
  switch (type) {
#define CONCORD_IPC_NAME(t, number, S, name, channels) \
  case MessageType::t: return name;
    CONCORD_IPC_MESSAGES(CONCORD_IPC_NAME)
#undef CONCORD_IPC_NAME
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
#define CONCORD_IPC_INDEX(t, number, S, name, channels) MessageType::t,
      CONCORD_IPC_MESSAGES(CONCORD_IPC_INDEX)
#undef CONCORD_IPC_INDEX
  };
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[message.index()];
}

bool allowed_on(MessageType type, Channel channel) { return (channels_of(type) & channel_bit(channel)) != 0; }

namespace {

void write_body(Writer& w, const Message& m) {
  std::visit(
      [&w](const auto& v) {
        Write write{w};
        std::decay_t<decltype(v)>::fields(write, v);
      },
      m);
}

}  // namespace

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
