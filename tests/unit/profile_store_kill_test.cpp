// Two processes write different fields of the same profiles (as `profile run` and `profile raise`
// do) into one store at once, and are killed with SIGKILL at random points and restarted: every
// write a process reported committed is still there, with its value or a later one, and the store
// passes SQLite's integrity check.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

#include "concord/profile.h"

namespace concord {
namespace {

constexpr int kKeys = 6;

ProfileKey key(int i) { return {"H200", "580", "k" + std::to_string(i), "mid", 64}; }

// Field writes a writer makes, each value carrying its round r (1, 2, ...).
enum class Writer { curves = 0, facets = 1 };

// Writes forever from round `first`; after each committed write, one line "key field r" on `out`.
[[noreturn]] void write_forever(Writer who, const std::string& db, int first, int out) {
  auto report = [&](const std::string& line) {
    const std::string l = line + "\n";
    if (::write(out, l.data(), l.size()) < 0) ::_exit(3);
  };
  auto store = ProfileStore::open(db);
  if (!store) {
    report("E " + store.status().message());
    ::_exit(1);
  }
  for (int r = first;; ++r) {
    for (int i = 0; i < kKeys; ++i) {
      KernelProfile p;
      p.key = key(i);
      if (who == Writer::curves) {
        p.sm_curve = {{2, 2.0 * r}, {132, 1.0 * r}};
        if (Status s = (*store)->merge(p, {ProfileField::sm_curve}); !s) {
          report("E " + s.message());
          ::_exit(1);
        }
        report(std::to_string(i) + " sm_curve " + std::to_string(r));
        p.tlp_seconds = {1.0 * r};
        if (Status s = (*store)->merge(p, {ProfileField::tlp}); !s) {
          report("E " + s.message());
          ::_exit(1);
        }
        report(std::to_string(i) + " tlp " + std::to_string(r));
      } else {
        p.cache_seconds = {1.0 * r, 1.0 * r, 1.0 * r, 1.0 * r};
        if (Status s = (*store)->merge(p, {ProfileField::cache}); !s) {
          report("E " + s.message());
          ::_exit(1);
        }
        report(std::to_string(i) + " cache " + std::to_string(r));
        if (Status s = (*store)->put_facet(p.key, "counter", nlohmann::json{{"r", r}}.dump()); !s) {
          report("E " + s.message());
          ::_exit(1);
        }
        report(std::to_string(i) + " facet " + std::to_string(r));
      }
    }
  }
}

struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string partial;  // an unfinished line
};

TEST(ProfileStoreKill, ConcurrentWritersKilledAtRandomLoseNoCommittedField) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("store_kill_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "p.db").string();

  std::map<std::pair<int, std::string>, int> committed;  // (key, field) -> highest round reported
  std::vector<std::string> errors;
  std::array<Child, 2> children;
  std::array<int, 2> next_round{1, 1};
  auto start = [&](int w) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      write_forever(static_cast<Writer>(w), db, next_round[static_cast<size_t>(w)], fds[1]);
    }
    ::close(fds[1]);
    children[static_cast<size_t>(w)] = {pid, fds[0], ""};
  };
  auto take_lines = [&](Child& c, bool until_eof) {
    char buf[4096];
    while (true) {
      pollfd pfd{c.out, POLLIN, 0};
      if (!until_eof && ::poll(&pfd, 1, 0) <= 0) return;
      const ssize_t n = ::read(c.out, buf, sizeof(buf));
      if (n <= 0) return;
      c.partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = c.partial.find('\n')) != std::string::npos) {
        const std::string line = c.partial.substr(0, nl);
        c.partial.erase(0, nl + 1);
        if (line.rfind("E ", 0) == 0) {
          errors.push_back(line);
          continue;
        }
        std::istringstream words(line);
        int k = 0, r = 0;
        std::string field;
        words >> k >> field >> r;
        int& best = committed[{k, field}];
        best = std::max(best, r);
      }
    }
  };
  auto kill_and_reap = [&](int w) {
    Child& c = children[static_cast<size_t>(w)];
    ::kill(c.pid, SIGKILL);
    take_lines(c, /*until_eof=*/true);  // the pipe keeps what was written before the kill
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    ::close(c.out);
    // A restart continues after the last round it reported for any key.
    int last = 0;
    for (const auto& [kf, r] : committed) {
      const bool mine = w == 0 ? (kf.second == "sm_curve" || kf.second == "tlp") : (kf.second == "cache" || kf.second == "facet");
      if (mine) last = std::max(last, r);
    }
    next_round[static_cast<size_t>(w)] = last + 1;
  };

  // Both start on a store that does not exist yet: they also race to create it.
  start(0);
  start(1);
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> pause_ms(5, 60), which(0, 1);
  int kills = 0;
  for (; kills < 24; ++kills) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(pause_ms(rng));
    while (std::chrono::steady_clock::now() < until) {
      for (Child& c : children) take_lines(c, false);
      ::usleep(1000);
    }
    const int w = which(rng);
    kill_and_reap(w);
    start(w);
  }
  kill_and_reap(0);
  kill_and_reap(1);
  EXPECT_TRUE(errors.empty()) << errors.front();
  ASSERT_FALSE(committed.empty()) << "the writers committed nothing";
  std::printf("%d kills, %zu (key, field) pairs written, rounds reached: curves %d, facets %d\n", kills, committed.size(),
              next_round[0] - 1, next_round[1] - 1);

  // Opening for writing runs PRAGMA quick_check: the store is intact.
  auto store = ProfileStore::open(db);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  for (const auto& [kf, r] : committed) {
    const ProfileKey k = key(kf.first);
    int stored = 0;
    if (kf.second == "facet") {
      auto f = (*store)->get_facet(k, "counter");
      ASSERT_TRUE(f.is_ok() && f->has_value()) << k.to_string();
      stored = nlohmann::json::parse(**f)["r"].get<int>();
    } else {
      auto p = (*store)->get(k);
      ASSERT_TRUE(p.is_ok() && p->has_value()) << k.to_string();
      if (kf.second == "sm_curve") {
        ASSERT_EQ((*p)->sm_curve.size(), 2u);
        stored = static_cast<int>((*p)->sm_curve[1].seconds);
      } else if (kf.second == "tlp") {
        ASSERT_EQ((*p)->tlp_seconds.size(), 1u);
        stored = static_cast<int>((*p)->tlp_seconds[0]);
      } else {
        stored = static_cast<int>((*p)->cache_seconds[0]);
      }
    }
    EXPECT_GE(stored, r) << k.to_string() << " " << kf.second << ": committed round " << r << ", stored " << stored;
  }
  auto all = (*store)->all();
  ASSERT_TRUE(all.is_ok());
  EXPECT_TRUE(all->problems.empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace concord
