// The shared-memory SPSC ring: order, wraparound, full and empty, corruption refused, a producer
// killed mid-write seen dead without a torn message, and a round trip between two processes.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ipc/launch_ledger.h"
#include "ipc/protocol.h"
#include "ipc/ring.h"

namespace concord::ipc {
namespace {

std::string unique_name(const char* what) {
  static int n = 0;
  return fmt::format("/concord-test-{}-{}-{}", ::getpid(), what, n++);
}

// A ring in private memory, aligned as shared memory is.
struct LocalRing {
  explicit LocalRing(RingGeometry g) : memory(*SpscRing::bytes_for(g) + 64) {
    auto* p = memory.data();
    const size_t pad = (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
    span = {p + pad, memory.size() - 64};
    producer = *SpscRing::format(span, g);
    consumer = *SpscRing::attach(span);
  }
  std::vector<std::byte> memory;
  std::span<std::byte> span;
  SpscRing producer, consumer;
};

std::vector<uint8_t> bytes_of(uint32_t value, size_t size) {
  std::vector<uint8_t> b(size, uint8_t(value));
  std::memcpy(b.data(), &value, std::min(size, sizeof value));
  return b;
}

TEST(IpcRing, GeometryIsChecked) {
  EXPECT_FALSE(SpscRing::bytes_for({12, 8}).is_ok());
  EXPECT_FALSE(SpscRing::bytes_for({100, 8}).is_ok());
  Result<size_t> bad = SpscRing::bytes_for({64, 6});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("field capacity"), std::string::npos);
  EXPECT_TRUE(SpscRing::bytes_for({64, 8}).is_ok());
  // A 320-byte header, then the slots: fuzz/corpus/ipc_protocol/ring_one_decision is laid out so.
  EXPECT_EQ(*SpscRing::bytes_for({64, 2}), 320u + 2 * 64);
}

TEST(IpcRing, FullEmptyAndWraparoundKeepOrder) {
  LocalRing r({32, 4});
  uint8_t out[64];
  EXPECT_EQ(*r.consumer.try_pop(out), 0u) << "empty";
  uint32_t next_in = 0, next_out = 0;
  // Many times around the 4 slots, with the ring filled to the brim each time.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 4; ++i) {
      const auto msg = bytes_of(next_in, 1 + next_in % r.producer.max_message());
      Result<bool> pushed = r.producer.try_push(msg);
      ASSERT_TRUE(pushed.is_ok() && *pushed);
      ++next_in;
    }
    EXPECT_FALSE(*r.producer.try_push(bytes_of(999, 4))) << "full at capacity";
    EXPECT_EQ(*r.consumer.pending(), 4u);
    const int take = 1 + round % 4;
    for (int i = 0; i < take; ++i) {
      Result<size_t> n = r.consumer.try_pop(out);
      ASSERT_TRUE(n.is_ok());
      const auto want = bytes_of(next_out, 1 + next_out % r.producer.max_message());
      ASSERT_EQ(*n, want.size());
      EXPECT_EQ(0, std::memcmp(out, want.data(), *n)) << "message " << next_out;
      ++next_out;
    }
    while (*r.consumer.try_pop(out) > 0) ++next_out;
    next_in = next_out;
  }
  EXPECT_GT(next_out, 150u);
}

