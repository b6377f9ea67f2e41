// TenantClient against a fake daemon: a control server and the tenant's rings, driven by the test
// (in this process, or in a forked child that the test kills).
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "ipc/control_socket.h"
#include "ipc/lease_page.h"
#include "ipc/tenant_client.h"
#include "ipc/tenant_registry.h"

namespace concord::ipc {
namespace {

using namespace std::chrono_literals;

// The daemon's half: a registry that makes sealed rings and a lease page, a node board, a control
// server on a thread that passes the four descriptors with each registration, and the daemon's
// ends (up consumer, down producer, lease writer) for the test to drive.
LcBoard made_board() {
  Result<LcBoard> b = LcBoard::create("/fake.board");
  EXPECT_TRUE(b.is_ok());
  return std::move(*b);
}

class FakeDaemon {
 public:
  explicit FakeDaemon(std::string dir) : dir_(std::move(dir)), board_(made_board()) {
    registry_.emplace([this](uint64_t tenant, const PeerCredentials&, const RegisterTenant& info) -> Result<TenantRegistry::Made> {
      const std::string base = fmt::format("/concord-test-{}-{}", ::getpid(), tenant);
      Result<TenantChannel> c = TenantChannel::create_sealed(base, {kRingSlotBytes, ring_slots_});
      if (!c.is_ok()) return c.status();
      LeaseTerms initial = initial_;
      if (info.cls == TenantClass::latency_critical) initial.lc_slot = next_slot_++;
      Result<LeasePage> page = LeasePage::create(base + ".lease", initial, quota_);
      if (!page.is_ok()) return page.status();
      const uint64_t now = monotonic_ns();
      c->up().claim(RingSide::consumer, ::getpid(), 1, now);
      c->down().claim(RingSide::producer, ::getpid(), 1, now);
      std::lock_guard lock(mu_);
      pending_fds_ = c->fds();
      for (int& fd : pending_fds_) fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      pending_fds_.push_back(*page->reader_fd());
      pending_fds_.push_back(*board_.tenant_fd(info.cls == TenantClass::latency_critical));
      channels_.emplace(tenant, std::move(*c));
      leases_.emplace(tenant, std::move(*page));
      return TenantRegistry::Made{base, "0", quota_};
    }, LcAccess{{static_cast<uint32_t>(::getuid())}, {}, "this test's user"});
    handler_.emplace(*this);
    ControlServerOptions o;
    o.path = dir_ + "/concordd.sock";
    Result<ControlServer> s = ControlServer::listen(o, creds_, *handler_);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    server_.emplace(std::move(*s));
    thread_ = std::thread([this] {
      while (!stop_) {
        {
          std::lock_guard lock(mu_);
          for (auto& [id, c] : channels_) {
            c.up().beat(RingSide::consumer, monotonic_ns());
            c.down().beat(RingSide::producer, monotonic_ns());
          }
        }
        if (!server_->serve_once(5ms).is_ok()) return;
      }
    });
  }
  ~FakeDaemon() {
    stop_ = true;
    thread_.join();
  }
  std::string socket() const { return dir_ + "/concordd.sock"; }
  // What the next registrations get: their initial lease, their up ring's depth.
  void set_initial(const LeaseTerms& t) { initial_ = t; }
  void set_ring_slots(uint32_t n) { ring_slots_ = n; }
  void set_quota(const MemoryQuota& q) { quota_ = q; }
  LcBoard& board() { return board_; }
  // Publishes a tenant's lease and wakes the waiters, as the daemon does.
  void publish(uint64_t tenant, const LeaseTerms& t) {
    {
      std::lock_guard lock(mu_);
      ASSERT_TRUE(leases_.at(tenant).publish(t).is_ok());
    }
    board_.wake_all();
  }
  void send(uint64_t tenant, const Message& m) {
    std::lock_guard lock(mu_);
    uint8_t buf[kRingSlotBytes];
    Result<size_t> n = encode_into(m, buf);
    ASSERT_TRUE(n.is_ok());
    ASSERT_TRUE(*channels_.at(tenant).down().try_push({buf, *n}));
  }
  // The next message up, within 2 s.
  Result<Message> next_up(uint64_t tenant) {
    uint8_t buf[kRingSlotBytes];
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (std::chrono::steady_clock::now() < deadline) {
      Result<size_t> n = [&] {
        std::lock_guard lock(mu_);
        return channels_.at(tenant).up().try_pop(buf);
      }();
      if (!n.is_ok()) return n.status();
      if (*n > 0) return decode_on({buf, *n}, Channel::up_ring);
      std::this_thread::sleep_for(100us);
    }
    return Status::deadline_exceeded("no message up");
  }

