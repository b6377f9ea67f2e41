// The control socket and the tenant registry: the kernel's credentials of a real peer, and who may
// see and steer which tenant, with credentials injected for users this test cannot be.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "ipc/control_socket.h"
#include "ipc/tenant_registry.h"

namespace concord::ipc {
namespace {

using namespace std::chrono_literals;

const PeerCredentials kAlice{100, 1000, 1000};
const PeerCredentials kBob{200, 1001, 1001};
const PeerCredentials kRoot{1, 0, 0};

// Alice and Bob may register LC tenants; nobody else but root.
TenantRegistry make_registry(LcAccess lc = LcAccess{{1000, 1001}, {}, "alice, bob"}) {
  return TenantRegistry([](uint64_t id, const PeerCredentials& owner, const RegisterTenant&) -> Result<TenantRegistry::Made> {
    return TenantRegistry::Made{fmt::format("/concord-{}-{}", owner.uid, id), "0", {}};
  }, std::move(lc));
}

RegisterTenant lc(int32_t pid, const char* name) { return {TenantClass::latency_critical, 2'000'000, 1, pid, name, ""}; }

template <typename T>
const T& as(const Message& m) {
  EXPECT_TRUE(std::holds_alternative<T>(m))
      << "got a " << to_string(type_of(m))
      << (std::holds_alternative<ErrorReply>(m) ? ": " + std::get<ErrorReply>(m).message : std::string());
  static const T empty{};
  return std::holds_alternative<T>(m) ? std::get<T>(m) : empty;
}

// A server that accepts nothing (stopped or wedged): once its queue is full a connect is an error
// within its timeout, never a wait without end (the client that reconnects to a daemon keeps
// trying one).
TEST(IpcControl, AConnectToAServerThatAcceptsNothingEndsWithinItsTimeout) {
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("concord-full-{}.sock", ::getpid())).string();
  ::unlink(path.c_str());
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  std::vector<ControlClient> queued;
  bool refused = false;
  for (int i = 0; i < 16 && !refused; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Result<ControlClient> c = ControlClient::connect(path, std::chrono::milliseconds(100));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000)) << "connect " << i << " waited past its timeout";
    if (c.is_ok()) {
      queued.push_back(std::move(*c));
    } else {
      refused = true;
      EXPECT_EQ(c.status().code(), StatusCode::deadline_exceeded) << c.status().to_string();
      EXPECT_NE(c.status().message().find("accepted nothing"), std::string::npos) << c.status().to_string();
    }
  }
  EXPECT_TRUE(refused) << "16 connects queued on a listener with a backlog of 1";
  ::close(listener);
  ::unlink(path.c_str());
}

TEST(IpcControl, SoPeerCredReadsTheRealPeer) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Result<PeerCredentials> peer = KernelCredentials().peer(fds[0]);
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(peer.is_ok()) << peer.status().to_string();
  EXPECT_EQ(peer->pid, ::getpid());
  EXPECT_EQ(peer->uid, ::getuid());
  EXPECT_EQ(peer->gid, ::getgid());
}

