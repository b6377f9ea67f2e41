// libconcord_intercept.so end to end without a GPU: driver-API programs (apps/standin_app.cpp) on
// the stand-in libcuda.so.1 (driver/), plain and preloaded, with and without concordd, and what
// the stand-in recorded of every launch (stream, context, SMs, shared memory, priority, times).
// The stand-in's times order events; bounds on them are asserted only with wide margins and
// printed, never taken as performance figures.
#include <gtest/gtest.h>
#include <pwd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "ipc/control_socket.h"
#include "ipc/tenant_client.h"
#include "standin_support.h"

namespace concord::standin_test {
namespace {

constexpr int kGreatest = -5;  // the stand-in's greatest stream priority (an H100's)

std::vector<json> by_kernel(const std::vector<json>& kernels, const std::string& name) {
  std::vector<json> out;
  for (const json& k : kernels) {
    if (k.at("kernel") == name) out.push_back(k);
  }
  return out;
}

// The failed calls in a record but the library's name probe (it asks cuFuncGetName first of a
// handle that may be a CUkernel, and cuKernelGetName when that fails).
std::vector<json> unexpected_errors(const Record& r) {
  std::vector<json> out;
  for (const json& e : r.errors()) {
    if (e.at("call") != "cuFuncGetName") out.push_back(e);
  }
  return out;
}
std::string dump_errors(const Record& r) {
  std::string s;
  for (const json& e : unexpected_errors(r)) s += e.dump() + "\n";
  return s;
}

// ---- without a daemon ------------------------------------------------------------------------

TEST(StandinPassThrough, WithoutADaemonEveryLaunchGoesThroughUnchanged) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"chains"}, {}, false);
  ASSERT_TRUE(plain.exit.ok()) << plain.exit.out << plain.exit.err;
  const AppRun pre = run_app(scratch, "pre", {"chains"}, {{"CONCORD_SOCKET", scratch.path("nobody-here.sock")}}, true);
  ASSERT_TRUE(pre.exit.ok()) << pre.exit.out << pre.exit.err;
  EXPECT_EQ(pre.exit.line.at("checksum"), plain.exit.line.at("checksum"));
  // The same kernels, in the same order on each stream, at the same priorities.
  EXPECT_EQ(pre.record.kernels().size(), plain.record.kernels().size());
  std::vector<uint64_t> plain_order, pre_order;
  for (const auto& [stream, tags] : tags_by_stream(plain.record.kernels())) plain_order.insert(plain_order.end(), tags.begin(), tags.end());
  for (const auto& [stream, tags] : tags_by_stream(pre.record.kernels())) pre_order.insert(pre_order.end(), tags.begin(), tags.end());
  EXPECT_EQ(pre_order, plain_order);
  for (const json& k : pre.record.kernels()) EXPECT_FALSE(k.at("priority_attribute").get<bool>() && k.at("api") != "cuLaunchKernelEx") << k.dump();
  EXPECT_NE(pre.exit.err.find("concord-intercept: pass-through"), std::string::npos) << pre.exit.err;
  EXPECT_EQ(pre.stats.at("mode"), "pass_through") << pre.stats.dump();
  EXPECT_EQ(pre.stats.at("launches"), pre.exit.line.at("launches_made")) << pre.stats.dump();
  EXPECT_EQ(pre.stats.at("launches"), pre.stats.at("passed_through"));
  EXPECT_TRUE(unexpected_errors(pre.record).empty()) << dump_errors(pre.record);
}

TEST(StandinPassThrough, DisabledTheLibraryIsSilentAndTouchesNothing) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"chains"}, {}, false);
  ASSERT_TRUE(plain.exit.ok());
  const AppRun pre = run_app(scratch, "pre", {"chains"}, {{"CONCORD_DISABLE", "1"}}, true);
  ASSERT_TRUE(pre.exit.ok()) << pre.exit.out << pre.exit.err;
  EXPECT_EQ(pre.exit.err.find("concord-intercept"), std::string::npos) << pre.exit.err;
  EXPECT_EQ(pre.stats.at("mode"), "pass_through");
  EXPECT_EQ(pre.stats.at("launches"), pre.stats.at("passed_through"));
  // Only the program's own streams (the library made none) and the same kernels.
  EXPECT_EQ(pre.record.of("stream").size(), plain.record.of("stream").size());
  EXPECT_EQ(pre.record.kernels().size(), plain.record.kernels().size());
  EXPECT_EQ(pre.exit.line.at("checksum"), plain.exit.line.at("checksum"));
}

struct BadSetting {
  const char* var;
  const char* value;
};
class StandinBadSetting : public ::testing::TestWithParam<BadSetting> {};

TEST_P(StandinBadSetting, IsNamedOnceAndTheProgramRunsPassThrough) {
  Scratch scratch;
  const BadSetting b = GetParam();
  Env env = {{"CONCORD_SOCKET", scratch.path("none.sock")}, {b.var, b.value}};
  if (std::string(b.var) == "CONCORD_TARGET_MS") env.emplace_back("CONCORD_CLASS", "lc");
  if (std::string(b.var) == "CONCORD_MEMORY_RESERVE") env.insert(env.end(), {{"CONCORD_CLASS", "lc"}, {"CONCORD_TARGET_MS", "50"}});
  const AppRun pre = run_app(scratch, "pre", {"accumulate", "launches=10"}, env, true);
  ASSERT_TRUE(pre.exit.ok()) << pre.exit.out << pre.exit.err;
  const std::string named = std::string(b.var) + "='" + b.value + "'";
  EXPECT_NE(pre.exit.err.find(named), std::string::npos) << pre.exit.err;
  EXPECT_EQ(std::count(pre.exit.err.begin(), pre.exit.err.end(), '\n'), 1) << pre.exit.err;
  EXPECT_EQ(pre.record.kernels().size(), 10u);
  EXPECT_EQ(pre.exit.line.at("value"), 10);
}

INSTANTIATE_TEST_SUITE_P(Settings, StandinBadSetting,
                         ::testing::Values(BadSetting{"CONCORD_CLASS", "realtime"}, BadSetting{"CONCORD_TARGET_MS", "soon"},
                                           BadSetting{"CONCORD_POLL_US", "0"}, BadSetting{"CONCORD_MARKER_EVERY", "-3"},
                                           BadSetting{"CONCORD_DISABLE", "yes"}, BadSetting{"CONCORD_WEIGHT", "0"},
                                           BadSetting{"CONCORD_MEMORY_RESERVE", "abc"}, BadSetting{"CONCORD_MEMORY_LIMIT", "-1"}),
                         [](const auto& info) { return std::string(info.param.var).substr(8); });

// ---- under leases ----------------------------------------------------------------------------

// Under orion an LC tenant's kernels all run at the greatest priority (its streams made at it, a
// launch attribute on the default streams), a BE tenant's at the least (an attribute where the
// program's stream has another); results and each stream's order are as without the library.
TEST(StandinLeases, LcAndBeKeepResultsOrderAndGetTheirLeasesPriority) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"chains"}, {}, false);
  ASSERT_TRUE(plain.exit.ok());
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  for (const std::string cls : {"lc", "be"}) {
    SCOPED_TRACE(cls);
    const AppRun r = run_app(scratch, cls, {"chains"}, tenant(d, cls), true);
    ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
    EXPECT_EQ(r.exit.line.at("checksum"), plain.exit.line.at("checksum"));
    EXPECT_EQ(r.record.kernels().size(), plain.record.kernels().size());
    const int want = cls == "lc" ? kGreatest : 0;
    for (const json& k : r.record.kernels()) EXPECT_EQ(k.at("priority"), want) << k.dump();
    EXPECT_EQ(r.stats.at("mode"), "active") << r.stats.dump();
    EXPECT_EQ(r.stats.at("released"), 0) << r.stats.dump();
    EXPECT_EQ(r.stats.at("leased").get<int>() + r.stats.at("captured").get<int>(), r.stats.at("launches").get<int>()) << r.stats.dump();
    EXPECT_LT(r.stats.at("markers").get<int>(), r.stats.at("leased").get<int>()) << "not an event per launch";
    EXPECT_GT(r.stats.at("completions").get<int>(), 0);
    if (cls == "lc") {
      // Every stream the program made was made at the greatest priority.
      for (const json& s : r.record.of("stream")) {
        if (!s.at("green").get<bool>()) {
          EXPECT_EQ(s.at("priority"), kGreatest) << s.dump();
        }
      }
      EXPECT_GT(r.stats.at("lc_raises").get<int>(), 0);
    }
    EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  }
  EXPECT_EQ(d.stop().code, 0);
}

// A graph an LC tenant launches on its legacy stream (which cannot be made at a priority) goes to
// a shadow stream of the lease's priority, between event hand-offs that keep the legacy stream's
// order.
TEST(StandinLeases, AnLcGraphOnTheLegacyStreamRunsOnAShadowStreamInOrder) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "lc", {"capture", "graph_launches=4", "graph_stream=legacy"}, tenant(d, "lc"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  std::vector<json> graph_kernels;
  for (const json& k : r.record.kernels()) {
    if (k.at("graph").get<int>() != 0) graph_kernels.push_back(k);
  }
  ASSERT_EQ(graph_kernels.size(), 20u);
  for (const json& k : graph_kernels) {
    EXPECT_EQ(k.at("priority"), kGreatest) << k.dump();
    EXPECT_FALSE(k.at("legacy").get<bool>()) << "on a shadow stream: " << k.dump();
  }
  // In launch order: launch l's five steps before launch l + 1's, one at a time.
  std::sort(graph_kernels.begin(), graph_kernels.end(), [](const json& a, const json& b) { return a.at("start_ns") < b.at("start_ns"); });
  for (size_t i = 1; i < graph_kernels.size(); ++i) {
    EXPECT_LE(graph_kernels[i - 1].at("graph_launch").get<int>(), graph_kernels[i].at("graph_launch").get<int>());
    EXPECT_LE(graph_kernels[i - 1].at("end_ns").get<uint64_t>(), graph_kernels[i].at("start_ns").get<uint64_t>());
  }
  EXPECT_EQ(r.stats.at("graphs"), 4);
  EXPECT_EQ(r.stats.at("on_priority_stream"), 4) << r.stats.dump();
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
}

