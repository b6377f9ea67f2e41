#include "ipc/ring.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include <fmt/format.h>

namespace concord::ipc {
namespace detail {

struct Endpoint {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> generation;
  std::atomic<uint64_t> heartbeat_ns;
  std::atomic<uint32_t> closed;
};

struct RingHeader {
  std::atomic<uint32_t> magic;  // stored last by format(): an attacher never sees half a header
  uint32_t version;
  uint32_t slot_size;
  uint32_t capacity;
  uint64_t total_bytes;
  alignas(64) std::atomic<uint64_t> head;  // next slot the consumer reads
  alignas(64) std::atomic<uint64_t> tail;  // next slot the producer writes
  alignas(64) Endpoint producer;
  alignas(64) Endpoint consumer;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

}  // namespace detail

namespace {

using detail::Endpoint;
using detail::RingHeader;

constexpr size_t kHeaderBytes = (sizeof(RingHeader) + 63) / 64 * 64;

Status check_geometry(const RingGeometry& g) {
  if (g.slot_size < 16 || g.slot_size > 65536 || g.slot_size % 8 != 0) {
    return Status::invalid_argument(fmt::format("ring: field slot_size: {} is not a multiple of 8 in 16..65536", g.slot_size));
  }
  if (g.capacity < 2 || g.capacity > 65536 || (g.capacity & (g.capacity - 1)) != 0) {
    return Status::invalid_argument(fmt::format("ring: field capacity: {} is not a power of two in 2..65536", g.capacity));
  }
  return Status::ok();
}

Endpoint& endpoint(RingHeader& h, RingSide side) { return side == RingSide::producer ? h.producer : h.consumer; }

}  // namespace

void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void sleep_ns(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

const char* to_string(RingSide side) { return side == RingSide::producer ? "producer" : "consumer"; }

const char* to_string(PeerState state) {
  switch (state) {
    case PeerState::absent: return "absent";
    case PeerState::alive: return "alive";
    case PeerState::closed: return "closed";
    case PeerState::dead: return "dead";
  }
  return "unknown";
}

SpscRing::SpscRing(RingHeader* header, std::byte* slots, const RingGeometry& geometry)
    : header_(header), slots_(slots), geometry_(geometry) {}

Result<size_t> SpscRing::bytes_for(const RingGeometry& geometry) {
  CONCORD_RETURN_IF_ERROR(check_geometry(geometry));
  return kHeaderBytes + size_t(geometry.slot_size) * geometry.capacity;
}

Result<SpscRing> SpscRing::format(std::span<std::byte> memory, const RingGeometry& geometry) {
  Result<size_t> bytes = bytes_for(geometry);
  if (!bytes.is_ok()) return bytes.status();
  if (memory.size() < *bytes) {
    return Status::invalid_argument(fmt::format("ring: {} bytes of memory, the geometry needs {}", memory.size(), *bytes));
  }
  if (reinterpret_cast<uintptr_t>(memory.data()) % 64 != 0) return Status::invalid_argument("ring: memory not 64-byte aligned");
  auto* h = new (memory.data()) RingHeader{};
  h->version = kVersion;
  h->slot_size = geometry.slot_size;
  h->capacity = geometry.capacity;
  h->total_bytes = *bytes;
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  h->magic.store(kMagic, std::memory_order_release);
  return SpscRing(h, memory.data() + kHeaderBytes, geometry);
}

Result<SpscRing> SpscRing::attach(std::span<std::byte> memory) {
  if (memory.size() < kHeaderBytes) {
    return Status::parse_error(fmt::format("ring: field header: {} bytes of memory, a header is {}", memory.size(), kHeaderBytes));
  }
  if (reinterpret_cast<uintptr_t>(memory.data()) % 64 != 0) return Status::invalid_argument("ring: memory not 64-byte aligned");
  auto* h = reinterpret_cast<RingHeader*>(memory.data());
  const uint32_t magic = h->magic.load(std::memory_order_acquire);
  if (magic != kMagic) return Status::parse_error(fmt::format("ring: field magic: 0x{:08x} is not a Concord ring's (0x{:08x})", magic, kMagic));
  if (h->version != kVersion) return Status::parse_error(fmt::format("ring: field version: {} is not {}", h->version, kVersion));
  const RingGeometry g{h->slot_size, h->capacity};
  if (Status s = check_geometry(g); !s.is_ok()) return Status::parse_error(s.message());
  const size_t bytes = kHeaderBytes + size_t(g.slot_size) * g.capacity;
  if (h->total_bytes != bytes || bytes > memory.size()) {
    return Status::parse_error(fmt::format("ring: field total_bytes: header says {}, geometry needs {}, memory has {}",
                                           h->total_bytes, bytes, memory.size()));
  }
  SpscRing ring(h, memory.data() + kHeaderBytes, g);
  ring.head_ = h->head.load(std::memory_order_acquire);
  ring.tail_ = h->tail.load(std::memory_order_acquire);
  if (ring.tail_ - ring.head_ > g.capacity) return ring.corrupt("at attach");
  return ring;
}

Status SpscRing::corrupt(const std::string& what) const {
  return Status::failed_precondition(fmt::format(
      "ring: {}: head {} and tail {} are more than {} slots apart: the peer wrote outside the protocol", what,
      header_->head.load(std::memory_order_relaxed), header_->tail.load(std::memory_order_relaxed), geometry_.capacity));
}

Result<std::span<uint8_t>> SpscRing::reserve() {
  if (header_ == nullptr) return Status::failed_precondition("ring: not formatted or attached");
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  if (tail_ - head > geometry_.capacity) return corrupt("reserve");
  if (tail_ - head == geometry_.capacity) return std::span<uint8_t>{};
  std::byte* slot = slots_ + (tail_ & (geometry_.capacity - 1)) * geometry_.slot_size;
  reserved_ = true;
  return std::span<uint8_t>(reinterpret_cast<uint8_t*>(slot) + sizeof(uint32_t), max_message());
}

Status SpscRing::commit(size_t bytes) {
  if (!reserved_) return Status::failed_precondition("ring: commit without a reserved slot");
  if (bytes == 0 || bytes > max_message()) {
    return Status::invalid_argument(fmt::format("ring: commit of {} bytes: a message is 1..{}", bytes, max_message()));
  }
  std::byte* slot = slots_ + (tail_ & (geometry_.capacity - 1)) * geometry_.slot_size;
  const auto length = static_cast<uint32_t>(bytes);
  std::memcpy(slot, &length, sizeof length);
  reserved_ = false;
  ++tail_;
  header_->tail.store(tail_, std::memory_order_release);
  return Status::ok();
}

Result<bool> SpscRing::try_push(std::span<const uint8_t> message) {
  if (message.empty() || message.size() > max_message()) {
    return Status::invalid_argument(fmt::format("ring: a message of {} bytes: a slot holds 1..{}", message.size(), max_message()));
  }
  Result<std::span<uint8_t>> slot = reserve();
  if (!slot.is_ok()) return slot.status();
  if (slot->empty()) return false;
  std::memcpy(slot->data(), message.data(), message.size());
  CONCORD_RETURN_IF_ERROR(commit(message.size()));
  return true;
}

Result<RingWriters> RingWriters::over(SpscRing& ring, uint64_t numbered) {
  if (ring.header_ == nullptr) return Status::failed_precondition("ring writers: the ring is not formatted or attached");
  if (ring.geometry_.capacity > (uint32_t{1} << (kTicketBits - 1))) {
    return Status::invalid_argument(fmt::format("ring writers: field capacity: {} slots, over the {} many writers can share",
                                                ring.geometry_.capacity, uint32_t{1} << (kTicketBits - 1)));
  }
  if (numbered > (kNumberMask >> kTicketBits)) return Status::invalid_argument("ring writers: the last number is out of range");
  RingWriters w;
  w.ring_ = &ring;
  const uint64_t tail = ring.header_->tail.load(std::memory_order_acquire);
  w.word_ = std::make_unique<std::atomic<uint64_t>>((numbered << kTicketBits) | (tail & kTicketMask));
  w.published_ = std::make_unique<std::atomic<uint64_t>>(tail);
  w.ready_ = std::make_unique<std::atomic<uint32_t>[]>(ring.geometry_.capacity);
  for (uint32_t i = 0; i < ring.geometry_.capacity; ++i) w.ready_[i].store(0, std::memory_order_relaxed);
  return w;
}

RingWriters::Claim RingWriters::claim_at(uint64_t word_after, uint64_t ticket) {
  const RingGeometry& g = ring_->geometry_;
  std::byte* slot = ring_->slots_ + (ticket & (g.capacity - 1)) * g.slot_size;
  return Claim{ticket, (word_after & kNumberMask) >> kTicketBits,
               std::span<uint8_t>(reinterpret_cast<uint8_t*>(slot) + sizeof(uint32_t), ring_->max_message())};
}

Result<std::optional<RingWriters::Claim>> RingWriters::try_claim(uint64_t& w, bool numbered, bool ignore_queueing) {
  const uint64_t capacity = ring_->geometry_.capacity;
  // The claim word first, then the consumer's head: when the compare-exchange below succeeds the
  // word did not change across the head's read, so the slots claimed and not freed are exactly
  // ticket - head, in 0..capacity (a head read first could be stale by 2^20 claims and wrap to a
  // small count over a full ring). A word gone stale meanwhile shows as a head beyond it, and a
  // fresh read of both resolves it; a head that stays out of reach is the consumer's doing.
  constexpr int kStaleReads = 1000;
  for (int stale = 0;;) {
    w = word_->load(std::memory_order_acquire);
    const uint64_t head = ring_->header_->head.load(std::memory_order_acquire);
    if ((w & kQueueing) != 0 && !ignore_queueing) return std::optional<Claim>{};
    const uint64_t ticket = w & kTicketMask;
    // The slots claimed and not yet freed by the consumer (fewer than 2^20: exact mod 2^20).
    const uint64_t used = (ticket - head) & kTicketMask;
    if (used > capacity) {
      if (++stale >= kStaleReads) return ring_->corrupt("claim");
      cpu_pause();
      continue;
    }
    if (used == capacity) return std::optional<Claim>{};
    uint64_t next = (w & ~kTicketMask) | ((ticket + 1) & kTicketMask);
    if (numbered) next += uint64_t{1} << kTicketBits;
    if (word_->compare_exchange_weak(w, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return std::optional<Claim>{claim_at(next, ticket)};
    }
  }
}

Result<std::variant<RingWriters::Claim, RingWriters::Refusal>> RingWriters::claim(bool numbered) {
  if (ring_ == nullptr) return Status::failed_precondition("ring writers: over no ring");
  uint64_t w = 0;
  Result<std::optional<Claim>> c = try_claim(w, numbered, false);
  if (!c.is_ok()) return c.status();
  if (*c) return std::variant<Claim, Refusal>{**c};
  return std::variant<Claim, Refusal>{(w & kQueueing) != 0 ? Refusal::queueing : Refusal::full};
}

Status RingWriters::publish(const Claim& claim, size_t bytes) {
  if (bytes == 0 || bytes > ring_->max_message()) {
    return Status::invalid_argument(fmt::format("ring: commit of {} bytes: a message is 1..{}", bytes, ring_->max_message()));
  }
  const auto length = static_cast<uint32_t>(bytes);
  std::memcpy(claim.bytes.data() - sizeof(uint32_t), &length, sizeof length);
  // Sequentially consistent with advance()'s loads: of a writer marking its slot and another
  // moving the tail up to it, at least one sees the other (a store-buffer pattern), so the tail
  // never stops short of a published slot.
  ready_[claim.ticket & (ring_->geometry_.capacity - 1)].store(kReady | static_cast<uint32_t>(claim.ticket));
  advance();
  return Status::ok();
}

void RingWriters::advance() {
  const uint64_t mask = ring_->geometry_.capacity - 1;
  uint64_t p = published_->load();
  for (;;) {
    if (ready_[p & mask].load() != (kReady | static_cast<uint32_t>(p & kTicketMask))) return;
    if (!published_->compare_exchange_strong(p, p + 1)) continue;  // another writer moved it: p is its value now
    ++p;
    // The tail only grows: a writer that moved `published` before this one may store after it.
    uint64_t tail = ring_->header_->tail.load(std::memory_order_relaxed);
    while (tail < p && !ring_->header_->tail.compare_exchange_weak(tail, p, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
}

uint64_t RingWriters::queue_number(bool numbered) {
  uint64_t w = word_->load(std::memory_order_acquire);
  uint64_t next = 0;
  do {
    next = (w | kQueueing) + (numbered ? uint64_t{1} << kTicketBits : 0);
  } while (!word_->compare_exchange_weak(w, next, std::memory_order_acq_rel, std::memory_order_acquire));
  return (next & kNumberMask) >> kTicketBits;
}

Result<std::optional<RingWriters::Claim>> RingWriters::claim_queued() {
  uint64_t w = 0;
  return try_claim(w, false, true);
}

void RingWriters::stop_queueing() { word_->fetch_and(~kQueueing, std::memory_order_acq_rel); }

Result<size_t> SpscRing::try_pop(std::span<uint8_t> out) {
  if (header_ == nullptr) return Status::failed_precondition("ring: not formatted or attached");
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  if (tail - head_ > geometry_.capacity) return corrupt("pop");
  if (tail == head_) return size_t{0};
  const std::byte* slot = slots_ + (head_ & (geometry_.capacity - 1)) * geometry_.slot_size;
  uint32_t length = 0;
  std::memcpy(&length, slot, sizeof length);
  if (length == 0 || length > max_message()) {
    return Status::failed_precondition(fmt::format("ring: slot {}: field length: {} is outside 1..{}", head_, length, max_message()));
  }
  if (length > out.size()) {
    return Status::invalid_argument(fmt::format("ring: a {}-byte message does not fit the {}-byte buffer", length, out.size()));
  }
  std::memcpy(out.data(), slot + sizeof length, length);
  ++head_;
  header_->head.store(head_, std::memory_order_release);
  return size_t{length};
}

Result<size_t> SpscRing::pop_wait(std::span<uint8_t> out, const WaitPolicy& wait) {
  const uint64_t start = monotonic_ns();
  for (int i = 0;; ++i) {
    Result<size_t> n = try_pop(out);
    if (!n.is_ok() || *n > 0) return n;
    if (i < wait.spin_iterations) {
      cpu_pause();
      continue;
    }
    const uint64_t now = monotonic_ns();
    const PeerStatus p = peer(RingSide::producer, now, wait.stale_after_ns);
    if (p.state == PeerState::dead || p.state == PeerState::closed) {
      // A last message may have landed between the pop and the check.
      n = try_pop(out);
      if (!n.is_ok() || *n > 0) return n;
      return Status::failed_precondition(fmt::format("ring: the producer (pid {}) is {}{}{}", p.pid, to_string(p.state),
                                                     p.reason.empty() ? "" : ": ", p.reason));
    }
    if (now - start >= wait.timeout_ns) {
      return Status::deadline_exceeded(fmt::format("ring: no message within {} us", wait.timeout_ns / 1000));
    }
    sleep_ns(wait.sleep_ns);
  }
}

Result<size_t> SpscRing::pending() const {
  if (header_ == nullptr) return Status::failed_precondition("ring: not formatted or attached");
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  if (tail - head > geometry_.capacity) return corrupt("pending");
  return size_t(tail - head);
}

void SpscRing::claim(RingSide side, int32_t pid, uint32_t generation, uint64_t now_ns) {
  Endpoint& e = endpoint(*header_, side);
  e.closed.store(0, std::memory_order_relaxed);
  e.heartbeat_ns.store(now_ns, std::memory_order_relaxed);
  e.generation.store(generation, std::memory_order_relaxed);
  e.pid.store(pid, std::memory_order_release);
}

void SpscRing::beat(RingSide side, uint64_t now_ns) {
  endpoint(*header_, side).heartbeat_ns.store(now_ns, std::memory_order_release);
}

void SpscRing::close(RingSide side) { endpoint(*header_, side).closed.store(1, std::memory_order_release); }

PeerStatus SpscRing::peer(RingSide side, uint64_t now_ns, uint64_t stale_after_ns) const {
  const Endpoint& e = endpoint(*header_, side);
  PeerStatus s;
  s.pid = e.pid.load(std::memory_order_acquire);
  s.generation = e.generation.load(std::memory_order_relaxed);
  if (s.pid <= 0) return s;  // absent
  if (e.closed.load(std::memory_order_acquire) != 0) {
    s.state = PeerState::closed;
    return s;
  }
  if (::kill(s.pid, 0) != 0 && errno == ESRCH) {
    s.state = PeerState::dead;
    s.reason = fmt::format("process {} is gone", s.pid);
    return s;
  }
  const uint64_t beat = e.heartbeat_ns.load(std::memory_order_acquire);
  // A beat from the future (a clock the peer made up) counts as fresh only up to now.
  const uint64_t age = now_ns > beat ? now_ns - beat : 0;
  if (age > stale_after_ns) {
    s.state = PeerState::dead;
    s.reason = fmt::format("no heartbeat for {} ms", age / 1'000'000);
    return s;
  }
  s.state = PeerState::alive;
  return s;
}

Result<SharedRing> SharedRing::create(const std::string& name, const RingGeometry& geometry, mode_t mode,
                                      std::optional<uid_t> owner) {
  Result<size_t> bytes = SpscRing::bytes_for(geometry);
  if (!bytes.is_ok()) return bytes.status();
  Result<SharedMemory> memory = SharedMemory::create(name, *bytes, mode, owner);
  if (!memory.is_ok()) return memory.status();
  SharedRing r;
  r.memory_ = std::move(*memory);
  Result<SpscRing> ring = SpscRing::format({r.memory_.data(), r.memory_.size()}, geometry);
  if (!ring.is_ok()) return ring.status();
  r.ring_ = *ring;
  return r;
}

Result<SharedRing> SharedRing::open(const std::string& name) {
  Result<SharedMemory> memory = SharedMemory::open(name);
  if (!memory.is_ok()) return memory.status();
  SharedRing r;
  r.memory_ = std::move(*memory);
  Result<SpscRing> ring = SpscRing::attach({r.memory_.data(), r.memory_.size()});
  if (!ring.is_ok()) return Status(ring.status().code(), fmt::format("{}: {}", name, ring.status().message()));
  r.ring_ = *ring;
  return r;
}

namespace {
Result<SpscRing> format_in(SharedMemory& memory, const RingGeometry& geometry) {
  return SpscRing::format({memory.data(), memory.size()}, geometry);
}
}  // namespace

Result<SharedRing> SharedRing::create_sealed(const std::string& label, const RingGeometry& geometry) {
  Result<size_t> bytes = SpscRing::bytes_for(geometry);
  if (!bytes.is_ok()) return bytes.status();
  Result<SharedMemory> memory = SharedMemory::create_sealed(label, *bytes);
  if (!memory.is_ok()) return memory.status();
  SharedRing r;
  r.memory_ = std::move(*memory);
  Result<SpscRing> ring = format_in(r.memory_, geometry);
  if (!ring.is_ok()) return ring.status();
  r.ring_ = *ring;
  return r;
}

Result<SharedRing> SharedRing::from_fd(int fd, const std::string& label) {
  Result<SharedMemory> memory = SharedMemory::from_fd(fd, label);
  if (!memory.is_ok()) return memory.status();
  SharedRing r;
  r.memory_ = std::move(*memory);
  Result<SpscRing> ring = SpscRing::attach({r.memory_.data(), r.memory_.size()});
  if (!ring.is_ok()) return Status(ring.status().code(), fmt::format("{}: {}", label, ring.status().message()));
  r.ring_ = *ring;
  return r;
}

Result<TenantChannel> TenantChannel::create_sealed(const std::string& base, const RingGeometry& geometry) {
  TenantChannel c;
  Result<SharedRing> up = SharedRing::create_sealed(base + ".up", geometry);
  if (!up.is_ok()) return up.status();
  c.up_ = std::move(*up);
  Result<SharedRing> down = SharedRing::create_sealed(base + ".down", geometry);
  if (!down.is_ok()) return down.status();
  c.down_ = std::move(*down);
  c.up_fd_ = c.up_.memory().fd();
  c.down_fd_ = c.down_.memory().fd();
  return c;
}

Result<TenantChannel> TenantChannel::from_fds(int up_fd, int down_fd, const std::string& base) {
  TenantChannel c;
  Result<SharedRing> up = SharedRing::from_fd(up_fd, base + ".up");
  if (!up.is_ok()) {
    ::close(down_fd);
    return up.status();
  }
  c.up_ = std::move(*up);
  Result<SharedRing> down = SharedRing::from_fd(down_fd, base + ".down");
  if (!down.is_ok()) return down.status();
  c.down_ = std::move(*down);
  return c;
}

Result<TenantChannel> TenantChannel::create(const std::string& base, const RingGeometry& geometry, mode_t mode,
                                            std::optional<uid_t> owner) {
  TenantChannel c;
  Result<SharedRing> up = SharedRing::create(base + ".up", geometry, mode, owner);
  if (!up.is_ok()) return up.status();
  c.up_ = std::move(*up);
  Result<SharedRing> down = SharedRing::create(base + ".down", geometry, mode, owner);
  if (!down.is_ok()) return down.status();
  c.down_ = std::move(*down);
  return c;
}

Result<TenantChannel> TenantChannel::open(const std::string& base) {
  TenantChannel c;
  Result<SharedRing> up = SharedRing::open(base + ".up");
  if (!up.is_ok()) return up.status();
  c.up_ = std::move(*up);
  Result<SharedRing> down = SharedRing::open(base + ".down");
  if (!down.is_ok()) return down.status();
  c.down_ = std::move(*down);
  return c;
}

Status TenantChannel::unlink() {
  CONCORD_RETURN_IF_ERROR(up_.memory().unlink());
  return down_.memory().unlink();
}

}  // namespace concord::ipc
