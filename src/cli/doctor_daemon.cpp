// `concord doctor`'s checks of concordd: its control socket (there, a socket, open to the caller,
// answered) and the daemon behind it (it answers its control protocol; the policy and GPUs it
// runs, from its metrics where it serves them, else from its command line).
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cli/doctor.h"
#include "cli/doctor_processes.h"
#include "daemon/daemon.h"
#include "daemon/device_lanes.h"
#include "ipc/control_socket.h"

namespace concord::cli::doctor {
namespace {

namespace fs = std::filesystem;

std::string start_daemon(const std::string& socket) {
  const bool systemd = fs::exists("/run/systemd/system");
  // concordd makes no folder: systemd makes the unit's RuntimeDirectory.
  const std::string folder = fs::path(socket).parent_path().string();
  const std::string direct = fmt::format("mkdir -p {} && concordd{} &", shell_quote(folder.empty() ? "." : folder),
                                         socket == daemon::DaemonOptions{}.socket_path ? "" : " --socket " + shell_quote(socket));
  return systemd ? fmt::format("systemctl start concordd (without systemd: {})", direct)
                 : fmt::format("{} (as root; where systemd runs: systemctl start concordd)", direct);
}

// Why the caller may not connect through a file of group `gid` (the socket, or a folder on its way),
// and what lets it: the socket's mode where it leaves its group out, the group where the caller is
// not in it.
Finding refused(const std::string& what, bool group_may, gid_t gid) {
  const std::string me = caller_name(), group = group_name(gid);
  std::vector<std::string> fixes;
  if (!group_may) {
    fixes.push_back("restart concordd with --socket-mode 0660 (CONCORDD_ARGS in /etc/default/concordd, then systemctl restart concordd)");
  }
  std::string why;
  if (caller_holds_group(gid)) {
    why = fmt::format("{} is in group {}", me, group);
  } else if (caller_listed_in_group(gid)) {
    why = fmt::format("{} joined group {} after this login", me, group);
    fixes.push_back(fmt::format("log in again (or: newgrp {})", group));
  } else {
    why = fmt::format("{} is not in group {}", me, group);
    fixes.push_back(fmt::format("usermod -aG {} {}, then log in again", group, me));
  }
  std::string fix;
  for (const std::string& f : fixes) fix += (fix.empty() ? "" : "; and ") + f;
  return problem(fmt::format("{} ({}): its CUDA processes cannot become tenants", what, why), fix);
}

// The first folder on the way to `path` the caller may not pass through, if any.
std::optional<std::string> closed_folder(const std::string& path) {
  fs::path at;
  for (const fs::path& part : fs::path(path).parent_path()) {
    at /= part;
    if (::access(at.c_str(), X_OK) != 0) return at.string();
  }
  return std::nullopt;
}

// A Prometheus label set, `{a="x",b="y"}` at the start of `text`.
std::map<std::string, std::string> labels(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t at = 1;
  while (at < text.size() && text[at] != '}') {
    const size_t eq = text.find("=\"", at);
    if (eq == std::string::npos) break;
    const std::string key = text.substr(at, eq - at);
    std::string value;
    size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        value += text[i] == 'n' ? '\n' : text[i];
      } else {
        value += text[i];
      }
    }
    out[key] = value;
    at = i + 1;
    if (at < text.size() && text[at] == ',') ++at;
  }
  return out;
}

// The daemon's metrics text over its Unix socket (HTTP/1.0), within two seconds.
Result<std::string> scrape(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return Status::invalid_argument(path + ": path too long for a socket");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::io_error(std::string("socket: ") + std::strerror(errno));
  std::string reply;
  Status st = Status::ok();
  const char request[] = "GET /metrics HTTP/1.0\r\n\r\n";
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, request, sizeof request - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof request - 1)) {
    st = Status::io_error(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (st.is_ok()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      st = Status::deadline_exceeded(path + ": no whole reply within 2 s");
      break;
    }
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!st.is_ok()) return st;
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.0 200", 0) != 0 || body == std::string::npos) {
    return Status::parse_error(path + ": not a metrics reply: " + reply.substr(0, reply.find('\r')));
  }
  return reply.substr(body + 4);
}

// A flag's value on a command line ("--policy X" or "--policy=X"); empty where it is not given.
std::string flag_value(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) return argv[i + 1];
    if (argv[i].rfind(flag + "=", 0) == 0) return argv[i].substr(flag.size() + 1);
  }
  return {};
}

}  // namespace

Finding check_socket(Node& node) {
  const std::string& path = node.where.socket;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) {
      const std::string dir = closed_folder(path).value_or(fs::path(path).parent_path().string());
      struct stat ds{};
      ::stat(dir.c_str(), &ds);
      return refused(fmt::format("{} may not reach {}: the folder {} is closed to it (owner {}, group {}, mode {:04o})", caller_name(),
                                 path, dir, user_name(ds.st_uid), group_name(ds.st_gid), ds.st_mode & 07777),
                     true, ds.st_gid);
    }
    return problem(fmt::format("no socket at {}: concordd is not running (or serves another --socket)", path), start_daemon(path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return problem(fmt::format("{} is not a socket", path), fmt::format("rm {}, then {}", shell_quote(path), start_daemon(path)));
  }
  const std::string mode = fmt::format("mode {:04o}, owner {}, group {}", st.st_mode & 07777, user_name(st.st_uid), group_name(st.st_gid));
  if (::access(path.c_str(), W_OK) != 0) {
    return refused(fmt::format("{} may not connect to {} ({})", caller_name(), path, mode), (st.st_mode & 0020) != 0, st.st_gid);
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return problem(path + ": the path is too long for a Unix socket", "give concordd a shorter --socket");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int rc = fd < 0 ? -1 : ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  if (rc == 0) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) node.daemon_pid = cred.pid;
  }
  if (fd >= 0) ::close(fd);
  if (rc != 0) {
    if (err == EACCES || err == EPERM) {
      return refused(fmt::format("{} may not connect to {} ({})", caller_name(), path, mode), (st.st_mode & 0020) != 0, st.st_gid);
    }
    if (err == ECONNREFUSED) {
      return problem(fmt::format("nothing answers on {}: concordd is not running (the socket file is left from one that ended)", path),
                     start_daemon(path));
    }
    return problem(fmt::format("cannot connect to {}: {}", path, std::strerror(err)), start_daemon(path));
  }
  node.socket_open = true;
  return ok(fmt::format("{} ({}); {} may connect", path, mode, caller_name()));
}

