// concordd end to end on the CPU: fake tenant processes (fork) register through TenantClient,
// post launch notices, wait for their releases, "run" each launch for a while (a sleep) and post
// its completion, against a daemon in this process (LiveSource + RemoteBackend + the real engine
// and policies). The tests read what each tenant was told and when.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "concord/estimator.h"
#include "daemon/daemon.h"
#include "daemon/lease_runner.h"
#include "daemon/live_source.h"
#include "ipc/control_socket.h"
#include "ipc/tenant_client.h"

namespace concord::daemon {
namespace {

using namespace std::chrono_literals;

struct Script {
  ipc::RegisterTenant info;
  int launches = 10;
  int per_request = 0;  // LC: launches per request between request boundaries (0: no boundaries)
  ipc::Dim3 grid{64, 1, 1}, block{128, 1, 1};
  std::chrono::microseconds run{2000};  // the "kernel": a sleep between release and completion
  bool hang_on_first = false;           // never completes its first launch (the test kills it)
  bool after_yield = false;             // BE: launches once its lease yields to someone (the policy saw the LC)
};

// What a tenant reports to the test, one fixed-size record each.
struct Record {
  uint32_t kind = 0;  // 1: a launch; 2: an SM-set announcement; 3: the end (pass-through or not)
  uint32_t sm_set = 0;
  uint64_t seq = 0;
  uint8_t priority = 0;
  uint8_t pass = 0;
  int64_t released_ns = 0;
  int64_t done_ns = 0;
  std::array<uint64_t, 4> words{};
};

ipc::RegisterTenant lc(const std::string& name, uint64_t target_ms = 50) {
  return ipc::RegisterTenant{TenantClass::latency_critical, target_ms * 1'000'000, 1, 0, name, ""};
}
ipc::RegisterTenant be(const std::string& name) { return ipc::RegisterTenant{TenantClass::best_effort, 0, 1, 0, name, ""}; }

void put(int fd, const Record& r) {
  if (::write(fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) ::_exit(5);
}

// One launch of a fake tenant as the interception library makes it: under a per-launch lease,
// notice and wait for the decision; under an open one, a BE tenant waits while its gate is closed
// and an LC tenant raises its flag, then it launches and notices. Returns the launch's seq and
// its priority (0 when the client turned pass-through). `admitted_ns`, when given, is when the
// launch was let through (its gate found open, or its flag raised): what a check of holding reads,
// since a process descheduled between that moment and its notice is not a launch released late.
std::pair<uint64_t, ipc::Priority> start_launch(ipc::TenantClient& c, const ipc::LaunchNotice& n, int64_t* admitted_ns = nullptr) {
  ipc::LeaseTerms terms = c.lease();
  if (terms.gate == LeaseGate::per_launch) {
    Result<uint64_t> seq = c.notice(n);
    if (!seq.is_ok() || *seq == 0) return {0, ipc::Priority::normal};
    Result<ipc::Decision> d = c.wait_release(*seq);
    if (!d.is_ok()) return {0, ipc::Priority::normal};
    if (admitted_ns) *admitted_ns = static_cast<int64_t>(ipc::monotonic_ns());
    return {*seq, d->priority};
  }
  if (c.lease().lc_slot != ipc::kNoLcSlot) {
    c.raise_lc(terms.lc_slot);
  } else {
    while (!ipc::admission(terms, c.lc_active()).open && !c.pass_through()) terms = c.wait_open(1'000'000'000);
  }
  if (admitted_ns) *admitted_ns = static_cast<int64_t>(ipc::monotonic_ns());
  Result<uint64_t> seq = c.notice(n, /*launched=*/true);
  if (!seq.is_ok()) return {0, ipc::Priority::normal};
  return {*seq, terms.priority};
}

// Its end: completed on stream 1, and an LC tenant outside a request lowers its flag.
void end_launch(ipc::TenantClient& c, uint64_t seq, bool in_request) {
  (void)c.completed(seq, 1, true);
  const ipc::LeaseTerms terms = c.lease();
  if (!in_request && terms.lc_slot != ipc::kNoLcSlot) c.lower_lc(terms.lc_slot);
}

// The tenant process's body.
[[noreturn]] void run_tenant(const std::string& socket, const Script& s, int out) {
  ipc::TenantClientOptions o;
  o.socket_path = socket;
  o.info = s.info;
  o.wait.stale_after_ns = 500'000'000;
  o.heartbeat_period = 20ms;
  auto client = ipc::TenantClient::connect(o);
  if (!client.is_ok()) {
    std::fprintf(stderr, "tenant %s: %s\n", s.info.name.c_str(), client.status().to_string().c_str());
    ::_exit(3);
  }
  ipc::TenantClient& c = **client;
  for (int i = 0; s.after_yield && i < 400 && c.lease().yield_mask == 0; ++i) std::this_thread::sleep_for(5ms);
  for (int i = 0; i < s.launches; ++i) {
    const bool begins = s.per_request > 0 && i % s.per_request == 0;
    const bool ends = s.per_request > 0 && (i % s.per_request == s.per_request - 1 || i == s.launches - 1);
    if (begins) {
      (void)c.request_begin();
      if (c.lease().lc_slot != ipc::kNoLcSlot) c.raise_lc(c.lease().lc_slot);
    }
    int64_t admitted_ns = 0;
    const auto [seq, priority] = start_launch(c, ipc::LaunchNotice{0, 1, 7, s.grid, s.block, 0, false, 0}, &admitted_ns);
    if (seq == 0 && !c.pass_through()) ::_exit(4);
    Record r;
    r.kind = 1;
    r.seq = seq;
    r.priority = static_cast<uint8_t>(priority);
    r.pass = c.pass_through() ? 1 : 0;
    r.released_ns = admitted_ns != 0 ? admitted_ns : static_cast<int64_t>(ipc::monotonic_ns());
    for (const ipc::SmSetAnnouncement& a : c.take_announcements()) {
      Record ar;
      ar.kind = 2;
      ar.sm_set = a.handle;
      for (int sm : a.sms) {
        if (sm < 256) ar.words[static_cast<size_t>(sm / 64)] |= uint64_t{1} << (sm % 64);
      }
      put(out, ar);
    }
    if (s.hang_on_first && i == 0) {
      put(out, r);
      for (;;) ::pause();
    }
    std::this_thread::sleep_for(s.run);
    r.done_ns = static_cast<int64_t>(ipc::monotonic_ns());
    put(out, r);
    end_launch(c, seq, s.per_request > 0 && !ends);
    if (ends) {
      (void)c.request_end();
      if (c.lease().lc_slot != ipc::kNoLcSlot) c.lower_lc(c.lease().lc_slot);
    }
  }
  Record end;
  end.kind = 3;
  end.pass = c.pass_through() ? 1 : 0;
  put(out, end);
  c.close();
  ::_exit(0);
}

// A tenant process, forked before the daemon's threads start, waiting for go().
class ForkedTenant {
 public:
  ForkedTenant(const std::string& socket, const Script& s) : script_(s) {
    int go[2], out[2];
    EXPECT_EQ(::pipe(go), 0);
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(go[1]);
      ::close(out[0]);
      char b = 0;
      if (::read(go[0], &b, 1) != 1) ::_exit(6);
      run_tenant(socket, s, out[1]);
    }
    ::close(go[0]);
    ::close(out[1]);
    go_ = go[1];
    out_ = out[0];
  }
  ~ForkedTenant() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(go_);
    ::close(out_);
  }
  void go() {
    const char b = 1;
    EXPECT_EQ(::write(go_, &b, 1), 1);
  }
  pid_t pid() const { return pid_; }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
    drain();
  }
  // Waits for the process to end (at most `limit`); its exit status, or -1 when it did not end.
  int finish(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      drain();
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        drain();
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  }
  std::vector<Record> launches() const {
    std::vector<Record> out;
    for (const Record& r : records_) {
      if (r.kind == 1) out.push_back(r);
    }
    return out;
  }
  std::map<uint32_t, std::array<uint64_t, 4>> sets() const {
    std::map<uint32_t, std::array<uint64_t, 4>> out;
    for (const Record& r : records_) {
      if (r.kind == 2) out[r.sm_set] = r.words;
    }
    return out;
  }
  std::optional<Record> end() const {
    for (const Record& r : records_) {
      if (r.kind == 3) return r;
    }
    return std::nullopt;
  }
  const Script& script() const { return script_; }

 private:
  void drain() {
    for (;;) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      Record r;
      const ssize_t n = ::read(out_, &r, sizeof r);
      if (n != static_cast<ssize_t>(sizeof r)) return;
      records_.push_back(r);
    }
  }
  Script script_;
  pid_t pid_ = -1;
  int go_ = -1, out_ = -1;
  bool reaped_ = false;
  std::vector<Record> records_;
};

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("concordd-test-{}-{}", ::getpid(), counter_++);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    tenants_.clear();
    if (daemon_) {
      daemon_->stop();
      const Status st = daemon_->wait();
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      daemon_.reset();
    }
    std::filesystem::remove_all(dir_);
  }
  std::string socket() const { return (dir_ / "concordd.sock").string(); }
  // An in-process tenant's options.
  ipc::TenantClientOptions client_options(const ipc::RegisterTenant& info) const {
    ipc::TenantClientOptions o;
    o.socket_path = socket();
    o.info = info;
    return o;
  }
  // A BE tenant "train" whose first launch is released (and not ended), with `n` more noticed
  // behind it; `client` is null (after a failed expectation) when that could not be set up.
  struct LaunchesAhead {
    std::unique_ptr<ipc::TenantClient> client;
    uint64_t first = 0;
    std::vector<uint64_t> ahead;
  };
  LaunchesAhead be_with_launches_ahead(int n) const {
    LaunchesAhead out;
    auto client = ipc::TenantClient::connect(client_options(be("train")));
    EXPECT_TRUE(client.is_ok()) << client.status().to_string();
    if (!client.is_ok()) return out;
    const ipc::LaunchNotice notice{0, 1, 7, {64, 1, 1}, {128, 1, 1}, 0, false, 0};
    out.first = *(*client)->notice(notice);
    const bool released = (*client)->wait_release(out.first).is_ok();
    EXPECT_TRUE(released) << "the first launch was not released";
    if (!released) return out;
    for (int i = 0; i < n; ++i) out.ahead.push_back(*(*client)->notice(notice));
    out.client = std::move(*client);
    return out;
  }
  ForkedTenant& add(const Script& s) { return *tenants_.emplace_back(std::make_unique<ForkedTenant>(socket(), s)); }
  DaemonOptions options(const std::string& policy) {
    DaemonOptions o;
    o.socket_path = socket();
    o.policy = policy;
    o.device = h100_sxm_spec();
    o.metrics_socket = (dir_ / "metrics.sock").string();
    o.stale_after_ns = 500'000'000;
    o.shm_prefix = fmt::format("/concordd-test-{}", counter_);
    return o;
  }
  void start(const DaemonOptions& o) {
    Result<std::unique_ptr<Daemon>> d = Daemon::start(o);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    daemon_ = std::move(*d);
  }
  // Starts the daemon with `policy`, lets every tenant go and waits for all to end.
  void run_all(const std::string& policy, std::chrono::milliseconds limit = 20s) {
    start(options(policy));
    for (auto& t : tenants_) t->go();
    for (auto& t : tenants_) {
      ASSERT_EQ(t->finish(limit), 0) << "tenant " << t->script().info.name << " did not finish cleanly";
      ASSERT_TRUE(t->end().has_value());
      EXPECT_EQ(t->end()->pass, 0) << t->script().info.name << " fell back to pass-through";
      EXPECT_EQ(static_cast<int>(t->launches().size()), t->script().launches);
    }
  }

  std::filesystem::path dir_;
  std::unique_ptr<Daemon> daemon_;
  std::vector<std::unique_ptr<ForkedTenant>> tenants_;
  static inline int counter_ = 0;
};

// Whether `x` was released while `y` ran. A process notes its release when it wakes, a little
// after the daemon sent it: a release noted within kWake of y's own is not counted (it may have
// been sent before y's notice came).
constexpr int64_t kWake = 2'000'000;
bool during(const Record& x, const Record& y) { return x.released_ns > y.released_ns + kWake && x.released_ns < y.done_ns; }

bool overlaps(const Record& a, const Record& b) { return a.released_ns < b.done_ns && b.released_ns < a.done_ns; }

int count_overlaps(const std::vector<Record>& a, const std::vector<Record>& b) {
  int n = 0;
  for (const Record& x : a) {
    for (const Record& y : b) n += overlaps(x, y) ? 1 : 0;
  }
  return n;
}

TEST_F(DaemonTest, SerialNeverReleasesTwoLaunchesAtOnce) {
  ForkedTenant& a = add({be("a"), 12});
  ForkedTenant& b = add({be("b"), 12});
  run_all("serial");
  EXPECT_EQ(count_overlaps(a.launches(), b.launches()), 0);
}

TEST_F(DaemonTest, StreamsRunsTenantsSideBySide) {
  ForkedTenant& a = add({be("a"), 12});
  ForkedTenant& b = add({be("b"), 12});
  run_all("streams");
  EXPECT_GT(count_overlaps(a.launches(), b.launches()), 0);
}

TEST_F(DaemonTest, PriorityStreamsGivesLcTheHighPriority) {
  ForkedTenant& l = add({lc("lc"), 10});
  ForkedTenant& b = add({be("be"), 10});
  run_all("priority-streams");  // on leases: nobody waits
  for (const Record& r : l.launches()) EXPECT_EQ(r.priority, static_cast<uint8_t>(ipc::Priority::high));
  for (const Record& r : b.launches()) EXPECT_EQ(r.priority, static_cast<uint8_t>(ipc::Priority::normal));
  EXPECT_GT(count_overlaps(l.launches(), b.launches()), 0) << "no holding under priority streams";
}

// Orion on leases: a BE tenant's gate is closed while the flag of a GPU-bound LC tenant (one not
// measured yet counts as GPU-bound) is up; no BE launch starts while an LC request runs.
TEST_F(DaemonTest, OrionHoldsBeWhileLcRuns) {
  Script l{lc("lc"), 9, 3};
  l.run = 8000us;
  Script b{be("be"), 20};
  b.grid = {1'000'000, 1, 1};
  b.block = {1024, 1, 1};
  b.run = 1000us;
  b.after_yield = true;  // not before the policy has seen the LC tenant
  ForkedTenant& lt = add(l);
  ForkedTenant& bt = add(b);
  run_all("orion");
  for (const Record& x : bt.launches()) {
    for (const Record& y : lt.launches()) {
      EXPECT_FALSE(during(x, y)) << "BE launch " << x.seq << " released while LC launch " << y.seq << " ran";
    }
  }
}