 private:
  // The registry as the server's handler, with the descriptors its last registration made.
  class Handler final : public ControlHandler {
   public:
    explicit Handler(FakeDaemon& d) : d_(d) {}
    Message handle(const PeerCredentials& peer, const Message& request) override { return d_.registry_->handle(peer, request); }
    std::vector<int> reply_fds(const PeerCredentials&, const Message& reply) override {
      if (!std::holds_alternative<Registered>(reply)) return {};
      std::lock_guard lock(d_.mu_);
      for (int fd : passed_) ::close(fd);
      passed_ = std::exchange(d_.pending_fds_, {});
      return passed_;
    }
    void disconnected(const PeerCredentials& peer) override { d_.registry_->disconnected(peer); }
    ~Handler() override {
      for (int fd : passed_) ::close(fd);
    }

   private:
    FakeDaemon& d_;
    std::vector<int> passed_;
  };

  std::string dir_;
  LcBoard board_;
  KernelCredentials creds_;
  std::optional<TenantRegistry> registry_;
  std::optional<Handler> handler_;
  std::optional<ControlServer> server_;
  std::mutex mu_;
  std::map<uint64_t, TenantChannel> channels_;
  std::map<uint64_t, LeasePage> leases_;
  std::vector<int> pending_fds_;
  LeaseTerms initial_;
  MemoryQuota quota_;
  uint32_t ring_slots_ = 64;
  uint32_t next_slot_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class TenantClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("concord-client-{}-{}", ::getpid(), counter_++);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  TenantClientOptions options(const std::string& socket) {
    TenantClientOptions o;
    o.socket_path = socket;
    o.info = RegisterTenant{TenantClass::latency_critical, 2'000'000, 1, 0, "lc", ""};
    o.wait.timeout_ns = 2'000'000'000;
    o.wait.stale_after_ns = 300'000'000;
    o.heartbeat_period = 20ms;
    return o;
  }
  std::filesystem::path dir_;
  static inline int counter_ = 0;
};

LaunchNotice launch(uint64_t kernel) { return LaunchNotice{0, 1, kernel, {64, 1, 1}, {128, 1, 1}, 0, false, 0}; }

LeaseTerms per_launch() {
  LeaseTerms t;
  t.gate = LeaseGate::per_launch;
  return t;
}

TEST_F(TenantClientTest, NoDaemonIsAnErrorNamingTheSocket) {
  Result<std::unique_ptr<TenantClient>> c = TenantClient::connect(options((dir_ / "none.sock").string()));
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("none.sock"), std::string::npos);
}

// The client reads its memory quota from its lease page, and its use goes up the ring.
TEST_F(TenantClientTest, TheQuotaComesFromTheLeasePageAndTheUseGoesUpTheRing) {
  FakeDaemon d(dir_.string());
  d.set_quota(MemoryQuota{6ull << 30, 6ull << 30});
  auto c = TenantClient::connect(options(d.socket()));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ((*c)->memory_quota(), (MemoryQuota{6ull << 30, 6ull << 30}));
  (*c)->memory_used(1 << 20, 3 << 20);
  Result<Message> up = d.next_up((*c)->tenant());
  ASSERT_TRUE(up.is_ok()) << up.status().to_string();
  ASSERT_TRUE(std::holds_alternative<MemoryUsage>(*up)) << to_string(type_of(*up));
  EXPECT_EQ(std::get<MemoryUsage>(*up), (MemoryUsage{1 << 20, 3 << 20}));
  (*c)->close();
  (*c)->memory_used(5, 5);  // pass-through: nothing is posted
}

TEST_F(TenantClientTest, NoticeDecisionAnnouncementCompletionAndRequests) {
  FakeDaemon daemon(dir_.string());
  daemon.set_initial(per_launch());
  auto client = TenantClient::connect(options(daemon.socket()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  TenantClient& c = **client;
  const uint64_t t = c.tenant();
  ASSERT_TRUE(c.request_begin().is_ok());
  Result<uint64_t> seq = c.notice(launch(42));
  ASSERT_TRUE(seq.is_ok());
  EXPECT_EQ(*seq, 1u);
  Result<Message> up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok()) << up.status().to_string();
  EXPECT_EQ(std::get<RequestBoundary>(*up).edge, RequestEdge::begin);
  EXPECT_EQ(std::get<RequestBoundary>(*up).last_seq, 0u);
  EXPECT_GT(std::get<RequestBoundary>(*up).at_ns, 0u);
  EXPECT_EQ(c.lease().gate, LeaseGate::per_launch);
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<LaunchNotice>(*up).kernel, 42u);
  EXPECT_EQ(std::get<LaunchNotice>(*up).seq, 1u);

  daemon.send(t, SmSetAnnounce{3, *sm_words({0, 1, 2, 3, 130})});
  daemon.send(t, Decision{1, Verdict::release, Priority::high, 3});
  Result<Decision> d = c.wait_release(1);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->priority, Priority::high);
  EXPECT_EQ(d->sm_set, 3u);
  const auto ann = c.take_announcements();
  ASSERT_EQ(ann.size(), 1u);
  EXPECT_EQ(ann[0].handle, 3u);
  EXPECT_EQ(ann[0].sms, (std::vector<int>{0, 1, 2, 3, 130}));
  EXPECT_TRUE(c.take_announcements().empty());

