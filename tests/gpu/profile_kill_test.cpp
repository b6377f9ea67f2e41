// `concord profile run` (measuring on the GPU) and `concord profile raise` (RAISE's metrics from
// a stored Nsight Compute CSV) write the same profiles of one store at once, and are killed with
// SIGKILL at random points and restarted: no field that was in the store is ever missing
// afterwards, the store stays readable, and once both finish every field is there. The CPU side of
// the same property, with the store's own calls, is tests/unit/profile_store_kill_test.cpp.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "concord/profile.h"

extern char** environ;

namespace concord {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKernel = "bfs";
constexpr int64_t kSize = 1048576;  // the size tests/cli/data/ncu_bfs_1048576.csv was measured at

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

// The stored Nsight Compute CSV: $CONCORD_TEST_DATA, the source tree's, or tests/cli/data under
// the working directory (the repository root on the GPU machines).
std::string ncu_csv() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("CONCORD_TEST_DATA")) dirs.emplace_back(env);
#ifdef CONCORD_TEST_DATA_DIR
  dirs.emplace_back(CONCORD_TEST_DATA_DIR);
#endif
  dirs.emplace_back("tests/cli/data");
  for (const fs::path& d : dirs) {
    if (fs::exists(d / "ncu_bfs_1048576.csv")) return (d / "ncu_bfs_1048576.csv").string();
  }
  return "";
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// (variant, field) pairs the store holds: profile fields and the "raise" facet.
using Present = std::set<std::pair<std::string, std::string>>;

Result<Present> present_fields(const std::string& db) {
  Present out;
  auto store = ProfileStore::open(db, /*read_only=*/true);
  if (!store) return store.status();
  auto profiles = (*store)->all();
  if (!profiles) return profiles.status();
  if (!profiles->problems.empty()) return Status::internal("unreadable rows: " + profiles->problems.front());
  for (const KernelProfile& p : profiles->profiles) {
    const ProfileFields f = measured_fields(p);
    for (ProfileField field : kAllProfileFields) {
      if (f.contains(field)) out.insert({p.key.variant, to_string(field)});
    }
  }
  auto facets = (*store)->all_facets();
  if (!facets) return facets.status();
  if (!facets->problems.empty()) return Status::internal("unreadable facets: " + facets->problems.front());
  for (const ProfileFacet& f : facets->facets) out.insert({f.key.variant, "facet:" + f.name});
  return out;
}

TEST(GpuProfileStoreKill, ProfileRunAndRaiseKilledAtRandomLoseNoField) {
  const std::string concord = concord_binary();
  if (concord.empty()) GTEST_SKIP() << "no concord binary (set CONCORD_BIN)";
  const std::string csv = ncu_csv();
  if (csv.empty()) GTEST_SKIP() << "tests/cli/data/ncu_bfs_1048576.csv not found (run from the repository root or set CONCORD_TEST_DATA)";
  // The key's device, as `profile run` states it, so that both commands write the same rows.
  std::string gpu, driver;
  {
    auto b = cuda::CudaBackend::create(0, 1);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    gpu = (*b)->device().name;
    driver = (*b)->device().driver_version;
  }
  const fs::path dir = fs::path(::testing::TempDir()) / ("gpu_store_kill_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "p.db").string();
  const std::string size = std::string(kKernel) + "=" + std::to_string(kSize);
  const std::array<std::vector<std::string>, 2> commands = {
      std::vector<std::string>{concord, "profile", "run", "--kernels", kKernel, "--size", size, "--all-variants",
                               "--no-pressure", "--reps", "2", "--db", db},
      std::vector<std::string>{concord, "profile", "raise", "--kernels", kKernel, "--size", size, "--from-csv", csv,
                               "--gpu", gpu, "--driver", driver, "--db", db}};
  const std::array<std::string, 2> logs = {(dir / "run.log").string(), (dir / "raise.log").string()};
  std::array<pid_t, 2> pids{-1, -1};
  auto start = [&](int w) { pids[static_cast<size_t>(w)] = spawn(commands[static_cast<size_t>(w)], logs[static_cast<size_t>(w)]); };
  // Ended by itself: its exit status (restarted then, to write its fields again); -1 while running.
  auto ended = [&](int w) {
    int status = 0;
    if (waitpid(pids[static_cast<size_t>(w)], &status, WNOHANG) != pids[static_cast<size_t>(w)]) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };

  start(0);
  start(1);
  ASSERT_GT(pids[0], 0);
  ASSERT_GT(pids[1], 0);
  std::mt19937 rng(20251125);
  std::uniform_int_distribution<int> pause_ms(100, 2500), which(0, 1);
  Present seen;
  int kills = 0, checks = 0;
  auto check = [&](const char* when) {
    // The store may be busy with the other writer's transaction for a moment.
    Result<Present> now = Status::internal("not read");
    for (int attempt = 0; attempt < 50 && !now.is_ok(); ++attempt) {
      now = present_fields(db);
      if (!now.is_ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!now.is_ok() && !fs::exists(db)) return;  // not created yet: nothing to lose
    ASSERT_TRUE(now.is_ok()) << when << ": " << now.status().to_string();
    for (const auto& f : seen) EXPECT_TRUE(now->count(f)) << when << ": lost " << f.first << " " << f.second;
    seen.insert(now->begin(), now->end());
    ++checks;
  };
  for (; kills < 16; ++kills) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(pause_ms(rng));
    while (std::chrono::steady_clock::now() < until) {
      for (int w = 0; w < 2; ++w) {
        const int rc = ended(w);
        if (rc < 0) continue;
        EXPECT_EQ(rc, 0) << "a writer failed on its own; log " << logs[static_cast<size_t>(w)];
        start(w);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int w = which(rng);
    kill(pids[static_cast<size_t>(w)], SIGKILL);
    waitpid(pids[static_cast<size_t>(w)], nullptr, 0);
    check("after a kill");
    start(w);
  }
  for (int w = 0; w < 2; ++w) {
    kill(pids[static_cast<size_t>(w)], SIGKILL);
    waitpid(pids[static_cast<size_t>(w)], nullptr, 0);
  }
  check("after the last kill");
  // Both once more, to their end: every field of every variant is there.
  for (int w = 0; w < 2; ++w) {
    start(w);
    int status = 0;
    waitpid(pids[static_cast<size_t>(w)], &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "log " << logs[static_cast<size_t>(w)];
  }
  check("after both finished");
  std::printf("%d kills, %d checks, %zu (variant, field) pairs\n", kills, checks, seen.size());
  auto writable = ProfileStore::open(db);  // runs SQLite's quick_check
  ASSERT_TRUE(writable.is_ok()) << writable.status().to_string();
  auto final_fields = present_fields(db);
  ASSERT_TRUE(final_fields.is_ok());
  for (const char* variant : {"min", "mid", "max"}) {
    for (const char* field : {"sm_curve", "cache", "tlp", "linear", "facet:raise"}) {
      EXPECT_TRUE(final_fields->count({variant, field})) << variant << " " << field;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace concord
