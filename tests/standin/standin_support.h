// What the end-to-end tests through the stand-in driver share: a scratch folder per test, the
// node daemon (concordd) as a child process on a socket there, the stand-in test program
// (concord_standin_app) run plain or under LD_PRELOAD=libconcord_intercept.so as a child with its
// own environment, and the record the stand-in driver writes of what each process launched.
#pragma once

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace concord::standin_test {

using json = nlohmann::json;
using Env = std::vector<std::pair<std::string, std::string>>;

inline uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh folder for one test, removed afterwards unless CONCORD_KEEP_TEST_FILES is set.
class Scratch {
 public:
  Scratch() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "concord_standin_XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    ::chmod(dir_.c_str(), 0777);  // a tenant of another user writes its record and stats here
  }
  ~Scratch() {
    if (!std::getenv("CONCORD_KEEP_TEST_FILES")) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

struct Exit {
  int code = -1;  // the exit status, or 128 + signal, or -1 when it did not end in time (killed)
  std::string out, err;
  json line = json::object();  // stdout's last JSON line
  bool ok() const { return code == 0 && line.value("ok", false); }
};

// A child process with `env` added to this process's environment, optionally as another user.
class Child {
 public:
  Child() = default;
  Child(const std::vector<std::string>& argv, const Env& env, const std::string& out, const std::string& err,
        std::optional<uid_t> as_uid = std::nullopt)
      : out_(out), err_(err) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) std::_Exit(126);
      if (as_uid) {
        if (::setgid(*as_uid) != 0 || ::setuid(*as_uid) != 0) std::_Exit(125);
      }
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::_Exit(127);
    }
  }
  Child(Child&& o) noexcept : pid_(std::exchange(o.pid_, -1)), out_(std::move(o.out_)), err_(std::move(o.err_)) {}
  Child& operator=(Child&& o) noexcept {
    if (this != &o) {
      reap();
      pid_ = std::exchange(o.pid_, -1);
      out_ = std::move(o.out_);
      err_ = std::move(o.err_);
    }
    return *this;
  }
  ~Child() { reap(); }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && ::kill(pid_, 0) == 0 && !exited_; }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits up to `timeout`; a child still running then is killed and its code is -1.
  Exit wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    Exit e;
    if (pid_ <= 0) return e;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    bool done = false;
    while (std::chrono::steady_clock::now() < deadline) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        done = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!done) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      e.code = -1;
    } else {
      e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    exited_ = true;
    pid_ = -1;
    e.out = read_text(out_);
    e.err = read_text(err_);
    std::istringstream lines(e.out);
    for (std::string l; std::getline(lines, l);) {
      if (!l.empty() && l[0] == '{') {
        auto j = json::parse(l, nullptr, false);
        if (!j.is_discarded()) e.line = j;
      }
    }
    return e;
  }
  // Resident memory in KiB (0 when gone).
  long rss_kib() const {
    std::ifstream statm("/proc/" + std::to_string(pid_) + "/statm");
    long pages = 0, resident = 0;
    if (!(statm >> pages >> resident)) return 0;
    return resident * (::sysconf(_SC_PAGESIZE) / 1024);
  }

 private:
  void reap() {
    if (pid_ > 0 && !exited_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string out_, err_;
};

struct Paths {
  std::string app = CONCORD_STANDIN_APP;
  std::string library = CONCORD_INTERCEPT_LIBRARY;
  std::string daemon = CONCORD_DAEMON;
};
inline const Paths& paths() {
  static const Paths p;
  return p;
}

// concordd on a socket in `scratch`, planning for an H100 (the stand-in's shape), one lane that
// takes every tenant; `extra` are more flags (e.g. {"--per-launch"}). Its log (stderr, in the
// scratch folder; CONCORD_KEEP_TEST_FILES keeps it) is at CONCORD_TEST_DAEMON_LOG's level, warn
// by default.
class Daemon {
 public:
  Daemon(const Scratch& scratch, const std::string& policy, const std::vector<std::string>& extra = {})
      : socket_(scratch.path("concordd.sock")) {
    const std::string drivers = scratch.path("no-driver");
    std::filesystem::create_directories(drivers);
    std::vector<std::string> argv = {paths().daemon,  "--socket",      socket_, "--policy", policy, "--device-spec", "h100",
                                      "--driver-root", drivers,        "--log-level", std::getenv("CONCORD_TEST_DAEMON_LOG") ? std::getenv("CONCORD_TEST_DAEMON_LOG") : "warn"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = Child(argv, {}, scratch.path("concordd.out"), scratch.path("concordd.err"));
    // Up once its socket takes a connection (the file appears at bind, before the daemon listens).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(up_ = accepts(socket_)) && std::chrono::steady_clock::now() < deadline && child_.running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  bool up() const { return up_; }
  const std::string& socket() const { return socket_; }
  Child& child() { return child_; }
  Exit stop() {
    child_.signal(SIGTERM);
    return child_.wait(std::chrono::seconds(10));
  }

 private:
  static bool accepts(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
  }
  std::string socket_;
  Child child_;
  bool up_ = false;
};

// What the stand-in driver recorded (CONCORD_STANDIN_RECORD): one JSON object a line.
struct Record {
  std::vector<json> lines;
  static Record read(const std::string& path) {
    Record r;
    std::istringstream in(read_text(path));
    for (std::string l; std::getline(in, l);) {
      auto j = json::parse(l, nullptr, false);
      if (!j.is_discarded()) r.lines.push_back(std::move(j));
    }
    return r;
  }
  std::vector<json> of(const std::string& kind) const {
    std::vector<json> out;
    for (const json& j : lines) {
      if (j.value("record", "") == kind) out.push_back(j);
    }
    return out;
  }
  std::vector<json> kernels(const std::string& name = "") const {
    std::vector<json> out;
    for (const json& j : of("kernel")) {
      if (name.empty() || j.value("kernel", "") == name) out.push_back(j);
    }
    return out;
  }
  std::vector<json> errors() const { return of("error"); }
};

// A run of the stand-in program: its record, its counters (under the library) and how it ended.
struct AppRun {
  Exit exit;
  Record record;
  json stats = json::object();
};

class App {
 public:
  // `preload`: under libconcord_intercept.so; `env`: more settings (CONCORD_*, the stand-in's).
  App(const Scratch& scratch, const std::string& name, const std::vector<std::string>& args, const Env& env, bool preload,
      std::optional<uid_t> as_uid = std::nullopt)
      : record_(scratch.path(name + ".record.jsonl")), stats_(scratch.path(name + ".stats.json")) {
    Env all = env;
    all.emplace_back("CONCORD_STANDIN_RECORD", record_);
    if (preload) {
      all.emplace_back("LD_PRELOAD", paths().library);
      all.emplace_back("CONCORD_INTERCEPT_STATS", stats_);
    }
    std::vector<std::string> argv = {paths().app};
    argv.insert(argv.end(), args.begin(), args.end());
    child_ = Child(argv, all, scratch.path(name + ".out"), scratch.path(name + ".err"), as_uid);
  }
  Child& child() { return child_; }
  AppRun wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    AppRun r;
    r.exit = child_.wait(timeout);
    r.record = Record::read(record_);
    const std::string s = read_text(stats_);
    if (!s.empty()) {
      auto j = json::parse(s, nullptr, false);
      if (!j.is_discarded()) r.stats = j;
    }
    return r;
  }

 private:
  std::string record_, stats_;
  Child child_;
};

// The settings that make the program a tenant of `daemon` of class `cls` ("lc" or "be").
inline Env tenant(const Daemon& daemon, const std::string& cls, const std::string& name = "") {
  Env env = {{"CONCORD_SOCKET", daemon.socket()}, {"CONCORD_CLASS", cls}, {"CONCORD_NAME", name.empty() ? cls : name}};
  if (cls == "lc") env.emplace_back("CONCORD_TARGET_MS", "50");
  return env;
}

inline AppRun run_app(const Scratch& scratch, const std::string& name, const std::vector<std::string>& args, const Env& env,
                      bool preload) {
  return App(scratch, name, args, env, preload).wait();
}

// Waits until `path` exists (a program's "ready" file), up to `timeout`.
inline bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// The kernels' tags in the order they started, per stream.
inline std::map<uint64_t, std::vector<uint64_t>> tags_by_stream(const std::vector<json>& kernels) {
  std::vector<json> sorted = kernels;
  std::sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) { return a.at("start_ns") < b.at("start_ns"); });
  std::map<uint64_t, std::vector<uint64_t>> out;
  for (const json& k : sorted) out[k.at("stream").get<uint64_t>()].push_back(k.at("tag").get<uint64_t>());
  return out;
}

}  // namespace concord::standin_test
