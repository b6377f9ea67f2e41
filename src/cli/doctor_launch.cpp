// `concord doctor`'s checks that the library steers processes: a test program run under it, its
// launches counted by the library (CONCORD_INTERCEPT_STATS) and by concordd (its launch total),
// and whether a running process (--pid) has the library mapped.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/doctor.h"
#include "cli/doctor_processes.h"
#include "ipc/control_socket.h"

namespace concord::cli::doctor {
namespace {

namespace fs = std::filesystem;

constexpr auto kProgramTimeout = std::chrono::seconds(30);

struct Ran {
  int status = 0;          // the exit status; 128 + N for a signal
  bool timed_out = false;  // killed after kProgramTimeout
  std::string output;      // stdout and stderr together
};

// Runs `argv` with the library preloaded as a BE tenant named concord-doctor of the daemon at
// `socket`, its counters written to `stats`; calls `seen` every 10 ms until it ends or `seen`
// returns true, when the program's standard input (a pipe) is closed: doctor's probe waits for that
// before it exits, so doctor never misses it.
Ran run_preloaded(const Where& w, const std::vector<std::string>& argv, const std::string& stats, const std::string& output,
                  const std::function<bool(pid_t)>& seen) {
  int input[2] = {-1, -1};
  if (::pipe2(input, O_CLOEXEC) != 0) input[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setenv("LD_PRELOAD", w.library.c_str(), 1);
    ::setenv("CONCORD_SOCKET", w.socket.c_str(), 1);
    ::setenv("CONCORD_NAME", "concord-doctor", 1);
    ::setenv("CONCORD_CLASS", "be", 1);
    ::setenv("CONCORD_INTERCEPT_STATS", stats.c_str(), 1);
    ::setenv("CONCORD_INTERCEPT_LOG", "1", 1);
    for (const char* v : {"CONCORD_TARGET_MS", "CONCORD_DISABLE", "CONCORD_LC_REFUSED"}) ::unsetenv(v);
    const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    if (input[0] >= 0) ::dup2(input[0], 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(input[0]);
  Ran ran;
  if (child < 0) {
    ran.status = 127;
    ran.output = std::string("fork: ") + std::strerror(errno);
    return ran;
  }
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (input[1] >= 0 && seen(child)) {
      ::close(input[1]);
      input[1] = -1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      ran.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (input[1] >= 0) ::close(input[1]);
  ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  ran.output = read_text(output);
  return ran;
}

// The last line of `text` that starts with `prefix` (without it), else the last non-empty line.
std::string last_line(const std::string& text, const std::string& prefix = "") {
  std::istringstream in(text);
  std::string last, match;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    last = line;
    if (!prefix.empty() && line.rfind(prefix, 0) == 0) match = line.substr(prefix.size());
  }
  return match.empty() ? last : match;
}

// What concordd lists of a process while it runs: the most launches it showed, and as which tenant.
// The daemon lists a tenant only while its process lives, so this is asked as the program runs.
class TenantWatch {
 public:
  explicit TenantWatch(const std::string& socket) : client_(ipc::ControlClient::connect(socket)) {}
  void look(int pid) {
    if (!client_.is_ok()) return;
    Result<ipc::Message> reply = client_->call(ipc::ListTenants{}, std::chrono::seconds(1));
    if (!reply.is_ok()) return;
    const auto* list = std::get_if<ipc::TenantList>(&*reply);
    if (list == nullptr) return;
    for (const ipc::TenantEntry& t : list->tenants) {
      if (t.pid != pid) continue;
      tenant_ = t.id;
      name_ = t.name;
      launches_ = std::max(launches_, t.launches);
    }
  }
  std::optional<uint64_t> tenant() const { return tenant_; }
  const std::string& name() const { return name_; }
  uint64_t launches() const { return launches_; }

 private:
  Result<ipc::ControlClient> client_;
  std::optional<uint64_t> tenant_;
  std::string name_;
  uint64_t launches_ = 0;
};

std::string preload_name(const Where& w) { return w.library_installed ? "libconcord_intercept.so" : w.library; }

}  // namespace

Finding check_launches(Node& node) {
  const Where& w = node.where;
  if (!node.library_present) return skipped("needs the library (above)");
  if (!node.daemon_answers) return skipped("needs concordd (above)");
  const bool probe = w.test_program.empty();
  if (probe && !node.driver_loads) return skipped("needs the driver (above) for doctor's probe; --test-program runs another program");
  const std::vector<std::string> argv =
      probe ? std::vector<std::string>{w.self, "doctor", "--probe", "--libcuda", w.libcuda} : w.test_program;
  std::string shown;
  for (const std::string& a : argv) shown += (shown.empty() ? "" : " ") + shell_quote(a);
  const std::string by_hand = fmt::format("run it by hand to see why: LD_PRELOAD={} CONCORD_SOCKET={} CONCORD_INTERCEPT_LOG=1 {}",
                                          shell_quote(preload_name(w)), shell_quote(w.socket), shown);

  char dir_template[] = "/tmp/concord-doctor-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) return problem(std::string("cannot make a scratch folder in /tmp: ") + std::strerror(errno), "check /tmp");
  const std::string stats = std::string(dir) + "/counters.json";
  TenantWatch watch(w.socket);
  const Ran ran = run_preloaded(w, argv, stats, std::string(dir) + "/output.txt", [&](pid_t child) {
    watch.look(child);
    return watch.launches() > 0;
  });
  const std::string counters_text = read_text(stats);
  std::error_code ec;
  fs::remove_all(dir, ec);

  const std::string exited = ran.timed_out ? fmt::format("did not end within {} s", kProgramTimeout.count())
                                           : fmt::format("exited with status {}", ran.status);
  if (ran.status == 127 && ran.output.rfind("exec ", 0) == 0) {
    return problem(fmt::format("cannot run the test program: {}", last_line(ran.output)), "give --test-program a CUDA program of this node");
  }
  nlohmann::json counters = nlohmann::json::parse(counters_text, nullptr, false);
  if (counters_text.empty() || counters.is_discarded() || !counters.is_object()) {
    return problem(fmt::format("{} {} and the library wrote no counters: it did not load, or the program did not exit normally ({})",
                               shown, exited, last_line(ran.output)),
                   by_hand + " (a setuid or static program ignores LD_PRELOAD)");
  }
  const uint64_t launches = counters.value("launches", uint64_t{0}), noticed = counters.value("noticed", uint64_t{0});
  if (launches == 0) {
    return problem(fmt::format("the library saw no launch of {} ({}: {})", shown, exited, last_line(ran.output)),
                   "give --test-program a program that launches CUDA kernels through the driver; " + by_hand);
  }
  if (noticed == 0) {
    return problem(fmt::format("{}'s {} launches went straight to the driver: {}", shown, launches,
                               last_line(ran.output, "concord-intercept: ")),
                   by_hand);
  }
  if (ran.timed_out || ran.status != 0) {
    return problem(fmt::format("{} {} after {} launches under the library: {}", shown, exited, launches, last_line(ran.output)), by_hand);
  }
  // The daemon's side: it listed the program as a tenant and counted its launches. It lists a
  // tenant while its process lives and refreshes the counts about every 200 ms, so doctor's probe
  // stays until doctor saw them; another program must run long enough to be seen.
  if (!watch.tenant() || watch.launches() == 0) {
    return problem(fmt::format("the library posted {} launches of {}, but concordd {} while it ran", noticed, shown,
                               watch.tenant() ? fmt::format("counted none of them for tenant {}", *watch.tenant())
                                              : std::string("never listed it as a tenant")),
                   probe ? "systemctl restart concordd (its log: journalctl -u concordd -o cat)"
                         : "give --test-program a program that runs for a second or more, or leave it out for doctor's probe");
  }
  return ok(fmt::format("{}: {} launches through the library, {} posted to concordd, which counted {} for tenant {} ({})",
                        probe ? "doctor's probe" : shown, launches, noticed, watch.launches(), *watch.tenant(), watch.name()));
}

Finding check_process(Node& node) {
  const Where& w = node.where;
  const int pid = *w.pid;
  const std::string maps_path = fmt::format("{}/{}/maps", w.proc_root, pid);
  const std::string maps = read_text(maps_path);
  const std::optional<Process> p = process(w.proc_root, pid);
  const std::string who = p && !p->argv.empty() ? fmt::format("process {} ({})", pid, fs::path(p->argv[0]).filename().string())
                                                : fmt::format("process {}", pid);
  if (maps.empty()) {
    return problem(fmt::format("cannot read {} as {}", maps_path, caller_name()),
                   "run concord doctor as root, or as the process's user");
  }
  std::string mapped;
  bool cuda = false;
  std::istringstream lines(maps);
  for (std::string line; std::getline(lines, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string name = fs::path(path).filename();
    if (name == "libconcord_intercept.so" || path == w.library) mapped = path;
    if (name.rfind("libcuda.so", 0) == 0) cuda = true;
  }
  if (mapped.empty()) {
    const std::string command = p && !p->argv.empty() ? command_line(*p) : "PROGRAM";
    return problem(fmt::format("{} did not preload libconcord_intercept.so: its launches go straight to the driver", who),
                   fmt::format("restart it under the library: LD_PRELOAD={} {}", shell_quote(preload_name(w)), command));
  }
  std::string tenant;
  if (node.daemon_answers) {
    TenantWatch watch(w.socket);
    watch.look(pid);
    if (watch.tenant()) tenant = fmt::format("tenant {} ({}, {} launches)", *watch.tenant(), watch.name(), watch.launches());
  }
  if (tenant.empty()) {
    tenant = cuda ? "not a tenant of concordd now (its stderr says why: concord-intercept: ...)"
                  : "not a tenant yet (it has not loaded libcuda; it registers at its first launch)";
  }
  return ok(fmt::format("{} preloaded {}; {}", who, mapped, tenant));
}

}  // namespace concord::cli::doctor