// SGDRC on leases: LC at high priority with a flag; a BE tenant keeps launching while that flag is
// up, with at most `be_in_flight` launches in flight.
TEST_F(DaemonTest, SgdrcCapsBeInFlightWhileLcWorkIsInFlight) {
  start(options("sgdrc:be_in_flight=3"));
  auto svc = ipc::TenantClient::connect(client_options(lc("svc")));
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(svc.is_ok() && batch.is_ok());
  const ipc::LeaseTerms l = (*svc)->lease();
  EXPECT_EQ(l.priority, ipc::Priority::high);
  ASSERT_NE(l.lc_slot, ipc::kNoLcSlot);
  ipc::LeaseTerms b;
  for (int i = 0; i < 200; ++i) {
    b = (*batch)->lease();
    if (b.yield_mask != 0) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(b.yield_mask, uint64_t{1} << l.lc_slot);
  EXPECT_EQ(b.on_lc, LcYield::cap);
  EXPECT_EQ(b.be_in_flight_cap, 3u);
  EXPECT_EQ(b.priority, ipc::Priority::normal);
  (*svc)->raise_lc(l.lc_slot);
  const ipc::Admission a = ipc::admission(b, (*batch)->lc_active());
  EXPECT_TRUE(a.open);
  EXPECT_EQ(a.cap, 3u);
  (*svc)->lower_lc(l.lc_slot);
  EXPECT_EQ(ipc::admission(b, (*batch)->lc_active()).cap, 0u);
  (*svc)->close();
  (*batch)->close();
}

// One launch through an in-process client, as its lease says: a sleep, then its completion.
void launch_once(ipc::TenantClient& c, std::chrono::microseconds run = 0us, bool in_request = false) {
  const auto [s, priority] = start_launch(c, ipc::LaunchNotice{0, 1, 7, {1, 1, 1}, {32, 1, 1}, 0, false, 0});
  ASSERT_NE(s, 0u);
  std::this_thread::sleep_for(run);
  end_launch(c, s, in_request);
}

// The daemon's metrics once `pattern` matches them (at most 3 s).
std::string metrics_when(const Daemon& d, const std::regex& pattern) {
  std::string text;
  for (int i = 0; i < 150; ++i) {
    text = d.metrics_text();
    if (std::regex_search(text, pattern)) break;
    std::this_thread::sleep_for(20ms);
  }
  return text;
}

TEST_F(DaemonTest, LcLatencyIsMeasuredPerRequest) {
  start(options("streams"));
  ipc::TenantClientOptions co = client_options(lc("lc"));
  auto client = ipc::TenantClient::connect(co);
  ASSERT_TRUE(client.is_ok());
  ipc::TenantClient& c = **client;
  // Three requests of three 3-ms launches: each request's latency is at least 9 ms.
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(c.request_begin().is_ok());
    for (int i = 0; i < 3; ++i) launch_once(c, 3000us, true);
    ASSERT_TRUE(c.request_end().is_ok());
  }
  const std::string text = metrics_when(*daemon_, std::regex(R"(concord_tenant_requests_total\{[^}]*\} 3\n)"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(concord_tenant_requests_total\{[^}]*name="lc"[^}]*\} (\d+))"))) << text;
  EXPECT_EQ(m[1], "3");
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(quantile="0.5"\} ([0-9.e-]+))"))) << text;
  EXPECT_GE(std::stod(m[1]), 0.009);
  EXPECT_LT(std::stod(m[1]), 1.0);
  // Launches outside request boundaries are requests of their own.
  launch_once(c);
  const std::string after = metrics_when(*daemon_, std::regex(R"(concord_tenant_requests_total\{[^}]*\} 4\n)"));
  EXPECT_NE(after.find("name=\"lc\",class=\"lc\",uid=\"" + std::to_string(::getuid()) + "\"} 4\n"), std::string::npos) << after;
  c.close();
}

TEST_F(DaemonTest, ATenantKilledMidLaunchIsDroppedAndTheOtherFinishes) {
  Script dying{be("dying"), 5};
  dying.hang_on_first = true;
  ForkedTenant& d = add(dying);
  ForkedTenant& b = add({be("b"), 10});
  start(options("serial"));
  d.go();
  // Its first launch is released and "runs" for ever: serial holds every other launch.
  const auto t0 = std::chrono::steady_clock::now();
  while (d.launches().empty() && std::chrono::steady_clock::now() - t0 < 5s) {
    (void)d.finish(10ms);
  }
  ASSERT_EQ(d.launches().size(), 1u);
  b.go();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(b.finish(1ms), -1) << "held behind the running launch";
  d.kill();
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_EQ(b.finish(10s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 5s);
  EXPECT_EQ(b.launches().size(), 10u);
  EXPECT_EQ(b.end()->pass, 0);
  const std::string text = metrics_when(*daemon_, std::regex("concord_dropped_total 1\n"));
  EXPECT_NE(text.find("concord_dropped_total 1\n"), std::string::npos) << text;
}

TEST_F(DaemonTest, ADaemonKilledLeavesItsTenantsRunningPassThrough) {
  // The daemon in a child process (killed with SIGKILL), the tenant in this one.
  DaemonOptions o = options("serial");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    Result<std::unique_ptr<Daemon>> d = Daemon::start(o);
    if (!d.is_ok()) ::_exit(3);
    const char b = 1;
    if (::write(ready[1], &b, 1) != 1) ::_exit(4);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char b = 0;
  ASSERT_EQ(::read(ready[0], &b, 1), 1);
  ::close(ready[0]);
  ipc::TenantClientOptions co = client_options(be("survivor"));
  co.wait.stale_after_ns = 500'000'000;
  co.heartbeat_period = 20ms;
  auto client = ipc::TenantClient::connect(co);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  ipc::TenantClient& c = **client;
  const auto t0 = std::chrono::steady_clock::now();
  int released = 0;
  for (int i = 0; i < 40; ++i) {
    if (i == 10) ::kill(child, SIGKILL);
    Result<uint64_t> seq = c.notice(ipc::LaunchNotice{0, 1, 7, {64, 1, 1}, {128, 1, 1}, 0, false, 0});
    ASSERT_TRUE(seq.is_ok());
    Result<ipc::Decision> d = c.wait_release(*seq);
    ASSERT_TRUE(d.is_ok());
    released += d->verdict == ipc::Verdict::release ? 1 : 0;
    std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(c.completed(*seq, 1, true).is_ok());
  }
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(released, 40);
  EXPECT_TRUE(c.pass_through());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  c.close();
  // Its rings had no names: nothing of the killed daemon is left in /dev/shm.
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_EQ(e.path().filename().string().find(o.shm_prefix.substr(1)), std::string::npos) << e.path();
  }
}

// Another user's client (its uid injected) sees none of this user's tenants and cannot steer them.
class SwitchableCredentials final : public ipc::CredentialSource {
 public:
  Result<ipc::PeerCredentials> peer(int fd) const override {
    Result<ipc::PeerCredentials> p = real_.peer(fd);
    if (p.is_ok() && uid_override >= 0) p->uid = static_cast<uint32_t>(uid_override.load());
    return p;
  }
  std::atomic<int64_t> uid_override{-1};

 private:
  ipc::KernelCredentials real_;
};