  EXPECT_FALSE(c.completed(1, 2, true).is_ok()) << "another stream";
  EXPECT_FALSE(c.completed(5, 1, true).is_ok()) << "never noticed";
  ASSERT_TRUE(c.completed(1, 1, true, 77).is_ok());
  EXPECT_TRUE(c.completed(1, 1, true).is_ok()) << "named again: nothing is posted";
  ASSERT_TRUE(c.request_end().is_ok());
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<CompletionNotice>(*up), (CompletionNotice{1, 1, true, 77}));
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<RequestBoundary>(*up).edge, RequestEdge::end);
  EXPECT_EQ(std::get<RequestBoundary>(*up).last_seq, 1u);
  EXPECT_FALSE(c.pass_through());
  c.close();
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_TRUE(std::holds_alternative<Bye>(*up));
  EXPECT_TRUE(c.pass_through());
}

// A registration made with seq_base 100 (a client registering again): its callers' numbers go on
// from 101 while the daemon sees 1, 2, ...; a wait or an end for a number at or below the base (a
// launch made under the daemon before) answers at once and posts nothing; the decision and the
// completion of a new launch travel under the daemon's numbers.
TEST_F(TenantClientTest, ASeqBaseNumbersOnAndAnswersTheEarlierLaunchesInTheProcess) {
  FakeDaemon daemon(dir_.string());
  daemon.set_initial(per_launch());
  TenantClientOptions o = options(daemon.socket());
  o.seq_base = 100;
  auto client = TenantClient::connect(o);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  TenantClient& c = **client;
  const uint64_t t = c.tenant();
  EXPECT_EQ(c.last_seq(), 100u);
  const Result<uint64_t> seq = c.notice(launch(42));
  ASSERT_TRUE(seq.is_ok());
  EXPECT_EQ(*seq, 101u);
  EXPECT_EQ(c.last_seq(), 101u);
  Result<Message> up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok()) << up.status().to_string();
  EXPECT_EQ(std::get<LaunchNotice>(*up).seq, 1u);
  // The earlier registration's launches: answered here.
  const Result<Decision> old = c.wait_release(99);
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(old->seq, 99u);
  EXPECT_EQ(old->verdict, Verdict::release);
  EXPECT_TRUE(c.completed(100, 1, true).is_ok());
  daemon.send(t, Decision{1, Verdict::release, Priority::high, 0});
  const Result<Decision> d = c.wait_release(101);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->seq, 101u);
  EXPECT_EQ(d->priority, Priority::high);
  EXPECT_FALSE(c.completed(102, 1, true).is_ok()) << "never noticed";
  ASSERT_TRUE(c.completed(101, 1, true, 77).is_ok());
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<CompletionNotice>(*up), (CompletionNotice{1, 1, true, 77})) << "the old launch's end was posted";
  c.close();
}