TEST(IpcControl, ATenantIsSeenAndSteeredOnlyByItsUserOrRoot) {
  TenantRegistry reg = make_registry();
  const Registered a = as<Registered>(reg.handle(kAlice, lc(kAlice.pid, "alice-svc")));
  EXPECT_EQ(a.channel, fmt::format("/concord-1000-{}", a.tenant));
  const Registered b = as<Registered>(reg.handle(kBob, RegisterTenant{TenantClass::best_effort, 0, 1, kBob.pid, "bob-job", ""}));
  ASSERT_TRUE(reg.note_launch(a.tenant).is_ok());

  const TenantList alice_sees = as<TenantList>(reg.handle(kAlice, ListTenants{}));
  ASSERT_EQ(alice_sees.tenants.size(), 1u);
  EXPECT_EQ(alice_sees.tenants[0].name, "alice-svc");
  EXPECT_EQ(alice_sees.tenants[0].uid, 1000u);
  EXPECT_EQ(alice_sees.tenants[0].launches, 1u);
  const TenantList bob_sees = as<TenantList>(reg.handle(kBob, ListTenants{}));
  ASSERT_EQ(bob_sees.tenants.size(), 1u);
  EXPECT_EQ(bob_sees.tenants[0].name, "bob-job");
  EXPECT_EQ(as<TenantList>(reg.handle(kRoot, ListTenants{})).tenants.size(), 2u);

  // Bob steering Alice's tenant is answered as if it did not exist, exactly like a made-up id.
  const ErrorReply foreign = as<ErrorReply>(reg.handle(kBob, SetWeight{a.tenant, 50}));
  const ErrorReply missing = as<ErrorReply>(reg.handle(kBob, SetWeight{999, 50}));
  EXPECT_EQ(foreign.code, StatusCode::not_found);
  EXPECT_EQ(foreign.message, fmt::format("tenant {}: no such tenant of uid 1001", a.tenant));
  EXPECT_EQ(missing.code, StatusCode::not_found);
  EXPECT_EQ(reg.tenants().at(a.tenant).info.weight, 1u) << "the refused request changed nothing";
  as<Ack>(reg.handle(kAlice, SetWeight{a.tenant, 5}));
  EXPECT_EQ(reg.tenants().at(a.tenant).info.weight, 5u);
  as<Ack>(reg.handle(kRoot, SetWeight{b.tenant, 7}));
  EXPECT_EQ(reg.tenants().at(b.tenant).info.weight, 7u);

  // Stats: a user counts its own tenants; the daemon-wide rejections only root sees.
  const Stats bob_stats = as<Stats>(reg.handle(kBob, GetStats{}));
  EXPECT_EQ(bob_stats.tenants, 1u);
  EXPECT_EQ(bob_stats.launches, 0u);
  EXPECT_EQ(bob_stats.rejected, 0u);
  const Stats root_stats = as<Stats>(reg.handle(kRoot, GetStats{}));
  EXPECT_EQ(root_stats.tenants, 2u);
  EXPECT_EQ(root_stats.launches, 1u);
  EXPECT_EQ(root_stats.rejected, 2u);

  ASSERT_TRUE(reg.drop(a.tenant, true).is_ok());
  EXPECT_TRUE(as<TenantList>(reg.handle(kAlice, ListTenants{})).tenants.empty());
  EXPECT_EQ(as<Stats>(reg.handle(kRoot, GetStats{})).dropped, 1u);
}

TEST(IpcControl, RegisterMustNameTheCallersOwnPid) {
  TenantRegistry reg = make_registry();
  const ErrorReply spoof = as<ErrorReply>(reg.handle(kBob, lc(kAlice.pid, "spoof")));
  EXPECT_EQ(spoof.code, StatusCode::permission_denied);
  EXPECT_NE(spoof.message.find("field pid: 100 is not the caller's process (200)"), std::string::npos);
  EXPECT_TRUE(reg.tenants().empty());
  // Root may register another process (a launcher); the tenant is root's.
  const Registered r = as<Registered>(reg.handle(kRoot, lc(4242, "launched")));
  EXPECT_EQ(reg.tenants().at(r.tenant).owner.uid, 0u);
  EXPECT_TRUE(as<TenantList>(reg.handle(kAlice, ListTenants{})).tenants.empty());
}

TEST(IpcControl, GoodbyeRemovesAndADisconnectDropsTheCallersTenants) {
  TenantRegistry reg = make_registry();
  as<Registered>(reg.handle(kAlice, lc(kAlice.pid, "a1")));
  as<Registered>(reg.handle(kAlice, lc(kAlice.pid, "a2")));
  as<Registered>(reg.handle(kBob, lc(kBob.pid, "b")));
  as<Ack>(reg.handle(kAlice, Bye{ByeReason::exit}));
  EXPECT_EQ(reg.tenants().size(), 1u);
  reg.disconnected(kAlice);  // nothing left of Alice's: nothing dropped
  EXPECT_EQ(as<Stats>(reg.handle(kRoot, GetStats{})).dropped, 0u);
  reg.disconnected(kBob);
  EXPECT_TRUE(reg.tenants().empty());
  EXPECT_EQ(as<Stats>(reg.handle(kRoot, GetStats{})).dropped, 1u);
}

// A tenant belongs to the connection that registered it: a process with two connections that
// closes one (or says goodbye on it) keeps the tenants of the other.
TEST(IpcControl, TenantsBelongToTheirConnectionNotJustTheirProcess) {
  TenantRegistry reg = make_registry();
  PeerCredentials first = kAlice, second = kAlice;
  first.connection = 1;
  second.connection = 2;
  as<Registered>(reg.handle(first, lc(kAlice.pid, "a1")));
  as<Registered>(reg.handle(second, lc(kAlice.pid, "a2")));
  reg.disconnected(first);
  ASSERT_EQ(reg.tenants().size(), 1u);
  EXPECT_EQ(reg.tenants().begin()->second.info.name, "a2");
  as<Registered>(reg.handle(first, lc(kAlice.pid, "a3")));
  as<Ack>(reg.handle(first, Bye{ByeReason::exit}));
  ASSERT_EQ(reg.tenants().size(), 1u);
  EXPECT_EQ(reg.tenants().begin()->second.info.name, "a2");
}