TEST_F(DaemonTest, SocketModeGroupAndOwnership) {
  SwitchableCredentials creds;
  DaemonOptions o = options("streams");
  o.credentials = &creds;
  o.socket_gid = ::getgid();
  o.socket_mode = 0660;
  start(o);
  struct stat st {};
  ASSERT_EQ(::stat(socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, ::getgid());

  ipc::TenantClientOptions co = client_options(be("mine"));
  auto client = ipc::TenantClient::connect(co);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  const uint64_t id = (*client)->tenant();
  const uint32_t me = ::getuid();
  const int64_t stranger = me == 4242 ? 4343 : 4242;

  creds.uid_override = stranger;
  Result<ipc::ControlClient> other = ipc::ControlClient::connect(socket());
  ASSERT_TRUE(other.is_ok());
  Result<ipc::Message> list = other->call(ipc::ListTenants{}, 2s);
  ASSERT_TRUE(list.is_ok());
  EXPECT_TRUE(std::get<ipc::TenantList>(*list).tenants.empty());
  Result<ipc::Message> steer = other->call(ipc::SetWeight{id, 100}, 2s);
  ASSERT_TRUE(steer.is_ok());
  ASSERT_TRUE(std::holds_alternative<ipc::ErrorReply>(*steer));
  EXPECT_EQ(std::get<ipc::ErrorReply>(*steer).code, StatusCode::not_found);
  Result<ipc::Message> stats = other->call(ipc::GetStats{}, 2s);
  ASSERT_TRUE(stats.is_ok());
  EXPECT_EQ(std::get<ipc::Stats>(*stats).tenants, 0u);

  creds.uid_override = me;
  Result<ipc::ControlClient> own = ipc::ControlClient::connect(socket());
  ASSERT_TRUE(own.is_ok());
  list = own->call(ipc::ListTenants{}, 2s);
  ASSERT_TRUE(list.is_ok());
  ASSERT_EQ(std::get<ipc::TenantList>(*list).tenants.size(), 1u);
  EXPECT_EQ(std::get<ipc::TenantList>(*list).tenants[0].name, "mine");
  steer = own->call(ipc::SetWeight{id, 100}, 2s);
  ASSERT_TRUE(steer.is_ok());
  EXPECT_TRUE(std::holds_alternative<ipc::Ack>(*steer));
  (*client)->close();
}

TEST_F(DaemonTest, MalformedRingMessagesDropOnlyTheirTenant) {
  start(options("streams"));
  ipc::TenantClientOptions co = client_options(be("liar"));
  // Register by hand, then write garbage into the up ring.
  Result<ipc::ControlClient> c = ipc::ControlClient::connect(socket());
  ASSERT_TRUE(c.is_ok());
  ipc::RegisterTenant info = be("liar");
  info.pid = ::getpid();
  std::vector<int> fds;
  Result<ipc::Message> reg = c->call(info, 2s, fds);
  ASSERT_TRUE(reg.is_ok());
  const auto& registered = std::get<ipc::Registered>(*reg);
  ASSERT_EQ(fds.size(), 4u) << "the rings, the lease page and the board come with the reply";
  EXPECT_FALSE(ipc::TenantChannel::open(registered.channel).is_ok()) << "and have no name";
  ::close(fds[2]);
  ::close(fds[3]);
  Result<ipc::TenantChannel> ch = ipc::TenantChannel::from_fds(fds[0], fds[1], registered.channel);
  ASSERT_TRUE(ch.is_ok()) << ch.status().to_string();
  ch->up().claim(ipc::RingSide::producer, ::getpid(), 1, ipc::monotonic_ns());
  const uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  ASSERT_TRUE(*ch->up().try_push(junk));
  // Meanwhile an honest tenant in this process works normally.
  co.info = be("honest");
  auto honest = ipc::TenantClient::connect(co);
  ASSERT_TRUE(honest.is_ok());
  for (int i = 0; i < 5; ++i) launch_once(**honest);
  EXPECT_FALSE((*honest)->pass_through());
  const auto t0 = std::chrono::steady_clock::now();
  std::string text;
  while (std::chrono::steady_clock::now() - t0 < 3s) {
    text = daemon_->metrics_text();
    if (text.find("concord_rejected_total 1\n") != std::string::npos && text.find("name=\"liar\"") == std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_NE(text.find("concord_rejected_total 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("name=\"liar\""), std::string::npos) << "the liar was dropped";
  (*honest)->close();
}

// GET /metrics over the Unix socket at `path`: the whole reply ("" when it could not connect).
std::string http_get_metrics(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  std::string reply;
  const std::string req = "GET /metrics HTTP/1.0\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

// A metrics client that trickles its request a byte at a time holds the endpoint for 200 ms at
// most, not 200 ms a byte: another reader gets its answer within a second.
TEST_F(DaemonTest, ASlowMetricsClientHoldsNobodyUp) {
  start(options("streams"));
  const std::string path = (dir_ / "metrics.sock").string();
  const auto connect_metrics = [&] {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  };
  std::atomic<bool> stop{false};
  std::thread slow([&] {
    while (!stop) {
      const int fd = connect_metrics();
      for (int i = 0; i < 40 && !stop; ++i) {
        if (::send(fd, "G", 1, MSG_NOSIGNAL) != 1) break;
        std::this_thread::sleep_for(50ms);
      }
      ::close(fd);
    }
  });
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string reply = http_get_metrics(path);
  const auto took = std::chrono::steady_clock::now() - t0;
  stop = true;
  slow.join();
  EXPECT_EQ(reply.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << reply;
  EXPECT_LT(took, 1s) << "the trickling client held the endpoint";
}

// The metrics endpoint speaks the Prometheus text format (over HTTP on a Unix socket).
TEST_F(DaemonTest, PrometheusTextOverTheMetricsSocket) {
  start(options("priority-streams"));
  ipc::TenantClientOptions co = client_options(lc("svc"));
  auto svc = ipc::TenantClient::connect(co);
  co.info = be("batch");
  auto batch = ipc::TenantClient::connect(co);
  ASSERT_TRUE(svc.is_ok() && batch.is_ok());
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE((*svc)->request_begin().is_ok());
    launch_once(**svc);
    launch_once(**svc);
    ASSERT_TRUE((*svc)->request_end().is_ok());
    launch_once(**batch);
  }
  (void)metrics_when(*daemon_, std::regex(R"(concord_tenant_requests_total\{[^}]*name="svc"[^}]*\} 2\n)"));
  const std::string reply = http_get_metrics((dir_ / "metrics.sock").string());
  ASSERT_EQ(reply.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << reply;
  const std::string body = reply.substr(reply.find("\r\n\r\n") + 4);
  // Every line: a comment (# HELP / # TYPE) or `name{labels} value`.
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$)");
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream lines(body);
  int samples = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
    } else {
      EXPECT_TRUE(std::regex_match(line, sample)) << line;
      ++samples;
    }
  }
  EXPECT_GT(samples, 10);
  EXPECT_NE(body.find("concord_tenant_launches_total{tenant=\"1\",device=\"0\",name=\"svc\",class=\"lc\""), std::string::npos) << body;
  EXPECT_NE(body.find("concord_tenant_launches_total{tenant=\"2\",device=\"0\",name=\"batch\",class=\"be\""), std::string::npos) << body;
  EXPECT_NE(body.find("quantile=\"0.99\""), std::string::npos);
  EXPECT_NE(body.find("concord_tenant_completions_total{tenant=\"1\",device=\"0\",name=\"svc\",class=\"lc\",uid=\"" +
                      std::to_string(::getuid()) + "\"} 4\n"),
            std::string::npos)
      << body;
  (*svc)->close();
  (*batch)->close();
}

// Under a lease nothing waits for the daemon; it still takes the notices and completions.
TEST_F(DaemonTest, LeasedTenantsNeverWaitAndStayInTheBooks) {
  start(options("streams"));
  ipc::TenantClientOptions co = client_options(be("fast"));
  co.wait.timeout_ns = 1'000'000;  // would turn pass-through if any launch waited for a decision
  auto client = ipc::TenantClient::connect(co);
  ASSERT_TRUE(client.is_ok());
  ipc::TenantClient& c = **client;
  EXPECT_EQ(c.lease().gate, LeaseGate::open);
  for (int i = 0; i < 50; ++i) launch_once(c);
  EXPECT_FALSE(c.pass_through());
  const std::string text = metrics_when(*daemon_, std::regex(R"(concord_tenant_completions_total\{[^}]*name="fast"[^}]*\} 50\n)"));
  EXPECT_NE(text.find("concord_rejected_total 0\n"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_completions_total\{[^}]*name="fast"[^}]*\} 50\n)"))) << text;
  c.close();
}

// Follow-on: with no LC work, a BE tenant's launch right behind a released one is released before
// that one completes (the host queues ahead of the GPU); with follow_on off it waits for the
// completion (the engine's stream order).
// Waits on another thread (for releases of `c`'s launches). Should the test leave early while the
// wait goes on (a failed ASSERT), the client is closed, which ends the wait (pass-through), so the
// future's destructor does not hang the test.
struct GuardedWait {
  ipc::TenantClient& c;
  std::future<bool> f;
  GuardedWait(ipc::TenantClient& client, std::function<bool()> wait) : c(client), f(std::async(std::launch::async, std::move(wait))) {}
  GuardedWait(const GuardedWait&) = delete;
  GuardedWait& operator=(const GuardedWait&) = delete;
  ~GuardedWait() {
    if (f.valid() && f.wait_for(0s) != std::future_status::ready) c.close();
  }
};

TEST_F(DaemonTest, FollowOnReleasesLaunchesAheadWhileNoLcIsActive) {
  for (const bool follow : {true, false}) {
    SCOPED_TRACE(follow ? "follow_on" : "no follow_on");
    DaemonOptions o = options("orion");
    o.per_launch = true;
    o.follow_on = follow;
    start(o);
    auto [client, first, ahead] = be_with_launches_ahead(8);
    ASSERT_TRUE(client);
    ipc::TenantClient& c = *client;
    GuardedWait waiting(c, [&] {
      for (uint64_t s : (follow ? ahead : std::vector<uint64_t>{ahead.front()})) {
        if (!c.wait_release(s).is_ok()) return false;
      }
      return true;
    });
    std::future<bool>& released = waiting.f;
    if (follow) {
      ASSERT_EQ(released.wait_for(2s), std::future_status::ready) << "launches behind a running one were not released before it ended";
      EXPECT_TRUE(released.get());
      ASSERT_TRUE(c.completed(first, 1, true).is_ok());
      for (uint64_t s : ahead) ASSERT_TRUE(c.completed(s, 1, true).is_ok());
    } else {
      EXPECT_EQ(released.wait_for(500ms), std::future_status::timeout) << "released before its predecessor ended";
      ASSERT_TRUE(c.completed(first, 1, true).is_ok());
      ASSERT_EQ(released.wait_for(2s), std::future_status::ready) << "not released after its predecessor ended";
      EXPECT_TRUE(released.get());
      ASSERT_TRUE(c.completed(ahead.front(), 1, true).is_ok());
    }
    EXPECT_FALSE(c.pass_through());
    c.close();
    daemon_->stop();
    ASSERT_TRUE(daemon_->wait().is_ok());
    daemon_.reset();
  }
}

// Whether the daemon may release a launch ahead is the policy's to say (Policy::repeats_decisions):
// serial orders launches across tenants, so with follow-on on a launch still waits for the one
// before it to end.
TEST_F(DaemonTest, APolicyThatDoesNotRepeatItsDecisionsGetsNoFollowOn) {
  DaemonOptions o = options("serial");
  o.per_launch = true;
  o.follow_on = true;
  start(o);
  auto [client, first, ahead] = be_with_launches_ahead(2);
  ASSERT_TRUE(client);
  ipc::TenantClient& c = *client;
  GuardedWait waiting(c, [&] { return c.wait_release(ahead.front()).is_ok(); });
  EXPECT_EQ(waiting.f.wait_for(500ms), std::future_status::timeout) << "released ahead under serial";
  ASSERT_TRUE(c.completed(first, 1, true).is_ok());
  ASSERT_EQ(waiting.f.wait_for(2s), std::future_status::ready) << "not released after its predecessor ended";
  EXPECT_TRUE(waiting.f.get());
  ASSERT_TRUE(c.completed(ahead.front(), 1, true).is_ok());
  EXPECT_FALSE(c.pass_through());
  c.close();
}

// With a BE depth of 3, follow-on releases stop once three launches are released and not ended,
// and go on as those end.
TEST_F(DaemonTest, BeDepthCapsTheLaunchesReleasedAhead) {
  DaemonOptions o = options("orion");
  o.per_launch = true;
  o.be_depth = 3;
  start(o);
  auto [client, first, ahead] = be_with_launches_ahead(6);
  ASSERT_TRUE(client);
  ipc::TenantClient& c = *client;
  const auto wait = [&c](uint64_t s) { return [&c, s] { return c.wait_release(s).is_ok(); }; };
  // `first` and two behind it: three in flight.
  for (size_t i = 0; i < 2; ++i) {
    GuardedWait w(c, wait(ahead[i]));
    ASSERT_EQ(w.f.wait_for(2s), std::future_status::ready) << "launch " << i << " behind the first was not released ahead";
    EXPECT_TRUE(w.f.get());
  }
  GuardedWait third(c, wait(ahead[2]));
  EXPECT_EQ(third.f.wait_for(300ms), std::future_status::timeout) << "a fourth launch was released while three were in flight";
  ASSERT_TRUE(c.completed(first, 1, true).is_ok());
  ASSERT_EQ(third.f.wait_for(2s), std::future_status::ready) << "not released once one of the three ended";
  EXPECT_TRUE(third.f.get());
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(c.completed(ahead[i], 1, true).is_ok());
  for (size_t i = 3; i < ahead.size(); ++i) {
    GuardedWait w(c, wait(ahead[i]));
    ASSERT_EQ(w.f.wait_for(2s), std::future_status::ready);
    EXPECT_TRUE(w.f.get());
    ASSERT_TRUE(c.completed(ahead[i], 1, true).is_ok());
  }
  EXPECT_FALSE(c.pass_through());
  c.close();
}

// BE launches held while an LC request was open follow on, in order, once it ends, without
// waiting for the launch ahead of them to end (no depth limit).
TEST_F(DaemonTest, HeldBeLaunchesFollowOnOnceLcWorkEnds) {
  DaemonOptions o = options("orion");
  o.per_launch = true;
  start(o);
  ipc::TenantClientOptions co = client_options(be("train"));
  auto batch = ipc::TenantClient::connect(co);
  co.info = lc("svc");
  auto svc = ipc::TenantClient::connect(co);
  ASSERT_TRUE(batch.is_ok() && svc.is_ok());
  ipc::TenantClient& c = **batch;
  const ipc::LaunchNotice n{0, 1, 7, {64, 1, 1}, {128, 1, 1}, 0, false, 0};
  const uint64_t first = *c.notice(n);
  ASSERT_TRUE(c.wait_release(first).is_ok());
  ASSERT_TRUE((*svc)->request_begin().is_ok());
  std::this_thread::sleep_for(100ms);  // the daemon sees the open request before the BE notices
  std::vector<uint64_t> ahead;
  for (int i = 0; i < 4; ++i) ahead.push_back(*c.notice(n));
  GuardedWait waiting(c, [&] {
    for (uint64_t s : ahead) {
      if (!c.wait_release(s).is_ok()) return false;
    }
    return true;
  });
  EXPECT_EQ(waiting.f.wait_for(300ms), std::future_status::timeout) << "BE launches released while an LC request was open";
  ASSERT_TRUE((*svc)->request_end().is_ok());
  ASSERT_EQ(waiting.f.wait_for(2s), std::future_status::ready) << "held BE launches not released once the LC request ended";
  EXPECT_TRUE(waiting.f.get());
  ASSERT_TRUE(c.completed(first, 1, true).is_ok());
  for (uint64_t s : ahead) ASSERT_TRUE(c.completed(s, 1, true).is_ok());
  EXPECT_FALSE(c.pass_through());
  c.close();
  (*svc)->close();
}

// The BE lease of `client` once the daemon's policy has seen every tenant (its yield mask set,
// or `want_mask` reached): at most 2 s.
ipc::LeaseTerms lease_when(ipc::TenantClient& client, uint64_t want_mask) {
  ipc::LeaseTerms t = client.lease();
  for (int i = 0; i < 400 && t.yield_mask != want_mask; ++i) {
    std::this_thread::sleep_for(5ms);
    t = client.lease();
  }
  return t;
}

// An LC tenant killed with its flag up (in a request, its launch running) never lowers it: the
// daemon does, and a BE launch waiting on the gate goes on.
TEST_F(DaemonTest, AKilledLcTenantsFlagIsLoweredForIt) {
  Script dying{lc("dying"), 5, 5};
  dying.hang_on_first = true;
  ForkedTenant& d = add(dying);
  start(options("orion"));
  d.go();
  const auto t0 = std::chrono::steady_clock::now();
  while (d.launches().empty() && std::chrono::steady_clock::now() - t0 < 5s) (void)d.finish(10ms);
  ASSERT_EQ(d.launches().size(), 1u);
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(batch.is_ok());
  ipc::TenantClient& c = **batch;
  const ipc::LeaseTerms terms = lease_when(c, 1);
  ASSERT_EQ(terms.yield_mask, 1u) << "the BE lease yields to the LC tenant";
  ASSERT_EQ(c.lc_active(), 1u) << "its flag is up";
  EXPECT_FALSE(ipc::admission(terms, c.lc_active()).open);
  GuardedWait waiting(c, [&c] {
    const ipc::LeaseTerms t = c.wait_open(5'000'000'000);
    return ipc::admission(t, c.lc_active()).open;
  });
  EXPECT_EQ(waiting.f.wait_for(200ms), std::future_status::timeout) << "went through a closed gate";
  const auto killed = std::chrono::steady_clock::now();
  d.kill();
  ASSERT_EQ(waiting.f.wait_for(2s), std::future_status::ready) << "still waiting behind a dead LC tenant's flag";
  EXPECT_TRUE(waiting.f.get());
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 1s);
  EXPECT_EQ(c.lc_active(), 0u);
  c.close();
}

// An LC tenant maps the board writable: one that scribbles over all of it (every flag up, the
// header garbage) makes the daemon clear the flags of slots it does not hold; nobody else is
// stuck, newcomers still attach, and the daemon goes on serving.
TEST_F(DaemonTest, AScribbledBoardWedgesNobody) {
  start(options("orion"));
  std::optional<Result<ipc::ControlClient>> conn(ipc::ControlClient::connect(socket()));
  ASSERT_TRUE(conn->is_ok());
  ipc::RegisterTenant info = lc("scribbler");
  info.pid = ::getpid();
  std::vector<int> fds;
  Result<ipc::Message> reg = (*conn)->call(info, 2s, fds);
  ASSERT_TRUE(reg.is_ok());
  ASSERT_EQ(fds.size(), 4u);
  void* board = ::mmap(nullptr, ipc::kBoardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[3], 0);
  ASSERT_NE(board, MAP_FAILED) << "an LC tenant's board is writable";
  auto honest_be = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(honest_be.is_ok());
  std::memset(board, 0xff, ipc::kBoardBytes);
  // The scribbler holds slot 0: every other flag is cleared.
  uint64_t active = ~0ull;
  for (int i = 0; i < 200 && active != 1u; ++i) {
    std::this_thread::sleep_for(5ms);
    active = (*honest_be)->lc_active();
  }
  EXPECT_EQ(active, 1u) << "flags of slots nobody holds were left up";
  // A newcomer still attaches, and a BE tenant that yields only to it launches.
  auto late = ipc::TenantClient::connect(client_options(lc("late")));
  ASSERT_TRUE(late.is_ok()) << late.status().to_string();
  for (int i = 0; i < 5; ++i) launch_once(**late);
  // The scribbler goes: its flag with it, and the BE gate opens.
  ::munmap(board, ipc::kBoardBytes);
  for (int fd : fds) ::close(fd);
  conn.reset();  // its connection ends
  bool open = false;
  for (int i = 0; i < 300 && !open; ++i) {
    const ipc::LeaseTerms t = (*honest_be)->wait_open(10'000'000);
    open = ipc::admission(t, (*honest_be)->lc_active()).open;
  }
  EXPECT_TRUE(open) << "the BE gate stayed closed after the scribbler left";
  for (int i = 0; i < 5; ++i) launch_once(**honest_be);
  EXPECT_FALSE((*honest_be)->pass_through());
  EXPECT_FALSE((*late)->pass_through());
  (*late)->close();
  (*honest_be)->close();
}

// Open descriptors of this process (the daemon's and its clients').
size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// 1000 tenants join, launch and leave: every ring, lease page and board slot they had is gone
// (nothing in /dev/shm, no descriptor left open), and the 1001st LC tenant still gets a slot.
TEST_F(DaemonTest, AThousandTenantsJoiningAndLeavingLeaveNothingBehind) {
  start(options("orion"));
  const size_t fds_before = open_fds();
  std::set<std::string> shm_before;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) shm_before.insert(e.path().filename().string());
  for (int i = 0; i < 1000; ++i) {
    auto c = ipc::TenantClient::connect(client_options(i % 2 ? lc(fmt::format("lc{}", i)) : be(fmt::format("be{}", i))));
    ASSERT_TRUE(c.is_ok()) << i << ": " << c.status().to_string();
    launch_once(**c);
    (*c)->close();
  }
  std::optional<Result<ipc::ControlClient>> control(ipc::ControlClient::connect(socket()));
  ASSERT_TRUE(control->is_ok());
  uint64_t left = 1;
  for (int i = 0; i < 300 && left != 0; ++i) {
    Result<ipc::Message> st = (*control)->call(ipc::GetStats{}, 2s);
    ASSERT_TRUE(st.is_ok());
    left = std::get<ipc::Stats>(*st).tenants;
    if (left != 0) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(left, 0u);
  {
    auto last = ipc::TenantClient::connect(client_options(lc("last")));
    ASSERT_TRUE(last.is_ok()) << last.status().to_string();
    EXPECT_NE((*last)->lease().lc_slot, ipc::kNoLcSlot) << "the slots of those that left are free again";
  }
  // The control thread keeps the descriptors of the last registration's reply until its next
  // request.
  ASSERT_TRUE((*control)->call(ipc::GetStats{}, 2s).is_ok());
  control.reset();
  // What the daemon made for them is unmapped and closed once it has removed them.
  size_t fds_after = open_fds();
  for (int i = 0; i < 100 && fds_after > fds_before; ++i) {
    std::this_thread::sleep_for(10ms);
    fds_after = open_fds();
  }
  EXPECT_LE(fds_after, fds_before);
  // Only this daemon's names (its prefix and this process's pid): other test processes running at
  // once create and remove their own meanwhile.
  const std::string mine = fmt::format("{}.{}.", options("orion").shm_prefix.substr(1), ::getpid());
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mine, 0) != 0) continue;
    EXPECT_TRUE(shm_before.count(name)) << "left behind: " << e.path();
  }
}