// ---- the gate --------------------------------------------------------------------------------

struct Window {
  uint64_t begin = 0, end = 0;
};
// Each request's span, from its first kernel's queueing to its last kernel's end (tags: request
// << 16 | kernel).
std::vector<Window> request_windows(const std::vector<json>& kernels) {
  std::map<uint64_t, Window> w;
  for (const json& k : kernels) {
    Window& x = w[k.at("tag").get<uint64_t>() >> 16];
    const uint64_t q = k.at("queued_ns"), e = k.at("end_ns");
    x.begin = x.begin == 0 ? q : std::min(x.begin, q);
    x.end = std::max(x.end, e);
  }
  std::vector<Window> out;
  for (const auto& [r, x] : w) out.push_back(x);
  return out;
}

// The kernels' queueing times, sorted.
std::vector<uint64_t> queued_times(const std::vector<json>& kernels) {
  std::vector<uint64_t> out;
  for (const json& k : kernels) out.push_back(k.at("queued_ns"));
  std::sort(out.begin(), out.end());
  return out;
}

// How many of `queued` fall inside a window, past its first 3 ms (a BE launch admitted just
// before the LC's flag went up may be queued a moment after).
size_t queued_inside(const std::vector<Window>& windows, const std::vector<uint64_t>& queued) {
  constexpr uint64_t kGrace = 3'000'000;
  size_t n = 0;
  for (const Window& w : windows) {
    n += static_cast<size_t>(std::count_if(queued.begin(), queued.end(), [&](uint64_t q) { return q > w.begin + kGrace && q < w.end; }));
  }
  return n;
}