// Many threads write one ring without a lock: the consumer sees every message once, whole, the
// numbered ones numbered 1, 2, ... in the ring's order, and each unnumbered one carrying the number
// before it. A small ring fills often, so the writers' queue (one thread at a time, behind a
// mutex, as the tenant client does it) takes turns with the lock-free claims.
TEST(IpcRingWriters, ManyThreadsKeepOneOrderThroughAFullRing) {
  LocalRing r({64, 8});
  Result<RingWriters> made = RingWriters::over(r.producer);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  RingWriters& w = *made;
  constexpr int kThreads = 4;
  constexpr uint64_t kEach = 20000;
  std::mutex queue_mu;
  std::deque<std::array<uint64_t, 3>> queue;  // (numbered, number, writer) waiting for room
  const auto write = [&](const RingWriters::Claim& c, const std::array<uint64_t, 3>& m) {
    std::memcpy(c.bytes.data(), m.data(), sizeof m);
    ASSERT_TRUE(w.publish(c, sizeof m).is_ok());
  };
  const auto drain = [&] {  // queue_mu held
    while (!queue.empty()) {
      Result<std::optional<RingWriters::Claim>> c = w.claim_queued();
      ASSERT_TRUE(c.is_ok());
      if (!*c) return;
      write(**c, queue.front());
      queue.pop_front();
    }
    if (w.queueing()) w.stop_queueing();
  };
  std::atomic<uint64_t> queued{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t i = 0; i < kEach; ++i) {
        const bool numbered = i % 3 != 0;
        Result<std::variant<RingWriters::Claim, RingWriters::Refusal>> c = w.claim(numbered);
        ASSERT_TRUE(c.is_ok());
        if (const auto* claim = std::get_if<RingWriters::Claim>(&*c)) {
          write(*claim, {numbered, claim->number, uint64_t(t)});
          continue;
        }
        std::lock_guard lock(queue_mu);
        drain();
        if (queue.empty()) {
          Result<std::variant<RingWriters::Claim, RingWriters::Refusal>> again = w.claim(numbered);
          ASSERT_TRUE(again.is_ok());
          if (const auto* claim = std::get_if<RingWriters::Claim>(&*again)) {
            write(*claim, {numbered, claim->number, uint64_t(t)});
            continue;
          }
        }
        queue.push_back({numbered, w.queue_number(numbered), uint64_t(t)});
        queued.fetch_add(1);
      }
    });
  }
  std::atomic<bool> done{false};
  std::thread flusher([&] {  // what the tenant client's heartbeat does: drains the queue now and then
    while (!done.load()) {
      {
        std::lock_guard lock(queue_mu);
        drain();
      }
      std::this_thread::yield();
    }
  });
  uint64_t seen = 0, last_number = 0, numbered_seen = 0;
  std::array<uint64_t, kThreads> per_writer{};
  uint8_t out[64];
  const uint64_t total = kThreads * kEach;
  while (seen < total) {
    Result<size_t> n = r.consumer.try_pop(out);
    ASSERT_TRUE(n.is_ok()) << n.status().to_string();
    if (*n == 0) {
      cpu_pause();
      continue;
    }
    ASSERT_EQ(*n, 24u);
    std::array<uint64_t, 3> m;
    std::memcpy(m.data(), out, sizeof m);
    ASSERT_LT(m[2], uint64_t(kThreads));
    if (m[0] == 1) {
      ASSERT_EQ(m[1], last_number + 1) << "message " << seen << ": numbers in the ring's order";
      last_number = m[1];
      ++numbered_seen;
    } else {
      ASSERT_EQ(m[1], last_number) << "message " << seen << ": an unnumbered message carries the number before it";
    }
    ++per_writer[m[2]];
    ++seen;
  }
  done = true;
  for (auto& t : writers) t.join();
  flusher.join();
  EXPECT_EQ(*r.consumer.try_pop(out), 0u) << "nothing more than was written";
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(per_writer[t], kEach);
  EXPECT_EQ(numbered_seen, w.last_number());
  EXPECT_GT(queued.load(), 0u) << "the ring never filled: the queue was not exercised";
}

TEST(IpcRingWriters, AConsumerThatFreesMoreThanWasWrittenIsRefused) {
  LocalRing r({64, 8});
  Result<RingWriters> w = RingWriters::over(r.producer);
  ASSERT_TRUE(w.is_ok());
  auto* head = reinterpret_cast<std::atomic<uint64_t>*>(r.span.data() + 64);  // RingHeader::head, its own cache line
  head->store(1000);
  Result<std::variant<RingWriters::Claim, RingWriters::Refusal>> c = w->claim(true);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("outside the protocol"), std::string::npos) << c.status().message();
}

TEST(IpcRing, MessagesLargerThanASlotAreRefused) {
  LocalRing r({32, 4});
  Result<bool> pushed = r.producer.try_push(std::vector<uint8_t>(29));
  ASSERT_FALSE(pushed.is_ok());
  EXPECT_NE(pushed.status().message().find("a slot holds 1..28"), std::string::npos);
  EXPECT_FALSE(r.producer.try_push({}).is_ok());
}

