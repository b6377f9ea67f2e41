// TenantClient against a fake daemon: a control server and the tenant's rings, driven by the test
// (in this process, or in a forked child that the test kills).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "ipc/control_socket.h"
#include "ipc/tenant_client.h"
#include "ipc/tenant_registry.h"

namespace concord::ipc {
namespace {

using namespace std::chrono_literals;

// The daemon's half: a registry that makes rings, a control server on a thread, and the rings'
// daemon ends (up consumer, down producer) for the test to drive.
class FakeDaemon {
 public:
  explicit FakeDaemon(std::string dir) : dir_(std::move(dir)) {
    registry_.emplace([this](uint64_t tenant, const PeerCredentials&) -> Result<std::string> {
      const std::string base = fmt::format("/concord-test-{}-{}", ::getpid(), tenant);
      Result<TenantChannel> c = TenantChannel::create(base, {kRingSlotBytes, 64});
      if (!c.is_ok()) return c.status();
      const uint64_t now = monotonic_ns();
      c->up().claim(RingSide::consumer, ::getpid(), 1, now);
      c->down().claim(RingSide::producer, ::getpid(), 1, now);
      std::lock_guard lock(mu_);
      channels_.emplace(tenant, std::move(*c));
      return base;
    });
    ControlServerOptions o;
    o.path = dir_ + "/concordd.sock";
    Result<ControlServer> s = ControlServer::listen(o, creds_, *registry_);
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
  TenantChannel& channel(uint64_t tenant) {
    std::lock_guard lock(mu_);
    return channels_.at(tenant);
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
  std::string dir_;
  KernelCredentials creds_;
  std::optional<TenantRegistry> registry_;
  std::optional<ControlServer> server_;
  std::mutex mu_;
  std::map<uint64_t, TenantChannel> channels_;
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
    o.info = RegisterTenant{TenantClass::latency_critical, 2'000'000, 1, 0, "lc"};
    o.wait.timeout_ns = 2'000'000'000;
    o.wait.stale_after_ns = 300'000'000;
    o.heartbeat_period = 20ms;
    return o;
  }
  std::filesystem::path dir_;
  static inline int counter_ = 0;
};

LaunchNotice launch(uint64_t kernel) { return LaunchNotice{0, 1, kernel, {64, 1, 1}, {128, 1, 1}, 0, false}; }

TEST_F(TenantClientTest, NoDaemonIsAnErrorNamingTheSocket) {
  Result<std::unique_ptr<TenantClient>> c = TenantClient::connect(options((dir_ / "none.sock").string()));
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("none.sock"), std::string::npos);
}

TEST_F(TenantClientTest, NoticeDecisionAnnouncementCompletionAndRequests) {
  FakeDaemon daemon(dir_.string());
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
  EXPECT_EQ(std::get<RequestBoundary>(*up), (RequestBoundary{RequestEdge::begin, 0}));
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

  ASSERT_TRUE(c.completed(1, true).is_ok());
  EXPECT_FALSE(c.completed(1, true).is_ok()) << "completed twice";
  ASSERT_TRUE(c.request_end().is_ok());
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<CompletionNotice>(*up), (CompletionNotice{1, true}));
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_EQ(std::get<RequestBoundary>(*up), (RequestBoundary{RequestEdge::end, 1}));
  EXPECT_FALSE(c.pass_through());
  c.close();
  up = daemon.next_up(t);
  ASSERT_TRUE(up.is_ok());
  EXPECT_TRUE(std::holds_alternative<Bye>(*up));
  EXPECT_TRUE(c.pass_through());
}

TEST_F(TenantClientTest, AHoldIsWaitedOutAndOtherThreadsDecisionsAreKept) {
  FakeDaemon daemon(dir_.string());
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

TEST_F(TenantClientTest, FreeRunLaunchesWithoutWaitingAndDiscardsLateDecisions) {
  FakeDaemon daemon(dir_.string());
  auto client = TenantClient::connect(options(daemon.socket()));
  ASSERT_TRUE(client.is_ok());
  TenantClient& c = **client;
  daemon.send(c.tenant(), TenantMode{true});
  EXPECT_TRUE(c.take_announcements().empty());  // takes what came down
  EXPECT_TRUE(c.free_run());
  const uint64_t s = *c.notice(launch(1));
  Result<Decision> d = c.wait_release(s);
  ASSERT_TRUE(d.is_ok());
  ASSERT_TRUE(c.completed(s, true).is_ok());
  daemon.send(c.tenant(), Decision{s, Verdict::release, Priority::normal, 0});
  daemon.send(c.tenant(), TenantMode{false});
  EXPECT_TRUE(c.take_announcements().empty());
  EXPECT_FALSE(c.free_run());
  EXPECT_FALSE(c.pass_through()) << "the late decision of a free-run launch is not a protocol error";
}

TEST_F(TenantClientTest, ADaemonGoodbyeTurnsPassThrough) {
  FakeDaemon daemon(dir_.string());
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
  // The killed daemon's ring names (the mappings stay until the client goes).
  for (const char* side : {"up", "down"}) ::shm_unlink(fmt::format("/concord-test-{}-1.{}", child, side).c_str());
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