// Under orion (yielding to every LC tenant) no BE launch goes out while an LC request has work in
// flight, and the BE goes again soon after each request's work ends.
TEST(StandinGate, ABeLaunchWaitsWhileTheLcHasWorkInFlightAndGoesSoonAfter) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d.up());
  App be(scratch, "be", {"be", "ms=2500", "ns=1000000", "sync_every=1", "ready=" + scratch.path("be.ready")}, tenant(d, "be"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  App lc(scratch, "lc", {"lc", "requests=6", "kernels=10", "ns=4000000", "gap_us=80000", "settle_ms=100"}, tenant(d, "lc"), true);
  const AppRun l = lc.wait();
  const AppRun b = be.wait();
  ASSERT_TRUE(l.exit.ok()) << l.exit.out << l.exit.err;
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  const std::vector<Window> windows = request_windows(l.record.kernels());
  ASSERT_EQ(windows.size(), 6u);
  const std::vector<uint64_t> be_queued = queued_times(b.record.kernels());
  EXPECT_EQ(queued_inside(windows, be_queued), 0u) << "BE launches queued while an LC request had work in flight";
  uint64_t worst_resume = 0;
  for (const Window& w : windows) {
    const auto next = std::upper_bound(be_queued.begin(), be_queued.end(), w.end);
    if (next != be_queued.end()) worst_resume = std::max(worst_resume, *next - w.end);
  }
  std::printf("[ measured ] BE resumed at most %.2f ms after an LC request's last kernel ended (stand-in times)\n", worst_resume / 1e6);
  EXPECT_LT(worst_resume, 200'000'000u) << "the BE did not go again within 200 ms of the LC's work ending";
  EXPECT_GT(b.stats.at("gate_waits").get<int>(), 0) << b.stats.dump();
  EXPECT_GT(be_queued.size(), 100u) << "the BE ran between the requests";
  d.stop();
}

// An LC request whose host work comes between its kernels (each synchronised, then 10 ms on the
// host) holds the BE gate closed from its begin to its end, not only while its kernels run.
TEST(StandinGate, TheGateStaysClosedThroughAnLcRequestsHostWorkBetweenItsKernels) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d.up());
  App be(scratch, "be", {"be", "ms=1500", "ns=500000", "sync_every=1", "ready=" + scratch.path("be.ready")}, tenant(d, "be"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  App lc(scratch, "lc", {"lc", "requests=5", "kernels=4", "ns=2000000", "host_us=10000", "gap_us=60000", "settle_ms=100"},
         tenant(d, "lc"), true);
  const AppRun l = lc.wait();
  const AppRun b = be.wait();
  ASSERT_TRUE(l.exit.ok()) << l.exit.out << l.exit.err;
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  const std::vector<Window> windows = request_windows(l.record.kernels());
  ASSERT_EQ(windows.size(), 5u);
  const std::vector<uint64_t> be_queued = queued_times(b.record.kernels());
  EXPECT_EQ(queued_inside(windows, be_queued), 0u) << "BE launches queued during an LC request's host work";
  EXPECT_GT(be_queued.size(), 50u) << "the BE ran between the requests";
  d.stop();
}

// An LC tenant killed in the middle of a request leaves its flag on the board: the daemon lowers
// it when the tenant's connection goes, and the BE goes again.
TEST(StandinGate, AnLcKilledMidRequestDoesNotStarveTheBe) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d.up());
  App be(scratch, "be", {"be", "ms=3000", "ns=500000", "sync_every=1", "ready=" + scratch.path("be.ready")}, tenant(d, "be"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  App lc(scratch, "lc", {"lc", "requests=1", "kernels=2000", "ns=5000000", "ready=" + scratch.path("lc.ready")}, tenant(d, "lc"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("lc.ready")));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t killed_at = now_ns();
  lc.child().signal(SIGKILL);
  lc.wait();
  const AppRun b = be.wait();
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  uint64_t first_after = 0;
  size_t after = 0;
  for (const json& k : b.record.kernels()) {
    const uint64_t q = k.at("queued_ns");
    if (q > killed_at) {
      ++after;
      first_after = first_after == 0 ? q : std::min(first_after, q);
    }
  }
  ASSERT_GT(after, 0u) << "no BE launch after the LC died";
  std::printf("[ measured ] BE launched again %.1f ms after the LC was killed (stand-in times)\n", (first_after - killed_at) / 1e6);
  EXPECT_LT(first_after - killed_at, 2'500'000'000u);
  d.stop();
}

// The daemon's tenant list by name (empty when it does not answer).
std::map<std::string, ipc::TenantEntry> listed(const Daemon& d) {
  std::map<std::string, ipc::TenantEntry> out;
  Result<ipc::ControlClient> c = ipc::ControlClient::connect(d.socket());
  if (!c.is_ok()) return out;
  Result<ipc::Message> list = c->call(ipc::ListTenants{}, std::chrono::seconds(2));
  if (!list.is_ok() || !std::holds_alternative<ipc::TenantList>(*list)) return out;
  for (const ipc::TenantEntry& t : std::get<ipc::TenantList>(*list).tenants) out[t.name] = t;
  return out;
}

// The daemon killed: every tenant turns pass-through and runs on, none hangs.
TEST(StandinDaemonGone, KilledDaemonLeavesEveryTenantRunningPassThrough) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  App be(scratch, "be", {"be", "ms=2000", "ns=200000", "sync_every=4", "ready=" + scratch.path("be.ready")}, tenant(d, "be"), true);
  App lc(scratch, "lc", {"lc", "requests=60", "kernels=4", "ns=500000", "gap_us=20000", "ready=" + scratch.path("lc.ready")},
         tenant(d, "lc"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  ASSERT_TRUE(wait_for_file(scratch.path("lc.ready")));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t killed_at = now_ns();
  d.child().signal(SIGKILL);
  const AppRun l = lc.wait(std::chrono::seconds(20));
  const AppRun b = be.wait(std::chrono::seconds(20));
  for (const AppRun* r : {&l, &b}) {
    ASSERT_TRUE(r->exit.ok()) << r->exit.code << r->exit.out << r->exit.err;
    EXPECT_EQ(r->stats.at("daemon_gone"), true) << r->stats.dump();
    const std::vector<json> ks = r->record.kernels();
    const auto later = std::count_if(ks.begin(), ks.end(), [&](const json& k) { return k.at("queued_ns").get<uint64_t>() > killed_at + 500'000'000; });
    EXPECT_GT(later, 0) << "no launch half a second after the daemon died";
    EXPECT_GT(r->stats.at("passed_through").get<int>(), 0) << r->stats.dump();
  }
}

// A BE tenant held at its gate when the daemon dies is released: pass-through ignores the board.
TEST(StandinDaemonGone, ABeHeldAtItsGateWhenTheDaemonDiesGoesOn) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d.up());
  App lc(scratch, "lc", {"lc", "requests=1", "kernels=1200", "ns=5000000", "ready=" + scratch.path("lc.ready")}, tenant(d, "lc"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("lc.ready")));
  // The BE registers while the LC's request is in flight: its first lease already yields to it.
  App be(scratch, "be", {"be", "launches=20", "ns=100000", "sync_every=1"}, tenant(d, "be"), true);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const uint64_t killed_at = now_ns();
  d.child().signal(SIGKILL);
  const AppRun b = be.wait(std::chrono::seconds(15));
  ASSERT_TRUE(b.exit.ok()) << b.exit.code << b.exit.out << b.exit.err;
  ASSERT_EQ(b.record.kernels().size(), 20u);
  uint64_t first = UINT64_MAX;
  for (const json& k : b.record.kernels()) first = std::min(first, k.at("queued_ns").get<uint64_t>());
  EXPECT_GT(first, killed_at - 50'000'000) << "the BE launched while the LC's request was in flight";
  std::printf("[ measured ] the held BE launched %.1f ms after the daemon was killed (stand-in times)\n",
              (static_cast<double>(first) - static_cast<double>(killed_at)) / 1e6);
  EXPECT_GT(b.stats.at("gate_waits").get<int>(), 0);
  EXPECT_EQ(b.stats.at("daemon_gone"), true);
  lc.child().signal(SIGKILL);
}

// ---- the daemon restarted ---------------------------------------------------------------------

// Each launch in a record ran once: its tag (unique per launch in the program) appears once.
size_t repeated_tags(const std::vector<json>& kernels) {
  std::set<uint64_t> seen;
  size_t repeated = 0;
  for (const json& k : kernels) repeated += !seen.insert(k.at("tag").get<uint64_t>()).second;
  return repeated;
}

class StandinDaemonRestart : public ::testing::TestWithParam<int> {};

// concordd killed (SIGKILL, a crash) or stopped (SIGTERM, as `systemctl restart` and a package
// upgrade do) under a running LC service and BE job, and started again 300 ms later: both are
// registered with the new daemon, their launches going through it, within a second of its start;
// the LC's gate holds the BE again; and every launch of both ran exactly once.
TEST_P(StandinDaemonRestart, BothTenantsAreLeasedAgainWithinASecondAndTheGateHoldsAgain) {
  Scratch scratch;
  auto d = std::make_unique<Daemon>(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d->up());
  App be(scratch, "be", {"be", "ms=5000", "ns=500000", "sync_every=1", "ready=" + scratch.path("be.ready")}, tenant(*d, "be"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  App lc(scratch, "lc", {"lc", "requests=90", "kernels=4", "ns=2000000", "gap_us=40000", "ready=" + scratch.path("lc.ready")},
         tenant(*d, "lc"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("lc.ready")));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const std::map<std::string, ipc::TenantEntry> before = listed(*d);
  ASSERT_TRUE(before.count("lc") && before.count("be")) << "both were not tenants of the first daemon";
  d->child().signal(GetParam());
  (void)d->child().wait(std::chrono::seconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the tenants run pass-through
  d = std::make_unique<Daemon>(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d->up());
  const uint64_t up_at = now_ns();
  uint64_t leased_at = 0;
  while (leased_at == 0 && now_ns() - up_at < 3'000'000'000u) {
    const std::map<std::string, ipc::TenantEntry> now = listed(*d);
    const auto launching = [&](const char* name) { return now.count(name) && now.at(name).launches > 0; };
    if (launching("lc") && launching("be")) leased_at = now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(leased_at, 0u) << "both tenants were not launching through the new daemon within 3 s";
  std::printf("[ measured ] both tenants launched through the restarted daemon %.1f ms after it took connections\n",
              (leased_at - up_at) / 1e6);
  EXPECT_LT(leased_at - up_at, 1'000'000'000u);
  const AppRun l = lc.wait();
  const AppRun b = be.wait();
  ASSERT_TRUE(l.exit.ok()) << l.exit.out << l.exit.err;
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  for (const AppRun* r : {&l, &b}) {
    EXPECT_EQ(r->stats.at("reconnects"), 1) << r->stats.dump();
    EXPECT_EQ(r->stats.at("daemon_gone"), false) << r->stats.dump();
    EXPECT_GT(r->stats.at("passed_through").get<int>(), 0) << "no launch passed through while the daemon was away";
    EXPECT_NE(r->exit.err.find("registered again with concordd"), std::string::npos) << r->exit.err;
  }
  // Every launch ran once: as many kernels as the programs made, no tag twice.
  EXPECT_EQ(l.record.kernels().size(), 90u * 4u);
  EXPECT_EQ(repeated_tags(l.record.kernels()), 0u);
  EXPECT_EQ(b.record.kernels().size(), b.exit.line.at("launches").get<size_t>());
  EXPECT_EQ(repeated_tags(b.record.kernels()), 0u);
  // The gate holds again: no BE launch queued inside an LC request that began once both were back.
  std::vector<Window> after;
  for (const Window& w : request_windows(l.record.kernels())) {
    if (w.begin > leased_at) after.push_back(w);
  }
  ASSERT_GE(after.size(), 10u) << "too few LC requests after the restart to judge the gate";
  const std::vector<uint64_t> be_queued = queued_times(b.record.kernels());
  EXPECT_EQ(queued_inside(after, be_queued), 0u) << "BE launches queued while an LC request had work in flight after the restart";
  EXPECT_GT(std::count_if(be_queued.begin(), be_queued.end(), [&](uint64_t q) { return q > leased_at; }), 50)
      << "the BE did not run between the LC's requests after the restart";
  d->stop();
}

INSTANTIATE_TEST_SUITE_P(Signals, StandinDaemonRestart, ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& p) { return p.param == SIGKILL ? "Killed" : "Stopped"; });

// The daemon restarted every 2 s (killed and stopped in turn) under an LC service and a BE job for
// 12 s (CONCORD_RESTART_SOAK_SECONDS: longer; CONCORD_RESTART_SOAK_OUT: a JSON summary there):
// after each restart both are launching through the new daemon within a second; no kernel of
// either runs twice or is lost; each registered again once per restart; and their resident memory
// stays within 10% (+1 MiB) of its first sample after the first restart.
TEST(StandinRestartSoak, EveryRestartFindsBothTenantsBackAndNoLaunchRunsTwice) {
  const char* env_seconds = std::getenv("CONCORD_RESTART_SOAK_SECONDS");
  const double seconds = env_seconds ? std::atof(env_seconds) : 12.0;
  ASSERT_GE(seconds, 6.0) << "CONCORD_RESTART_SOAK_SECONDS is under 6";
  constexpr auto kEvery = std::chrono::seconds(2);
  Scratch scratch;
  auto d = std::make_unique<Daemon>(scratch, "orion:bound_share=0");
  ASSERT_TRUE(d->up());
  const long requests = static_cast<long>(seconds * 1000 / 30);  // a request (8 ms) every 30 ms or so
  App be(scratch, "be", {"be", "ms=" + std::to_string(static_cast<long>(seconds * 1000)), "ns=300000", "sync_every=2",
                         "ready=" + scratch.path("be.ready")}, tenant(*d, "be"), true);
  App lc(scratch, "lc", {"lc", "requests=" + std::to_string(requests), "kernels=4", "ns=2000000", "gap_us=22000",
                         "ready=" + scratch.path("lc.ready")}, tenant(*d, "lc"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  ASSERT_TRUE(wait_for_file(scratch.path("lc.ready")));
  std::vector<double> back_ms;
  std::vector<std::pair<long, long>> rss;  // lc, be (KiB)
  int restarts = 0, lost = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start + kEvery + std::chrono::seconds(1) < std::chrono::duration<double>(seconds)) {
    std::this_thread::sleep_for(kEvery);
    if (!lc.child().running() || !be.child().running()) break;
    if (restarts > 0) rss.emplace_back(lc.child().rss_kib(), be.child().rss_kib());
    d->child().signal(restarts % 2 == 0 ? SIGKILL : SIGTERM);
    (void)d->child().wait(std::chrono::seconds(10));
    ++restarts;
    d = std::make_unique<Daemon>(scratch, "orion:bound_share=0");
    ASSERT_TRUE(d->up());
    const uint64_t up_at = now_ns();
    bool both = false;
    while (!both && now_ns() - up_at < 3'000'000'000u) {
      const std::map<std::string, ipc::TenantEntry> now = listed(*d);
      both = now.count("lc") && now.count("be") && now.at("lc").launches > 0 && now.at("be").launches > 0;
      if (!both) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    lost += !both;
    back_ms.push_back((now_ns() - up_at) / 1e6);
  }
  const AppRun l = lc.wait(std::chrono::seconds(static_cast<long>(seconds) + 30));
  const AppRun b = be.wait(std::chrono::seconds(static_cast<long>(seconds) + 30));
  d->stop();
  ASSERT_GE(restarts, 2);
  ASSERT_TRUE(l.exit.ok()) << l.exit.out << l.exit.err;
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  const double worst = back_ms.empty() ? 0 : *std::max_element(back_ms.begin(), back_ms.end());
  std::printf("[ measured ] %d restarts in %.0f s: both tenants launching again at most %.1f ms after each\n", restarts, seconds, worst);
  EXPECT_EQ(lost, 0) << "after some restart a tenant was not launching through the new daemon within 3 s";
  EXPECT_LT(worst, 1000.0);
  EXPECT_EQ(l.record.kernels().size(), static_cast<size_t>(requests) * 4u);
  EXPECT_EQ(repeated_tags(l.record.kernels()), 0u);
  EXPECT_EQ(b.record.kernels().size(), b.exit.line.at("launches").get<size_t>());
  EXPECT_EQ(repeated_tags(b.record.kernels()), 0u);
  for (const AppRun* r : {&l, &b}) EXPECT_EQ(r->stats.at("reconnects").get<int>(), restarts) << r->stats.dump();
  ASSERT_GE(rss.size(), 1u);
  const auto flat = [](long first, long last) { return last <= first + first / 10 + 1024; };
  EXPECT_TRUE(flat(rss.front().first, rss.back().first)) << "LC resident memory " << rss.front().first << " -> " << rss.back().first << " KiB";
  EXPECT_TRUE(flat(rss.front().second, rss.back().second)) << "BE resident memory " << rss.front().second << " -> " << rss.back().second << " KiB";
  if (const char* out = std::getenv("CONCORD_RESTART_SOAK_OUT")) {
    json j{{"seconds", seconds},
           {"restart_every_s", 2},
           {"restarts", restarts},
           {"signals", "SIGKILL and SIGTERM in turn"},
           {"back_ms", back_ms},
           {"lost", lost},
           {"lc_kernels", l.record.kernels().size()},
           {"lc_repeated", repeated_tags(l.record.kernels())},
           {"be_kernels", b.record.kernels().size()},
           {"be_launches_made", b.exit.line.at("launches")},
           {"be_repeated", repeated_tags(b.record.kernels())},
           {"lc_stats", l.stats},
           {"be_stats", b.stats},
           {"rss_kib_lc_be", rss}};
    std::ofstream(out) << j.dump(1) << "\n";
  }
}

// With CONCORD_RECONNECT=0 a tenant whose daemon went stays pass-through: a daemon started again
// never sees it.
TEST(StandinReconnectOff, ATenantWhoseDaemonWentStaysPassThrough) {
  Scratch scratch;
  auto d = std::make_unique<Daemon>(scratch, "orion");
  ASSERT_TRUE(d->up());
  Env env = tenant(*d, "be");
  env.emplace_back("CONCORD_RECONNECT", "0");
  App be(scratch, "be", {"be", "ms=2000", "ns=200000", "sync_every=4", "ready=" + scratch.path("be.ready")}, env, true);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  d->child().signal(SIGKILL);
  (void)d->child().wait(std::chrono::seconds(10));
  d = std::make_unique<Daemon>(scratch, "orion");
  ASSERT_TRUE(d->up());
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(listed(*d).count("be"), 0u) << "a tenant with CONCORD_RECONNECT=0 registered again";
  const AppRun b = be.wait();
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  EXPECT_EQ(b.stats.at("reconnects"), 0);
  EXPECT_EQ(b.stats.at("daemon_gone"), true);
  d->stop();
}

// ---- room ------------------------------------------------------------------------------------

// An LC tenant with work in flight all along: a client of the test's own.
std::unique_ptr<ipc::TenantClient> lc_in_flight(const Daemon& d) {
  ipc::TenantClientOptions o;
  o.socket_path = d.socket();
  o.info = ipc::RegisterTenant{TenantClass::latency_critical, 50'000'000, 1, 0, "lc", ""};
  o.connect_timeout = std::chrono::seconds(5);
  Result<std::unique_ptr<ipc::TenantClient>> c = ipc::TenantClient::connect(o);
  if (!c) {
    ADD_FAILURE() << "the test's LC tenant did not register: " << c.status().to_string();
    return nullptr;
  }
  // The lease naming its slot may follow the registration by a moment.
  for (int i = 0; i < 500 && (*c)->lease().lc_slot == ipc::kNoLcSlot; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if ((*c)->lease().lc_slot == ipc::kNoLcSlot) return nullptr;
  // A request open backs the flag (the daemon lowers one its tenant's books do not back).
  (void)(*c)->request_begin();
  (*c)->raise_lc((*c)->lease().lc_slot);
  return std::move(*c);
}

std::vector<json> residency_kernels(const AppRun& r) { return by_kernel(r.record.kernels(), "standin_residency"); }

TEST(StandinRoom, BeKernelsBesideLcWorkRunOnAGreenContextOfTheLeasedSmsPaddedToTheLeasedBlocks) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"room", "launches=6", "settle_ms=0"}, {}, false);
  ASSERT_TRUE(plain.exit.ok()) << plain.exit.out;
  for (const json& k : residency_kernels(plain)) {
    EXPECT_EQ(k.at("peak_blocks_per_sm"), 32) << k.dump();
    EXPECT_EQ(k.at("sms_used").size(), 132u);
  }
  Daemon d(scratch, "orion:bound_share=0;be_sms=16;be_blocks_per_sm=2");
  ASSERT_TRUE(d.up());
  auto lc = lc_in_flight(d);
  ASSERT_TRUE(lc);
  const AppRun r = run_app(scratch, "be", {"room", "launches=6"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.exit.line.at("checksum"), plain.exit.line.at("checksum")) << "padding changes nothing the kernel computes";
  const std::vector<json> ks = residency_kernels(r);
  ASSERT_EQ(ks.size(), 6u);
  for (const json& k : ks) {
    EXPECT_TRUE(k.at("green").get<bool>()) << k.dump();
    EXPECT_EQ(k.at("context_sms"), 16) << k.dump();
    EXPECT_LE(k.at("sms_used").size(), 16u) << k.dump();
    EXPECT_LE(k.at("peak_blocks_per_sm").get<int>(), 2) << k.dump();
    EXPECT_GT(k.at("dynamic_smem").get<int>(), 0) << k.dump();
  }
  EXPECT_LE(r.exit.line.at("peak_blocks_per_sm").get<int>(), 2);
  EXPECT_EQ(r.stats.at("room_sms"), 6) << r.stats.dump();
  EXPECT_EQ(r.stats.at("room_padded"), 6) << r.stats.dump();
  EXPECT_EQ(r.stats.at("room_fallbacks"), 0) << r.stats.dump();
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  lc->close();
  d.stop();
}

// A driver-API CUfunction belongs to its module's context: it cannot go to a green context, so it
// is launched on the program's stream, still padded, and the library remembers it.
TEST(StandinRoom, AFunctionOfThePrimaryContextIsPaddedOnTheProgramsStream) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0;be_sms=16;be_blocks_per_sm=2");
  ASSERT_TRUE(d.up());
  auto lc = lc_in_flight(d);
  ASSERT_TRUE(lc);
  const AppRun r = run_app(scratch, "be", {"room", "launches=6", "handle=function"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  const std::vector<json> ks = residency_kernels(r);
  ASSERT_EQ(ks.size(), 6u);
  for (const json& k : ks) {
    EXPECT_FALSE(k.at("green").get<bool>()) << k.dump();
    EXPECT_LE(k.at("peak_blocks_per_sm").get<int>(), 2) << k.dump();
  }
  EXPECT_EQ(r.stats.at("green_fallbacks"), 1) << "tried once, then remembered: " << r.stats.dump();
  EXPECT_EQ(r.stats.at("room_padded"), 6) << r.stats.dump();
  // The refusals the record shows are the stand-in's answers to that first try, padded and not.
  const std::vector<json> errors = unexpected_errors(r.record);
  EXPECT_EQ(errors.size(), 2u) << dump_errors(r.record);
  for (const json& e : errors) EXPECT_NE(e.at("detail").get<std::string>().find("launched on a stream of context"), std::string::npos) << e.dump();
  lc->close();
  d.stop();
}

// Either cap alone: an SM count puts BE kernels on a green context of that many SMs (an odd count
// rounded up to whole pairs, never fewer than leased) and leaves their shared memory alone; a
// residency cap pads them on the program's stream.
TEST(StandinRoom, EachCapAloneIsAppliedAlone) {
  Scratch scratch;
  {
    Daemon d(scratch, "orion:bound_share=0;be_sms=15");
    ASSERT_TRUE(d.up());
    auto lc = lc_in_flight(d);
    ASSERT_TRUE(lc);
    const AppRun r = run_app(scratch, "be-sms", {"room", "launches=4"}, tenant(d, "be"), true);
    ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
    const std::vector<json> ks = residency_kernels(r);
    ASSERT_EQ(ks.size(), 4u);
    for (const json& k : ks) {
      EXPECT_TRUE(k.at("green").get<bool>()) << k.dump();
      EXPECT_EQ(k.at("context_sms"), 16) << "15 SMs leased: a green context of 8 pairs " << k.dump();
      EXPECT_EQ(k.at("dynamic_smem"), 0) << k.dump();
      EXPECT_EQ(k.at("peak_blocks_per_sm"), 32) << k.dump();
    }
    EXPECT_EQ(r.stats.at("room_sms"), 4) << r.stats.dump();
    EXPECT_EQ(r.stats.at("room_padded"), 0) << r.stats.dump();
    lc->close();
    d.stop();
  }
  {
    Daemon d(scratch, "orion:bound_share=0;be_blocks_per_sm=2");
    ASSERT_TRUE(d.up());
    auto lc = lc_in_flight(d);
    ASSERT_TRUE(lc);
    const AppRun r = run_app(scratch, "be-blocks", {"room", "launches=4"}, tenant(d, "be"), true);
    ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
    const std::vector<json> ks = residency_kernels(r);
    ASSERT_EQ(ks.size(), 4u);
    for (const json& k : ks) {
      EXPECT_FALSE(k.at("green").get<bool>()) << k.dump();
      EXPECT_GT(k.at("dynamic_smem").get<int>(), 0) << k.dump();
      EXPECT_LE(k.at("peak_blocks_per_sm").get<int>(), 2) << k.dump();
    }
    EXPECT_EQ(r.stats.at("room_padded"), 4) << r.stats.dump();
    EXPECT_EQ(r.stats.at("room_sms"), 0) << r.stats.dump();
    lc->close();
    d.stop();
  }
}

TEST(StandinRoom, WithoutLcWorkInFlightBeKernelsAreUntouched) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0;be_sms=16;be_blocks_per_sm=2");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "be", {"room", "launches=4"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  for (const json& k : residency_kernels(r)) {
    EXPECT_FALSE(k.at("green").get<bool>()) << k.dump();
    EXPECT_EQ(k.at("dynamic_smem"), 0) << k.dump();
    EXPECT_EQ(k.at("peak_blocks_per_sm"), 32) << k.dump();
  }
  EXPECT_EQ(r.stats.at("room_asked"), 0) << r.stats.dump();
  d.stop();
}

TEST(StandinRoom, ConcordRoomZeroIgnoresTheLeasesRoom) {
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0;be_sms=16;be_blocks_per_sm=2");
  ASSERT_TRUE(d.up());
  auto lc = lc_in_flight(d);
  ASSERT_TRUE(lc);
  Env env = tenant(d, "be");
  env.emplace_back("CONCORD_ROOM", "0");
  const AppRun r = run_app(scratch, "be", {"room", "launches=4"}, env, true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  for (const json& k : residency_kernels(r)) {
    EXPECT_FALSE(k.at("green").get<bool>()) << k.dump();
    EXPECT_EQ(k.at("dynamic_smem"), 0) << k.dump();
  }
  lc->close();
  d.stop();
}

// ---- per-launch decisions --------------------------------------------------------------------

// Under a policy without a lease form the BE tenant waits for each launch's decision, the LC
// tenant for none; the results are as without the library.
TEST(StandinPerLaunch, TheBeWaitsForEachDecisionTheLcForNone) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"chains"}, {}, false);
  Daemon d(scratch, "serial");
  ASSERT_TRUE(d.up());
  for (const std::string cls : {"be", "lc"}) {
    SCOPED_TRACE(cls);
    const AppRun r = run_app(scratch, cls, {"chains"}, tenant(d, cls), true);
    ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
    EXPECT_EQ(r.exit.line.at("checksum"), plain.exit.line.at("checksum"));
    EXPECT_EQ(r.record.kernels().size(), plain.record.kernels().size());
    if (cls == "be") {
      EXPECT_EQ(r.stats.at("released").get<int>() + r.stats.at("captured").get<int>(), r.stats.at("launches").get<int>()) << r.stats.dump();
      EXPECT_EQ(r.stats.at("leased"), 0);
      // Each decided launch gets its marker: the engine matches every launch's end.
      EXPECT_GE(r.stats.at("markers").get<int>(), r.stats.at("released").get<int>());
    } else {
      EXPECT_EQ(r.stats.at("released"), 0);
      EXPECT_GT(r.stats.at("leased").get<int>(), 0);
    }
    EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  }
  d.stop();
}

// The most BE kernels queued and not yet ended at any one time.
size_t most_in_flight(const std::vector<json>& kernels) {
  std::vector<std::pair<uint64_t, int>> edges;
  for (const json& k : kernels) {
    edges.emplace_back(k.at("queued_ns").get<uint64_t>(), +1);
    edges.emplace_back(k.at("end_ns").get<uint64_t>(), -1);
  }
  std::sort(edges.begin(), edges.end());
  int now = 0, most = 0;
  for (const auto& [t, d] : edges) most = std::max(most, now += d);
  return static_cast<size_t>(most);
}

TEST(StandinPerLaunch, BeDepthBoundsTheBeLaunchesReleasedAndNotEnded) {
  Scratch scratch;
  size_t unbounded = 0, bounded = 0;
  for (const int depth : {0, 2}) {
    Daemon d(scratch, "streams", {"--per-launch", "--be-depth", std::to_string(depth)});
    ASSERT_TRUE(d.up());
    const AppRun r = run_app(scratch, "be" + std::to_string(depth), {"be", "launches=40", "ns=2000000", "sync_every=0"}, tenant(d, "be"), true);
    ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
    ASSERT_EQ(r.record.kernels().size(), 40u);
    (depth == 0 ? unbounded : bounded) = most_in_flight(r.record.kernels());
    d.stop();
  }
  std::printf("[ measured ] BE kernels queued and not ended at most: %zu without a depth, %zu with --be-depth 2\n", unbounded, bounded);
  EXPECT_LE(bounded, 2u);
  EXPECT_GT(unbounded, 2u);
}

// Round-robin (one launch at a time, the turn passing from tenant to tenant) keeps its turns under
// the daemon: it does not repeat its decisions, so no launch is released ahead of its turn. Two BE
// tenants of 12 launches each: no two of their kernels overlap on the device, and while both have
// launches left they alternate. A follow-on release once let each tenant run its launches back to
// back beside the other's (the order aaaaaaaaaaababbbbbbbbbbb, 23 overlapping pairs).
TEST(StandinPerLaunch, RoundRobinKeepsItsTurnsUnderTheDaemon) {
  Scratch scratch;
  Daemon d(scratch, "round-robin");
  ASSERT_TRUE(d.up());
  const std::vector<std::string> args = {"be", "launches=12", "ns=2000000", "sync_every=0", "settle_ms=300"};
  App a(scratch, "a", args, tenant(d, "be", "a"), true);
  App b(scratch, "b", args, tenant(d, "be", "b"), true);
  const AppRun ra = a.wait();
  const AppRun rb = b.wait();
  ASSERT_TRUE(ra.exit.ok()) << ra.exit.out << ra.exit.err;
  ASSERT_TRUE(rb.exit.ok()) << rb.exit.out << rb.exit.err;
  ASSERT_EQ(ra.record.kernels().size(), 12u);
  ASSERT_EQ(rb.record.kernels().size(), 12u);
  EXPECT_EQ(ra.stats.at("released"), 12) << ra.stats.dump();
  struct Span {
    uint64_t start, end;
    char who;
  };
  std::vector<Span> all;
  for (const auto& [r, who] : {std::pair{&ra, 'a'}, std::pair{&rb, 'b'}}) {
    for (const json& k : r->record.kernels()) all.push_back({k.at("start_ns").get<uint64_t>(), k.at("end_ns").get<uint64_t>(), who});
  }
  std::sort(all.begin(), all.end(), [](const Span& x, const Span& y) { return x.start < y.start; });
  std::string order;
  size_t overlaps = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    order += all[i].who;
    for (size_t j = i + 1; j < all.size() && all[j].start < all[i].end; ++j) overlaps += all[j].who != all[i].who;
  }
  std::printf("[ measured ] order of the two tenants' kernels: %s\n", order.c_str());
  EXPECT_EQ(overlaps, 0u) << order;
  // While both have launches left (from the second tenant's first kernel to the first tenant's
  // last), the turn passes at every launch; a run of two allows for one notice arriving late.
  const size_t from = order.find_first_not_of(order[0]);
  const size_t to = std::min(order.rfind('a'), order.rfind('b'));
  ASSERT_NE(from, std::string::npos) << order;
  size_t longest = 1;
  for (size_t i = from + 1, run = 1; i <= to; ++i) longest = std::max(longest, run = order[i] == order[i - 1] ? run + 1 : 1);
  EXPECT_LE(longest, 2u) << order;
  d.stop();
}

// Under a lease the library holds the cap itself: orion's be_depth puts an in-flight cap in a BE
// tenant's lease, and its kernels queued and not yet ended never exceed it.
TEST(StandinLeases, ABeLeasesInFlightCapBoundsItsKernelsQueuedAndNotEnded) {
  Scratch scratch;
  Daemon d(scratch, "orion:be_depth=2");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "be", {"be", "launches=40", "ns=2000000", "sync_every=0"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  ASSERT_EQ(r.record.kernels().size(), 40u);
  const size_t most = most_in_flight(r.record.kernels());
  std::printf("[ measured ] BE kernels queued and not ended at most %zu under a lease capping them at 2\n", most);
  EXPECT_LE(most, 2u);
  EXPECT_EQ(r.stats.at("leased"), 40) << r.stats.dump();
  EXPECT_GT(r.stats.at("cap_waits").get<int>(), 0) << r.stats.dump();
  d.stop();
}

// A synchronisation that returns is the completion of every launch it covered: a BE tenant that
// synchronises after each launch has each completion reported without a marker behind it.
// Many threads launching at once under a lease, on a stream they share and on their own: every
// launch runs once, every notice reaches the daemon in the order it numbers them (a notice out of
// order would end the tenant: the library would turn pass-through), and the daemon's books of the
// tenant close when it leaves (no launch left outstanding).
TEST(StandinLeases, ManyThreadsLaunchingAtOnceAreNoticedInOrderAndAllEnd) {
  Scratch scratch;
  Daemon d(scratch, "streams");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "be", {"crowd", "threads=6", "launches=400"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.stats.at("leased").get<int>(), 2 * 6 * 400) << r.stats.dump();
  EXPECT_EQ(r.stats.at("passed_through").get<int>(), 0) << r.stats.dump();
  EXPECT_FALSE(r.stats.at("daemon_gone").get<bool>()) << r.stats.dump();
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
  std::ifstream in(scratch.path("concordd.err"));
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // At the daemon's log level (warn) a tenant that leaves cleanly says nothing; one that broke the
  // protocol, or left with launches outstanding, is a tenant_dropped line.
  EXPECT_EQ(log.find("tenant_dropped"), std::string::npos) << log;
}

TEST(StandinLeases, ASynchronisationIsTheCompletionOfTheLaunchesItCovered) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "be", {"be", "launches=30", "ns=100000", "sync_every=1"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_GE(r.stats.at("completions").get<int>(), 30) << "each synchronisation reported: " << r.stats.dump();
  EXPECT_LT(r.stats.at("markers").get<int>(), 10) << "markers where synchronisations said it all: " << r.stats.dump();
  d.stop();
}

// ---- capture ---------------------------------------------------------------------------------

class StandinCapture : public ::testing::TestWithParam<const char*> {};

// Launches into a capturing stream are left alone (no notice, no marker, no other stream), nothing
// the library does meanwhile breaks the capture, and each graph launch is one launch.
TEST_P(StandinCapture, CapturedLaunchesAreUntouchedAndEachGraphLaunchCountsOnce) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  // One launch on the stream just before its capture: the completion thread owes it a tail marker
  // while the capture runs, and must not record it there (it would join the graph).
  const AppRun r = run_app(scratch, "lc", {"capture", std::string("mode=") + GetParam(), "graph_launches=3", "before=1"},
                           tenant(d, "lc"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err << dump_errors(r.record);
  const std::vector<json> graphs = r.record.of("graph");
  ASSERT_EQ(graphs.size(), 1u);
  EXPECT_EQ(graphs[0].at("kernels"), 5);
  EXPECT_EQ(graphs[0].at("event_records"), 0) << "a marker joined the capture";
  EXPECT_EQ(graphs[0].at("other_nodes"), 0);
  EXPECT_EQ(r.stats.at("captured"), 5) << r.stats.dump();
  EXPECT_EQ(r.stats.at("graphs"), 3) << r.stats.dump();
  const int side = r.exit.line.at("side_launches");
  EXPECT_EQ(r.stats.at("leased"), side + 3 + 1) << r.stats.dump();
  size_t graph_kernels = 0;
  for (const json& k : r.record.kernels()) graph_kernels += k.at("graph").get<int>() != 0 ? 1 : 0;
  EXPECT_EQ(graph_kernels, 15u);
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
}
INSTANTIATE_TEST_SUITE_P(Modes, StandinCapture, ::testing::Values("global", "thread_local", "relaxed"));

// A launch on the legacy stream while a blocking stream captures would join the capture: the
// library cannot even ask the legacy stream whether it captures (the driver refuses the question)
// and leaves the launch to the real call, which refuses it as it does without the library.
TEST(StandinCaptureLegacy, ALaunchThatWouldJoinACaptureIsLeftToTheDriver) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"capture_legacy"}, {}, false);
  ASSERT_TRUE(plain.exit.ok()) << plain.exit.out << plain.exit.err;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "lc", {"capture_legacy"}, tenant(d, "lc"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.exit.line.at("legacy_result"), plain.exit.line.at("legacy_result"));
  EXPECT_EQ(r.exit.line.at("end_result"), plain.exit.line.at("end_result"));
  EXPECT_EQ(r.stats.at("captured"), 2) << "the captured launch and the refused one: " << r.stats.dump();
  EXPECT_EQ(r.stats.at("leased"), 0) << "nothing noticed, marked or moved: " << r.stats.dump();
  for (const json& e : r.record.errors()) {
    EXPECT_NE(e.at("call"), "cuEventRecord") << "a marker recorded on the legacy stream: " << e.dump();
  }
  d.stop();
}

// ---- streams and lookups ---------------------------------------------------------------------

TEST(StandinStreams, EachThreadsDefaultStreamIsItsOwnAndKeepsItsOrder) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "lc", {"ptsz", "threads=3", "steps=20"}, tenant(d, "lc"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  const auto streams = tags_by_stream(r.record.kernels());
  ASSERT_EQ(streams.size(), 3u);
  for (const auto& [stream, tags] : streams) {
    ASSERT_EQ(tags.size(), 20u);
    for (size_t i = 0; i < tags.size(); ++i) EXPECT_EQ(tags[i] & 0xffff, i) << "stream " << stream;
    const uint64_t thread = tags[0] >> 16;
    for (uint64_t t : tags) EXPECT_EQ(t >> 16, thread) << "one thread's launches on one stream";
  }
  for (const json& k : r.record.kernels()) {
    EXPECT_TRUE(k.at("per_thread").get<bool>()) << k.dump();
    EXPECT_EQ(k.at("priority"), kGreatest) << k.dump();
  }
  // An LC tenant marks every launch on a per-thread default stream (no other thread may).
  EXPECT_GE(r.stats.at("markers").get<int>(), 60) << r.stats.dump();
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
}

TEST(StandinLookups, GetProcAddressOfBothAbisAndDlsymGiveTheWrappers) {
  Scratch scratch;
  const AppRun plain = run_app(scratch, "plain", {"procaddress"}, {}, false);
  ASSERT_TRUE(plain.exit.ok()) << plain.exit.out;
  for (const char* key : {"legacy", "per_thread", "v1", "self", "dlsym"}) EXPECT_EQ(plain.exit.line.at(key), "libcuda.so.1") << key;
  const AppRun pre = run_app(scratch, "pre", {"procaddress"}, {{"CONCORD_SOCKET", scratch.path("none.sock")}}, true);
  ASSERT_TRUE(pre.exit.ok()) << pre.exit.out << pre.exit.err;
  for (const char* key : {"legacy", "per_thread", "old", "v1", "self", "dlsym"}) {
    EXPECT_EQ(pre.exit.line.at(key), "libconcord_intercept.so") << key << ": " << pre.exit.line.dump();
  }
  EXPECT_EQ(pre.exit.line.at("not_hooked"), "libcuda.so.1");
  EXPECT_EQ(pre.exit.line.at("distinct_flavours"), true);
  EXPECT_EQ(pre.exit.line.at("old_is_legacy"), true);
  // What the driver answers for a version too old is what the program sees through the library.
  EXPECT_EQ(pre.exit.line.at("too_old_result"), plain.exit.line.at("too_old_result"));
  EXPECT_EQ(pre.exit.line.at("too_old_status"), plain.exit.line.at("too_old_status"));
  EXPECT_EQ(pre.stats.at("launches"), 4) << pre.stats.dump();
  // The per-thread pointer launched on the per-thread default stream, the others on the program's.
  const std::vector<json> ks = pre.record.kernels();
  ASSERT_EQ(ks.size(), 4u);
  EXPECT_EQ(std::count_if(ks.begin(), ks.end(), [](const json& k) { return k.at("per_thread").get<bool>(); }), 0)
      << "a launch on a created stream stays there whatever the flavour";
}

TEST(StandinStreams, StreamsAndEventsMadeAndDestroyedAgainAndAgainLeaveNoStaleHandle) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  for (const std::string cls : {"lc", "be"}) {
    for (const std::string drain : {"0", "1"}) {
      SCOPED_TRACE(cls + ", drain=" + drain);
      const AppRun r = run_app(scratch, cls + "-" + drain, {"churn", "rounds=40", "drain=" + drain}, tenant(d, cls), true);
      ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
      EXPECT_EQ(r.record.kernels().size(), 80u);
      // The stand-in hands destroyed handles out again; a call on one the library kept would show.
      EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
      // And so would a priority kept from the stream that had the handle before (the program makes
      // them at 0 and -5 in turn; drained, each handle goes to the very next stream): every kernel
      // runs at its lease's priority.
      for (const json& k : r.record.kernels()) EXPECT_EQ(k.at("priority"), cls == "lc" ? kGreatest : 0) << k.dump();
    }
  }
  d.stop();
}

