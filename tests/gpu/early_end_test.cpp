// Runs that end early on the GPU, through the runner as `concord run` drives it
// (run_experiment_outcome, then the results JSON): an illegal address in one tenant's kernel, a
// never-ending elastic kernel at the time limit, a hung opaque kernel at the time limit. Each ends
// the run within its limit, names the tenant, and keeps what the other tenant finished; the ones
// that leave the device unusable (a fault poisons the context, a hung kernel keeps running) run
// in a child process, which must also exit within a bounded time. Then `concord run` itself on the
// GPU: SIGINT and --time-limit.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "concord/experiment.h"
#include "concord/report.h"
#include "concord/suite.h"
#include "gpu_test_support.h"
#include "test_kernels.h"

namespace concord {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kChildEnv = "CONCORD_GPU_EARLY_END_CHILD";
constexpr const char* kOutEnv = "CONCORD_GPU_EARLY_END_OUT";

// `good`: a closed loop of short kernels from the start; the other tenant's one request arrives
// at 0.2 s, when `good` has finished many.
Workload good_and(const std::string& name, const KernelSpec& other) {
  Workload w;
  w.name = "early-end-" + name;
  TenantSpec good;
  good.name = "good";
  good.requests = 1'000'000;
  good.steps.push_back(KernelStep{*make_suite_kernel("vector_add", 1 << 20), 1});
  TenantSpec t;
  t.name = name;
  t.steps.push_back(KernelStep{other, 1});
  t.arrival.kind = ArrivalProcess::Kind::timestamps;
  t.arrival.timestamps = {0.2};
  w.tenants = {good, t};
  return w;
}

ExperimentConfig gpu_config(const std::string& policy, PolicyParams params, Seconds time_limit, Seconds grace) {
  ExperimentConfig c;
  c.backend.kind = "cuda";
  c.policy = policy;
  c.params = std::move(params);
  c.compare_serial = false;
  c.time_limit = time_limit;
  c.abort_grace = grace;
  return c;
}

// What `concord run --out` writes for the outcome.
std::string results_of(const ExperimentOutcome& o) {
  DeviceSpec device;
  device.name = o.result.run.device;
  return experiment_json(o, RunContext{"gpu-early-end", {}, "test", "test", device});
}

json parse_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str(), nullptr, false);
}

int64_t finished_of(const json& results, const std::string& tenant) {
  for (const json& t : results.at("tenants")) {
    if (t.at("name") == tenant) return t.at("requests_finished").get<int64_t>();
  }
  return -1;
}