// The process's resident memory in KiB.
long resident_kib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

// Hostile tenants, as uid nobody where the test runs as root, writing the protocol directly: 100
// idle connections, half-sent frames, garbage, an oversize length, an unknown message type, a
// class out of range, a register flood past the per-user limit, a process killed mid-frame; and
// the rings written directly: a torn write, enums out of range, a scribbled ring header, a flood
// of notices never completed, decisions never read.
// After each the daemon registers a well-behaved tenant within 100 ms, and at the end its memory
// is within 10% of where it started.
TEST_F(DaemonTest, HostileTenantsLeaveTheDaemonServing) {
  DaemonOptions o = options("orion");
  o.socket_mode = 0666;  // nobody may connect
  start(o);
  const auto serve_one = [&](const std::string& after) {
    const auto t0 = std::chrono::steady_clock::now();
    auto c = ipc::TenantClient::connect(client_options(be("good")));
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(c.is_ok()) << after << ": " << c.status().to_string();
    EXPECT_LT(took, 100ms) << after;
    launch_once(**c);
    (*c)->close();
  };
  serve_one("warm-up");

  // Runs `body` in a child process as nobody (when root); the child signals through `ready` when
  // it has done its damage and then waits to be killed (its connections stay open meanwhile).
  const auto hostile = [&](const std::string& what, const std::function<void()>& body) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(ready[0]);
      if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
      body();
      const char c = 1;
      if (::write(ready[1], &c, 1) != 1) ::_exit(4);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char c = 0;
    pollfd p{ready[0], POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1) << what << ": the hostile child did not get through its part";
    ASSERT_EQ(::read(ready[0], &c, 1), 1) << what;
    ::close(ready[0]);
    serve_one(what + " (while it holds on)");
    ::kill(child, SIGKILL);
    int st = 0;
    ::waitpid(child, &st, 0);
    serve_one(what + " (after it was killed)");
  };
  const std::string path = socket();
  const auto raw = [path](const std::vector<uint8_t>& bytes) {
    Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
    if (!c.is_ok()) return;
    (void)::send(c->fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(1ms);
  };
  Result<std::vector<uint8_t>> encoded = ipc::encode(ipc::RegisterTenant{TenantClass::best_effort, 0, 1, ::getpid(), "bad", ""});
  ASSERT_TRUE(encoded.is_ok()) << encoded.status().to_string();
  const std::vector<uint8_t> good = *encoded;

  static std::vector<ipc::ControlClient> held;  // the child's, kept open until it is killed
  static std::vector<ipc::TenantChannel> channels;
  static int last_up_fd = -1;
  // In the child: registers a BE tenant by hand and claims its up ring as the producer (its down
  // ring is never read). The ring, or null when the daemon refused.
  const auto ring_tenant = [&](const std::string& name) -> ipc::SpscRing* {
    Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
    if (!c.is_ok()) return nullptr;
    std::vector<int> fds;
    Result<ipc::Message> reg = c->call(ipc::RegisterTenant{TenantClass::best_effort, 0, 1, ::getpid(), name, ""}, 2s, fds);
    held.push_back(std::move(*c));
    if (!reg.is_ok() || !std::holds_alternative<ipc::Registered>(*reg) || fds.size() != 4) return nullptr;
    last_up_fd = ::dup(fds[0]);
    Result<ipc::TenantChannel> ch = ipc::TenantChannel::from_fds(fds[0], fds[1], std::get<ipc::Registered>(*reg).channel);
    if (!ch.is_ok()) return nullptr;
    channels.push_back(std::move(*ch));
    ipc::SpscRing& up = channels.back().up();
    up.claim(ipc::RingSide::producer, ::getpid(), 1, ipc::monotonic_ns());
    return &up;
  };
  const auto attacks = [&] {
    hostile("100 idle connections", [&] {
      for (int i = 0; i < 100; ++i) {
        Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
        if (c.is_ok()) held.push_back(std::move(*c));
      }
    });
    hostile("50 half-sent frames", [&] {
      for (int i = 0; i < 50; ++i) {
        Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
        if (!c.is_ok()) continue;
        (void)::send(c->fd(), good.data(), ipc::kHeaderBytes / 2 + static_cast<size_t>(i % 6), MSG_NOSIGNAL);
        held.push_back(std::move(*c));
      }
    });
    hostile("200 garbage frames", [&] {
      for (int i = 0; i < 200; ++i) raw(std::vector<uint8_t>(static_cast<size_t>(1 + i * 37 % 500), static_cast<uint8_t>(i)));
    });
    hostile("oversize length, unknown type, class out of range", [&] {
      std::vector<uint8_t> oversize = good;
      oversize[8] = oversize[9] = oversize[10] = oversize[11] = 0xff;
      raw(oversize);
      std::vector<uint8_t> type = good;
      type[6] = 0x77;
      type[7] = 0x77;
      raw(type);
      for (uint8_t cls : {uint8_t{2}, uint8_t{9}, uint8_t{255}}) {
        std::vector<uint8_t> bad = good;
        bad[ipc::kHeaderBytes] = cls;
        raw(bad);
      }
    });
    hostile("a register flood past the per-user limit", [&] {
      for (int i = 0; i < 80; ++i) {
        Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
        if (!c.is_ok()) continue;
        (void)c->call(ipc::RegisterTenant{TenantClass::latency_critical, 1'000'000, 1, ::getpid(), fmt::format("flood{}", i), ""}, 2s);
        held.push_back(std::move(*c));
      }
    });
    hostile("killed mid-frame", [&] {
      Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
      if (!c.is_ok()) return;
      (void)::send(c->fd(), good.data(), good.size() - 3, MSG_NOSIGNAL);
      held.push_back(std::move(*c));
    });
    // The rings, written directly by a registered tenant: a torn write (a slot committed with half
    // a frame), an enum out of range in each ring message that has one, a scribbled ring header,
    // a flood of notices never completed, and a tenant that never reads its decisions.
    hostile("a torn write into the up ring", [&] {
      ipc::SpscRing* up = ring_tenant("torn");
      if (up == nullptr) return;
      Result<std::span<uint8_t>> slot = up->reserve();
      if (!slot.is_ok() || slot->empty()) return;
      Result<size_t> n = ipc::encode_into(ipc::LaunchNotice{1, 1, 7, {1, 1, 1}, {32, 1, 1}, 0, false, 1}, *slot);
      if (n.is_ok()) (void)up->commit(*n / 2);
    });
    hostile("enums out of range in ring frames", [&] {
      for (const ipc::Message& m : {ipc::Message(ipc::RequestBoundary{ipc::RequestEdge::end, 0, 1}), ipc::Message(ipc::Bye{ipc::ByeReason::error}),
                                    ipc::Message(ipc::CompletionNotice{1, 1, true, 1})}) {
        ipc::SpscRing* up = ring_tenant("enums");
        if (up == nullptr) return;
        Result<std::vector<uint8_t>> frame = ipc::encode(m);
        if (!frame.is_ok()) return;
        // The first body byte is the enum (edge, reason); a completion's ok flag sits after its
        // two 64-bit words.
        const size_t at = ipc::kHeaderBytes + (std::holds_alternative<ipc::CompletionNotice>(m) ? 16 : 0);
        (*frame)[at] = 0xee;
        (void)up->try_push(*frame);
      }
    });
    hostile("a scribbled up-ring header", [&] {
      ipc::SpscRing* up = ring_tenant("scribble");
      if (up == nullptr) return;
      std::vector<uint8_t> noise(256);
      for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>(i * 131 + 7);
      void* base = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, last_up_fd, 0);
      if (base == MAP_FAILED) return;
      std::memcpy(static_cast<uint8_t*>(base) + 64, noise.data(), noise.size());  // past the magic
      ::munmap(base, 4096);
    });
    hostile("10,000 notices never completed", [&] {
      ipc::SpscRing* up = ring_tenant("flood");
      if (up == nullptr) return;
      for (uint64_t seq = 1; seq <= 10'000; ++seq) {
        Result<std::vector<uint8_t>> frame = ipc::encode(ipc::LaunchNotice{seq, 1, 7, {1, 1, 1}, {32, 1, 1}, 0, false, seq});
        if (!frame.is_ok()) return;
        Result<bool> pushed = up->try_push(*frame);
        while (pushed.is_ok() && !*pushed) {
          // Full: the daemon drains the ring, or has dropped us.
          if (up->peer(ipc::RingSide::consumer, ipc::monotonic_ns(), 2'000'000'000).state != ipc::PeerState::alive) return;
          std::this_thread::sleep_for(100us);
          pushed = up->try_push(*frame);
        }
        if (!pushed.is_ok()) return;
      }
    });
  };
  // One round to warm the daemon's (and this process's) allocator up, then the memory to hold to,
  // then two more rounds.
  attacks();
  const long rss_before = resident_kib();
  attacks();
  attacks();
  // Whatever the hostile processes held is gone: the daemon's registry is back to nobody's tenants.
  Result<ipc::ControlClient> control = ipc::ControlClient::connect(socket());
  ASSERT_TRUE(control.is_ok());
  uint64_t left = 1;
  for (int i = 0; i < 300 && left != 0; ++i) {
    Result<ipc::Message> st = control->call(ipc::GetStats{}, 2s);
    ASSERT_TRUE(st.is_ok());
    left = std::get<ipc::Stats>(*st).tenants;
    if (left != 0) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(left, 0u);
  // The engine frees a dropped tenant's launches (up to 10,000 here) on its own thread, after the
  // registry has let the tenant go: memory is read until it is back within bounds, or 2 s passed.
  long rss_after = resident_kib();
  for (int i = 0; i < 200 && rss_after > rss_before + rss_before / 10; ++i) {
    std::this_thread::sleep_for(10ms);
    rss_after = resident_kib();
  }
  EXPECT_LE(rss_after, rss_before + rss_before / 10) << "resident memory grew from " << rss_before << " KiB to " << rss_after;
}

// --- One user cannot break the node for another (docs/daemon.md, "Security") ---

// Runs `attack` in a child process, as uid nobody where this test runs as root (else as this
// user), and returns what it wrote (its verdict); "" when it did not finish within 10 s.
std::string as_nobody(const std::function<std::string()>& attack) {
  int out[2];
  if (::pipe(out) != 0) return "";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    if (::getuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    const std::string verdict = attack();
    if (::write(out[1], verdict.data(), verdict.size()) != static_cast<ssize_t>(verdict.size())) ::_exit(4);
    ::_exit(0);
  }
  ::close(out[1]);
  std::string verdict;
  char buf[512];
  for (;;) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) break;
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    verdict.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return verdict;
}

// A well-behaved BE tenant registers within 100 ms and launches once.
void served_within_100ms(const ipc::TenantClientOptions& o, const std::string& after) {
  const auto t0 = std::chrono::steady_clock::now();
  auto c = ipc::TenantClient::connect(o);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(c.is_ok()) << after << ": " << c.status().to_string();
  EXPECT_LT(took, 100ms) << after;
  launch_once(**c);
  EXPECT_FALSE((*c)->pass_through()) << after;
  (*c)->close();
}

// Every descriptor a tenant receives refuses to be reopened for writing through /proc/self/fd;
// each is a memfd of mode 0400; a BE tenant cannot map its board or its lease page writable, so it
// cannot raise LC flags to hold another user's BE gates closed; an admitted LC tenant's board is
// writable (and only its).
TEST_F(DaemonTest, NoDescriptorATenantGetsCanBeReopenedForWriting) {
  DaemonOptions o = options("orion");
  o.socket_mode = 0666;
  start(o);
  const std::string path = socket();
  auto victim = ipc::TenantClient::connect(client_options(be("root-batch")));
  ASSERT_TRUE(victim.is_ok());
  for (const auto cls : {TenantClass::best_effort, TenantClass::latency_critical}) {
    const bool lc_asked = cls == TenantClass::latency_critical;
    const std::string verdict = as_nobody([&] {
      Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
      if (!c.is_ok()) return "connect: " + c.status().to_string();
      ipc::RegisterTenant info = lc_asked ? lc("attacker") : be("attacker");
      info.pid = ::getpid();
      info.on_lc_refused = ipc::LcRefusal::best_effort;
      std::vector<int> fds;
      Result<ipc::Message> reg = c->call(info, 2s, fds);
      if (!reg.is_ok() || !std::holds_alternative<ipc::Registered>(*reg) || fds.size() != 4) return std::string("not registered");
      const bool admitted_lc = std::get<ipc::Registered>(*reg).cls == TenantClass::latency_critical;
      std::string broke;
      for (size_t i = 0; i < fds.size(); ++i) {
        struct stat st {};
        if (::fstat(fds[i], &st) != 0 || (st.st_mode & 0777) != 0400) broke += fmt::format(" fd {} has mode {:o};", i, st.st_mode & 0777);
        const int again = ::open(fmt::format("/proc/self/fd/{}", fds[i]).c_str(), O_RDWR);
        if (again >= 0) {
          broke += fmt::format(" fd {} reopened O_RDWR;", i);
          ::close(again);
        }
      }
      if (::mmap(nullptr, ipc::kLeasePageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[2], 0) != MAP_FAILED) broke += " lease page mapped writable;";
      void* board = ::mmap(nullptr, ipc::kBoardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[3], 0);
      if (board != MAP_FAILED && !admitted_lc) {
        broke += " a BE tenant's board mapped writable;";
        std::memset(static_cast<char*>(board) + 64, 0xff, 8);  // every LC flag up: what the attack did
      }
      for (int fd : fds) ::close(fd);
      return fmt::format("{}{}", admitted_lc ? "lc" : "be", broke.empty() ? "" : ":" + broke);
    });
    EXPECT_EQ(verdict, ::getuid() == 0 || !lc_asked ? "be" : "lc") << "asked " << (lc_asked ? "lc" : "be");
    EXPECT_EQ((*victim)->lc_active(), 0u) << "the attacker raised flags on the board";
    served_within_100ms(client_options(be("good")), lc_asked ? "after an LC attacker" : "after a BE attacker");
  }
  // An admitted LC tenant (root, or this test's user in the daemon's group) gets the board writable.
  ipc::RegisterTenant info = lc("svc");
  info.pid = ::getpid();
  Result<ipc::ControlClient> c = ipc::ControlClient::connect(path);
  ASSERT_TRUE(c.is_ok());
  std::vector<int> fds;
  Result<ipc::Message> reg = c->call(info, 2s, fds);
  ASSERT_TRUE(reg.is_ok() && std::holds_alternative<ipc::Registered>(*reg) && fds.size() == 4u);
  EXPECT_EQ(std::get<ipc::Registered>(*reg).cls, TenantClass::latency_critical);
  void* board = ::mmap(nullptr, ipc::kBoardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[3], 0);
  EXPECT_NE(board, MAP_FAILED) << "an admitted LC tenant's board is writable";
  if (board != MAP_FAILED) ::munmap(board, ipc::kBoardBytes);
  EXPECT_EQ(::mmap(nullptr, ipc::kLeasePageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[2], 0), MAP_FAILED);
  for (int fd : fds) ::close(fd);
  (*victim)->close();
}

// LC is granted, not claimed: by default only root and the daemon's group may register LC. An LC
// registration from anyone else is answered with the reason, or, where it asks, admitted as BE
// (its board read-only); the metrics count both; a granted one works.
TEST_F(DaemonTest, AnUnprivilegedLcRegistrationIsRefusedAGrantedOneWorks) {
  DaemonOptions o = options("orion");
  o.socket_mode = 0666;
  o.lc_access = ipc::LcAccess{{0}, {}, "root"};
  start(o);
  const std::string path = socket();
  const std::string refused = as_nobody([&] {
    ipc::TenantClientOptions co;
    co.socket_path = path;
    co.info = lc("claims-lc");
    auto c = ipc::TenantClient::connect(co);
    std::string out = c.is_ok() ? "admitted" : fmt::format("{}|{}", to_string(c.status().code()), c.status().message());
    co.info.on_lc_refused = ipc::LcRefusal::best_effort;
    auto b = ipc::TenantClient::connect(co);
    if (!b.is_ok()) return out + "|as BE: " + b.status().to_string();
    out += fmt::format("|{}|{}|{}", (*b)->granted_class() == TenantClass::best_effort ? "be" : "lc", (*b)->lc_refused(),
                       (*b)->lease().lc_slot == ipc::kNoLcSlot ? "no slot" : "a slot");
    (*b)->raise_lc(0);  // a BE tenant's board is read-only: nothing to raise with
    (*b)->close();
    return out;
  });
  const std::string uid = ::getuid() == 0 ? "65534" : std::to_string(::getuid());
  if (::getuid() != 0) GTEST_LOG_(INFO) << "not root: the refused registrations are this user's";
  EXPECT_NE(refused.find(fmt::format("permission denied|the daemon refused the registration: register: uid {} may not register "
                                     "latency-critical tenants (allowed: root)", uid)), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("|be|uid " + uid + " may not register latency-critical tenants (allowed: root)|no slot"), std::string::npos) << refused;
  const std::string text = metrics_when(*daemon_, std::regex("concord_lc_refused_total 2\n"));
  EXPECT_NE(text.find("concord_lc_refused_total 2\n"), std::string::npos) << text;
  served_within_100ms(client_options(be("good")), "after the refusals");
  if (::getuid() == 0) {
    auto granted = ipc::TenantClient::connect(client_options(lc("root-svc")));
    ASSERT_TRUE(granted.is_ok()) << granted.status().to_string();
    EXPECT_EQ((*granted)->granted_class(), TenantClass::latency_critical);
    EXPECT_NE((*granted)->lease().lc_slot, ipc::kNoLcSlot);
    (*granted)->close();
  }
  // The daemon's group (its default) or a user named in the access list may.
  daemon_->stop();
  ASSERT_TRUE(daemon_->wait().is_ok());
  daemon_.reset();
  o.lc_access.reset();
  start(o);
  auto member = ipc::TenantClient::connect(client_options(lc("member-svc")));
  ASSERT_TRUE(member.is_ok()) << member.status().to_string();
  EXPECT_EQ((*member)->granted_class(), TenantClass::latency_critical) << "this process is in the daemon's own group";
  (*member)->close();
}

// The daemon stopped and started again under a tenant that reconnects: pass-through while it is
// away, registered again within a second of its return, its launch numbers going on from the last
// (the end of a launch made before is answered in the process and never told to the new daemon,
// which takes the new numbers from 1 and refuses nothing), and its LC flag up again on the new
// daemon's board.
TEST_F(DaemonTest, AReconnectingTenantRegistersAgainWithTheNextDaemonAndNumbersOn) {
  start(options("orion"));
  ipc::TenantClientOptions lo = client_options(lc("svc"));
  lo.reconnect.enabled = true;
  lo.heartbeat_period = 20ms;
  std::mutex events_mu;
  std::vector<std::string> events;
  lo.on_event = [&](const std::string& e) {
    std::lock_guard lock(events_mu);
    events.push_back(e);
  };
  auto svc = ipc::TenantClient::connect(lo);
  ASSERT_TRUE(svc.is_ok()) << svc.status().to_string();
  ipc::TenantClient& c = **svc;
  for (int i = 0; i < 200 && c.lease().lc_slot == ipc::kNoLcSlot; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_NE(c.lease().lc_slot, ipc::kNoLcSlot);
  ASSERT_TRUE(c.request_begin().is_ok());
  c.raise_lc(c.lease().lc_slot);
  const ipc::LaunchNotice n{0, 1, 7, {64, 1, 1}, {128, 1, 1}, 0, false, 0};
  for (int i = 0; i < 3; ++i) {
    const Result<uint64_t> seq = c.notice(n, true);
    ASSERT_TRUE(seq.is_ok() && *seq == static_cast<uint64_t>(i + 1));
    ASSERT_TRUE(c.completed(*seq, 1, true).is_ok());
  }
  const uint64_t open_seq = *c.notice(n, true);  // ends after the restart
  ASSERT_EQ(open_seq, 4u);

  daemon_->stop();
  ASSERT_TRUE(daemon_->wait().is_ok());
  daemon_.reset();
  for (int i = 0; i < 200 && !c.pass_through(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(c.pass_through()) << "the client did not notice its daemon go";
  EXPECT_EQ(*c.notice(n, true), 0u) << "a launch noticed while no daemon runs";
  EXPECT_EQ(c.lc_active(), 0u);

  DaemonOptions again = options("orion");
  again.shm_prefix += "-again";
  start(again);
  const auto back = std::chrono::steady_clock::now();
  while (c.pass_through() && std::chrono::steady_clock::now() - back < 3s) std::this_thread::sleep_for(2ms);
  ASSERT_FALSE(c.pass_through()) << "not registered again within 3 s";
  EXPECT_LT(std::chrono::steady_clock::now() - back, 1s);
  EXPECT_EQ(c.reconnections(), 1u);
  EXPECT_EQ(c.granted_class(), TenantClass::latency_critical);

  // The numbers go on; the old launch's end is nobody's to tell.
  EXPECT_TRUE(c.completed(open_seq, 1, true).is_ok());
  const Result<uint64_t> next = c.notice(n, true);
  ASSERT_TRUE(next.is_ok());
  EXPECT_GT(*next, open_seq);
  EXPECT_EQ(c.last_seq(), *next);
  EXPECT_TRUE(c.completed(*next, 1, true).is_ok());

  // The flag is up again, on the new daemon's board: a BE tenant there sees it.
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(batch.is_ok()) << batch.status().to_string();
  for (int i = 0; i < 200 && (*batch)->lc_active() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_NE((*batch)->lc_active(), 0u) << "the LC flag was not raised again on the new daemon's board";
  ASSERT_TRUE(c.request_end().is_ok());
  c.lower_lc(0);
  for (int i = 0; i < 200 && (*batch)->lc_active() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ((*batch)->lc_active(), 0u) << "the LC flag did not come down on the new daemon's board";

  // The new daemon took one launch, numbered from 1, and refused nothing.
  auto control = ipc::ControlClient::connect(socket());
  ASSERT_TRUE(control.is_ok());
  Result<ipc::Message> st = Status::ok();
  for (int i = 0; i < 200; ++i) {  // the daemon reads the ring in its own time
    st = control->call(ipc::GetStats{}, 2s);
    ASSERT_TRUE(st.is_ok() && std::holds_alternative<ipc::Stats>(*st));
    if (std::get<ipc::Stats>(*st).launches > 0) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(std::get<ipc::Stats>(*st).launches, 1u);
  EXPECT_EQ(std::get<ipc::Stats>(*st).rejected, 0u);
  EXPECT_EQ(std::get<ipc::Stats>(*st).tenants, 2u);
  (*batch)->close();
  c.close();
  EXPECT_TRUE(c.pass_through());
  std::lock_guard lock(events_mu);
  ASSERT_EQ(events.size(), 2u) << fmt::format("{}", fmt::join(events, " | "));
  EXPECT_NE(events[0].find("lost concordd"), std::string::npos) << events[0];
  EXPECT_NE(events[1].find("registered again"), std::string::npos) << events[1];
}

// One daemon per socket: a second start on a live daemon's socket fails naming its pid, never
// removes its socket, and the first goes on serving newcomers.
TEST_F(DaemonTest, ASecondDaemonOnTheSocketFailsAndTheFirstServesOn) {
  DaemonOptions o = options("streams");
  start(o);
  DaemonOptions again = o;
  again.metrics_socket.clear();
  again.shm_prefix += "-second";
  Result<std::unique_ptr<Daemon>> second = Daemon::start(again);
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find(fmt::format("a live server (pid {}) serves it", ::getpid())), std::string::npos)
      << second.status().to_string();
  // Its metrics socket too.
  again = o;
  again.socket_path = (dir_ / "other.sock").string();
  Result<std::unique_ptr<Daemon>> third = Daemon::start(again);
  ASSERT_FALSE(third.is_ok());
  EXPECT_NE(third.status().message().find("metrics socket"), std::string::npos) << third.status().to_string();
  second = Status::ok();
  third = Status::ok();
  EXPECT_TRUE(std::filesystem::exists(socket()));
  EXPECT_TRUE(std::filesystem::exists(o.metrics_socket));
  served_within_100ms(client_options(be("newcomer")), "after a second daemon tried the socket");
  EXPECT_EQ(http_get_metrics(o.metrics_socket).rfind("HTTP/1.0 200 OK\r\n", 0), 0u);
}

// An LC flag is checked against its owner: one up while its tenant has no launch in flight and no
// request open (raised by another LC tenant, or left up) is lowered after the grace, and the BE
// gates that yielded to it open.
TEST_F(DaemonTest, AnLcFlagWithNoWorkOfItsOwnerInFlightIsLowered) {
  DaemonOptions o = options("orion");
  o.lc_flag_grace = 200ms;
  start(o);
  auto meddler = ipc::TenantClient::connect(client_options(lc("meddler")));
  auto idle = ipc::TenantClient::connect(client_options(lc("idle")));
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(meddler.is_ok() && idle.is_ok() && batch.is_ok());
  const uint32_t idle_slot = (*idle)->lease().lc_slot;
  ASSERT_NE(idle_slot, ipc::kNoLcSlot);
  const ipc::LeaseTerms terms = lease_when(**batch, (uint64_t{1} << idle_slot) | (uint64_t{1} << (*meddler)->lease().lc_slot));
  ASSERT_NE(terms.yield_mask & (uint64_t{1} << idle_slot), 0u);
  (*meddler)->raise_lc(idle_slot);  // the other tenant's slot
  ASSERT_FALSE(ipc::admission(terms, (*batch)->lc_active()).open);
  const auto t0 = std::chrono::steady_clock::now();
  bool open = false;
  while (!open && std::chrono::steady_clock::now() - t0 < 3s) {
    const ipc::LeaseTerms t = (*batch)->wait_open(20'000'000);
    open = ipc::admission(t, (*batch)->lc_active()).open;
  }
  EXPECT_TRUE(open) << "the BE gate stayed closed behind a flag nobody's work backs";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  const std::string text = metrics_when(*daemon_, std::regex("concord_lc_flags_cleared_total [1-9]"));
  EXPECT_TRUE(std::regex_search(text, std::regex("concord_lc_flags_cleared_total [1-9]"))) << text;
  served_within_100ms(client_options(be("good")), "after a flag raised for another LC tenant");
  // A flag its owner's work backs stays up: a request open.
  ASSERT_TRUE((*idle)->request_begin().is_ok());
  (*idle)->raise_lc(idle_slot);
  std::this_thread::sleep_for(600ms);
  EXPECT_NE((*batch)->lc_active() & (uint64_t{1} << idle_slot), 0u) << "a flag backed by an open request was lowered";
  ASSERT_TRUE((*idle)->request_end().is_ok());
  (*idle)->lower_lc(idle_slot);
  for (auto* c : {&*meddler, &*idle, &*batch}) (*c)->close();
}

// The TCP metrics endpoint serves scrapes beside silent connections: six held open and silent at
// all times (each reconnects as soon as the server closes it) slow nobody's scrape, on TCP and on
// the Unix socket. (A server that answered one connection at a time, 200 ms each, made a scrape
// wait behind all six.)
TEST_F(DaemonTest, SilentMetricsConnectionsSlowNoScrape) {
  // A free port: bound to 0 and let go.
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  ::close(probe);
  DaemonOptions o = options("streams");
  o.metrics_port = port;
  start(o);
  const auto connect_tcp = [a] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to = a;
    return ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 ? fd : (::close(fd), -1);
  };
  const auto connect_unix = [&o] {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    std::memcpy(u.sun_path, o.metrics_socket.c_str(), o.metrics_socket.size() + 1);
    return ::connect(fd, reinterpret_cast<sockaddr*>(&u), sizeof u) == 0 ? fd : (::close(fd), -1);
  };
  std::atomic<bool> stop{false};
  std::vector<std::thread> holders;
  for (int i = 0; i < 12; ++i) {
    holders.emplace_back([&, tcp = i % 2 == 0] {
      while (!stop) {
        const int fd = tcp ? connect_tcp() : connect_unix();
        if (fd < 0) break;
        // Silent until the server closes it (or the test ends).
        for (char b = 0; !stop;) {
          pollfd p{fd, POLLIN, 0};
          if (::poll(&p, 1, 20) > 0 && ::recv(fd, &b, 1, MSG_DONTWAIT) <= 0) break;
        }
        ::close(fd);
      }
    });
  }
  std::this_thread::sleep_for(100ms);
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    const int fd = connect_tcp();
    ASSERT_GE(fd, 0);
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    std::string reply;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
    ::close(fd);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms) << "TCP scrape " << round;
    EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
    EXPECT_NE(reply.find("concord_tenants "), std::string::npos) << reply;
    t0 = std::chrono::steady_clock::now();
    const std::string unix_reply = http_get_metrics(o.metrics_socket);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms) << "Unix scrape " << round;
    EXPECT_EQ(unix_reply.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << unix_reply;
    std::this_thread::sleep_for(150ms);
  }
  served_within_100ms(client_options(be("good")), "beside silent metrics connections");
  stop = true;
  for (std::thread& t : holders) t.join();
}

// No launch held forever by another tenant, under every per-launch policy: a tenant that holds a
// released launch, keeps its heartbeat and never reports its end is dropped once its bound
// (--launch-timeout, short here) has passed, and the other tenant's launch is released.
class PerLaunchStarvation : public DaemonTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(PerLaunchStarvation, AReleasedLaunchThatNeverEndsIsFailedWithinItsBound) {
  DaemonOptions o = options(GetParam());
  o.per_launch = true;
  o.launch_timeout = 0.3;
  start(o);
  auto hog = ipc::TenantClient::connect(client_options(be("hog")));
  auto other = ipc::TenantClient::connect(client_options(be("other")));
  ASSERT_TRUE(hog.is_ok() && other.is_ok());
  const ipc::LaunchNotice n{0, 1, 7, {64, 1, 1}, {128, 1, 1}, 0, false, 0};
  const auto before_release = std::chrono::steady_clock::now();
  const uint64_t held = *(*hog)->notice(n);
  ASSERT_TRUE((*hog)->wait_release(held).is_ok());
  ASSERT_FALSE((*hog)->pass_through());
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t waiting = *(*other)->notice(n);
  GuardedWait released(**other, [&] { return (*other)->wait_release(waiting).is_ok(); });
  ASSERT_EQ(released.f.wait_for(5s), std::future_status::ready) << "the other tenant's launch waited past the hog's bound";
  EXPECT_TRUE(released.f.get());
  ASSERT_TRUE((*other)->completed(waiting, 1, true).is_ok());
  // The hog is dropped (its rings closed: it runs pass-through from then on) within its bound and
  // a margin, never before the bound.
  while (!(*hog)->pass_through() && std::chrono::steady_clock::now() - t0 < 5s) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE((*hog)->pass_through()) << "the hog was not dropped";
  EXPECT_GE(std::chrono::steady_clock::now() - before_release, 290ms) << "dropped before its bound";
  EXPECT_FALSE((*other)->pass_through());
  served_within_100ms(client_options(be("newcomer")), "after the hog was dropped");
  (*hog)->close();
  (*other)->close();
}

INSTANTIATE_TEST_SUITE_P(EveryPerLaunchPolicy, PerLaunchStarvation,
                         ::testing::Values("serial", "round-robin", "random", "shortest-first", "streams", "orion", "sgdrc",
                                           "fedcm", "raise", "pbs", "aker", "concord"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The bound grows with what a kernel has taken before: a launch longer than the floor, of a kernel
// that took half the floor once (its bound: 20 times that), is not cut.
TEST_F(DaemonTest, ALaunchAsLongAsItsKernelMayTakeIsNotCut) {
  DaemonOptions o = options("serial");
  o.per_launch = true;
  o.launch_timeout = 0.3;
  start(o);
  auto c = ipc::TenantClient::connect(client_options(be("long-kernels")));
  ASSERT_TRUE(c.is_ok());
  const ipc::LaunchNotice n{0, 1, 9, {64, 1, 1}, {128, 1, 1}, 0, false, 0};
  for (const auto run : {150ms, 700ms}) {
    const uint64_t s = *(*c)->notice(n);
    ASSERT_TRUE((*c)->wait_release(s).is_ok());
    std::this_thread::sleep_for(run);
    EXPECT_FALSE((*c)->pass_through()) << "a " << run.count() << " ms launch was cut";
    ASSERT_TRUE((*c)->completed(s, 1, true).is_ok());
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE((*c)->pass_through());
  (*c)->close();
}

// A launch-bound LC tenant (the GPU ends each burst right after the host's last launch) is one BE
// work may run beside: orion's BE lease stops yielding to it once its bursts say so, and yields
// again once its bursts turn GPU-bound (the work ends long after the last launch).
TEST_F(DaemonTest, OrionYieldsOnlyToGpuBoundLcTenants) {
  start(options("orion"));
  auto svc = ipc::TenantClient::connect(client_options(lc("svc")));
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(svc.is_ok() && batch.is_ok());
  ipc::TenantClient& c = **svc;
  EXPECT_EQ(lease_when(**batch, 1).yield_mask, 1u) << "not measured yet: GPU-bound";
  // Bursts of 10 launches 100 us apart, each ending 5 us after the last: a share of 0.005.
  const auto burst = [&c](int launches, uint64_t gap_ns, uint64_t tail_ns) {
    const uint64_t t0 = ipc::monotonic_ns();
    uint64_t seq = 0;
    for (int i = 0; i < launches; ++i) {
      seq = *c.notice(ipc::LaunchNotice{0, 1, 7, {1, 1, 1}, {32, 1, 1}, 0, false, t0 + gap_ns * i}, true);
    }
    ASSERT_TRUE(c.completed(seq, 1, true, t0 + gap_ns * (launches - 1) + tail_ns).is_ok());
  };
  for (int i = 0; i < 10; ++i) burst(10, 100'000, 5'000);
  EXPECT_EQ(lease_when(**batch, 0).yield_mask, 0u) << "a launch-bound LC tenant still holds BE back";
  // Now one launch each, the GPU busy 2 ms after it: a share of 1.
  for (int i = 0; i < 10; ++i) burst(1, 0, 2'000'000);
  EXPECT_EQ(lease_when(**batch, 1).yield_mask, 1u) << "a GPU-bound LC tenant no longer holds BE back";
  c.close();
  (*batch)->close();
}

// A policy's Lease on a tenant's page: LC tenant ids become board slots (those without one are
// left out), a flag's slot only where the lease raises one; an invalid lease is refused.
TEST(LeaseTerms, PolicyLeasesBecomePageTerms) {
  Lease l;
  l.priority = 1;
  l.max_in_flight = 7;
  l.yield_to = {10, 11, 12};
  l.on_lc = LcYield::cap;
  l.be_in_flight_cap = 2;
  const auto slot_of = [](uint64_t id) { return id == 10 ? 3u : id == 12 ? 63u : ipc::kNoLcSlot; };
  Result<ipc::LeaseTerms> t = lease_terms(l, 5, slot_of);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->gate, LeaseGate::open);
  EXPECT_EQ(t->priority, ipc::Priority::high);
  EXPECT_EQ(t->max_in_flight, 7u);
  EXPECT_EQ(t->yield_mask, (uint64_t{1} << 3) | (uint64_t{1} << 63));
  EXPECT_EQ(t->on_lc, LcYield::cap);
  EXPECT_EQ(t->be_in_flight_cap, 2u);
  EXPECT_EQ(t->lc_slot, ipc::kNoLcSlot) << "no flag unless the lease raises one";
  l.signal_lc = true;
  EXPECT_EQ(lease_terms(l, 5, slot_of)->lc_slot, 5u);
  l.be_in_flight_cap = 0;
  EXPECT_FALSE(lease_terms(l, 5, slot_of).is_ok());
  l.be_in_flight_cap = 1;
  l.max_in_flight = -1;
  EXPECT_FALSE(lease_terms(l, 5, slot_of).is_ok());
  l.max_in_flight = 0;
  l.be_sm_cap = 66;
  l.be_blocks_per_sm_cap = 2;
  EXPECT_EQ(lease_terms(l, 5, slot_of)->be_sm_cap, 66u);
  EXPECT_EQ(lease_terms(l, 5, slot_of)->be_blocks_per_sm_cap, 2u);
  l.be_sm_cap = -3;
  EXPECT_FALSE(lease_terms(l, 5, slot_of).is_ok());
}

// Under per-launch decisions a notice the device cannot run (more shared memory than a block may
// have: within the protocol's limit, over the device's) ends that tenant, not the daemon.
TEST_F(DaemonTest, ALaunchTheDeviceCannotRunEndsItsTenantNotTheDaemon) {
  start(options("serial"));
  auto bad = ipc::TenantClient::connect(client_options(be("bad")));
  ASSERT_TRUE(bad.is_ok());
  ASSERT_TRUE((*bad)->notice(ipc::LaunchNotice{0, 1, 7, {1, 1, 1}, {32, 1, 1}, 240'000, false, 0}).is_ok());
  auto good = ipc::TenantClient::connect(client_options(be("good")));
  ASSERT_TRUE(good.is_ok());
  for (int i = 0; i < 5; ++i) launch_once(**good);
  EXPECT_FALSE((*good)->pass_through());
  std::string text;
  for (int i = 0; i < 150; ++i) {
    text = daemon_->metrics_text();
    if (text.find("name=\"bad\"") == std::string::npos && text.find("name=\"good\"") != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(text.find("name=\"bad\""), std::string::npos) << "the tenant is gone: " << text;
  EXPECT_NE(text.find("name=\"good\""), std::string::npos) << text;
  (*good)->close();
}

// An opaque kernel's nominal curve: the SMs one wave of its grid covers (all of them for a graph),
// so that SGDRC's LC need and Orion's SM threshold follow the launch's shape.
TEST(LiveSourceTest, OpaqueKernelsDemandTheSmsOfOneWave) {
  SharedRegistry shared;
  TenantHub hub(shared, shared.devices.emplace_back(), ipc::WaitPolicy{}, [](const ipc::TenantRecord&) { return false; });
  const DeviceSpec dev = h100_sxm_spec();
  LiveSource source(hub, dev);
  auto demand = [&](ipc::Dim3 grid, ipc::Dim3 block, bool graph) {
    const KernelSpec* k = source.kernel_for(ipc::LaunchNotice{0, 1, 42, grid, block, 0, graph, 0});
    EXPECT_EQ(k->sm_curve.size(), 1u);
    return k->sm_curve.front().sms;
  };
  EXPECT_EQ(demand({1'000'000, 1, 1}, {256, 1, 1}, false), dev.sm_count);
  EXPECT_EQ(demand({64, 1, 1}, {1024, 1, 1}, false), 32);  // two 1024-thread blocks per SM
  EXPECT_EQ(demand({1, 1, 1}, {32, 1, 1}, false), 1);
  EXPECT_EQ(demand({0, 0, 0}, {0, 0, 0}, true), dev.sm_count);
  const KernelSpec* small = source.kernel_for(ipc::LaunchNotice{0, 1, 42, {64, 1, 1}, {1024, 1, 1}, 0, false, 0});
  const Estimator est(dev);
  EXPECT_EQ(est.demand_sms(*small, 0, 0.03), 32) << "the estimator reads the curve: more SMs than the wave do not help";
}

// `concord top --once --socket SOCKET`: its wait status and what it printed (stdout and stderr).
std::pair<int, std::string> top_once(const std::string& socket) {
  FILE* p = ::popen(fmt::format("{} top --once --socket {} 2>&1", CONCORD_CLI_BINARY, socket).c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[1024];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return {::pclose(p), out};
}

TEST_F(DaemonTest, ConcordTopOncePrintsTheLiveTenants) {
  start(options("streams"));
  ipc::TenantClientOptions co = client_options(lc("web-frontend", 25));
  auto client = ipc::TenantClient::connect(co);
  ASSERT_TRUE(client.is_ok());
  for (int i = 0; i < 3; ++i) launch_once(**client);
  std::this_thread::sleep_for(400ms);  // the daemon's counts reach the registry
  const auto [rc, out] = top_once(socket());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("1 tenants, 3 launches"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\s1\s+0 web-frontend\s+LC\s+\d+\s+\d+\s+1\s+3\s+3\s+25\.000)"))) << out;
  (*client)->close();
  // No daemon: a clear error and exit status 1.
  const auto [missing, err] = top_once(dir_.string() + "/none.sock");
  EXPECT_EQ(WEXITSTATUS(missing), 1);
  EXPECT_NE(err.find("none.sock"), std::string::npos) << err;
}

// A BE budget in µs (sgdrc's be_in_flight_us) becomes a launch count once the daemon has measured
// the BE's GPU time per launch from its bursts: 10 launches whose burst ends 2 ms after the first,
// 200 µs each, and a budget of 1000 µs: 5 in flight while the LC's work is.
TEST_F(DaemonTest, AMicrosecondBudgetBecomesACapOnceTheBeIsMeasured) {
  start(options("sgdrc:bound_share=0;be_in_flight=2;be_in_flight_us=1000"));
  auto svc = ipc::TenantClient::connect(client_options(lc("svc")));
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(svc.is_ok() && batch.is_ok());
  ipc::TenantClient& b = **batch;
  EXPECT_EQ(lease_when(b, 1).be_in_flight_cap, 2u) << "not measured yet: the count";
  for (int burst = 0; burst < 3; ++burst) {
    const uint64_t t0 = ipc::monotonic_ns();
    uint64_t seq = 0;
    for (int i = 0; i < 10; ++i) seq = *b.notice(ipc::LaunchNotice{0, 1, 7, {1, 1, 1}, {32, 1, 1}, 0, false, t0 + 1000 * i}, true);
    ASSERT_TRUE(b.completed(seq, 1, true, t0 + 2'000'000).is_ok());
  }
  ipc::LeaseTerms t = b.lease();
  for (int i = 0; i < 400 && t.be_in_flight_cap != 5; ++i) {
    std::this_thread::sleep_for(5ms);
    t = b.lease();
  }
  EXPECT_EQ(t.be_in_flight_cap, 5u);
  (*svc)->close();
  b.close();
}

// One daemon, two GPUs: each its own engine, policy instance and board. An LC tenant's flag on GPU
// 0 makes GPU 0's BE tenant yield and leaves GPU 1's alone; a tenant is placed by the PCI bus id it
// names (in any of the forms the driver, nvidia-smi and /proc write), and one naming no GPU, or a
// GPU the daemon does not manage, is refused with the reason. The metrics and `concord top` carry
// the device.
TEST_F(DaemonTest, EachGpuHasItsOwnEngineAndBoard) {
  DaemonOptions o = options("orion:bound_share=0;be_sms=66;be_blocks_per_sm=2");
  o.devices = {DeviceLane{"0", "0000:18:00.0", "NVIDIA H100 80GB HBM3", h100_sxm_spec()},
               DeviceLane{"1", "0000:2a:00.0", "NVIDIA H100 80GB HBM3", h100_sxm_spec()}};
  start(o);
  const auto on = [](ipc::RegisterTenant info, const std::string& bus) {
    info.device = bus;
    return info;
  };
  auto svc = ipc::TenantClient::connect(client_options(on(lc("svc"), "0000:18:00.0")));
  auto near = ipc::TenantClient::connect(client_options(on(be("near"), "00000000:18:00.0")));
  auto far = ipc::TenantClient::connect(client_options(on(be("far"), "0000:2A:00.0")));
  ASSERT_TRUE(svc.is_ok() && near.is_ok() && far.is_ok());
  auto nowhere = ipc::TenantClient::connect(client_options(be("nowhere")));
  ASSERT_FALSE(nowhere.is_ok());
  EXPECT_NE(nowhere.status().message().find("could not tell which GPU"), std::string::npos) << nowhere.status().to_string();
  auto other = ipc::TenantClient::connect(client_options(on(be("other"), "0000:99:00.0")));
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("0000:99:00.0 is not one this daemon manages"), std::string::npos)
      << other.status().to_string();

  // A request open backs the flag (the daemon lowers a flag no work of its tenant backs).
  ASSERT_TRUE((*svc)->request_begin().is_ok());
  (*svc)->raise_lc((*svc)->lease().lc_slot);
  const std::string text =
      metrics_when(*daemon_, std::regex(R"(concord_tenant_lease\{[^}]*device="0",name="near"[^}]*yield="room"[^}]*\} 1
)"));
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_lease\{[^}]*device="0",name="near"[^}]*\} 1
)"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_lease\{[^}]*device="1",name="far"[^}]*\} 0
)"))) << "GPU 0's LC flag reached GPU 1's BE tenant\n" << text;
  EXPECT_NE(text.find("concord_device_info{device=\"1\",bus_id=\"0000:2a:00.0\",spec=\"H100 SXM\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("concord_device_tenants{device=\"0\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("concord_device_tenants{device=\"1\"} 1\n"), std::string::npos) << text;
  // GPU 1's board has no flag up: the far tenant's own view.
  EXPECT_EQ((*far)->lc_active(), 0u);
  EXPECT_NE((*near)->lc_active(), 0u);
  const auto [rc, out] = top_once(socket());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\s3\s+1 far\s+BE)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\s2\s+0 near\s+BE)"))) << out;
  (*svc)->close();
  (*near)->close();
  (*far)->close();
}

// The lease's choice beside LC work shows in `concord top` and in the metrics: a BE tenant under
// orion with room yields room (66 SMs, 2 blocks per SM), "now" while the LC's flag is up.
TEST_F(DaemonTest, TheLeasesChoiceShowsInTopAndTheMetrics) {
  start(options("orion:bound_share=0;be_sms=66;be_blocks_per_sm=2"));
  auto svc = ipc::TenantClient::connect(client_options(lc("svc")));
  auto batch = ipc::TenantClient::connect(client_options(be("batch")));
  ASSERT_TRUE(svc.is_ok() && batch.is_ok());
  ASSERT_TRUE((*svc)->request_begin().is_ok());  // backs the flag
  (*svc)->raise_lc((*svc)->lease().lc_slot);
  const std::string text = metrics_when(*daemon_, std::regex(R"(concord_tenant_lease\{[^}]*name="batch"[^}]*yield="room"[^}]*\} 1
)"));
  EXPECT_NE(text.find("room_sms=\"66\",room_blocks_per_sm=\"2\""), std::string::npos) << text;
  std::this_thread::sleep_for(400ms);  // the daemon's summary reaches the registry
  const auto [rc, out] = top_once(socket());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(batch\s+BE.*room 66 SMs x 2/SM \(now\))"))) << out;
  (*svc)->close();
  (*batch)->close();
}

// --device-spec auto: the node's model from the driver's files, h200 where they name no H100 or
// H200 (as `concord run`'s default).
TEST(DaemonDevice, AutoTakesTheModelTheDriverNames) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / fmt::format("concord-driver-{}", ::getpid());
  std::filesystem::remove_all(root);
  std::string chosen;
  auto none = daemon_device("auto", &chosen, root.string());
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_EQ(none->name, builtin_device("h200")->name);
  EXPECT_NE(chosen.find("default"), std::string::npos) << chosen;
  std::filesystem::create_directories(root / "gpus" / "0000:18:00.0");
  {
    std::ofstream(root / "gpus" / "0000:18:00.0" / "information") << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   123\n";
  }
  auto h100 = daemon_device("auto", &chosen, root.string());
  ASSERT_TRUE(h100.is_ok());
  EXPECT_EQ(h100->name, builtin_device("h100")->name);
  EXPECT_NE(chosen.find("NVIDIA H100 80GB HBM3"), std::string::npos) << chosen;
  // An H100 PCIe (114 SMs) is not the built-in H100 SXM spec: the default, and the log says why.
  {
    std::ofstream(root / "gpus" / "0000:18:00.0" / "information") << "Model: \t\t NVIDIA H100 PCIe\n";
  }
  auto pcie = daemon_device("auto", &chosen, root.string());
  ASSERT_TRUE(pcie.is_ok());
  EXPECT_EQ(pcie->name, builtin_device("h200")->name);
  EXPECT_NE(chosen.find("is not a built-in device"), std::string::npos) << chosen;
  EXPECT_FALSE(daemon_device("h300").is_ok());
  std::filesystem::remove_all(root);
}

// --devices: the node's GPUs from the driver's files, in bus order (nvidia-smi's indices), each
// with the spec of its model; a subset by index or bus id; bad entries named.
TEST(DaemonDevice, LanesComeFromTheDriversGpus) {
  EXPECT_EQ(normalize_bus_id("00000000:2A:00.0"), std::optional<std::string>("0000:2a:00.0"));
  EXPECT_EQ(normalize_bus_id("0000:18:00.0"), std::optional<std::string>("0000:18:00.0"));
  EXPECT_EQ(normalize_bus_id("18:00.0"), std::optional<std::string>("0000:18:00.0"));
  EXPECT_EQ(normalize_bus_id("00010000:01:00.0"), std::optional<std::string>("10000:01:00.0"));  // a VMD domain
  for (const char* bad : {"", "0", "gpu0", "0000:18:00", "0000:118:00.0", "0000:18:00.8", "0000:18:zz.0"}) {
    EXPECT_FALSE(normalize_bus_id(bad).has_value()) << bad;
  }
  const std::filesystem::path root = std::filesystem::temp_directory_path() / fmt::format("concord-lanes-{}", ::getpid());
  std::filesystem::remove_all(root);
  // No GPU listed: one lane that takes every tenant.
  auto none = choose_lanes("all", "auto", root.string());
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  ASSERT_EQ(none->size(), 1u);
  EXPECT_EQ((*none)[0].bus_id, "");
  EXPECT_EQ(*lane_for(*none, "0000:18:00.0"), size_t{0});
  EXPECT_EQ(*lane_for(*none, ""), size_t{0});
  for (const auto& [bus, model] : {std::pair{"0000:9a:00.0", "NVIDIA H200"}, std::pair{"0000:18:00.0", "NVIDIA H100 80GB HBM3"}}) {
    std::filesystem::create_directories(root / "gpus" / bus);
    std::ofstream(root / "gpus" / bus / "information") << "Model: \t\t " << model << "\nGPU UUID: \t GPU-" << bus << "\n";
  }
  const std::vector<NodeGpu> gpus = node_gpus(root.string());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].bus_id, "0000:18:00.0");
  EXPECT_EQ(gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[1].uuid, "GPU-0000:9a:00.0");
  auto all = choose_lanes("all", "auto", root.string());
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].spec.name, builtin_device("h100")->name);
  EXPECT_EQ((*all)[1].spec.name, builtin_device("h200")->name);
  EXPECT_EQ((*all)[1].label, "1");
  EXPECT_EQ(*lane_for(*all, "00000000:9A:00.0"), size_t{1});
  EXPECT_FALSE(lane_for(*all, "").is_ok());
  auto one = choose_lanes("0000:9a:00.0", "h100", root.string());
  ASSERT_TRUE(one.is_ok()) << one.status().to_string();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].label, "1");
  EXPECT_EQ((*one)[0].spec.name, builtin_device("h100")->name);  // --device-spec for every lane
  EXPECT_FALSE(lane_for(*one, "0000:18:00.0").is_ok()) << "a GPU the daemon does not manage";
  for (const char* bad : {"2", "0,0", "0000:77:00.0", "first", ""}) {
    auto r = choose_lanes(bad, "auto", root.string());
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--devices"), std::string::npos) << r.status().to_string();
  }
  EXPECT_FALSE(choose_lanes("all", "h300", root.string()).is_ok());
  std::filesystem::remove_all(root);
}

// Who sees which tenant on the metrics endpoint: every tenant for root, the daemon's user and its
// group; a user's own tenants for that user; the totals alone (no name, no uid) for the TCP port.
TEST(DaemonMetrics, TenantsAreNamedOnlyToWhoMaySeeThem) {
  DaemonSnapshot s;
  s.policy = "orion";
  s.device = "H100";
  TenantSnapshot a;
  a.id = 1;
  a.name = "alice-svc";
  a.uid = 1000;
  a.cls = TenantClass::latency_critical;
  a.launches = 5;
  TenantSnapshot b;
  b.id = 2;
  b.name = "bob-job";
  b.uid = 1001;
  b.launches = 7;
  s.tenants = {a, b};
  const std::string all = prometheus_text(s);
  EXPECT_NE(all.find("alice-svc"), std::string::npos);
  EXPECT_NE(all.find("bob-job"), std::string::npos);
  const std::string own = prometheus_text(s, {MetricsView::Kind::own, 1000});
  EXPECT_NE(own.find("alice-svc"), std::string::npos);
  EXPECT_EQ(own.find("bob-job"), std::string::npos) << own;
  EXPECT_EQ(own.find("uid=\"1001\""), std::string::npos) << own;
  const std::string totals = prometheus_text(s, {MetricsView::Kind::aggregate, 0});
  EXPECT_EQ(totals.find("alice-svc"), std::string::npos) << totals;
  EXPECT_EQ(totals.find("bob-job"), std::string::npos) << totals;
  EXPECT_EQ(totals.find("uid="), std::string::npos) << totals;
  for (const std::string& text : {all, own, totals}) {
    EXPECT_NE(text.find("concord_tenants 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("concord_class_launches{class=\"lc\"} 5\n"), std::string::npos) << text;
    EXPECT_NE(text.find("concord_class_launches{class=\"be\"} 7\n"), std::string::npos) << text;
  }
}

// The metrics socket gets the mode it is given, whatever the umask.
TEST(DaemonMetrics, TheMetricsSocketHasItsModeWhateverTheUmask) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("concordd-metrics-{}", ::getpid());
  std::filesystem::create_directories(dir);
  DaemonOptions o;
  o.socket_path = (dir / "concordd.sock").string();
  o.policy = "streams";
  o.device = h100_sxm_spec();
  o.metrics_socket = (dir / "metrics.sock").string();
  o.metrics_socket_mode = 0640;
  o.shm_prefix = fmt::format("/concordd-metrics-{}", ::getpid());
  const mode_t old_mask = ::umask(0);
  Result<std::unique_ptr<Daemon>> d = Daemon::start(o);
  ::umask(old_mask);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(o.metrics_socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  (*d)->stop();
  EXPECT_TRUE((*d)->wait().is_ok());
  d->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace concord::daemon

// ---- memory quotas (docs/daemon.md, "Memory") ------------------------------------------------

namespace concord::daemon {
namespace {

constexpr uint64_t MiB = 1 << 20;

ipc::RegisterTenant asking(ipc::RegisterTenant info, uint64_t memory, uint64_t device_memory = 0) {
  info.memory_bytes = memory;
  info.device_memory_bytes = device_memory;
  return info;
}

ipc::TenantRecord holding(const std::string& device, uint64_t limit, uint64_t reserved) {
  ipc::TenantRecord r;
  r.device = device;
  r.memory = MemoryQuota{limit, reserved};
  return r;
}

TEST(MemoryBooks, ReservationsFitOrAreRefusedAndLimitsAreAShareOfWhatIsLeft) {
  MemoryBooks books(MemoryPolicy{100 * MiB, 0.5});
  std::map<uint64_t, ipc::TenantRecord> registered;
  // An LC reservation: exactly what it asked.
  Result<MemoryQuota> a = books.grant("0", asking(lc("a"), 60 * MiB), registered);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(*a, (MemoryQuota{60 * MiB, 60 * MiB}));
  registered[1] = holding("0", 60 * MiB, 60 * MiB);
  // One that does not fit: refused with the numbers.
  Result<MemoryQuota> b = books.grant("0", asking(lc("b"), 60 * MiB), registered);
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), StatusCode::failed_precondition);
  EXPECT_EQ(b.status().message(),
            "memory reservation 60.0 MiB does not fit GPU 0: 1 tenants hold 60.0 MiB of its 100.0 MiB (60.0 MiB of it reserved by "
            "LC tenants), 40.0 MiB left");
  // One over the GPU (a forged value): refused.
  Result<MemoryQuota> huge = books.grant("0", asking(lc("huge"), 1ull << 40), {});
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("is more than GPU 0 has (100.0 MiB)"), std::string::npos);
  // A BE tenant: half of what is left; one asking for less gets it, one asking for more is clamped.
  EXPECT_EQ(*books.grant("0", be("c"), registered), (MemoryQuota{20 * MiB, 0}));
  EXPECT_EQ(*books.grant("0", asking(be("d"), 5 * MiB), registered), (MemoryQuota{5 * MiB, 0}));
  EXPECT_EQ(*books.grant("0", asking(be("e"), 90 * MiB), registered), (MemoryQuota{20 * MiB, 0}));
  // An LC tenant without a reservation is limited as a BE tenant is.
  EXPECT_EQ(*books.grant("0", lc("f"), registered), (MemoryQuota{20 * MiB, 0}));
  // Another GPU's books are its own.
  EXPECT_EQ(*books.grant("1", asking(lc("g"), 100 * MiB), registered), (MemoryQuota{100 * MiB, 100 * MiB}));
  // Held out of the registry's records alone.
  registered[2] = holding("0", 20 * MiB, 0);
  registered[3] = holding("1", 30 * MiB, 0);
  registered[4] = holding("0", kNoMemoryLimit, 0);
  const HeldMemory held = MemoryBooks::held("0", registered);
  EXPECT_EQ(held.granted, 80 * MiB);
  EXPECT_EQ(held.reserved, 60 * MiB);
  EXPECT_EQ(held.tenants, 2u);
}

TEST(MemoryBooks, AGpusSizeIsTheSmallestItsTenantsReportUnlessGiven) {
  MemoryBooks books(MemoryPolicy{std::nullopt, 0.5});
  EXPECT_FALSE(books.total("0").has_value());
  // Not known: no quota, and a reservation cannot be kept.
  EXPECT_FALSE(books.grant("0", be("a"), {})->limited());
  Result<MemoryQuota> r = books.grant("0", asking(lc("b"), 8 * MiB), {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("GPU 0's memory size is not known"), std::string::npos) << r.status().message();
  // The first report sets it; a larger one (forged) does not enlarge it, a smaller one shrinks it.
  EXPECT_EQ(*books.grant("0", asking(be("c"), 0, 80 * MiB), {}), (MemoryQuota{40 * MiB, 0}));
  EXPECT_EQ(*books.grant("0", asking(be("d"), 0, 800 * MiB), {}), (MemoryQuota{40 * MiB, 0}));
  EXPECT_EQ(books.total("0"), 80 * MiB);
  (void)books.grant("0", asking(be("e"), 0, 60 * MiB), {});
  EXPECT_EQ(books.total("0"), 60 * MiB);
  EXPECT_FALSE(books.total("1").has_value());
  // --memory-total wins over every report.
  MemoryBooks given(MemoryPolicy{10 * MiB, 1.0});
  EXPECT_EQ(*given.grant("0", asking(be("f"), 0, 80 * MiB), {}), (MemoryQuota{10 * MiB, 0}));
  EXPECT_EQ(given.total("0"), 10 * MiB);
}

TEST(MemoryBooks, AbsurdSettingsAreNamed) {
  EXPECT_TRUE(check_memory_policy(MemoryPolicy{}).is_ok());
  EXPECT_TRUE(check_memory_policy(MemoryPolicy{80ull << 30, 1.0}).is_ok());
  for (double share : {0.0, -0.5, 1.5, std::nan("")}) {
    const Status st = check_memory_policy(MemoryPolicy{std::nullopt, share});
    ASSERT_FALSE(st.is_ok()) << share;
    EXPECT_EQ(st.message().rfind("--be-memory-share: ", 0), 0u) << st.message();
  }
  for (uint64_t total : {uint64_t{0}, uint64_t{1} << 60}) {
    const Status st = check_memory_policy(MemoryPolicy{total, 0.5});
    ASSERT_FALSE(st.is_ok()) << total;
    EXPECT_EQ(st.message().rfind("--memory-total: ", 0), 0u) << st.message();
  }
  DaemonOptions o;
  o.device = h100_sxm_spec();
  o.memory.be_share = 1.5;
  const Result<std::unique_ptr<Daemon>> d = Daemon::start(o);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("--be-memory-share"), std::string::npos) << d.status().to_string();
}

// The tenant list's memory entries (ListTenants), by name.
std::map<std::string, ipc::TenantMemory> listed_memory(const std::string& socket) {
  std::map<std::string, ipc::TenantMemory> out;
  Result<ipc::ControlClient> c = ipc::ControlClient::connect(socket);
  if (!c.is_ok()) return out;
  Result<ipc::Message> list = c->call(ipc::ListTenants{}, 2s);
  if (!list.is_ok() || !std::holds_alternative<ipc::TenantList>(*list)) return out;
  for (const ipc::TenantEntry& t : std::get<ipc::TenantList>(*list).tenants) out[t.name] = t.memory;
  return out;
}

// Registration refuses an LC reservation that does not fit, with the numbers, and hands BE tenants
// their share of what is left; the quotas reach the lease pages, the tenant list and the metrics.
TEST_F(DaemonTest, AnLcReservationThatDoesNotFitIsRefusedAndBeTenantsGetAShareOfTheRest) {
  DaemonOptions o = options("orion");
  o.memory = MemoryPolicy{100 * MiB, 0.5};
  start(o);
  auto svc = ipc::TenantClient::connect(client_options(asking(lc("svc"), 60 * MiB)));
  ASSERT_TRUE(svc.is_ok()) << svc.status().to_string();
  EXPECT_EQ((*svc)->memory_quota(), (MemoryQuota{60 * MiB, 60 * MiB}));
  auto second = ipc::TenantClient::connect(client_options(asking(lc("second"), 60 * MiB)));
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("memory reservation 60.0 MiB does not fit GPU 0"), std::string::npos)
      << second.status().message();
  auto train = ipc::TenantClient::connect(client_options(be("train")));
  ASSERT_TRUE(train.is_ok());
  EXPECT_EQ((*train)->memory_quota(), (MemoryQuota{20 * MiB, 0}));
  // A BE asking for more than the policy gives is clamped to it.
  auto greedy = ipc::TenantClient::connect(client_options(asking(be("greedy"), 90 * MiB)));
  ASSERT_TRUE(greedy.is_ok());
  EXPECT_EQ((*greedy)->memory_quota(), (MemoryQuota{10 * MiB, 0}));
  std::map<std::string, ipc::TenantMemory> listed = listed_memory(socket());
  EXPECT_EQ(listed["svc"].limit_bytes, 60 * MiB);
  EXPECT_EQ(listed["svc"].reserved_bytes, 60 * MiB);
  EXPECT_EQ(listed["train"].limit_bytes, 20 * MiB);
  EXPECT_EQ(listed["greedy"].limit_bytes, 10 * MiB);
  std::string text;
  for (int i = 0; i < 100 && text.find("concord_device_memory_granted_bytes{device=\"0\"} 94371840") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    text = daemon_->metrics_text();
  }
  EXPECT_NE(text.find("concord_device_memory_total_bytes{device=\"0\"} 104857600"), std::string::npos) << text;
  EXPECT_NE(text.find("concord_device_memory_granted_bytes{device=\"0\"} 94371840"), std::string::npos) << text;
  EXPECT_NE(text.find("concord_device_memory_reserved_bytes{device=\"0\"} 62914560"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_memory_quota_bytes\{[^}]*name="svc"[^}]*kind="reservation"\} 62914560)")))
      << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_memory_quota_bytes\{[^}]*name="train"[^}]*kind="limit"\} 20971520)")))
      << text;
  // The service leaves: its reservation is free again at once.
  (*svc)->close();
  std::optional<Result<std::unique_ptr<ipc::TenantClient>>> again;
  for (int i = 0; i < 100; ++i) {
    again.emplace(ipc::TenantClient::connect(client_options(asking(lc("again"), 60 * MiB))));
    if (again->is_ok()) break;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(again->is_ok()) << again->status().to_string();
  (**again)->close();
  (*train)->close();
  (*greedy)->close();
}

