// A single-producer/single-consumer ring of fixed-size slots in shared memory, and the liveness of
// its two ends.
//
// Layout: a header (magic, version, slot size, capacity, total bytes; the consumer's head and the
// producer's tail on cache lines of their own; per end a pid, a generation and a heartbeat), then
// `capacity` slots of `slot_size` bytes, each a u32 length and the message. The producer writes a
// slot, then publishes it by storing tail (release); the consumer reads slots below tail (acquire)
// and frees them by storing head (release). A producer that dies mid-write never published the
// slot, so the consumer never sees half a message.
//
// Neither end trusts the shared bytes after attaching: the geometry is copied out of the header
// once and checked against the mapping's real size, each end keeps its own index in private
// memory, and every index and slot length read from the peer is checked (a ring whose peer wrote
// nonsense fails with failed_precondition rather than reading out of bounds).
//
// Liveness: each end claims its side with its pid and a generation and beats a heartbeat
// (CLOCK_MONOTONIC nanoseconds) while it lives; the other end calls the peer dead when the pid is
// gone or the heartbeat is older than a bound, and closed when it said goodbye. Waiting is polling:
// a bounded spin, then sleeps, checking the peer between sleeps (no futex, no eventfd: nothing the
// peer could leave in a state that blocks the waiter).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "concord/status.h"
#include "ipc/shared_memory.h"

namespace concord::ipc {

uint64_t monotonic_ns();
// A CPU pause for spin loops, and a sleep that resumes after signals: the waits of both ends.
void cpu_pause();
void sleep_ns(uint64_t ns);

struct RingGeometry {
  uint32_t slot_size = 128;  // bytes a slot holds, its u32 length included: 16..65536, a multiple of 8
  uint32_t capacity = 256;   // slots: a power of two, 2..65536
};

enum class RingSide : uint8_t { producer, consumer };
const char* to_string(RingSide side);

enum class PeerState : uint8_t {
  absent,  // the side was never claimed
  alive,   // claimed, its process exists and its heartbeat is recent
  closed,  // it said goodbye
  dead,    // its process is gone, or its heartbeat stopped
};
const char* to_string(PeerState state);

struct PeerStatus {
  PeerState state = PeerState::absent;
  int32_t pid = 0;
  uint32_t generation = 0;  // changes when another process claims the side
  std::string reason;       // for dead: why it is called dead
};

// How long and how a waiting end waits.
struct WaitPolicy {
  int spin_iterations = 4000;       // busy polls (with a CPU pause) before sleeping
  uint64_t sleep_ns = 20'000;       // each sleep after the spin
  uint64_t timeout_ns = 1'000'000'000;
  uint64_t stale_after_ns = 2'000'000'000;  // a heartbeat older than this: the peer is dead
};

namespace detail {
struct RingHeader;
}

// A view of a ring in memory someone else owns (SharedRing below owns one in shared memory). One
// producer and one consumer, each its own SpscRing object (usually in its own process).
class SpscRing {
 public:
  static constexpr uint32_t kMagic = 0x474e5243;  // "CRNG"
  static constexpr uint32_t kVersion = 1;

  static Result<size_t> bytes_for(const RingGeometry& geometry);
  // Writes an empty ring's header into `memory` (at least bytes_for(geometry) bytes).
  static Result<SpscRing> format(std::span<std::byte> memory, const RingGeometry& geometry);
  // Reads a ring someone formatted: magic, version and geometry checked against `memory`'s size.
  static Result<SpscRing> attach(std::span<std::byte> memory);

  SpscRing() = default;
  const RingGeometry& geometry() const { return geometry_; }
  size_t max_message() const { return geometry_.slot_size - sizeof(uint32_t); }

  // Producer. The next free slot's message bytes (max_message() of them), or an empty span when
  // the ring is full; commit(n) publishes the first n bytes of it.
  Result<std::span<uint8_t>> reserve();
  Status commit(size_t bytes);
  // reserve + copy + commit: false when the ring is full.
  Result<bool> try_push(std::span<const uint8_t> message);

  // Consumer. Copies the oldest message into `out` (max_message() bytes suffice) and frees its
  // slot: its length, or 0 when the ring is empty.
  Result<size_t> try_pop(std::span<uint8_t> out);
  // try_pop, waiting as `wait` says for a message: deadline_exceeded when none came in time,
  // failed_precondition when the producer is dead or closed (the message names which and why).
  Result<size_t> pop_wait(std::span<uint8_t> out, const WaitPolicy& wait);
  // Messages published and not yet taken, as the consumer's head and the producer's tail say.
  Result<size_t> pending() const;

  // Liveness of the two ends.
  void claim(RingSide side, int32_t pid, uint32_t generation, uint64_t now_ns);
  void beat(RingSide side, uint64_t now_ns);
  void close(RingSide side);
  PeerStatus peer(RingSide side, uint64_t now_ns, uint64_t stale_after_ns) const;