TEST(IpcRing, AttachRefusesAForeignOrShrunkHeader) {
  LocalRing r({32, 4});
  std::vector<std::byte> copy(r.span.begin(), r.span.end());
  // A header whose geometry claims more than the memory holds.
  Result<SpscRing> small = SpscRing::attach(r.span.first(r.span.size() - 32));
  ASSERT_FALSE(small.is_ok());
  EXPECT_NE(small.status().message().find("field total_bytes"), std::string::npos);
  std::memset(r.span.data(), 0x5a, 4);
  Result<SpscRing> foreign = SpscRing::attach(r.span);
  ASSERT_FALSE(foreign.is_ok());
  EXPECT_NE(foreign.status().message().find("field magic"), std::string::npos);
}

TEST(IpcRing, APeerThatWritesNonsenseIsRefusedNotFollowed) {
  LocalRing r({32, 4});
  ASSERT_TRUE(*r.producer.try_push(bytes_of(1, 8)));
  // The peer's slot length is beyond the slot.
  uint8_t out[64];
  std::byte* slots = r.span.data() + (r.span.size() - 4 * 32);
  const uint32_t huge = 4000;
  std::memcpy(slots, &huge, 4);
  Result<size_t> n = r.consumer.try_pop(out);
  ASSERT_FALSE(n.is_ok());
  EXPECT_NE(n.status().message().find("field length: 4000"), std::string::npos);
  // The peer's tail runs far ahead of the head.
  LocalRing q({32, 4});
  // tail sits at the start of the header's second cache line group: find it by pushing.
  ASSERT_TRUE(*q.producer.try_push(bytes_of(1, 8)));
  uint64_t* words = reinterpret_cast<uint64_t*>(q.span.data());
  bool found = false;
  for (size_t i = 0; i < 64; ++i) {
    if (words[i] == 1) {  // the tail (head is 0): set it 100 ahead
      words[i] = 100;
      found = true;
      break;
    }
  }
  ASSERT_TRUE(found);
  n = q.consumer.try_pop(out);
  ASSERT_FALSE(n.is_ok());
  EXPECT_NE(n.status().message().find("outside the protocol"), std::string::npos);
}