// Runs this binary's test `filter` in a child process with kChildEnv set and its results file at
// `out`; returns its exit status and output, and how long it took to exit.
struct ChildRun {
  int status = -1;
  std::string output;
  double seconds = 0;
};
ChildRun run_child(const std::string& filter, const std::string& out, int timeout_s) {
  char self[4096] = {};
  EXPECT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  const std::string cmd = std::string(kChildEnv) + "=1 " + kOutEnv + "='" + out + "' timeout -s KILL " +
                          std::to_string(timeout_s) + " '" + self + "' --gtest_filter=" + filter + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  ChildRun r;
  FILE* child = popen(cmd.c_str(), "r");
  if (!child) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), child)) r.output.append(buf, n);
  r.status = pclose(child);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("concord_gpu_early_end_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

// The child's side: runs the experiment, writes its results where the parent said, and exits
// the way `concord run` does (normally, destructors and all).
void run_as_child(const Workload& w, const ExperimentConfig& config) {
  ASSERT_OK(testing::register_test_kernels());
  cuda::register_backend();
  ReferenceCache cache;
  const auto t0 = std::chrono::steady_clock::now();
  const ExperimentOutcome o = run_experiment_outcome(w, config, cache);
  std::printf("run ended after %.2f s: %s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              o.status.to_string().c_str());
  std::ofstream(std::getenv(kOutEnv)) << results_of(o) << "\n";
  std::printf("CHILD-WROTE\n");
  std::fflush(stdout);
}

TEST(GpuEarlyEndChild, IllegalAddress) {
  if (!std::getenv(kChildEnv)) GTEST_SKIP() << "runs as the child of GpuEarlyEnd.*";
  run_as_child(good_and("bad", testing::fault_kernel()), gpu_config("streams", {}, 60, 5));
}

TEST(GpuEarlyEndChild, HungOpaqueKernel) {
  if (!std::getenv(kChildEnv)) GTEST_SKIP() << "runs as the child of GpuEarlyEnd.*";
  run_as_child(good_and("hang", testing::hang_kernel()), gpu_config("streams", {}, 2, 1));
}

TEST(GpuEarlyEnd, AnIllegalAddressEndsTheRunNamingTheTenantWithTheOthersWorkKept) {
  const std::string out = scratch("fault.json");
  const ChildRun child = run_child("GpuEarlyEndChild.IllegalAddress", out, 120);
  std::printf("child exited after %.2f s\n", child.seconds);
  ASSERT_NE(child.output.find("CHILD-WROTE"), std::string::npos) << child.output;
  EXPECT_EQ(child.status, 0) << "the process exits normally after a fault\n" << child.output;
  EXPECT_LT(child.seconds, 60) << child.output;
  const json r = parse_file(out);
  ASSERT_FALSE(r.is_discarded()) << child.output;
  const json& status = r.at("status");
  EXPECT_FALSE(status.at("complete").get<bool>());
  EXPECT_EQ(status.at("code"), "device error");
  EXPECT_EQ(status.at("stage"), "shared run");
  const std::string reason = status.at("reason").get<std::string>();
  EXPECT_NE(reason.find("tenant 'bad' kernel 'test_fault'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("cudaErrorIllegalAddress"), std::string::npos) << reason;
  EXPECT_GT(finished_of(r, "good"), 0) << "what `good` finished before the fault is reported";
  bool failed_dispatch = false;
  for (const json& d : r.at("dispatches")) failed_dispatch = failed_dispatch || d.contains("error");
  EXPECT_TRUE(failed_dispatch);
}

TEST(GpuEarlyEnd, AHungOpaqueKernelEndsTheRunAtTheLimitAndTheProcessExits) {
  const std::string out = scratch("hang.json");
  const ChildRun child = run_child("GpuEarlyEndChild.HungOpaqueKernel", out, 120);
  std::printf("child exited after %.2f s\n", child.seconds);
  ASSERT_NE(child.output.find("CHILD-WROTE"), std::string::npos) << child.output;
  EXPECT_EQ(child.status, 0) << "the process exits by itself with the kernel still running\n" << child.output;
  // Start-up, a 2 s limit, a 1 s grace, the backend's bounded teardown (5 s), exit.
  EXPECT_LT(child.seconds, 60) << child.output;
  const json r = parse_file(out);
  ASSERT_FALSE(r.is_discarded()) << child.output;
  const json& status = r.at("status");
  EXPECT_EQ(status.at("code"), "deadline exceeded");
  const std::string reason = status.at("reason").get<std::string>();
  EXPECT_NE(reason.find("not ended when the run gave up on them"), std::string::npos) << reason;
  EXPECT_NE(reason.find("tenant 'hang' kernel 'test_hang'"), std::string::npos) << reason;
  EXPECT_GT(finished_of(r, "good"), 0);
}

TEST(GpuEarlyEnd, TheTimeLimitPreemptsANeverEndingElasticKernel) {
  ASSERT_OK(testing::register_test_kernels());
  cuda::register_backend();
  const Workload w = good_and("spin", testing::spin_kernel());
  ReferenceCache cache;
  const auto t0 = std::chrono::steady_clock::now();
  const ExperimentOutcome o = run_experiment_outcome(w, gpu_config("manual", {{"form", "persistent"}}, 2, 5), cache);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(o.status.code(), StatusCode::deadline_exceeded) << o.status.to_string();
  const std::string& m = o.status.message();
  EXPECT_NE(m.find("tenant 'spin' kernel 'test_spin'"), std::string::npos) << m;
  EXPECT_EQ(m.find("not ended"), std::string::npos) << "preemption stops it: " << m;
  // Set-up (backend, inputs), the 2 s of the run, then a stop within the grace.
  EXPECT_LT(took, 30) << m;
  const json r = json::parse(results_of(o));
  EXPECT_GT(finished_of(r, "good"), 0);
  bool preempted = false;
  for (const json& d : r.at("dispatches")) {
    EXPECT_FALSE(d.at("end_s").is_null()) << d.dump();
    if (d.at("launches").size() == 1 && d.at("placement").at("form") == "persistent" && d.at("preempted").get<bool>()) preempted = true;
  }
  EXPECT_TRUE(preempted) << "the endless dispatch ended preempted";
}

// --- `concord run` on the GPU, as a process.

// The concord binary: $CONCORD_BIN, else next to this test binary (the .gpu/bin bundle), else the
// build tree's; empty when none exists.
std::string concord_binary() {
  if (const char* env = std::getenv("CONCORD_BIN")) return env;
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) {
    const fs::path sibling = fs::path(self).parent_path() / "concord";
    if (fs::exists(sibling)) return sibling.string();
  }
#ifdef CONCORD_CLI
  if (fs::exists(CONCORD_CLI)) return CONCORD_CLI;
#endif
  return "";
}

// A GPU run of many short requests: long enough to be stopped.
std::string long_spec() {
  const std::string path = scratch("long.yaml");
  std::ofstream(path) << "name: long\ntenants:\n"
                         "  - {name: a, requests: 1000000, kernels: [{kernel: vector_add, size: 1048576}]}\n"
                         "  - {name: b, requests: 1000000, kernels: [{kernel: fma_loop, size: 1048576}]}\n";
  return path;
}

TEST(GpuCli, SigintEndsAGpuRunWithWhatFinishedWritten) {
  const std::string concord = concord_binary();
  if (concord.empty()) GTEST_SKIP() << "no concord binary (set CONCORD_BIN)";
  const std::string out = scratch("sigint.json");
  const std::string log = scratch("sigint.log");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stderr);
    (void)f;
    execl(concord.c_str(), concord.c_str(), "-v", "run", long_spec().c_str(), "--backend", "cuda", "--policy", "streams",
          "--no-serial", "--out", out.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  // Stop it once it runs (its "running" line; then 2 s of work).
  auto log_text = [&] {
    std::ifstream in(log);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (log_text().find("running ") == std::string::npos && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto t0 = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "did not exit within 60 s of SIGINT\n" << log_text();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("exited %.2f s after SIGINT\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  ASSERT_TRUE(WIFEXITED(status)) << log_text();
  EXPECT_EQ(WEXITSTATUS(status), 130) << log_text();
  const json r = parse_file(out);
  ASSERT_FALSE(r.is_discarded()) << log_text();
  EXPECT_EQ(r.at("status").at("code"), "cancelled");
  EXPECT_GT(finished_of(r, "a") + finished_of(r, "b"), 0);
}

TEST(GpuCli, TheTimeLimitEndsAGpuRunWithWhatFinishedWritten) {
  const std::string concord = concord_binary();
  if (concord.empty()) GTEST_SKIP() << "no concord binary (set CONCORD_BIN)";
  const std::string out = scratch("limit.json");
  const std::string cmd = "timeout -s KILL 120 '" + concord + "' run '" + long_spec() +
                          "' --backend cuda --policy streams --no-serial --time-limit 1 --out '" + out + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) text.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  EXPECT_NE(text.find("deadline exceeded: shared run: the run passed its time limit of 1"), std::string::npos) << text;
  const json r = parse_file(out);
  ASSERT_FALSE(r.is_discarded()) << text;
  EXPECT_EQ(r.at("status").at("code"), "deadline exceeded");
  EXPECT_GT(finished_of(r, "a") + finished_of(r, "b"), 0);
}

}  // namespace
}  // namespace concord