TEST_F(TenantClientTest, AHoldIsWaitedOutAndOtherThreadsDecisionsAreKept) {
  FakeDaemon daemon(dir_.string());
  daemon.set_initial(per_launch());
  auto o = options(daemon.socket());
  o.wait.timeout_ns = 100'000'000;  // a hold outlasts this: only an unanswered notice is bounded by it
  auto client = TenantClient::connect(o);
  ASSERT_TRUE(client.is_ok());
  TenantClient& c = **client;
  const uint64_t t = c.tenant();
  const uint64_t a = *c.notice(launch(1));
  const uint64_t b = *c.notice(launch(2));
  daemon.send(t, Decision{a, Verdict::hold, Priority::normal, 0});
  daemon.send(t, Decision{b, Verdict::release, Priority::normal, 0});
  std::atomic<bool> a_released{false};
  std::thread waiter([&] {
    Result<Decision> d = c.wait_release(a);
    EXPECT_TRUE(d.is_ok());
    EXPECT_EQ(d->priority, Priority::high);
    a_released = true;
  });
  // b's decision came first, taken maybe by the other thread: it is kept for this one.
  Result<Decision> db = c.wait_release(b);
  ASSERT_TRUE(db.is_ok());
  EXPECT_EQ(db->seq, b);
  std::this_thread::sleep_for(300ms);  // past timeout_ns: still held, not pass-through
  EXPECT_FALSE(a_released);
  EXPECT_FALSE(c.pass_through());
  daemon.send(t, Decision{a, Verdict::release, Priority::high, 0});
  waiter.join();
  EXPECT_TRUE(a_released);
}

TEST_F(TenantClientTest, AnUnansweredNoticeTurnsPassThroughAfterTheBound) {
  FakeDaemon daemon(dir_.string());
  daemon.set_initial(per_launch());
  auto o = options(daemon.socket());
  o.wait.timeout_ns = 50'000'000;
  auto client = TenantClient::connect(o);
  ASSERT_TRUE(client.is_ok());
  const uint64_t s = *(*client)->notice(launch(1));
  const auto t0 = std::chrono::steady_clock::now();
  Result<Decision> d = (*client)->wait_release(s);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->verdict, Verdict::release);
  EXPECT_EQ(d->sm_set, 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_TRUE((*client)->pass_through());
  EXPECT_EQ(*(*client)->notice(launch(1)), 0u) << "nothing is posted in pass-through";
}

// Under an open lease a launch is noticed after it went out: nothing waits, not even a full ring
// (the notices queue in the process and follow, in order, once the daemon reads).
TEST_F(TenantClientTest, LaunchesUnderAnOpenLeaseNeverWaitEvenOnAFullRing) {
  FakeDaemon daemon(dir_.string());
  daemon.set_ring_slots(4);
  auto o = options(daemon.socket());
  o.wait.timeout_ns = 1'000'000;  // would turn pass-through if any launch waited for a decision
  auto client = TenantClient::connect(o);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  TenantClient& c = **client;
  EXPECT_EQ(c.lease().gate, LeaseGate::open);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= 40; ++i) {
    LaunchNotice n = launch(i);
    n.stream = i % 2 == 0 ? 2 : 3;
    Result<uint64_t> seq = c.notice(n, /*launched=*/true);
    ASSERT_TRUE(seq.is_ok());
    EXPECT_EQ(*seq, i);
  }
  ASSERT_TRUE(c.completed(40, 2, true).is_ok());  // the even launches
  ASSERT_TRUE(c.completed(39, 3, true).is_ok());  // the odd ones
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms) << "a full ring made launches wait";
  for (uint64_t i = 1; i <= 40; ++i) {
    Result<Message> up = daemon.next_up(c.tenant());
    ASSERT_TRUE(up.is_ok()) << "notice " << i << ": " << up.status().to_string();
    EXPECT_EQ(std::get<LaunchNotice>(*up).seq, i) << "in order";
  }
  Result<Message> up = daemon.next_up(c.tenant());
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<CompletionNotice>(*up).seq, 40u);
  up = daemon.next_up(c.tenant());
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<CompletionNotice>(*up).seq, 39u);
  EXPECT_FALSE(c.pass_through());
}