// One user cannot make rings without end; root is not limited.
TEST(IpcControl, AUserHasAtMostTheTenantLimit) {
  TenantRegistry reg = make_registry();
  for (int i = 0; i < kTenantsPerUser; ++i) as<Registered>(reg.handle(kAlice, lc(kAlice.pid, "a")));
  const Message refused = reg.handle(kAlice, lc(kAlice.pid, "one more"));
  ASSERT_TRUE(std::holds_alternative<ErrorReply>(refused));
  EXPECT_NE(std::get<ErrorReply>(refused).message.find("the limit"), std::string::npos);
  as<Registered>(reg.handle(kBob, lc(kBob.pid, "b")));  // another user is not affected
  as<Registered>(reg.handle(kRoot, lc(kRoot.pid, "r")));
}

// LC is granted, not claimed: a user outside the access list is refused with the reason, or
// admitted as BE when it asks for that; a group member, root, and a process under a root grant
// for its user are admitted; a grant ends with its connection, and only root may grant.
TEST(IpcControl, LcIsGrantedNotClaimed) {
  TenantRegistry reg = make_registry(LcAccess{{1000}, {5000}, "alice, group 5000"});
  const PeerCredentials carol{300, 1002, 1002};
  const ErrorReply refused = as<ErrorReply>(reg.handle(carol, lc(carol.pid, "carol-svc")));
  EXPECT_EQ(refused.code, StatusCode::permission_denied);
  EXPECT_NE(refused.message.find("uid 1002 may not register latency-critical tenants (allowed: alice, group 5000)"), std::string::npos)
      << refused.message;
  RegisterTenant or_be = lc(carol.pid, "carol-svc");
  or_be.on_lc_refused = LcRefusal::best_effort;
  const Registered as_be = as<Registered>(reg.handle(carol, or_be));
  EXPECT_EQ(as_be.cls, TenantClass::best_effort);
  EXPECT_NE(as_be.lc_refused.find("may not register latency-critical"), std::string::npos);
  EXPECT_EQ(reg.tenants().at(as_be.tenant).info.cls, TenantClass::best_effort) << "the daemon's books say BE";
  EXPECT_EQ(reg.tenants().at(as_be.tenant).info.latency_target_ns, 0u);
  EXPECT_EQ(reg.lc_refused(), 2u);
  EXPECT_EQ(as<Stats>(reg.handle(kRoot, GetStats{})).lc_refused, 2u);
  EXPECT_EQ(as<Registered>(reg.handle(kAlice, lc(kAlice.pid, "a"))).cls, TenantClass::latency_critical);
  PeerCredentials dave{400, 1003, 1003};
  dave.groups = {27, 5000};
  EXPECT_EQ(as<Registered>(reg.handle(dave, lc(dave.pid, "d"))).cls, TenantClass::latency_critical) << "a supplementary group";
  EXPECT_EQ(as<Registered>(reg.handle(kRoot, lc(kRoot.pid, "r"))).cls, TenantClass::latency_critical);

  // A grant: processes of uid 1002 below this process (a child) may register LC.
  EXPECT_EQ(as<ErrorReply>(reg.handle(carol, GrantLc{1002, "slurm-1.0"})).code, StatusCode::permission_denied);
  PeerCredentials stepd{::getpid(), 0, 0};
  stepd.connection = 77;
  ASSERT_TRUE(std::holds_alternative<Ack>(reg.handle(stepd, GrantLc{1002, "slurm-1.0"})));
  EXPECT_TRUE(reg.holds_tenant(stepd)) << "a grant's connection is kept open like a tenant's";
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const PeerCredentials carol_task{child, 1002, 1002};
  EXPECT_EQ(as<Registered>(reg.handle(carol_task, lc(child, "carol-job"))).cls, TenantClass::latency_critical);
  const PeerCredentials other_user_task{child, 1003, 1003};
  EXPECT_TRUE(std::holds_alternative<ErrorReply>(reg.handle(other_user_task, lc(child, "not-for-1003")))) << "a grant is for its user";
  EXPECT_TRUE(std::holds_alternative<ErrorReply>(reg.handle(carol, lc(carol.pid, "outside")))) << "a grant is for its process tree";
  reg.disconnected(stepd);
  EXPECT_TRUE(std::holds_alternative<ErrorReply>(reg.handle(carol_task, lc(child, "after")))) << "a grant ends with its connection";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(descends_from(child, ::getpid())) << "a process that is gone descends from nobody";
}