// A tenant killed holding a reservation gives it back at once: its connection ends, the registry
// drops it, and the books are the registry's records.
TEST_F(DaemonTest, AKilledTenantsMemoryReturnsToTheBooksAtOnce) {
  Script holder{asking(lc("holder"), 60 * MiB), 5};
  holder.hang_on_first = true;
  ForkedTenant& h = add(holder);
  DaemonOptions o = options("orion");
  o.memory = MemoryPolicy{100 * MiB, 0.5};
  start(o);
  h.go();
  const auto t0 = std::chrono::steady_clock::now();
  while (h.launches().empty() && std::chrono::steady_clock::now() - t0 < 5s) (void)h.finish(10ms);
  ASSERT_EQ(h.launches().size(), 1u);
  auto refused = ipc::TenantClient::connect(client_options(asking(lc("next"), 60 * MiB)));
  ASSERT_FALSE(refused.is_ok()) << "the holder's 60 MiB are taken";
  const auto killed = std::chrono::steady_clock::now();
  h.kill();
  std::optional<Result<std::unique_ptr<ipc::TenantClient>>> next;
  for (int i = 0; i < 200; ++i) {
    next.emplace(ipc::TenantClient::connect(client_options(asking(lc("next"), 60 * MiB))));
    if (next->is_ok()) break;
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(next->is_ok()) << next->status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 500ms);
  EXPECT_EQ((**next)->memory_quota(), (MemoryQuota{60 * MiB, 60 * MiB}));
  (**next)->close();
}