TEST(IpcRing, PeerStatesFromPidAndHeartbeat) {
  LocalRing r({32, 4});
  const uint64_t t0 = monotonic_ns();
  EXPECT_EQ(r.consumer.peer(RingSide::producer, t0, 1'000'000).state, PeerState::absent);
  r.producer.claim(RingSide::producer, ::getpid(), 7, t0);
  PeerStatus s = r.consumer.peer(RingSide::producer, t0 + 500'000, 1'000'000);
  EXPECT_EQ(s.state, PeerState::alive);
  EXPECT_EQ(s.generation, 7u);
  s = r.consumer.peer(RingSide::producer, t0 + 5'000'000, 1'000'000);
  EXPECT_EQ(s.state, PeerState::dead);
  EXPECT_NE(s.reason.find("no heartbeat for 5 ms"), std::string::npos);
  r.producer.beat(RingSide::producer, t0 + 5'000'000);
  EXPECT_EQ(r.consumer.peer(RingSide::producer, t0 + 5'500'000, 1'000'000).state, PeerState::alive);
  r.producer.close(RingSide::producer);
  EXPECT_EQ(r.consumer.peer(RingSide::producer, t0 + 5'500'000, 1'000'000).state, PeerState::closed);
}

// A child claims the producer side of a shared ring, publishes messages, then starts another
// (reserved, half-written, never committed) and is killed with SIGKILL there. The consumer
// gets exactly the published messages, then sees the producer dead: first by its heartbeat
// while the child is a zombie (its pid still exists), then by its pid once reaped.
TEST(IpcRing, ProducerKilledMidWriteIsSeenDeadWithoutATornMessage) {
  const std::string name = unique_name("kill");
  Result<SharedRing> created = SharedRing::create(name, {128, 8});
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  SpscRing& consumer = created->ring();
  consumer.claim(RingSide::consumer, ::getpid(), 1, monotonic_ns());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<SharedRing> opened = SharedRing::open(name);
    if (!opened.is_ok()) ::_exit(2);
    SpscRing& p = opened->ring();
    p.claim(RingSide::producer, ::getpid(), 42, monotonic_ns());
    for (uint32_t i = 1; i <= 3; ++i) {
      uint8_t frame[128];
      Result<size_t> n = encode_into(LaunchNotice{i, 1, 9, {1, 1, 1}, {32, 1, 1}, 0, false}, frame);
      if (!n.is_ok() || !p.try_push({frame, *n}).is_ok()) ::_exit(3);
    }
    Result<std::span<uint8_t>> slot = p.reserve();
    if (!slot.is_ok() || slot->empty()) ::_exit(4);
    std::memset(slot->data(), 0xab, 10);  // half a message, never committed
    const char c = 'r';
    if (::write(ready[1], &c, 1) != 1) ::_exit(5);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  const ssize_t got = ::read(ready[0], &c, 1);
  ::close(ready[0]);
  if (got != 1) {
    int status = 0;
    ::waitpid(child, &status, 0);
    FAIL() << "the producer child ended before its half-written slot, status " << status;
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);

  WaitPolicy wait;
  wait.spin_iterations = 100;
  wait.sleep_ns = 1'000'000;
  wait.timeout_ns = 5'000'000'000;
  wait.stale_after_ns = 100'000'000;
  uint8_t out[128];
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    Result<size_t> n = consumer.pop_wait(out, wait);
    ASSERT_TRUE(n.is_ok()) << n.status().to_string();
    Result<Message> m = decode_on({out, *n}, Channel::up_ring);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    EXPECT_EQ(std::get<LaunchNotice>(*m).seq, seq);
  }
  // The child is a zombie now (not reaped): its pid exists, so the heartbeat tells.
  Result<size_t> n = consumer.pop_wait(out, wait);
  ASSERT_FALSE(n.is_ok());
  EXPECT_EQ(n.status().code(), StatusCode::failed_precondition);
  EXPECT_NE(n.status().message().find("no heartbeat"), std::string::npos) << n.status().message();
  EXPECT_EQ(consumer.peer(RingSide::producer, monotonic_ns(), wait.stale_after_ns).generation, 42u);

  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child exited early with " << status;
  const PeerStatus gone = consumer.peer(RingSide::producer, monotonic_ns(), 60'000'000'000);
  EXPECT_EQ(gone.state, PeerState::dead);
  EXPECT_NE(gone.reason.find("is gone"), std::string::npos) << gone.reason;
  EXPECT_EQ(*consumer.pending(), 0u) << "the half-written slot was never published";
}

// Launch notices up, decisions down, through two shared rings between two processes: the
// child (tenant) sends N notices and waits for each decision; the parent (daemon) answers each.
TEST(IpcRing, TwoProcessRoundTripThroughSharedMemory) {
  const std::string base = unique_name("rt");
  Result<TenantChannel> created = TenantChannel::create(base, {128, 16});
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  TenantChannel& daemon = *created;
  daemon.up().claim(RingSide::consumer, ::getpid(), 1, monotonic_ns());
  daemon.down().claim(RingSide::producer, ::getpid(), 1, monotonic_ns());
  constexpr uint64_t kLaunches = 2000;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<TenantChannel> opened = TenantChannel::open(base);
    if (!opened.is_ok()) ::_exit(2);
    TenantChannel& tenant = *opened;
    tenant.up().claim(RingSide::producer, ::getpid(), 1, monotonic_ns());
    tenant.down().claim(RingSide::consumer, ::getpid(), 1, monotonic_ns());
    LaunchLedger ledger;
    uint8_t frame[128];
    for (uint64_t seq = 1; seq <= kLaunches; ++seq) {
      const uint64_t now = monotonic_ns();
      tenant.up().beat(RingSide::producer, now);
      tenant.down().beat(RingSide::consumer, now);
      Result<size_t> n = encode_into(LaunchNotice{seq, seq % 3, 77, {uint32_t(seq), 1, 1}, {128, 1, 1}, 0, false}, frame);
      if (!n.is_ok() || !ledger.notice(seq, seq % 3).is_ok()) ::_exit(3);
      for (;;) {
        Result<bool> pushed = tenant.up().try_push({frame, *n});
        if (!pushed.is_ok()) ::_exit(4);
        if (*pushed) break;
      }
      Result<size_t> got = tenant.down().pop_wait(frame, WaitPolicy{});
      if (!got.is_ok()) ::_exit(5);
      Result<Message> m = decode_on({frame, *got}, Channel::down_ring);
      if (!m.is_ok()) ::_exit(6);
      const auto* d = std::get_if<Decision>(&*m);
      if (d == nullptr || d->seq != seq || !ledger.decision(*d).is_ok()) ::_exit(7);
      if (d->priority != (seq % 2 ? Priority::high : Priority::normal)) ::_exit(8);
      if (!ledger.completion(seq, seq % 3).is_ok()) ::_exit(9);
    }
    tenant.up().close(RingSide::producer);
    ::_exit(0);
  }
  LaunchLedger ledger;
  uint8_t frame[128];
  uint64_t answered = 0;
  while (answered < kLaunches) {
    daemon.down().beat(RingSide::producer, monotonic_ns());
    Result<size_t> n = daemon.up().pop_wait(frame, WaitPolicy{});
    ASSERT_TRUE(n.is_ok()) << n.status().to_string();
    Result<Message> m = decode_on({frame, *n}, Channel::up_ring);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    const auto& notice = std::get<LaunchNotice>(*m);
    ASSERT_TRUE(ledger.notice(notice.seq, notice.stream).is_ok());
    EXPECT_EQ(notice.grid.x, uint32_t(notice.seq));
    const Decision d{notice.seq, Verdict::release, notice.seq % 2 ? Priority::high : Priority::normal, 0};
    Result<size_t> len = encode_into(d, frame);
    ASSERT_TRUE(len.is_ok());
    Result<bool> pushed = daemon.down().try_push({frame, *len});
    ASSERT_TRUE(pushed.is_ok() && *pushed);
    ++answered;
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tenant child status " << status;
  EXPECT_EQ(ledger.last_noticed(), kLaunches);
  EXPECT_EQ(daemon.up().peer(RingSide::producer, monotonic_ns(), 1'000'000'000).state, PeerState::closed);
}

TEST(IpcRing, SharedMemoryNamesAreNeverAdopted) {
  const std::string name = unique_name("excl");
  Result<SharedRing> first = SharedRing::create(name, {64, 4});
  ASSERT_TRUE(first.is_ok());
  Result<SharedRing> second = SharedRing::create(name, {64, 4});
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::already_exists);
  ASSERT_TRUE(first->memory().unlink().is_ok());
  Result<SharedRing> gone = SharedRing::open(name);
  ASSERT_FALSE(gone.is_ok());
  EXPECT_EQ(gone.status().code(), StatusCode::not_found);
  EXPECT_FALSE(SharedMemory::create("no-slash", 64).is_ok());
}

}  // namespace
}  // namespace concord::ipc