// The registry keeps the quota the maker granted with the tenant's record (the daemon's books), shows
// it and the use the daemon noted in the list, and drops it with the tenant when its connection ends.
TEST(IpcControl, ATenantsQuotaLivesAndLeavesWithItsRecord) {
  TenantRegistry reg([](uint64_t id, const PeerCredentials&, const RegisterTenant& r) -> Result<TenantRegistry::Made> {
    return TenantRegistry::Made{fmt::format("/concord-{}", id), "0", MemoryQuota{r.memory_bytes, r.memory_bytes}};
  }, LcAccess{{1000}, {}, "alice"});
  RegisterTenant asked = lc(kAlice.pid, "a");
  asked.memory_bytes = 8 << 20;
  const Registered r = as<Registered>(reg.handle(kAlice, asked));
  ASSERT_EQ(reg.tenants().size(), 1u);
  EXPECT_EQ(reg.tenants().at(r.tenant).memory, (MemoryQuota{8 << 20, 8 << 20}));
  EXPECT_EQ(reg.tenants().at(r.tenant).device, "0");
  ASSERT_TRUE(reg.note_memory(r.tenant, 3 << 20, 5 << 20).is_ok());
  EXPECT_FALSE(reg.note_memory(r.tenant + 1, 1, 1).is_ok());
  const TenantList list = as<TenantList>(reg.handle(kAlice, ListTenants{}));
  ASSERT_EQ(list.tenants.size(), 1u);
  EXPECT_EQ(list.tenants[0].memory, (TenantMemory{8 << 20, 8 << 20, 3 << 20, 5 << 20}));
  reg.disconnected(kAlice);
  EXPECT_TRUE(reg.tenants().empty());
}

TEST(IpcControl, AFailedChannelRefusesTheRegistration) {
  TenantRegistry reg([](uint64_t, const PeerCredentials&, const RegisterTenant&) -> Result<TenantRegistry::Made> {
    return Status::io_error("shared memory /x.up: shm_open: No space left on device");
  }, LcAccess{{1000}, {}, "alice"});
  const ErrorReply e = as<ErrorReply>(reg.handle(kAlice, lc(kAlice.pid, "a")));
  EXPECT_EQ(e.code, StatusCode::io_error);
  EXPECT_NE(e.message.find("No space left"), std::string::npos);
  EXPECT_TRUE(reg.tenants().empty());
}