TEST(StandinDevices, LaunchesOnAnotherGpuThanTheRegisteredOneAreUntouched) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  Env env = tenant(d, "lc");
  env.emplace_back("CONCORD_STANDIN_DEVICES", "2");
  const AppRun r = run_app(scratch, "lc", {"devices", "launches=10"}, env, true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  for (const json& k : r.record.kernels()) {
    // Device 1's stream is made as the program asked and its kernels launched as they came.
    const int device = k.at("device");
    EXPECT_EQ(k.at("priority"), device == 0 ? kGreatest : 0) << k.dump();
    EXPECT_FALSE(k.at("priority_attribute").get<bool>()) << k.dump();
  }
  EXPECT_EQ(r.stats.at("other_gpu"), 10) << r.stats.dump();
  d.stop();
}

TEST(StandinMemory, VirtualMemoryAndPoolAllocationsWorkUnderTheLibrary) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "be", {"vmm"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.record.kernels().size(), 2u);
  // The pool allocation is counted (cuMemAllocFromPoolAsync is hooked) and freed.
  EXPECT_GE(r.stats.at("allocations").get<int>(), 1) << r.stats.dump();
  EXPECT_EQ(r.stats.at("live_bytes"), 0) << r.stats.dump();
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
}

// ---- memory quotas (docs/intercept.md, "Memory") --------------------------------------------

