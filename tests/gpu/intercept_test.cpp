// libconcord_intercept.so on the GPU: a CUDA program (tests/gpu/intercept_app.cu) gives the same,
// correct results with stream order kept when the library is preloaded, and the library's own
// counters show that it saw every launch.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "concord/device.h"
#include "daemon/daemon.h"
#include "ipc/tenant_client.h"
#include "intercept_support.h"

namespace concord::testing {
namespace {

using json = nlohmann::json;

TEST(Intercept, TheProgramIsCorrectWithoutTheLibrary) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "chains", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  EXPECT_TRUE(plain.line.at("ok").get<bool>()) << plain.stdout_text;
}

TEST(Intercept, WithoutADaemonTheLibraryPassesEveryLaunchThroughAndResultsAreIdentical) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "chains", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  const std::string stats = scratch_path("passthrough_stats.json");
  const RunResult preloaded = run_app(paths, "chains",
                                      {{"LD_PRELOAD", paths.library},
                                       {"CONCORD_SOCKET", scratch_path("no_daemon_here.sock")},
                                       {"CONCORD_INTERCEPT_STATS", stats}});
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.stdout_text << preloaded.stderr_text;
  EXPECT_TRUE(preloaded.line.at("ok").get<bool>()) << preloaded.stdout_text;
  EXPECT_EQ(preloaded.line.at("checksum"), plain.line.at("checksum"));
  // One line says why it runs pass-through.
  EXPECT_NE(preloaded.stderr_text.find("concord-intercept: pass-through"), std::string::npos) << preloaded.stderr_text;
  const json s = read_json(stats);
  EXPECT_EQ(s.at("mode"), "pass_through") << s.dump();
  // Every launch went through a hook: the runtime's, the driver's found by cuGetProcAddress, the
  // graph launches, and the kernels launched into the capturing stream.
  EXPECT_GE(s.at("launches").get<int>(), plain.line.at("launches_made").get<int>()) << s.dump();
  EXPECT_EQ(s.at("launches"), s.at("passed_through")) << s.dump();
  EXPECT_GT(s.at("allocations").get<int>(), 0) << "cudaMalloc reaches cuMemAlloc_v2: " << s.dump();
}

TEST(Intercept, DisabledTheLibraryPassesThroughSilently) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const std::string stats = scratch_path("disabled_stats.json");
  const RunResult preloaded =
      run_app(paths, "chains", {{"LD_PRELOAD", paths.library}, {"CONCORD_DISABLE", "1"}, {"CONCORD_INTERCEPT_STATS", stats}});
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.stdout_text << preloaded.stderr_text;
  EXPECT_TRUE(preloaded.line.at("ok").get<bool>());
  EXPECT_EQ(preloaded.stderr_text.find("concord-intercept"), std::string::npos) << preloaded.stderr_text;
  const json s = read_json(stats);
  EXPECT_EQ(s.at("mode"), "pass_through");
  EXPECT_EQ(s.at("launches"), s.at("passed_through"));
}

TEST(Intercept, ABadSettingIsNamedAndTheProgramStillFinishes) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult preloaded = run_app(paths, "chains", {{"LD_PRELOAD", paths.library}, {"CONCORD_CLASS", "realtime"}});
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.stdout_text << preloaded.stderr_text;
  EXPECT_TRUE(preloaded.line.at("ok").get<bool>());
  EXPECT_NE(preloaded.stderr_text.find("CONCORD_CLASS='realtime'"), std::string::npos) << preloaded.stderr_text;
}

// A daemon in this process (its socket in the scratch folder), under `policy`.
std::unique_ptr<daemon::Daemon> start_daemon(const std::string& policy, const std::string& socket, bool per_launch = false) {
  daemon::DaemonOptions o;
  o.socket_path = socket;
  o.policy = policy;
  o.per_launch = per_launch;
  o.device = h100_sxm_spec();
  o.shm_prefix = "/concordd-gputest";
  Result<std::unique_ptr<daemon::Daemon>> d = daemon::Daemon::start(o);
  EXPECT_TRUE(d.is_ok()) << d.status().to_string();
  return d.is_ok() ? std::move(*d) : nullptr;
}

std::vector<std::pair<std::string, std::string>> tenant_env(const InterceptPaths& paths, const std::string& socket,
                                                            const std::string& cls, const std::string& stats) {
  std::vector<std::pair<std::string, std::string>> env = {{"LD_PRELOAD", paths.library},
                                                          {"CONCORD_SOCKET", socket},
                                                          {"CONCORD_CLASS", cls},
                                                          {"CONCORD_NAME", cls},
                                                          {"CONCORD_INTERCEPT_STATS", stats}};
  if (cls == "lc") env.emplace_back("CONCORD_TARGET_MS", "50");
  return env;
}