// Credentials handed out in the order connections are accepted.
class QueuedCredentials final : public CredentialSource {
 public:
  void push(PeerCredentials c) {
    std::lock_guard lock(mutex_);
    queue_.push_back(c);
  }
  Result<PeerCredentials> peer(int) const override {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return Status::internal("test: no credentials queued");
    const PeerCredentials c = queue_.front();
    queue_.pop_front();
    return c;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::deque<PeerCredentials> queue_;
};

// A server on its own thread, over a registry only that thread touches.
class IpcControlServer : public ::testing::Test {
 protected:
  void start(const CredentialSource& creds, ControlServerOptions options = {}) {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("concord-ctl-{}-{}", ::getpid(), counter_++);
    std::filesystem::create_directories(dir_);
    options.path = (dir_ / "concordd.sock").string();
    path_ = options.path;
    Result<ControlServer> server = ControlServer::listen(options, creds, registry_);
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    server_.emplace(std::move(*server));
    thread_ = std::thread([this] {
      while (!stop_) {
        if (!server_->serve_once(10ms).is_ok()) return;
      }
    });
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  Result<Message> call(const Message& m) {
    Result<ControlClient> c = ControlClient::connect(path_);
    if (!c.is_ok()) return c.status();
    return c->call(m, 2s);
  }
  KernelCredentials kernel_;  // outlives the server, which keeps a pointer to it
  TenantRegistry registry_ = make_registry();
  std::optional<ControlServer> server_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::filesystem::path dir_;
  std::string path_;
  static inline int counter_ = 0;
};

TEST_F(IpcControlServer, SocketFileHasTheModeAndGroup) {
  ControlServerOptions options;
  options.gid = ::getgid();
  start(kernel_, options);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, ::getgid());
}

TEST_F(IpcControlServer, RealClientRegistersAsItself) {
  start(kernel_);
  // A tenant's connection stays open for as long as it lives (its end drops the tenant).
  Result<ControlClient> me = ControlClient::connect(path_);
  ASSERT_TRUE(me.is_ok()) << me.status().to_string();
  Result<Message> r = me->call(RegisterTenant{TenantClass::best_effort, 0, 2, ::getpid(), "me", ""}, 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Registered reg = as<Registered>(*r);
  Result<Message> list = call(ListTenants{});
  ASSERT_TRUE(list.is_ok()) << list.status().to_string();
  const TenantList l = as<TenantList>(*list);
  ASSERT_EQ(l.tenants.size(), 1u);
  EXPECT_EQ(l.tenants[0].id, reg.tenant);
  EXPECT_EQ(l.tenants[0].uid, ::getuid());
  EXPECT_EQ(l.tenants[0].pid, ::getpid());
  // A pid not its own is refused by what the kernel says of the caller (root may name any).
  Result<Message> spoof = me->call(RegisterTenant{TenantClass::best_effort, 0, 2, ::getpid() + 1, "not-me", ""}, 2s);
  ASSERT_TRUE(spoof.is_ok());
  if (::getuid() == 0) {
    as<Registered>(*spoof);
  } else {
    EXPECT_EQ(as<ErrorReply>(*spoof).code, StatusCode::permission_denied);
  }
}

TEST_F(IpcControlServer, ForeignUsersThroughTheSocket) {
  QueuedCredentials creds;
  start(creds);
  creds.push(kAlice);
  Result<ControlClient> alice = ControlClient::connect(path_);
  ASSERT_TRUE(alice.is_ok()) << alice.status().to_string();
  Result<Message> r = alice->call(lc(kAlice.pid, "alice-svc"), 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const uint64_t tenant = as<Registered>(*r).tenant;
  creds.push(kBob);
  r = call(ListTenants{});
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(as<TenantList>(*r).tenants.empty());
  creds.push(kBob);
  r = call(SetWeight{tenant, 9});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(as<ErrorReply>(*r).code, StatusCode::not_found);
  creds.push(kRoot);
  r = call(ListTenants{});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(as<TenantList>(*r).tenants.size(), 1u);
}

TEST_F(IpcControlServer, MalformedFramesAreRefusedByNameAndDropOnlyTheirClient) {
  start(kernel_);
  Result<ControlClient> good = ControlClient::connect(path_);
  ASSERT_TRUE(good.is_ok());
  Result<ControlClient> bad = ControlClient::connect(path_);
  ASSERT_TRUE(bad.is_ok());
  std::vector<uint8_t> garbage(kHeaderBytes, 0x41);
  Result<Message> r = bad->call_raw(garbage, 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_NE(as<ErrorReply>(*r).message.find("field magic"), std::string::npos);
  // A well-formed frame of a reply type is not a request.
  Result<std::vector<uint8_t>> reply_frame = encode(Ack{});
  ASSERT_TRUE(reply_frame.is_ok());
  Result<ControlClient> wrong = ControlClient::connect(path_);
  ASSERT_TRUE(wrong.is_ok());
  r = wrong->call_raw(*reply_frame, 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_NE(as<ErrorReply>(*r).message.find("not carried on the control request"), std::string::npos);
  // The refused clients were disconnected; the good one still gets answers.
  Result<Message> again = bad->call_raw(garbage, 500ms);
  EXPECT_FALSE(again.is_ok());
  r = good->call(GetStats{}, 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  as<Stats>(*r);
  EXPECT_EQ(server_->malformed(), 2u);
}

// One user holding connections cannot lock the others out: past its cap its new connections are
// refused by name, while another user (and root) are served at once.
TEST_F(IpcControlServer, AUsersConnectionsAreCappedOthersAreServed) {
  QueuedCredentials creds;
  ControlServerOptions options;
  options.max_clients_per_uid = 4;
  start(creds, options);
  std::vector<ControlClient> held;
  for (int i = 0; i < 4; ++i) {
    creds.push(kBob);
    Result<ControlClient> c = ControlClient::connect(path_);
    ASSERT_TRUE(c.is_ok());
    held.push_back(std::move(*c));
  }
  creds.push(kBob);
  Result<Message> refused = call(ListTenants{});
  ASSERT_TRUE(refused.is_ok()) << refused.status().to_string();
  EXPECT_NE(as<ErrorReply>(*refused).message.find("uid 1001 holds 4 connections, the limit per user"), std::string::npos);
  for (PeerCredentials who : {kAlice, kRoot}) {
    creds.push(who);
    const auto t0 = std::chrono::steady_clock::now();
    Result<Message> r = call(ListTenants{});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    as<TenantList>(*r);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
  }
  EXPECT_EQ(server_->refused(), 1u);
  // One of Bob's closes: he may connect again.
  held.pop_back();
  std::this_thread::sleep_for(50ms);
  creds.push(kBob);
  Result<Message> again = call(ListTenants{});
  ASSERT_TRUE(again.is_ok());
  as<TenantList>(*again);
}

// A refused connection is closed at once; a client whose request goes out after that still reads
// the reason instead of "broken pipe".
TEST_F(IpcControlServer, ARefusalClosedBeforeTheRequestIsStillRead) {
  QueuedCredentials creds;
  ControlServerOptions options;
  options.max_clients_per_uid = 1;
  start(creds, options);
  creds.push(kBob);
  Result<ControlClient> held = ControlClient::connect(path_);
  ASSERT_TRUE(held.is_ok());
  creds.push(kBob);
  Result<ControlClient> late = ControlClient::connect(path_);
  ASSERT_TRUE(late.is_ok());
  pollfd p{late->fd(), POLLRDHUP, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);  // the server has refused and closed
  Result<Message> r = late->call(ListTenants{}, 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_NE(as<ErrorReply>(*r).message.find("uid 1001 holds 1 connections, the limit per user"), std::string::npos);
}

// A connection that says nothing, or stops halfway through a frame, is closed after its timeout;
// one that holds a tenant stays open however long it is silent.
TEST_F(IpcControlServer, IdleAndHalfSentConnectionsTimeOutTenantsDoNot) {
  ControlServerOptions options;
  options.idle_timeout = 100ms;
  options.frame_timeout = 100ms;
  start(kernel_, options);
  Result<ControlClient> idle = ControlClient::connect(path_);
  Result<ControlClient> half = ControlClient::connect(path_);
  Result<ControlClient> tenant = ControlClient::connect(path_);
  ASSERT_TRUE(idle.is_ok() && half.is_ok() && tenant.is_ok());
  Result<Message> r = tenant->call(RegisterTenant{TenantClass::best_effort, 0, 1, ::getpid(), "quiet", ""}, 2s);
  ASSERT_TRUE(r.is_ok());
  as<Registered>(*r);
  Result<std::vector<uint8_t>> frame = encode(ListTenants{});
  ASSERT_TRUE(frame.is_ok());
  ASSERT_EQ(::send(half->fd(), frame->data(), kHeaderBytes / 2, MSG_NOSIGNAL), static_cast<ssize_t>(kHeaderBytes / 2));
  std::this_thread::sleep_for(400ms);
  for (ControlClient* closed : {&*idle, &*half}) {
    pollfd p{closed->fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 1000), 1);
    char c = 0;
    EXPECT_EQ(::recv(closed->fd(), &c, 1, MSG_DONTWAIT), 0) << "the server did not close an expired connection";
  }
  EXPECT_EQ(server_->timed_out(), 2u);
  // The tenant's connection still answers, and its tenant is still there.
  r = tenant->call(ListTenants{}, 2s);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(as<TenantList>(*r).tenants.size(), 1u);
}

// Connections in all: past the limit a new one is refused by name.
TEST_F(IpcControlServer, ConnectionsInAllAreCapped) {
  ControlServerOptions options;
  options.max_clients = 2;
  start(kernel_, options);
  Result<ControlClient> a = ControlClient::connect(path_);
  Result<ControlClient> b = ControlClient::connect(path_);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  std::this_thread::sleep_for(50ms);
  Result<Message> r = call(ListTenants{});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_NE(as<ErrorReply>(*r).message.find("2 connections, the limit"), std::string::npos);
}

// Out of descriptors, the listening socket stays readable and accept keeps failing: the server
// waits instead of spinning (a few serve_once calls in 300 ms, not thousands), and accepts the
// waiting connection once descriptors are free again. In a child: it lowers its own fd limit.
TEST(IpcControl, OutOfDescriptorsTheServerWaitsInsteadOfSpinning) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("concord-emfile-{}", ::getpid());
    std::filesystem::create_directories(dir);
    KernelCredentials creds;
    TenantRegistry registry = make_registry();
    ControlServerOptions options;
    options.path = (dir / "s.sock").string();
    Result<ControlServer> server = ControlServer::listen(options, creds, registry);
    if (!server.is_ok()) ::_exit(10);
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = 64;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(11);
    std::vector<int> filler;
    for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) filler.push_back(fd);
    if (filler.empty()) ::_exit(12);
    ::close(filler.back());  // one for the client's socket
    filler.pop_back();
    Result<ControlClient> client = ControlClient::connect(options.path);
    if (!client.is_ok()) ::_exit(13);
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < 300ms) {
      if (!server->serve_once(100ms).is_ok()) ::_exit(14);
      ++calls;
    }
    if (server->clients() != 0) ::_exit(15);
    if (calls > 30) ::_exit(16);  // spinning: every poll returns at once
    for (int fd : filler) ::close(fd);
    for (int i = 0; i < 50 && server->clients() == 0; ++i) (void)server->serve_once(10ms);
    if (server->clients() != 1) ::_exit(17);
    std::filesystem::remove_all(dir);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10 listen, 11 setrlimit, 12-13 setup, 14 serve, 15 accepted past the limit, "
                                   "16 spun, 17 not accepted once descriptors were free";
}

// A tenant process registers through the socket and is killed with SIGKILL: the server sees its
// connection end and drops its tenant; a second process that says goodbye is not counted dropped.
TEST_F(IpcControlServer, AKilledTenantProcessIsDroppedOthersKeepBeingServed) {
  QueuedCredentials creds;
  start(creds);
  const auto spawn = [&](bool say_bye) {
    int go[2], registered[2];
    EXPECT_EQ(::pipe(go), 0);
    EXPECT_EQ(::pipe(registered), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      char c = 0;
      if (::read(go[0], &c, 1) != 1) ::_exit(2);
      Result<ControlClient> client = ControlClient::connect(path_);
      if (!client.is_ok()) ::_exit(3);
      Result<Message> r = client->call(RegisterTenant{TenantClass::best_effort, 0, 1, ::getpid(), "victim", ""}, 2s);
      if (!r.is_ok() || !std::holds_alternative<Registered>(*r)) ::_exit(4);
      if (say_bye) {
        r = client->call(Bye{ByeReason::exit}, 2s);
        ::_exit(r.is_ok() && std::holds_alternative<Ack>(*r) ? 0 : 5);
      }
      if (::write(registered[1], &c, 1) != 1) ::_exit(6);
      for (;;) ::pause();
    }
    creds.push(PeerCredentials{child, 1000, 1000});
    EXPECT_EQ(::write(go[1], "g", 1), 1);
    if (!say_bye) {
      char c = 0;
      EXPECT_EQ(::read(registered[0], &c, 1), 1);
      ::kill(child, SIGKILL);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    for (int fd : {go[0], go[1], registered[0], registered[1]}) ::close(fd);
    return status;
  };
  const int killed = spawn(false);
  EXPECT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL) << killed;
  const int clean = spawn(true);
  EXPECT_TRUE(WIFEXITED(clean) && WEXITSTATUS(clean) == 0) << clean;
  // The server notices the ended connections on its next polls; meanwhile it keeps answering.
  Stats stats;
  for (int i = 0; i < 200; ++i) {
    creds.push(kRoot);
    Result<Message> r = call(GetStats{});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    stats = as<Stats>(*r);
    if (stats.tenants == 0 && stats.dropped == 1) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(stats.tenants, 0u);
  EXPECT_EQ(stats.dropped, 1u) << "the killed tenant dropped, the one that said goodbye not";
}

// Runs `body` in a child process that became uid/gid 65534 (nobody/nogroup); its exit status.
template <typename Body>
int as_nobody(Body body) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

// Real users (needs root to become another): the socket file's mode and group keep a user outside
// the group from connecting at all; one inside it sees and steers only its own tenants.
TEST_F(IpcControlServer, RealOtherUserIsKeptOutByModeAndGroupThenByOwnership) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run a child as another user";
  ControlServerOptions options;
  options.gid = 0;
  start(kernel_, options);
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                         std::filesystem::perms::others_exec);
  const std::string path = path_;
  const int outside = as_nobody([&] {
    Result<ControlClient> c = ControlClient::connect(path);
    return !c.is_ok() && c.status().code() == StatusCode::permission_denied ? 0 : 1;
  });
  EXPECT_EQ(outside, 0) << "a user outside the socket's group connected";
  ASSERT_EQ(::chown(path_.c_str(), static_cast<uid_t>(-1), 65534), 0);
  Result<ControlClient> root = ControlClient::connect(path_);
  ASSERT_TRUE(root.is_ok()) << root.status().to_string();
  Result<Message> mine = root->call(RegisterTenant{TenantClass::best_effort, 0, 1, ::getpid(), "root-job", ""}, 2s);
  ASSERT_TRUE(mine.is_ok()) << mine.status().to_string();
  const uint64_t root_tenant = as<Registered>(*mine).tenant;
  const int inside = as_nobody([&] {
    Result<ControlClient> c = ControlClient::connect(path);
    if (!c.is_ok()) return 2;
    Result<Message> r = c->call(RegisterTenant{TenantClass::best_effort, 0, 1, ::getpid(), "nobody-job", ""}, 2s);
    if (!r.is_ok() || !std::holds_alternative<Registered>(*r)) return 3;
    r = c->call(ListTenants{}, 2s);
    if (!r.is_ok() || !std::holds_alternative<TenantList>(*r)) return 4;
    const auto& seen = std::get<TenantList>(*r).tenants;
    if (seen.size() != 1 || seen[0].name != "nobody-job" || seen[0].uid != 65534) return 5;
    r = c->call(SetWeight{root_tenant, 9}, 2s);
    if (!r.is_ok() || !std::holds_alternative<ErrorReply>(*r)) return 6;
    return std::get<ErrorReply>(*r).code == StatusCode::not_found ? 0 : 7;
  });
  EXPECT_EQ(inside, 0) << "the other user's session went wrong at step " << inside;
  // The other user's process ended: only root's tenant is left (the server may take a poll to
  // notice the ended connection).
  Result<Message> all = call(ListTenants{});
  for (int i = 0; i < 100 && all.is_ok() && as<TenantList>(*all).tenants.size() != 1; ++i) {
    std::this_thread::sleep_for(10ms);
    all = call(ListTenants{});
  }
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(as<TenantList>(*all).tenants.size(), 1u);
  EXPECT_EQ(as<TenantList>(*all).tenants[0].name, "root-job");
}

// A second server on a live server's path fails, naming its pid, and leaves its socket in place;
// the first goes on serving. Its socket is removed when it ends; a server never removes another's.
TEST(IpcControl, ASecondServerNeverTakesOverALiveSocket) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("concord-ctl-twice-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.sock").string();
  TenantRegistry reg = make_registry();
  KernelCredentials creds;
  ControlServerOptions o;
  o.path = path;
  std::optional<Result<ControlServer>> first(ControlServer::listen(o, creds, reg));
  ASSERT_TRUE(first->is_ok()) << first->status().to_string();
  Result<ControlServer> second = ControlServer::listen(o, creds, reg);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::already_exists);
  EXPECT_NE(second.status().message().find(fmt::format("a live server (pid {}) serves it", ::getpid())), std::string::npos)
      << second.status().message();
  ASSERT_TRUE(std::filesystem::exists(path)) << "the live server's socket was removed";
  std::atomic<bool> stop{false};
  std::thread serving([&] {
    while (!stop) (void)(*first)->serve_once(5ms);
  });
  Result<ControlClient> c = ControlClient::connect(path);
  ASSERT_TRUE(c.is_ok());
  EXPECT_TRUE(c->call(GetStats{}, 2s).is_ok()) << "the first server still answers";
  stop = true;
  serving.join();
  // A file put in its place after it bound is not its own: left alone when it ends.
  std::filesystem::rename(path, dir / "moved.sock");
  std::ofstream(path) << "someone else's";
  first.reset();
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
  std::filesystem::rename(dir / "moved.sock", path);
  Result<ControlServer> third = ControlServer::listen(o, creds, reg);
  ASSERT_TRUE(third.is_ok()) << "a stale socket is replaced: " << third.status().to_string();
  std::filesystem::remove_all(dir);
}

TEST(IpcControl, ListenReplacesAStaleSocketButNoOtherFile) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("concord-ctl-stale-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.sock").string();
  TenantRegistry reg = make_registry();
  KernelCredentials creds;
  const auto at = [](const std::string& p) {
    ControlServerOptions o;
    o.path = p;
    return o;
  };
  {
    Result<ControlServer> first = ControlServer::listen(at(path), creds, reg);
    ASSERT_TRUE(first.is_ok());
    // A daemon that died leaves its socket file: copy it aside as a stale one.
    std::filesystem::create_hard_link(path, dir / "stale.sock");
  }
  std::filesystem::rename(dir / "stale.sock", path);
  Result<ControlServer> second = ControlServer::listen(at(path), creds, reg);
  EXPECT_TRUE(second.is_ok()) << second.status().to_string();
  const std::string plain = (dir / "plain").string();
  std::ofstream(plain) << "x";
  Result<ControlServer> third = ControlServer::listen(at(plain), creds, reg);
  ASSERT_FALSE(third.is_ok());
  EXPECT_NE(third.status().message().find("is not a socket"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(plain));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace concord::ipc