constexpr uint64_t MiB = 1 << 20;
constexpr int kCudaOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY

// Lines of stderr holding `needle`.
size_t lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) n += l.find(needle) != std::string::npos;
  return n;
}

// The daemon's tenant list: each tenant's memory by name.
std::map<std::string, ipc::TenantMemory> listed_memory(const Daemon& d) {
  std::map<std::string, ipc::TenantMemory> out;
  for (const auto& [name, t] : listed(d)) out[name] = t.memory;
  return out;
}

// Every allocation path under a BE tenant's limit (half of concordd's --memory-total 64M): eight
// chunks of 4 MiB fit, the ninth is refused by the library before the driver sees it, with one
// line naming the limit; cuMemGetInfo (both versions) answers the limit as the total and what is
// left of it as free; the frees give every byte back.
class StandinMemoryPath : public ::testing::TestWithParam<const char*> {};

TEST_P(StandinMemoryPath, TheQuotaHoldsEveryPathAndFreesGiveItBack) {
  Scratch scratch;
  Daemon d(scratch, "orion", {"--memory-total", "64M"});
  ASSERT_TRUE(d.up());
  const std::string path = GetParam();
  const AppRun r = run_app(scratch, "be", {"memory", "path=" + path, "chunk=" + std::to_string(4 * MiB), "count=12"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  const json& l = r.exit.line;
  EXPECT_EQ(l.at("granted"), 8) << l.dump();
  EXPECT_EQ(l.at("refusals").at(0), kCudaOutOfMemory) << l.dump();
  for (const char* when : {"before", "after"}) {
    EXPECT_EQ(l.at(when).at("total"), 32 * MiB) << when << ": " << l.dump();
    EXPECT_EQ(l.at(when).at("free"), 32 * MiB) << when << ": " << l.dump();
    EXPECT_EQ(l.at(when).at("total_v1"), 32 * MiB) << when << ": " << l.dump();
    EXPECT_EQ(l.at(when).at("free_v1"), 32 * MiB) << when << ": " << l.dump();
  }
  EXPECT_EQ(l.at("during").at("free"), 0) << l.dump();
  EXPECT_EQ(l.at("during").at("total"), 32 * MiB) << l.dump();
  if (path == "pitch") {
    EXPECT_EQ(l.at("pitch"), 4 * MiB) << "rows of 4 MiB - 100 bytes, pitched to 512";
  }
  EXPECT_EQ(r.stats.at("memory_limit"), 32 * MiB) << r.stats.dump();
  EXPECT_EQ(r.stats.at("memory_reserved"), 0) << r.stats.dump();
  EXPECT_EQ(r.stats.at("peak_bytes"), 32 * MiB) << r.stats.dump();
  EXPECT_EQ(r.stats.at("live_bytes"), 0) << r.stats.dump();
  EXPECT_EQ(r.stats.at("allocations"), 8) << r.stats.dump();
  EXPECT_EQ(r.stats.at("frees"), 8) << r.stats.dump();
  EXPECT_EQ(r.stats.at("memory_refused"), 1) << r.stats.dump();
  EXPECT_EQ(lines_with(r.exit.err, "refused (CUDA_ERROR_OUT_OF_MEMORY)"), 1u) << r.exit.err;
  EXPECT_NE(r.exit.err.find("GPU memory limit is 32.0 MiB (set by concordd), 32.0 MiB of it in use"), std::string::npos) << r.exit.err;
  // The driver refused nothing: the ninth chunk never reached it.
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
}

INSTANTIATE_TEST_SUITE_P(Paths, StandinMemoryPath,
                         ::testing::Values("alloc", "pitch", "managed", "async", "async_ptsz", "pool", "pool_ptsz", "vmm"));

// VMM memory mapped twice (and retained and released once more) counts once; released while still
// mapped it stays counted until its last mapping goes, as the driver frees it.
TEST(StandinMemory, VmmMemoryMappedTwiceCountsOnceAndGoesWithItsLastMapping) {
  Scratch scratch;
  Daemon d(scratch, "orion", {"--memory-total", "64M"});
  ASSERT_TRUE(d.up());
  const std::vector<std::string> args = {"memory", "path=vmm", "chunk=" + std::to_string(4 * MiB), "count=4", "maps=2"};
  const AppRun r = run_app(scratch, "be", args, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.exit.line.at("granted"), 4);
  EXPECT_EQ(r.exit.line.at("during").at("free"), 16 * MiB) << "4 x 4 MiB of a 32 MiB limit, each counted once: " << r.exit.line.dump();
  EXPECT_EQ(r.exit.line.at("after").at("free"), 32 * MiB) << r.exit.line.dump();
  EXPECT_EQ(r.stats.at("peak_bytes"), 16 * MiB) << r.stats.dump();
  EXPECT_EQ(r.stats.at("live_bytes"), 0) << r.stats.dump();
  // The stand-in counts it once too (the tenant's view without the library is the device's).
  const AppRun plain = run_app(scratch, "plain", args, {}, false);
  ASSERT_TRUE(plain.exit.ok()) << plain.exit.out << plain.exit.err;
  EXPECT_EQ(plain.exit.line.at("before").at("free").get<uint64_t>() - plain.exit.line.at("during").at("free").get<uint64_t>(), 16 * MiB);
  EXPECT_EQ(plain.exit.line.at("after").at("free"), plain.exit.line.at("before").at("free"));
  EXPECT_TRUE(unexpected_errors(r.record).empty()) << dump_errors(r.record);
  d.stop();
}

// Without a daemon the library counts and refuses nothing: the view is the device's.
TEST(StandinMemory, WithoutADaemonNothingIsRefused) {
  Scratch scratch;
  const AppRun r = run_app(scratch, "pre", {"memory", "chunk=" + std::to_string(4 * MiB), "count=12"},
                           {{"CONCORD_SOCKET", scratch.path("none.sock")}}, true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.exit.line.at("granted"), 12);
  EXPECT_EQ(r.exit.line.at("before").at("total"), uint64_t{81559} * MiB) << "the stand-in's device";
  EXPECT_TRUE(r.stats.at("memory_limit").is_null()) << r.stats.dump();
  EXPECT_EQ(r.stats.at("peak_bytes"), 48 * MiB) << r.stats.dump();
  EXPECT_EQ(r.stats.at("live_bytes"), 0) << r.stats.dump();
}

// Threads racing for the last bytes of a limit: 32 chunks of 1 MiB go, in all, never more; every
// thread ends on a refusal, and the frees give every byte back.
TEST(StandinMemory, ThreadsRacingForTheLastBytesGetEachByteOnce) {
  Scratch scratch;
  Daemon d(scratch, "orion", {"--memory-total", "64M"});
  ASSERT_TRUE(d.up());
  const AppRun r = run_app(scratch, "be", {"memory", "chunk=" + std::to_string(MiB), "count=100", "threads=4"}, tenant(d, "be"), true);
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.exit.line.at("granted"), 32) << r.exit.line.dump();
  for (const json& refusal : r.exit.line.at("refusals")) EXPECT_EQ(refusal, kCudaOutOfMemory);
  EXPECT_EQ(r.stats.at("peak_bytes"), 32 * MiB) << r.stats.dump();
  EXPECT_EQ(r.stats.at("live_bytes"), 0) << r.stats.dump();
  EXPECT_EQ(r.exit.line.at("after").at("free"), 32 * MiB);
  d.stop();
}

// LC reservations against the daemon's books: a tenant holding 40 of 64 MiB; a second asking as
// much is refused at registration, the library saying why (and running pass-through); the holder
// killed, a third gets the 40 MiB at once. Two asking at the same moment: one gets it.
TEST(StandinMemory, AReservationThatDoesNotFitIsRefusedAndAKilledHoldersComesBackAtOnce) {
  Scratch scratch;
  Daemon d(scratch, "orion", {"--memory-total", "64M"});
  ASSERT_TRUE(d.up());
  const auto reserving = [&](const std::string& name) {
    Env env = tenant(d, "lc", name);
    env.emplace_back("CONCORD_MEMORY_RESERVE", "40M");
    return env;
  };
  App holder(scratch, "holder", {"memory", "chunk=" + std::to_string(MiB), "count=8", "ready=" + scratch.path("holder.ready"), "hold_ms=60000"},
             reserving("holder"), true);
  ASSERT_TRUE(wait_for_file(scratch.path("holder.ready")));
  // Its use reaches the daemon's books of what is in use (the list, `concord top`, the metrics).
  std::map<std::string, ipc::TenantMemory> listed;
  for (int i = 0; i < 100 && listed["holder"].live_bytes != 8 * MiB; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    listed = listed_memory(d);
  }
  EXPECT_EQ(listed["holder"].live_bytes, 8 * MiB);
  EXPECT_EQ(listed["holder"].limit_bytes, 40 * MiB);
  EXPECT_EQ(listed["holder"].reserved_bytes, 40 * MiB);
  const AppRun refused = run_app(scratch, "refused", {"memory", "chunk=" + std::to_string(MiB), "count=2"}, reserving("refused"), true);
  ASSERT_TRUE(refused.exit.ok()) << refused.exit.out << refused.exit.err;
  EXPECT_NE(refused.exit.err.find("memory reservation 40.0 MiB does not fit GPU 0: 1 tenants hold 40.0 MiB of its 64.0 MiB"),
            std::string::npos)
      << refused.exit.err;
  EXPECT_EQ(refused.stats.at("mode"), "pass_through") << refused.stats.dump();
  const auto killed = std::chrono::steady_clock::now();
  holder.child().signal(SIGKILL);
  (void)holder.wait();
  const AppRun next = run_app(scratch, "next", {"memory", "chunk=" + std::to_string(MiB), "count=2"}, reserving("next"), true);
  ASSERT_TRUE(next.exit.ok()) << next.exit.out << next.exit.err;
  EXPECT_EQ(next.stats.at("memory_limit"), 40 * MiB) << next.stats.dump() << next.exit.err;
  EXPECT_EQ(next.stats.at("memory_reserved"), 40 * MiB) << next.stats.dump();
  EXPECT_EQ(next.exit.line.at("before").at("total"), 40 * MiB) << "an LC tenant's view: its reservation";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(5));
  // Two at once for the same 40 MiB: one registers, the other is refused.
  App a(scratch, "a", {"memory", "chunk=" + std::to_string(MiB), "count=2", "ready=" + scratch.path("a.ready"), "hold_ms=500"}, reserving("a"), true);
  App b(scratch, "b", {"memory", "chunk=" + std::to_string(MiB), "count=2", "ready=" + scratch.path("b.ready"), "hold_ms=500"}, reserving("b"), true);
  const AppRun ra = a.wait(), rb = b.wait();
  ASSERT_TRUE(ra.exit.ok() && rb.exit.ok()) << ra.exit.err << rb.exit.err;
  const int reserved = (ra.stats.at("memory_reserved") == 40 * MiB) + (rb.stats.at("memory_reserved") == 40 * MiB);
  EXPECT_EQ(reserved, 1) << ra.stats.dump() << "\n" << rb.stats.dump();
  EXPECT_EQ(lines_with(ra.exit.err + rb.exit.err, "does not fit GPU 0"), 1u) << ra.exit.err << rb.exit.err;
  d.stop();
}