namespace concord::ipc {
namespace {

// Rings the daemon passes as descriptors: no name, and the peer cannot resize them under the
// daemon (a shrink would make the daemon's reads fault).
TEST(IpcSealedRing, ThePeerCannotResizeItAndUnsealedMemoryIsRefused) {
  Result<TenantChannel> mine = TenantChannel::create_sealed("/concord-sealed-test", {256, 8});
  ASSERT_TRUE(mine.is_ok()) << mine.status().to_string();
  const std::vector<int> fds = mine->fds();
  ASSERT_EQ(fds.size(), 2u);
  EXPECT_FALSE(TenantChannel::open("/concord-sealed-test").is_ok()) << "no name in /dev/shm";
  // The peer's end, from copies of the descriptors (as SCM_RIGHTS gives them).
  Result<TenantChannel> peer = TenantChannel::from_fds(::dup(fds[0]), ::dup(fds[1]), "/concord-sealed-test");
  ASSERT_TRUE(peer.is_ok()) << peer.status().to_string();
  uint8_t msg[4] = {1, 2, 3, 4};
  ASSERT_TRUE(*peer->up().try_push(msg));
  uint8_t out[256];
  EXPECT_EQ(*mine->up().try_pop(out), 4u);
  EXPECT_NE(::ftruncate(fds[0], 64), 0) << "shrinking is sealed";
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(fds[0], 1 << 20), 0) << "growing is sealed";

  const int plain = ::memfd_create("plain", MFD_CLOEXEC);
  ASSERT_GE(plain, 0);
  ASSERT_EQ(::ftruncate(plain, 4096), 0);
  Result<SharedMemory> refused = SharedMemory::from_fd(plain, "plain");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("not sealed"), std::string::npos);
}

}  // namespace
}  // namespace concord::ipc
