// The protocol's byte level (src/ipc/protocol.cpp): a bounded little-endian writer and a reader
// that names the message and field it could not read.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "ipc/protocol.h"

namespace concord::ipc::wire {

// Bounded little-endian writer: each put checks the room left, so encoding into a ring slot
// cannot run past it.
class Writer {
 public:
  explicit Writer(std::span<uint8_t> out) : out_(out) {}
  void u8(uint8_t v) { put(&v, 1); }
  void u16(uint16_t v) { uint8_t b[2] = {uint8_t(v), uint8_t(v >> 8)}; put(b, 2); }
  void u32(uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = uint8_t(v >> (8 * i));
    put(b, 4);
  }
  void u64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
    put(b, 8);
  }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void dim3(const Dim3& d) { u32(d.x); u32(d.y); u32(d.z); }
  // Strings: a u16 length, then the bytes.
  void str(const std::string& s) {
    u16(static_cast<uint16_t>(s.size()));
    put(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  bool overflowed() const { return overflow_; }
  size_t size() const { return at_; }
  void patch_u32(size_t offset, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[offset + i] = uint8_t(v >> (8 * i));
  }

 private:
  void put(const uint8_t* p, size_t n) {
    if (overflow_ || n > out_.size() - at_) {
      overflow_ = true;
      return;
    }
    if (n > 0) std::memcpy(out_.data() + at_, p, n);
    at_ += n;
  }
  std::span<uint8_t> out_;
  size_t at_ = 0;
  bool overflow_ = false;
};

// Bounded little-endian reader: a read past the end fails with the name of the field it was for.
class Reader {
 public:
  Reader(std::span<const uint8_t> in, MessageType type) : in_(in), type_(type) {}
  Status u8(uint8_t& v, const char* field) { return get(&v, 1, field); }
  Status u16(uint16_t& v, const char* field) {
    uint8_t b[2];
    CONCORD_RETURN_IF_ERROR(get(b, 2, field));
    v = uint16_t(b[0] | (b[1] << 8));
    return Status::ok();
  }
  Status u32(uint32_t& v, const char* field) {
    uint8_t b[4];
    CONCORD_RETURN_IF_ERROR(get(b, 4, field));
    v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | b[i];
    return Status::ok();
  }
  Status u64(uint64_t& v, const char* field) {
    uint8_t b[8];
    CONCORD_RETURN_IF_ERROR(get(b, 8, field));
    v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
    return Status::ok();
  }
  Status i32(int32_t& v, const char* field) {
    uint32_t u = 0;
    CONCORD_RETURN_IF_ERROR(u32(u, field));
    v = static_cast<int32_t>(u);
    return Status::ok();
  }
  Status dim3(Dim3& d, const char* field) {
    CONCORD_RETURN_IF_ERROR(u32(d.x, field));
    CONCORD_RETURN_IF_ERROR(u32(d.y, field));
    return u32(d.z, field);
  }
  // A length-prefixed string whose length must be at most `max` and within what is left.
  Status str(std::string& s, size_t max, const char* field) {
    uint16_t n = 0;
    CONCORD_RETURN_IF_ERROR(u16(n, field));
    if (n > max) return fail(field, fmt::format("length {} is over the limit of {} bytes", n, max));
    if (n > left()) return fail(field, fmt::format("length {} runs past the frame's end ({} bytes left)", n, left()));
    s.assign(reinterpret_cast<const char*>(in_.data() + at_), n);
    at_ += n;
    return Status::ok();
  }
  size_t left() const { return in_.size() - at_; }
  Status fail(const char* field, const std::string& reason) const {
    return Status::parse_error(fmt::format("{} message: field {}: {}", to_string(type_), field, reason));
  }

 private:
  Status get(uint8_t* p, size_t n, const char* field) {
    if (n > left()) return fail(field, fmt::format("frame ends {} bytes short of it", n - left()));
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
    return Status::ok();
  }
  std::span<const uint8_t> in_;
  size_t at_ = 0;
  MessageType type_;
};

}  // namespace concord::ipc::wire