 private:
  friend class RingWriters;
  SpscRing(detail::RingHeader* header, std::byte* slots, const RingGeometry& geometry);
  Status corrupt(const std::string& what) const;
  detail::RingHeader* header_ = nullptr;
  std::byte* slots_ = nullptr;
  RingGeometry geometry_;
  uint64_t head_ = 0;  // consumer's own copy: the shared one is only published
  uint64_t tail_ = 0;  // producer's own copy
  bool reserved_ = false;
};

// The producer end of a ring written by many threads of one process, without a lock. A thread
// claims the next slot and, for a launch notice, the next launch number in the same atomic step,
// writes the slot and publishes it; the ring's tail moves over published slots in the order they
// were claimed, so the consumer sees the slots (and the numbers) in claim order and never a slot
// half written. The shared layout is the SpscRing's: the consumer cannot tell.
//
// When the ring is full, the caller queues in its own memory: it claims a number without a slot
// and marks the writers `queueing`, and from then on claims fail until it has moved what queued
// into the ring (claim_queued) and cleared the mark, so nothing claimed later overtakes it. Those
// three calls are one caller's at a time (the caller's lock); claim() and publish() are any
// thread's. A thread stopped between claim and publish holds back the slots claimed after it.
class RingWriters {
 public:
  struct Claim {
    uint64_t ticket = 0;       // the slot's place in the ring (mod 2^20)
    uint64_t number = 0;       // with a number: this one; without: the last claimed
    std::span<uint8_t> bytes;  // the message's bytes (max_message() of them)
  };
  enum class Refusal : uint8_t { full, queueing };

  RingWriters() = default;
  // Over `ring`'s producer end (its capacity at most 2^19 slots), whose last number was `numbered`.
  static Result<RingWriters> over(SpscRing& ring, uint64_t numbered = 0);

  // A slot, with the next number when `numbered`; the refusal when the ring is full or queueing.
  Result<std::variant<Claim, Refusal>> claim(bool numbered);
  // Publishes `bytes` of a claimed slot (1..max_message()).
  Status publish(const Claim& claim, size_t bytes);

  // The caller's queue (one caller at a time): the next number (when `numbered`) or the last, the
  // mark set; a slot for what queued, mark or not; the mark cleared.
  uint64_t queue_number(bool numbered);
  Result<std::optional<Claim>> claim_queued();
  void stop_queueing();
  bool queueing() const { return (word_->load(std::memory_order_acquire) & kQueueing) != 0; }
  uint64_t last_number() const { return (word_->load(std::memory_order_acquire) & kNumberMask) >> kTicketBits; }

 private:
  static constexpr unsigned kTicketBits = 20;
  static constexpr uint64_t kTicketMask = (uint64_t{1} << kTicketBits) - 1;
  static constexpr uint64_t kQueueing = uint64_t{1} << 63;
  static constexpr uint64_t kNumberMask = ~kQueueing & ~kTicketMask;
  static constexpr uint32_t kReady = 0x80000000u;
  Result<std::optional<Claim>> try_claim(uint64_t& word, bool numbered, bool ignore_queueing);
  Claim claim_at(uint64_t word_after, uint64_t ticket);
  void advance();

  SpscRing* ring_ = nullptr;
  // queueing bit | last number | next ticket (mod 2^20), one word so that one step claims both.
  std::unique_ptr<std::atomic<uint64_t>> word_;
  std::unique_ptr<std::atomic<uint64_t>> published_;     // slots published into the tail (full count)
  std::unique_ptr<std::atomic<uint32_t>[]> ready_;       // per slot: kReady | the ticket written there
};

// A ring in its own shared-memory object: the creator formats it, the other end opens it.
class SharedRing {
 public:
  static Result<SharedRing> create(const std::string& name, const RingGeometry& geometry, mode_t mode = 0600,
                                   std::optional<uid_t> owner = std::nullopt);
  static Result<SharedRing> open(const std::string& name);
  // A ring in a sealed anonymous object (SharedMemory::create_sealed), and one received as its
  // descriptor.
  static Result<SharedRing> create_sealed(const std::string& label, const RingGeometry& geometry);
  static Result<SharedRing> from_fd(int fd, const std::string& label);
  SpscRing& ring() { return ring_; }
  SharedMemory& memory() { return memory_; }

 private:
  SharedMemory memory_;
  SpscRing ring_;
};

// A tenant's two rings: launch notices, completions and heartbeats go up (tenant -> daemon),
// decisions come down. Named "<base>.up" and "<base>.down".
class TenantChannel {
 public:
  static Result<TenantChannel> create(const std::string& base, const RingGeometry& geometry, mode_t mode = 0600,
                                      std::optional<uid_t> owner = std::nullopt);
  static Result<TenantChannel> open(const std::string& base);
  // The same two rings without names: sealed anonymous objects whose descriptors (fds(): up,
  // down) the daemon passes over the control socket, and the tenant's end made of them.
  static Result<TenantChannel> create_sealed(const std::string& base, const RingGeometry& geometry);
  static Result<TenantChannel> from_fds(int up, int down, const std::string& base);
  std::vector<int> fds() const { return {up_fd_, down_fd_}; }
  SpscRing& up() { return up_.ring(); }
  SpscRing& down() { return down_.ring(); }
  // Removes both names (the mappings stay).
  Status unlink();

 private:
  SharedRing up_;
  SharedRing down_;
  int up_fd_ = -1;    // owned by the rings' memory (sealed objects only)
  int down_fd_ = -1;
};

}  // namespace concord::ipc