// Under a lease (orion: LC at once at high priority with its flag; BE yielding to it) the program
// is as correct as without the library, every launch outside a capture went out under the lease,
// and its ends were seen through markers and synchronisations, not an event per launch.
TEST(Intercept, UnderLeasesAnLcAndABeTenantKeepTheirResultsAndOrder) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "chains", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  const std::string socket = scratch_path("leases.sock");
  auto d = start_daemon("orion", socket);
  ASSERT_TRUE(d);
  for (const std::string cls : {"lc", "be"}) {
    SCOPED_TRACE(cls);
    const std::string stats = scratch_path("lease_" + cls + "_stats.json");
    const RunResult r = run_app(paths, "chains", tenant_env(paths, socket, cls, stats));
    ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
    EXPECT_TRUE(r.line.at("ok").get<bool>()) << r.stdout_text;
    EXPECT_EQ(r.line.at("checksum"), plain.line.at("checksum"));
    const json s = read_json(stats);
    EXPECT_EQ(s.at("mode"), "active") << s.dump();
    EXPECT_EQ(s.at("daemon_gone"), false) << s.dump();
    EXPECT_EQ(s.at("released"), 0) << "no launch waited for a decision: " << s.dump();
    EXPECT_EQ(s.at("leased").get<int>() + s.at("captured").get<int>(), s.at("launches").get<int>()) << s.dump();
    EXPECT_LT(s.at("markers").get<int>(), s.at("leased").get<int>()) << "not an event per launch: " << s.dump();
    EXPECT_GT(s.at("completions").get<int>(), 0) << s.dump();
    if (cls == "lc") {
      EXPECT_GT(s.at("lc_raises").get<int>(), 0) << s.dump();
    }
  }
  d->stop();
  EXPECT_TRUE(d->wait().is_ok());
}

// Per-launch decisions (a policy without a lease form): the BE tenant waits for each, the LC tenant
// for none; both stay correct.
TEST(Intercept, PerLaunchDecisionsForBeOnlyKeepTheResults) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "chains", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  const std::string socket = scratch_path("per_launch.sock");
  auto d = start_daemon("serial", socket);
  ASSERT_TRUE(d);
  for (const std::string cls : {"be", "lc"}) {
    SCOPED_TRACE(cls);
    const std::string stats = scratch_path("per_launch_" + cls + "_stats.json");
    const RunResult r = run_app(paths, "chains", tenant_env(paths, socket, cls, stats));
    ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
    EXPECT_EQ(r.line.at("checksum"), plain.line.at("checksum"));
    const json s = read_json(stats);
    EXPECT_EQ(s.at("daemon_gone"), false) << s.dump();
    if (cls == "be") {
      EXPECT_GT(s.at("released").get<int>(), 0) << s.dump();
      EXPECT_EQ(s.at("leased"), 0) << s.dump();
    } else {
      EXPECT_EQ(s.at("released"), 0) << s.dump();
      EXPECT_GT(s.at("leased").get<int>(), 0) << s.dump();
    }
  }
  d->stop();
  EXPECT_TRUE(d->wait().is_ok());
}

// Room (orion with be_sms and be_blocks_per_sm): while an LC tenant's flag is up, a BE tenant's
// kernels go out on a green context of 16 SMs with their shared memory padded to 2 blocks per SM.
// The program sees its blocks on at most 16 SMs and at most 2 per SM, where alone they fill the
// GPU 32 to an SM, and computes the same sum.
TEST(Intercept, RoomConfinesBeKernelsToTheSmsAndResidencyTheLeaseNames) {
  const InterceptPaths paths = intercept_paths();
  if (!paths.error.empty()) GTEST_SKIP() << paths.error;
  const RunResult plain = run_app(paths, "room", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.stdout_text << plain.stderr_text;
  EXPECT_GT(plain.line.at("peak_blocks_per_sm").get<int>(), 2) << plain.stdout_text;
  EXPECT_GT(plain.line.at("sms_used").get<int>(), 16) << plain.stdout_text;
  const std::string socket = scratch_path("room.sock");
  auto d = start_daemon("orion:bound_share=0;be_sms=16;be_blocks_per_sm=2", socket);
  ASSERT_TRUE(d);
  ipc::TenantClientOptions lo;
  lo.socket_path = socket;
  lo.info = ipc::RegisterTenant{TenantClass::latency_critical, 50'000'000, 1, 0, "lc", ""};
  Result<std::unique_ptr<ipc::TenantClient>> lc = ipc::TenantClient::connect(lo);
  ASSERT_TRUE(lc.is_ok()) << lc.status().to_string();
  ASSERT_NE((*lc)->lease().lc_slot, ipc::kNoLcSlot);
  (*lc)->raise_lc((*lc)->lease().lc_slot);  // work in flight for the whole run
  const std::string stats = scratch_path("room_be_stats.json");
  const RunResult r = run_app(paths, "room", tenant_env(paths, socket, "be", stats));
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(r.line.at("checksum"), plain.line.at("checksum")) << "padding changes nothing the kernel computes";
  EXPECT_LE(r.line.at("sms_used").get<int>(), 16) << r.stdout_text;
  EXPECT_LE(r.line.at("peak_blocks_per_sm").get<int>(), 2) << r.stdout_text;
  const json s = read_json(stats);
  EXPECT_EQ(s.at("room_asked").get<int>(), 20) << s.dump();
  EXPECT_EQ(s.at("room_sms").get<int>(), 20) << s.dump();
  EXPECT_EQ(s.at("room_padded").get<int>(), 20) << s.dump();
  EXPECT_EQ(s.at("room_fallbacks").get<int>(), 0) << s.dump();
  (*lc)->close();
  d->stop();
  EXPECT_TRUE(d->wait().is_ok());
}

}  // namespace
}  // namespace concord::testing