// Registrations racing for the last bytes: the books hand out each byte once. Eight LC tenants
// ask for 30 MiB of 100 at once: three get it, the others are refused; eight BE tenants then
// share what is left, never more than it.
TEST_F(DaemonTest, TenantsRacingForTheLastBytesNeverTakeTheBooksOver) {
  DaemonOptions o = options("streams");
  o.memory = MemoryPolicy{100 * MiB, 0.5};
  start(o);
  std::vector<std::unique_ptr<ipc::TenantClient>> reserved;  // kept through the BE round
  for (const bool reserve : {true, false}) {
    SCOPED_TRACE(reserve ? "LC reservations" : "BE limits");
    std::vector<std::unique_ptr<ipc::TenantClient>> admitted(8);
    std::vector<std::thread> racers;
    for (size_t i = 0; i < admitted.size(); ++i) {
      racers.emplace_back([&, i] {
        const std::string name = (reserve ? "lc" : "be") + std::to_string(i);
        auto c = ipc::TenantClient::connect(client_options(reserve ? asking(lc(name), 30 * MiB) : be(name)));
        if (c.is_ok()) admitted[i] = std::move(*c);
      });
    }
    for (std::thread& t : racers) t.join();
    uint64_t granted = 0;
    size_t tenants = 0;
    for (const auto& c : admitted) {
      if (!c) continue;
      ++tenants;
      granted += c->memory_quota().limit_bytes;
    }
    if (reserve) {
      EXPECT_EQ(tenants, 3u);
      EXPECT_EQ(granted, 90 * MiB);
    } else {
      EXPECT_EQ(tenants, 8u) << "BE tenants are limited, not refused";
      EXPECT_LE(granted, 10 * MiB) << "what the reservations left";
      EXPECT_GT(granted, 9 * MiB);
    }
    for (auto& c : admitted) {
      if (c) reserved.push_back(std::move(c));
    }
  }
  for (const auto& c : reserved) c->close();
}