Finding check_daemon(Node& node) {
  if (!node.socket_open) return skipped("needs the socket (above)");
  const Where& w = node.where;
  const std::string restart = "systemctl restart concordd (its log: journalctl -u concordd -o cat)";
  Result<ipc::ControlClient> client = ipc::ControlClient::connect(w.socket);
  if (!client.is_ok()) return problem(fmt::format("concordd at {}: {}", w.socket, client.status().message()), start_daemon(w.socket));
  Result<ipc::Message> reply = client->call(ipc::GetStats{}, std::chrono::seconds(2));
  if (!reply.is_ok()) {
    return problem(fmt::format("concordd (pid {}) at {} did not answer: {}", node.daemon_pid, w.socket, reply.status().message()), restart);
  }
  if (const auto* e = std::get_if<ipc::ErrorReply>(&*reply)) {
    return problem(fmt::format("concordd (pid {}) refused a query: {}", node.daemon_pid, e->message),
                   "restart concordd so that it runs the installed release: " + restart);
  }
  const auto* stats = std::get_if<ipc::Stats>(&*reply);
  if (stats == nullptr) return problem("concordd answered a query with an unexpected message", restart);
  node.daemon_answers = true;

  // Its policy and GPUs: the metrics say what it runs; its command line what it was asked for.
  const std::optional<Process> daemon = node.daemon_pid > 0 ? process(w.proc_root, node.daemon_pid) : std::nullopt;
  const std::vector<std::string> argv = daemon ? daemon->argv : std::vector<std::string>{};
  std::string metrics = w.metrics_socket.empty() ? flag_value(argv, "--metrics-socket") : w.metrics_socket;
  std::string policy, gpus, note;
  std::set<std::string> managed;
  bool takes_every_tenant = false;
  if (!metrics.empty()) {
    // A daemon just started publishes its first snapshot within about 200 ms: until then its
    // metrics name no GPU (every daemon has one at least).
    Result<std::string> text = scrape(metrics);
    for (int i = 0; i < 10 && text.is_ok() && text->find("\nconcord_device_info{") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      text = scrape(metrics);
    }
    if (!text.is_ok() && !w.metrics_socket.empty()) {
      return problem(fmt::format("concordd's metrics: {}", text.status().message()),
                     "give --metrics-socket the daemon's (concordd --metrics-socket PATH), or leave it out");
    }
    if (text.is_ok()) {
      std::istringstream lines(*text);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("concord_info{", 0) == 0) policy = labels(line.substr(12))["policy"];
        if (line.rfind("concord_device_info{", 0) == 0) {
          std::map<std::string, std::string> l = labels(line.substr(19));
          gpus += fmt::format("{}GPU {} ({}{})", gpus.empty() ? "" : ", ", l["device"], l["bus_id"].empty() ? "" : l["bus_id"] + ", ",
                              l["spec"]);
          if (l["bus_id"].empty()) takes_every_tenant = true;
          if (std::optional<std::string> bus = daemon::normalize_bus_id(l["bus_id"])) managed.insert(*bus);
        }
      }
    } else {
      note = fmt::format("; its metrics at {}: {}", metrics, text.status().message());
    }
  }
  if (policy.empty() && daemon) {
    policy = flag_value(argv, "--policy");
    if (policy.empty()) policy = daemon::DaemonOptions{}.policy + " (its default)";
  }
  if (gpus.empty() && daemon) {
    const std::string devices = flag_value(argv, "--devices");
    gpus = devices.empty() ? "--devices not given (every GPU the driver lists)" : "--devices " + devices;
    gpus += "; its metrics name them (concordd --metrics-socket)";
  }
  const std::string where_from = daemon ? "" : "; its policy and GPUs unknown (its process cannot be read)";
  const std::string found = fmt::format("concordd pid {} answers: policy {}, {}; {} tenants, {} launches{}{}", node.daemon_pid,
                                        policy.empty() ? "?" : policy, gpus.empty() ? "GPUs ?" : gpus, stats->tenants,
                                        stats->launches, where_from, note);
  if (!managed.empty() && !takes_every_tenant) {
    std::string missing;
    for (const daemon::NodeGpu& g : daemon::node_gpus(w.driver_root)) {
      if (!managed.contains(g.bus_id)) missing += (missing.empty() ? "" : ", ") + g.bus_id;
    }
    if (!missing.empty()) {
      return problem(fmt::format("{}; but the driver's GPU {} is not among them: its processes run without Concord", found, missing),
                     "restart concordd with --devices all (CONCORDD_ARGS in /etc/default/concordd), then " + restart);
    }
  }
  return ok(found);
}

}  // namespace concord::cli::doctor