// ---- two users -------------------------------------------------------------------------------

// The user a test runs a tenant as: nobody, where the test runs as root.
std::optional<uid_t> another_user() {
  const passwd* nobody = ::geteuid() == 0 ? ::getpwnam("nobody") : nullptr;
  return nobody ? std::optional<uid_t>(nobody->pw_uid) : std::nullopt;
}

TEST(StandinUsers, TenantsOfTwoUsersShareOneDaemonAndItsGate) {
  const std::optional<uid_t> nobody = another_user();
  if (!nobody) GTEST_SKIP() << "needs root and a user nobody (runs a tenant as nobody)";
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0", {"--socket-mode", "0666"});
  ASSERT_TRUE(d.up());
  App be(scratch, "be", {"be", "ms=1500", "ns=1000000", "sync_every=1", "ready=" + scratch.path("be.ready")}, tenant(d, "be"), true, *nobody);
  ASSERT_TRUE(wait_for_file(scratch.path("be.ready")));
  App lc(scratch, "lc", {"lc", "requests=4", "kernels=10", "ns=4000000", "gap_us=60000", "settle_ms=100"}, tenant(d, "lc"), true);
  const AppRun l = lc.wait();
  const AppRun b = be.wait();
  ASSERT_TRUE(l.exit.ok()) << l.exit.out << l.exit.err;
  ASSERT_TRUE(b.exit.ok()) << b.exit.out << b.exit.err;
  EXPECT_EQ(b.stats.at("mode"), "active") << "nobody's tenant registered: " << b.stats.dump();
  EXPECT_GT(b.stats.at("gate_waits").get<int>(), 0) << "root's LC closed nobody's gate";
  EXPECT_EQ(queued_inside(request_windows(l.record.kernels()), queued_times(b.record.kernels())), 0u)
      << "nobody's BE launched during root's LC request";
  d.stop();
}