// What the library reports of its memory reaches the tenant list and the metrics.
TEST_F(DaemonTest, ATenantsMemoryInUseReachesTheListAndTheMetrics) {
  DaemonOptions o = options("orion");
  o.memory = MemoryPolicy{100 * MiB, 0.5};
  start(o);
  auto c = ipc::TenantClient::connect(client_options(be("reporter")));
  ASSERT_TRUE(c.is_ok());
  (*c)->memory_used(5 * MiB, 7 * MiB);
  ipc::TenantMemory m;
  for (int i = 0; i < 100 && m.live_bytes != 5 * MiB; ++i) {
    std::this_thread::sleep_for(20ms);
    m = listed_memory(socket())["reporter"];
  }
  EXPECT_EQ(m.live_bytes, 5 * MiB);
  EXPECT_EQ(m.peak_bytes, 7 * MiB);
  EXPECT_EQ(m.limit_bytes, 50 * MiB);
  const std::string text = daemon_->metrics_text();
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_memory_bytes\{[^}]*name="reporter"[^}]*\} 5242880)"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(concord_tenant_memory_peak_bytes\{[^}]*name="reporter"[^}]*\} 7340032)"))) << text;
  const auto [rc, top] = top_once(socket());
  EXPECT_EQ(rc, 0) << top;
  EXPECT_TRUE(std::regex_search(top, std::regex(R"(reporter\s+BE.*\s5\.0M\s+7\.0M\s+50M lim)"))) << top;
  (*c)->close();
}

}  // namespace
}  // namespace concord::daemon