// The tenant maps its lease page (and, as BE, the board) read-only: it can neither write nor
// resize what the daemon steers it by.
TEST_F(TenantClientTest, TheLeasePageIsTheDaemonsAlone) {
  auto page = LeasePage::create("/t.lease", LeaseTerms{});
  ASSERT_TRUE(page.is_ok());
  int fd = *page->reader_fd();
  EXPECT_EQ(::ftruncate(fd, 1), -1) << "resized through the tenant's descriptor";
  EXPECT_EQ(::mmap(nullptr, kLeasePageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  auto reader = LeaseReader::from_fd(fd, "/t.lease");
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  LeaseTerms t;
  t.gate = LeaseGate::closed;
  t.priority = Priority::high;
  t.max_in_flight = 3;
  t.yield_mask = 0x5;
  t.on_lc = LcYield::cap;
  t.be_in_flight_cap = 1;
  ASSERT_TRUE(page->publish(t).is_ok());
  EXPECT_EQ(*reader->read(), t);
  t.on_lc = LcYield::cap;
  t.be_in_flight_cap = 0;
  EXPECT_FALSE(page->publish(t).is_ok()) << "a cap of 0 is refused";
  EXPECT_EQ(reader->read()->be_in_flight_cap, 1u) << "and changes nothing";
  auto board = LcBoard::create("/t.board");
  ASSERT_TRUE(board.is_ok());
  const int bfd = *board->tenant_fd(false);
  EXPECT_EQ(::mmap(nullptr, kBoardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, 0), MAP_FAILED);
  EXPECT_EQ(::ftruncate(bfd, 1), -1);
  // Mode 0400: only root reopens them for writing; and the lease page is sealed, so not even a
  // descriptor root opens anew writes it. (LeaseReader::from_fd took `fd`: a fresh one.)
  fd = *page->reader_fd();
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
  ASSERT_EQ(::fstat(bfd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
  EXPECT_NE(::fcntl(fd, F_GET_SEALS) & F_SEAL_FUTURE_WRITE, 0);
  const int again = ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDWR);
  if (::geteuid() != 0) {
    EXPECT_EQ(again, -1) << "reopened for writing";
  } else if (again >= 0) {
    EXPECT_EQ(::mmap(nullptr, kLeasePageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0), MAP_FAILED);
    EXPECT_EQ(::pwrite(again, "x", 1, 0), -1) << "root wrote the sealed page";
    ::close(again);
  }
  ::close(fd);
  ::close(bfd);
}

TEST(LeaseAdmission, GatesCapsAndYielding) {
  LeaseTerms t;
  EXPECT_TRUE(admission(t, ~0ull).open) << "yields to nobody";
  t.gate = LeaseGate::closed;
  EXPECT_FALSE(admission(t, 0).open);
  t.gate = LeaseGate::per_launch;
  EXPECT_FALSE(admission(t, 0).open);
  t.gate = LeaseGate::open;
  t.max_in_flight = 8;
  t.yield_mask = 0b10;
  t.on_lc = LcYield::close;
  EXPECT_EQ(admission(t, 0b01).cap, 8u) << "another LC's flag";
  EXPECT_FALSE(admission(t, 0b11).open);
  t.on_lc = LcYield::cap;
  t.be_in_flight_cap = 2;
  EXPECT_EQ(admission(t, 0b10).cap, 2u);
  EXPECT_TRUE(admission(t, 0b10).lc_yield);
  t.max_in_flight = 1;
  EXPECT_EQ(admission(t, 0b10).cap, 1u) << "the tighter of the two";
  t.on_lc = LcYield::run;
  EXPECT_TRUE(admission(t, 0b10).open);
  // Room: only while a flag it yields to is up, with run or cap.
  t.be_sm_cap = 66;
  t.be_blocks_per_sm_cap = 2;
  EXPECT_EQ(admission(t, 0b10).sms, 66u);
  EXPECT_EQ(admission(t, 0b10).blocks_per_sm, 2u);
  EXPECT_EQ(admission(t, 0b01).sms, 0u) << "another LC's flag: the whole GPU";
  EXPECT_EQ(admission(t, 0b01).blocks_per_sm, 0u);
  t.on_lc = LcYield::cap;
  EXPECT_EQ(admission(t, 0b10).sms, 66u);
  EXPECT_EQ(admission(t, 0b10).cap, 1u);
  EXPECT_TRUE(check_terms(t).is_ok());
  t.on_lc = LcYield::close;
  EXPECT_FALSE(check_terms(t).is_ok()) << "room with a closed gate means nothing";
  t.on_lc = LcYield::run;
  t.be_sm_cap = kMaxRoomSms + 1;
  EXPECT_NE(check_terms(t).message().find("be_sm_cap"), std::string::npos);
  t.be_sm_cap = 0;
  t.be_blocks_per_sm_cap = kMaxRoomBlocksPerSm + 1;
  EXPECT_NE(check_terms(t).message().find("be_blocks_per_sm_cap"), std::string::npos);
  // An LC tenant's slot is a bit of the board's one word: 0..63, or none.
  t.be_blocks_per_sm_cap = 0;
  t.lc_slot = kLcSlots - 1;
  EXPECT_TRUE(check_terms(t).is_ok());
  t.lc_slot = kNoLcSlot;
  EXPECT_TRUE(check_terms(t).is_ok());
  t.lc_slot = kLcSlots;
  EXPECT_NE(check_terms(t).message().find("lc_slot"), std::string::npos);
}

// A publish left unfinished (the daemon killed between its first store and its last) is an error
// after a bounded wait, never the terms half-written. The test poses as that daemon: the page's
// sequence is the first word of its second cache line (checked against the reader's before).
TEST(LeasePage, APublishLeftUnfinishedIsAnErrorNotTermsHalfWritten) {
  LeaseTerms t;
  t.yield_mask = 1;
  Result<LeasePage> page = LeasePage::create("unfinished-test", t);
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  Result<int> fd = page->reader_fd();
  ASSERT_TRUE(fd.is_ok());
  Result<LeaseReader> reader = LeaseReader::from_fd(*fd, "unfinished-test");
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  auto* seq = reinterpret_cast<std::atomic<uint32_t>*>(page->memory().data() + 64);
  ASSERT_EQ(seq->load(), reader->sequence());
  t.gate = LeaseGate::closed;
  ASSERT_TRUE(page->publish(t).is_ok());
  ASSERT_EQ(seq->load(), reader->sequence()) << "not the page's sequence";
  ASSERT_EQ(reader->sequence() % 2, 0u);
  seq->fetch_add(1);  // a publish begun and never finished
  const auto t0 = std::chrono::steady_clock::now();
  Result<LeaseTerms> read = reader->read();
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(read.is_ok()) << "terms read while a publish was in progress";
  EXPECT_EQ(read.status().code(), StatusCode::deadline_exceeded) << read.status().to_string();
  EXPECT_LT(waited, 1s);
  seq->fetch_add(1);  // finished after all
  read = reader->read();
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(*read, t);
}

// A reader racing the daemon's publishes gets the terms of one publish or of the other, never a
// mix of the two (the page is a seqlock): two sets of terms that differ in every field, published
// in turn by one thread while this one reads.
TEST(LeasePage, AReaderRacingPublishesGetsOneWholePublishOrTheOther) {
  LeaseTerms a;
  a.max_in_flight = 1;
  a.yield_mask = 0x1;
  a.be_sm_cap = 10;
  a.be_blocks_per_sm_cap = 1;
  a.lc_slot = 1;
  LeaseTerms b;
  b.gate = LeaseGate::closed;
  b.priority = Priority::high;
  b.max_in_flight = 2;
  b.yield_mask = 0x2;
  b.on_lc = LcYield::cap;
  b.be_in_flight_cap = 3;
  b.be_sm_cap = 20;
  b.be_blocks_per_sm_cap = 2;
  b.lc_slot = 2;
  Result<LeasePage> page = LeasePage::create("race-test", a);
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  Result<int> fd = page->reader_fd();
  ASSERT_TRUE(fd.is_ok());
  Result<LeaseReader> reader = LeaseReader::from_fd(*fd, "race-test");
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  // The writer and the reader on two different CPUs where the process may use two (a scheduler
  // would otherwise often run them in turns on one, and they would seldom overlap).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  const auto pin = [&](size_t which) {
    if (cpus.size() < 2) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[which], &one);
    (void)::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
  };
  std::atomic<bool> done{false};
  std::atomic<uint64_t> publishes{0};
  std::thread writer([&] {
    pin(0);
    for (uint64_t i = 0; !done.load(std::memory_order_relaxed); ++i) {
      (void)page->publish(i % 2 ? b : a);
      publishes.fetch_add(1, std::memory_order_relaxed);
      // A pause between publishes (about a microsecond), so that reads also fall between them.
      const auto until = std::chrono::steady_clock::now() + 1us;
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  });
  cpu_set_t before;
  const bool had = ::pthread_getaffinity_np(::pthread_self(), sizeof before, &before) == 0;
  pin(1);
  uint64_t reads = 0, mixed = 0, failed = 0;
  std::string first_refusal;
  const auto until = std::chrono::steady_clock::now() + 1s;
  while (std::chrono::steady_clock::now() < until) {
    for (int k = 0; k < 1000; ++k, ++reads) {
      Result<LeaseTerms> t = reader->read();
      if (!t.is_ok()) {
        if (failed++ == 0) first_refusal = t.status().to_string();
      } else if (!(*t == a) && !(*t == b)) {
        ++mixed;
      }
    }
  }
  done = true;
  writer.join();
  if (had) (void)::pthread_setaffinity_np(::pthread_self(), sizeof before, &before);
  std::printf("[ measured ] %llu reads beside %llu publishes\n", static_cast<unsigned long long>(reads),
              static_cast<unsigned long long>(publishes.load()));
  EXPECT_EQ(mixed, 0u) << "reads that mixed two publishes' terms";
  EXPECT_EQ(failed, 0u) << "reads refused (a mix whose terms are out of range, or a publish never seen finished), the first: "
                        << first_refusal;
  EXPECT_GT(publishes.load(), 1000u);
}

// The memory quota is a section of the page of its own: written once when the page is made, read
// by the tenant, untouched by publishes of terms; a reservation over the limit is refused.
TEST(LeasePage, TheMemoryQuotaIsWrittenOnceAndPublishesLeaveIt) {
  const MemoryQuota quota{8ull << 30, 8ull << 30};
  Result<LeasePage> page = LeasePage::create("quota-test", LeaseTerms{}, quota);
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  Result<LeaseReader> reader = LeaseReader::from_fd(*page->reader_fd(), "quota-test");
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  EXPECT_EQ(*reader->memory_quota(), quota);
  LeaseTerms t;
  t.gate = LeaseGate::closed;
  ASSERT_TRUE(page->publish(t).is_ok());
  EXPECT_EQ(*reader->memory_quota(), quota) << "a publish of terms carries no quota and changes none";
  EXPECT_EQ(reader->read()->gate, LeaseGate::closed);
  Result<LeasePage> none = LeasePage::create("no-quota-test", LeaseTerms{});
  ASSERT_TRUE(none.is_ok());
  Result<LeaseReader> r2 = LeaseReader::from_fd(*none->reader_fd(), "no-quota-test");
  ASSERT_TRUE(r2.is_ok());
  EXPECT_FALSE(r2->memory_quota()->limited());
  const Result<LeasePage> bad = LeasePage::create("bad-quota-test", LeaseTerms{}, MemoryQuota{1 << 20, 2 << 20});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("memory_reserved"), std::string::npos) << bad.status().message();
}

TEST(LeasePage, RoomTermsTravelThroughThePage) {
  LeaseTerms t;
  t.yield_mask = 1;
  t.be_sm_cap = 34;
  t.be_blocks_per_sm_cap = 3;
  Result<LeasePage> page = LeasePage::create("room-test", t);
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  Result<int> fd = page->reader_fd();
  ASSERT_TRUE(fd.is_ok());
  Result<LeaseReader> reader = LeaseReader::from_fd(*fd, "room-test");
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  Result<LeaseTerms> read = reader->read();
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(*read, t);
  t.be_sm_cap = 0;
  ASSERT_TRUE(page->publish(t).is_ok());
  EXPECT_EQ(reader->read()->be_sm_cap, 0u);
  EXPECT_EQ(reader->read()->be_blocks_per_sm_cap, 3u);
}

// A BE tenant blocked on a closed gate (its lease closed while the LC flag it yields to is up)
// wakes as soon as the gate opens: the LC lowering its flag, or the daemon opening the lease. The
// waiter is another process, as in a node; it says when it woke, the test when it opened.
TEST_F(TenantClientTest, ABlockedBeWakesWithin100usOfItsGateOpening) {
  FakeDaemon daemon(dir_.string());
  LeaseTerms yielding;
  yielding.yield_mask = 0b1;  // the first LC tenant's slot
  yielding.on_lc = LcYield::close;
  daemon.set_initial(yielding);
  auto lc_client = TenantClient::connect(options(daemon.socket()));
  ASSERT_TRUE(lc_client.is_ok()) << lc_client.status().to_string();
  TenantClient& lc = **lc_client;
  ASSERT_EQ(lc.lease().lc_slot, 0u);
  constexpr int kTrials = 21;
  int go[2], woke[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(woke), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto o = options(daemon.socket());
    o.info = RegisterTenant{TenantClass::best_effort, 0, 1, 0, "be", ""};
    auto be = TenantClient::connect(o);
    if (!be.is_ok()) ::_exit(3);
    for (int i = 0; i < kTrials; ++i) {
      char b = 0;
      if (::read(go[0], &b, 1) != 1) ::_exit(4);
      (void)(*be)->wait_open(5'000'000'000);
      const uint64_t at = monotonic_ns();
      if (::write(woke[1], &at, sizeof at) != sizeof at) ::_exit(5);
    }
    (*be)->close();
    ::_exit(0);
  }
  std::vector<double> waits_us;
  for (int i = 0; i < kTrials; ++i) {
    lc.raise_lc(0);
    const char b = 1;
    ASSERT_EQ(::write(go[1], &b, 1), 1);
    std::this_thread::sleep_for(20ms);  // the child is asleep on the board by now
    pollfd p{woke[0], POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 0), 0) << "trial " << i << ": the BE went through a closed gate";
    const uint64_t opened = monotonic_ns();
    lc.lower_lc(0);
    uint64_t at = 0;
    ASSERT_EQ(::read(woke[0], &at, sizeof at), static_cast<ssize_t>(sizeof at));
    waits_us.push_back(static_cast<double>(at - opened) / 1e3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::sort(waits_us.begin(), waits_us.end());
  const double median = waits_us[waits_us.size() / 2];
  EXPECT_LE(median, 100.0) << "median wake-up " << median << " us (max " << waits_us.back() << " us)";
  ::close(go[0]);
  ::close(go[1]);
  ::close(woke[0]);
  ::close(woke[1]);
}

TEST_F(TenantClientTest, ADaemonGoodbyeTurnsPassThrough) {
  FakeDaemon daemon(dir_.string());
  daemon.set_initial(per_launch());
  auto client = TenantClient::connect(options(daemon.socket()));
  ASSERT_TRUE(client.is_ok());
  const uint64_t s = *(*client)->notice(launch(1));
  daemon.send((*client)->tenant(), Bye{ByeReason::shutdown});
  Result<Decision> d = (*client)->wait_release(s);
  ASSERT_TRUE(d.is_ok());
  EXPECT_TRUE((*client)->pass_through());
}

TEST_F(TenantClientTest, ADaemonKilledMidWaitLeavesTheClientPassThrough) {
  const std::string socket = (dir_ / "concordd.sock").string();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    {
      FakeDaemon daemon(dir_.string());
      daemon.set_initial(per_launch());
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
      ::pause();  // answers registrations (its thread), never a notice
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  auto client = TenantClient::connect(options(socket));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  const uint64_t s = *(*client)->notice(launch(1));
  std::thread killer([child] {
    std::this_thread::sleep_for(100ms);
    ::kill(child, SIGKILL);
  });
  const auto t0 = std::chrono::steady_clock::now();
  Result<Decision> d = (*client)->wait_release(s);
  killer.join();
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->verdict, Verdict::release);
  EXPECT_TRUE((*client)->pass_through());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms) << "noticed by the pid check or the socket's end";
  // Everything after goes straight through.
  EXPECT_EQ(*(*client)->notice(launch(2)), 0u);
  EXPECT_TRUE((*client)->wait_release(0).is_ok());
  (*client)->close();
}

}  // namespace
}  // namespace concord::ipc