// An LC registration the daemon does not grant (nobody is not in --lc-users or --lc-groups) runs
// as a BE tenant by default, and unscheduled with CONCORD_LC_REFUSED=pass-through; either way one
// line names the refusal and nothing the program launches is raised to the LC priority.
TEST(StandinUsers, AnLcTenantTheDaemonDoesNotGrantRunsAsBeOrPassThroughAsConfigured) {
  const std::optional<uid_t> nobody = another_user();
  if (!nobody) GTEST_SKIP() << "needs root and a user nobody (runs a tenant as nobody)";
  Scratch scratch;
  Daemon d(scratch, "orion", {"--socket-mode", "0666"});
  ASSERT_TRUE(d.up());
  for (const std::string refused : {"be", "pass-through"}) {
    SCOPED_TRACE(refused);
    Env env = tenant(d, "lc");
    env.emplace_back("CONCORD_LC_REFUSED", refused);
    const AppRun r = App(scratch, "lc-" + refused, {"chains"}, env, true, *nobody).wait();
    ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
    EXPECT_NE(r.exit.err.find("refused"), std::string::npos) << r.exit.err;
    for (const json& k : r.record.kernels()) {
      if (refused == "be") {
        EXPECT_EQ(k.at("priority"), 0) << "a BE tenant's lease priority: " << k.dump();
      } else if (k.at("api") != "cuLaunchKernelEx") {
        EXPECT_EQ(k.at("priority"), k.at("stream_priority")) << "as the program launched it: " << k.dump();
      }
    }
    EXPECT_EQ(r.stats.at("streams_raised"), 0) << r.stats.dump();
    EXPECT_EQ(r.stats.at("lc_raises"), 0) << r.stats.dump();
    EXPECT_EQ(r.stats.at("mode"), refused == "be" ? "active" : "pass_through") << r.stats.dump();
  }
  d.stop();
}

