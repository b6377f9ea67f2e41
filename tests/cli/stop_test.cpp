// `concord run` as a process: SIGINT and SIGTERM end a run cleanly with what finished written
// (results JSON with its status, a trace) and the shell's exit status; a second signal ends it at
// once; --time-limit ends a run that would go on, with the same partial results.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A run long enough (seconds of wall time on the simulator) to be stopped in its shared run. What
// it did by then is written: tens of megabytes of results after a second (a trace takes longer).
constexpr const char* kLongSpec = R"(name: long
tenants:
  - name: a
    requests: 200000
    kernels:
      - {kernel: vector_add, size: 65536}
  - name: b
    requests: 200000
    kernels:
      - {kernel: fma_loop, size: 65536}
)";

struct Child {
  pid_t pid = -1;
  int err = -1;  // its stderr
  std::string stderr_text;
};

class StopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("concord_stop_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "long.yaml") << kLongSpec;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts `concord run` on the long spec with -v (its "running" line says the handlers are in
  // place), results (and with `trace`, the trace) in the test's directory.
  Child start(const std::vector<std::string>& extra = {}, bool trace = false) {
    std::vector<std::string> args = {CONCORD_CLI, "-v", "run", (dir_ / "long.yaml").string(), "--policy", "streams",
                                     "--no-serial", "--out", (dir_ / "r.json").string()};
    if (trace) {
      args.push_back("--trace");
      args.push_back((dir_ / "t.json").string());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    Child c;
    EXPECT_EQ(posix_spawn(&c.pid, CONCORD_CLI, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    c.err = fds[0];
    return c;
  }

  // Reads the child's stderr until `needle` appears (true) or it closes or `seconds` pass.
  static bool wait_for(Child& c, const std::string& needle, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    char buf[4096];
    while (c.stderr_text.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      pollfd p{c.err, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      const ssize_t n = ::read(c.err, buf, sizeof(buf));
      if (n <= 0) return false;
      c.stderr_text.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  // Waits at most `seconds` for the child to end; its wait status, or -1 (then it is killed).
  static int reap(Child& c, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (::waitpid(c.pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, &status, 0);
        return -1;
      }
      wait_for(c, "\x01never", 0.05);  // keep draining stderr
    }
    wait_for(c, "\x01never", 0.2);
    ::close(c.err);
    return status;
  }

  json read_json(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream text;
    text << in.rdbuf();
    return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  }

  // The run was stopped in its shared run: partial results and a trace, each tenant's finished
  // requests kept, and stderr names the stop.
  void expect_partial_results(const Child& c, const std::string& code, bool trace = false) {
    const json results = read_json("r.json");
    ASSERT_FALSE(results.is_discarded()) << "results JSON unreadable\n" << c.stderr_text;
    const json& status = results.at("status");
    EXPECT_FALSE(status.at("complete").get<bool>());
    EXPECT_EQ(status.at("code"), code);
    EXPECT_EQ(status.at("stage"), "shared run");
    EXPECT_TRUE(results.at("metrics").is_null());
    int64_t finished = 0;
    for (const json& t : results.at("tenants")) finished += t.at("requests_finished").get<int64_t>();
    EXPECT_GT(finished, 0);
    EXPECT_LT(finished, 400000) << "stopped before the end";
    if (trace) {
      const json events = read_json("t.json");
      ASSERT_FALSE(events.is_discarded()) << "trace JSON unreadable";
      EXPECT_GT(events.at("traceEvents").size(), 0u);
      EXPECT_FALSE(events.at("otherData").at("status").at("complete").get<bool>());
      EXPECT_EQ(events.at("otherData").at("status").at("code"), code);
    }
    EXPECT_NE(c.stderr_text.find("results (partial: the run ended early)"), std::string::npos) << c.stderr_text;
  }

  fs::path dir_;
};

TEST_F(StopTest, SigintEndsTheRunWithWhatFinishedWritten) {
  Child c = start();
  ASSERT_TRUE(wait_for(c, "running ", 60)) << c.stderr_text;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(c.pid, SIGINT);
  const auto t0 = std::chrono::steady_clock::now();
  const int status = reap(c, 120);
  ASSERT_NE(status, -1) << "did not exit after SIGINT\n" << c.stderr_text;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal\n" << c.stderr_text;
  EXPECT_EQ(WEXITSTATUS(status), 130) << c.stderr_text;
  EXPECT_NE(c.stderr_text.find("concord: stopping"), std::string::npos) << c.stderr_text;
  EXPECT_NE(c.stderr_text.find("cancelled: shared run: the run was stopped"), std::string::npos) << c.stderr_text;
  expect_partial_results(c, "cancelled");
  std::printf("exited %.2f s after SIGINT\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

TEST_F(StopTest, SigtermEndsTheRunWithWhatFinishedWritten) {
  Child c = start();
  ASSERT_TRUE(wait_for(c, "running ", 60)) << c.stderr_text;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(c.pid, SIGTERM);
  const int status = reap(c, 120);
  ASSERT_NE(status, -1) << "did not exit after SIGTERM\n" << c.stderr_text;
  ASSERT_TRUE(WIFEXITED(status)) << c.stderr_text;
  EXPECT_EQ(WEXITSTATUS(status), 143) << c.stderr_text;
  expect_partial_results(c, "cancelled");
}

TEST_F(StopTest, ASecondSignalEndsTheProcessAtOnce) {
  Child c = start();
  ASSERT_TRUE(wait_for(c, "running ", 60)) << c.stderr_text;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(c.pid, SIGINT);
  // The first one's notice says the stop began; the second one kills the process.
  ASSERT_TRUE(wait_for(c, "concord: stopping", 30)) << c.stderr_text;
  ::kill(c.pid, SIGINT);
  const int status = reap(c, 30);
  ASSERT_NE(status, -1) << c.stderr_text;
  // Either the second signal ended it (by SIGINT's default action) or the first had already
  // written everything and exited 130: never anything else.
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGINT);
  } else {
    EXPECT_EQ(WEXITSTATUS(status), 130) << c.stderr_text;
  }
}

TEST_F(StopTest, TheTimeLimitEndsTheRunWithWhatFinishedWritten) {
  Child c = start({"--time-limit", "0.002"}, /*trace=*/true);
  const int status = reap(c, 120);
  ASSERT_NE(status, -1) << c.stderr_text;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << c.stderr_text;
  EXPECT_NE(c.stderr_text.find("deadline exceeded: shared run: the run passed its time limit of 0.002"), std::string::npos)
      << c.stderr_text;
  expect_partial_results(c, "deadline exceeded", /*trace=*/true);
}

TEST_F(StopTest, ATimeLimitMustBePositive) {
  for (const char* bad : {"0", "-1", "nan"}) {
    Child c = start({"--time-limit", bad});
    const int status = reap(c, 60);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 2) << bad << "\n" << c.stderr_text;
    EXPECT_NE(c.stderr_text.find("--time-limit"), std::string::npos) << c.stderr_text;
  }
}

}  // namespace
