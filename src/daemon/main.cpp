// concordd: the node daemon. Tenants (processes under libconcord_intercept, or programs using
// ipc::TenantClient) register on its control socket; a policy with a lease form steers them
// through leases (no launch waits for the daemon), any other policy decides every BE launch
// through the engine with a live source and a remote backend. SIGTERM or SIGINT stops it: tenants
// are told goodbye and go on without it.
#include <CLI/CLI.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "concord/cli_parse.h"
#include "concord/lease.h"
#include "concord/memory_quota.h"
#include "concord/policy.h"
#include "concord/suggest.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "ipc/control_socket.h"

int main(int argc, char** argv) {
  using namespace concord;
  CLI::App app{"concordd: the Concord node daemon (one per node: an engine and a policy instance for each of its GPUs)"};
  daemon::DaemonOptions o;
  std::string group, device = "auto", devices = "all", driver_root = "/proc/driver/nvidia", level = "info";
  std::string mode = "0660";
  double stale_s = 2.0;
  app.add_option("--socket", o.socket_path, "Control socket path")->capture_default_str();
  app.add_option("--group", group, "Group of the control socket (its members may register tenants)");
  app.add_option("--socket-mode", mode, "File mode of the control socket (octal)")->capture_default_str();
  app.add_option("--policy", o.policy, "Policy, with parameters as name:key=value;key=value")->capture_default_str();
  app.add_option("--devices", devices,
                 "The GPUs it manages, one engine and policy instance each: all (every GPU /proc/driver/nvidia lists; one "
                 "device taking every tenant where it lists none) or a comma list of indices (nvidia-smi's) and PCI bus ids. "
                 "A tenant is placed on the GPU it launches on (docs/cluster.md)")
      ->capture_default_str();
  app.add_option("--driver-root", driver_root,
                 "Where the NVIDIA driver's files are (gpus/<bus id>/information): the GPUs --devices all finds and their "
                 "models. An empty folder makes one device that takes every tenant (containers, tests)")
      ->capture_default_str();
  app.add_option("--device-spec", device,
                 "What each GPU's policy plans for: auto (each GPU's model as the driver names it, h100 or h200; h200 "
                 "where it names neither, as `concord run`), a built-in spec (h100, h200) or a device JSON file for every GPU "
                 "(the daemon never touches a GPU itself)")
      ->capture_default_str();
  app.add_flag("--per-launch", o.per_launch,
               "Decide every BE launch through the engine even when the policy has a lease form (LC tenants always launch at "
               "once under an open lease; docs/daemon.md)");
  app.add_flag("!--no-follow-on", o.follow_on,
               "Per-launch decisions: release no launch before the engine dispatches it (by default a launch right behind a "
               "released one of the same tenant is released at once while no latency-critical work is active; docs/daemon.md)");
  app.add_option("--be-depth", o.be_depth,
                 "Per-launch decisions: at most this many launches of a best-effort tenant released and not yet ended through "
                 "follow-on releases (0: no limit); a lower depth leaves less BE work queued ahead of an LC request that arrives")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--launch-timeout", o.launch_timeout,
                 "Per-launch decisions: seconds a tenant may hold a released launch without reporting any completion before "
                 "it is dropped (the bound is the larger of this and 20x the longest its kernel took; docs/daemon.md)")
      ->check(CLI::Range(1e-3, 86400.0) & concord::finite_number())
      ->capture_default_str();
  std::string lc_users = "root", lc_groups;
  app.add_option("--lc-users", lc_users,
                 "Users who may register latency-critical tenants: a comma list of names or uids (root always may)")
      ->capture_default_str();
  app.add_option("--lc-groups", lc_groups,
                 "Groups whose members may register latency-critical tenants: a comma list of names or gids, or none (default: "
                 "the --group, else the daemon's own group)");
  app.add_option("--metrics-socket", o.metrics_socket, "Serve Prometheus text on this Unix socket");
  std::string metrics_mode = "0660";
  app.add_option("--metrics-socket-mode", metrics_mode,
                 "File mode of the metrics socket (octal; its group is the control socket's): a tenant's name and uid go only "
                 "to its user, root and that group")
      ->capture_default_str();
  app.add_option("--metrics-port", o.metrics_port,
                 "Serve Prometheus text on 127.0.0.1:PORT: the totals alone, since it cannot tell who asks (off by default)")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--metrics-tcp-tenants", o.metrics_tcp_tenants,
               "Name every tenant (name, uid) on the TCP metrics endpoint too: any local user can read it");
  double idle_s = 10, frame_s = 2;
  app.add_option("--max-connections", o.limits.max_clients, "Control socket: connections in all")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--max-connections-per-uid", o.limits.max_clients_per_uid,
                 "Control socket: connections of one user at once (root's are not capped); a user has at most 64 tenants, "
                 "one connection each")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--idle-timeout", idle_s, "Control socket: seconds a connection that holds no tenant may stay silent")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 86400.0) & concord::finite_number());
  app.add_option("--frame-timeout", frame_s, "Control socket: seconds a request may take to arrive once begun")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 86400.0) & concord::finite_number());
  app.add_option("--stale-after", stale_s, "Seconds without a tenant's heartbeat before it counts as dead")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 86400.0) & concord::finite_number());
  std::string memory_total = "auto";
  app.add_option("--memory-total", memory_total,
                 "Each GPU's memory for the books of memory quotas: a size (80G, 81559M, bytes), or auto: the smallest total "
                 "its tenants report (docs/daemon.md, Memory). Set it below the device's size to leave room for CUDA contexts")
      ->type_name("SIZE")
      ->capture_default_str();
  std::string be_share = "0.5";
  app.add_option("--be-memory-share", be_share,
                 "The share of what is left of a GPU's memory that a tenant without a reservation (BE, or LC without "
                 "CONCORD_MEMORY_RESERVE) gets as its limit when it registers: a fraction in (0, 1]")
      ->type_name("FRACTION")
      ->capture_default_str();
  app.add_option("--log-level", level, "trace, debug, info, warn, error")->capture_default_str();
  app.footer("Exit status: 0 stopped by SIGTERM or SIGINT, 1 failure (message on stderr), 2 bad command line.");
  // Exit codes as `concord`'s: 2 for a bad command line (CLI11's own codes are 100 and up).
  constexpr int kExitFailure = 1, kExitUsage = 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A flag concordd does not take: named, with the nearest one it may have meant.
    std::vector<std::string> flags;
    for (const CLI::Option* opt : app.get_options()) {
      for (const std::string& l : opt->get_lnames()) flags.push_back("--" + l);
    }
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i], flag = arg.substr(0, arg.find('='));
      if (flag.rfind("--", 0) == 0 && flag.size() > 2 && app.get_option_no_throw(flag) == nullptr) {
        std::cerr << "concordd: unknown flag '" << escape_control(flag) << "'" << escape_control(did_you_mean(flag, flags))
                  << "\nRun `concordd --help` for usage.\n";
        return kExitUsage;
      }
    }
    std::cerr << "concordd: " << escape_control(e.what()) << "\nRun `concordd --help` for usage.\n";
    return kExitUsage;
  }
  const auto log_level = spdlog::level::from_str(level);
  if (log_level == spdlog::level::off && level != "off") {
    std::cerr << "concordd: --log-level '" << escape_control(level) << "': not trace, debug, info, warn, error or off\n";
    return kExitUsage;
  }

  daemon::install_json_logger(log_level);
  auto fail = [](const Status& s, int code) {
    daemon::log_event(spdlog::level::err, "failed", {{"error", s.to_string()}});
    std::cerr << "concordd: " << escape_control(s.to_string()) << "\n";
    return code;
  };
  std::vector<std::string> notes;
  Result<std::vector<daemon::DeviceLane>> lanes = daemon::choose_lanes(devices, device, driver_root, &notes);
  if (!lanes.is_ok()) return fail(lanes.status(), kExitUsage);
  o.devices = *lanes;
  for (const std::string& note : notes) daemon::log_event(spdlog::level::info, "device", {{"device", note}});
  // A policy that does not exist, or parameters it does not take, are a bad command line: found
  // here, before the socket is made, with the suggestions the registry gives.
  {
    Result<PolicySpec> ps = parse_policy_spec(o.policy);
    if (!ps.is_ok()) return fail(ps.status(), kExitUsage);
    // The form the daemon will run: the lease form where the policy has one (its parameters are
    // the lease form's), else per launch.
    Status made = Status::ok();
    if (!o.per_launch && builtin_lease_policies().contains(ps->name)) {
      made = builtin_lease_policies().make(ps->name, ps->params).status();
    } else {
      made = builtin_policies().make(ps->name, ps->params).status();
    }
    if (!made) return fail(Status(made.code(), "--policy: " + made.message()), kExitUsage);
  }
  // An octal file mode ("0660"), whole and at most 07777.
  const auto octal_mode = [](const std::string& text) -> std::optional<mode_t> {
    try {
      size_t used = 0;
      const unsigned long m = std::stoul(text, &used, 8);
      if (used == text.size() && m <= 07777) return static_cast<mode_t>(m);
    } catch (const std::exception&) {
    }
    return std::nullopt;
  };
  const std::optional<mode_t> socket_mode = octal_mode(mode), metrics_socket_mode = octal_mode(metrics_mode);
  if (!socket_mode) return fail(Status::invalid_argument("--socket-mode '" + mode + "' is not an octal mode"), kExitUsage);
  if (!metrics_socket_mode) {
    return fail(Status::invalid_argument("--metrics-socket-mode '" + metrics_mode + "' is not an octal mode"), kExitUsage);
  }
  o.socket_mode = *socket_mode;
  o.metrics_socket_mode = *metrics_socket_mode;
  if (!group.empty()) {
    Result<uint32_t> gid = ipc::group_id(group);
    if (!gid.is_ok()) return fail(gid.status(), kExitUsage);
    o.socket_gid = *gid;
  }
  {
    Result<ipc::LcAccess> access = daemon::lc_access(lc_users, lc_groups, o.socket_gid);
    if (!access.is_ok()) return fail(access.status(), kExitUsage);
    o.lc_access = *access;
  }
  if (memory_total != "auto") {
    Result<uint64_t> bytes = parse_bytes(memory_total);
    if (!bytes.is_ok()) {
      return fail(Status::invalid_argument("--memory-total '" + memory_total + "' " + bytes.status().message()), kExitUsage);
    }
    o.memory.total = *bytes;
  }
  {
    size_t used = 0;
    double share = 0;
    try {
      share = std::stod(be_share, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != be_share.size()) {
      return fail(Status::invalid_argument("--be-memory-share '" + be_share + "': not a number (a fraction in (0, 1])"), kExitUsage);
    }
    o.memory.be_share = share;
  }
  if (Status st = daemon::check_memory_policy(o.memory); !st) return fail(st, kExitUsage);
  o.stale_after_ns = static_cast<uint64_t>(stale_s * 1e9);
  o.limits.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(idle_s * 1e3));
  o.limits.frame_timeout = std::chrono::milliseconds(static_cast<int64_t>(frame_s * 1e3));

  // SIGTERM and SIGINT are taken by this thread alone (blocked before any other thread starts).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Result<std::unique_ptr<daemon::Daemon>> d = daemon::Daemon::start(o);
  if (!d.is_ok()) return fail(d.status(), kExitFailure);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) {
      daemon::log_event(spdlog::level::info, "stopping", {{"signal", sig}});
      (*d)->stop();
    }
  });
  const Status st = (*d)->wait();
  // The engine ended by itself (an error): wake the signal thread.
  ::kill(::getpid(), SIGTERM);
  waiter.join();
  if (!st.is_ok()) return fail(st, kExitFailure);
  return 0;
}