// An LC registration the daemon does not grant runs as BE in every respect: beside a granted LC
// tenant with work in flight its launches wait at the BE gate until that work is gone.
TEST(StandinUsers, AnLcTenantRunAsBeWaitsAtTheBeGate) {
  const std::optional<uid_t> nobody = another_user();
  if (!nobody) GTEST_SKIP() << "needs root and a user nobody (runs a tenant as nobody)";
  Scratch scratch;
  Daemon d(scratch, "orion:bound_share=0", {"--socket-mode", "0666"});
  ASSERT_TRUE(d.up());
  auto lc = lc_in_flight(d);  // root's: granted
  ASSERT_TRUE(lc);
  Env env = tenant(d, "lc", "refused");
  env.emplace_back("CONCORD_LC_REFUSED", "be");
  App refused(scratch, "refused", {"be", "launches=10", "ns=100000", "sync_every=1"}, env, true, *nobody);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // registered, its first launch at the gate
  const uint64_t lowered_at = now_ns();
  lc->close();
  const AppRun r = refused.wait();
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  EXPECT_NE(r.exit.err.find("refused"), std::string::npos) << r.exit.err;
  ASSERT_EQ(r.record.kernels().size(), 10u);
  for (const json& k : r.record.kernels()) {
    EXPECT_GT(k.at("queued_ns").get<uint64_t>(), lowered_at) << "launched beside the granted LC's work: " << k.dump();
  }
  EXPECT_GT(r.stats.at("gate_waits").get<int>(), 0) << r.stats.dump();
  d.stop();
}

// ---- a long eager loop -----------------------------------------------------------------------

// 1,000 launches a second for 10 s: the daemon's and the tenant's memory stay flat and every
// launch is noticed and seen ending.
TEST(StandinSoak, AThousandLaunchesASecondForTenSecondsLeakNothing) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  App lc(scratch, "lc", {"eager", "ms=10000", "hz=1000"}, tenant(d, "lc"), true);
  std::vector<long> daemon_kib, app_kib;
  for (int s = 0; s < 10 && lc.child().running(); ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    daemon_kib.push_back(d.child().rss_kib());
    const long a = lc.child().rss_kib();
    if (a > 0) app_kib.push_back(a);
  }
  const AppRun r = lc.wait(std::chrono::seconds(30));
  ASSERT_TRUE(r.exit.ok()) << r.exit.out << r.exit.err;
  const long launches = r.exit.line.at("launches");
  EXPECT_GE(launches, 8000) << "the loop kept its pace";
  EXPECT_EQ(r.record.kernels().size(), static_cast<size_t>(launches));
  EXPECT_EQ(r.stats.at("noticed"), launches) << r.stats.dump();
  EXPECT_EQ(r.stats.at("requests_ended"), r.stats.at("requests_begun"));
  EXPECT_GE(r.stats.at("completions").get<long>(), launches / 10) << "each synchronisation reported";
  ASSERT_GE(daemon_kib.size(), 8u);
  ASSERT_GE(app_kib.size(), 8u);
  const long daemon_growth = daemon_kib.back() - daemon_kib[1];
  const long app_growth = app_kib.back() - app_kib[1];
  std::printf("[ measured ] RSS from second 2 to 10: daemon %ld -> %ld KiB, tenant %ld -> %ld KiB\n", daemon_kib[1], daemon_kib.back(),
              app_kib[1], app_kib.back());
  EXPECT_LT(daemon_growth, 2048) << "the daemon grew by " << daemon_growth << " KiB";
  EXPECT_LT(app_growth, 4096) << "the tenant grew by " << app_growth << " KiB";
  d.stop();
}

// ---- a launch runs once ----------------------------------------------------------------------

class StandinOnce : public ::testing::TestWithParam<const char*> {};

// The library's bookkeeping after the real launch fails (the stand-in throws std::bad_alloc from
// the marker's event calls): the kernel still ran once, never twice, and the process runs on.
TEST_P(StandinOnce, AnExceptionInTheBookkeepingAfterTheLaunchNeverRunsItTwice) {
  Scratch scratch;
  Daemon d(scratch, "orion");
  ASSERT_TRUE(d.up());
  Env env = tenant(d, "lc");
  env.emplace_back("CONCORD_MARKER_EVERY", "1");
  env.emplace_back("CONCORD_STANDIN_THROW", std::string(GetParam()) + ":after=3");
  const AppRun r = run_app(scratch, "lc", {"accumulate", "launches=20"}, env, true);
  ASSERT_EQ(r.exit.code, 0) << r.exit.out << r.exit.err;
  EXPECT_EQ(r.exit.line.at("value"), 20) << "each x += 1 ran once";
  std::map<uint64_t, int> runs;
  for (const json& k : r.record.kernels()) ++runs[k.at("tag").get<uint64_t>()];
  EXPECT_EQ(runs.size(), 20u);
  for (const auto& [tag, n] : runs) EXPECT_EQ(n, 1) << "launch " << tag << " ran " << n << " times";
  EXPECT_NE(r.exit.err.find("concord-intercept"), std::string::npos) << "the failure is reported: " << r.exit.err;
  d.stop();
}
INSTANTIATE_TEST_SUITE_P(Calls, StandinOnce, ::testing::Values("cuEventCreate", "cuEventRecord"));

}  // namespace
}  // namespace concord::standin_test
