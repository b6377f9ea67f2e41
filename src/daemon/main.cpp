// concordd: the node daemon. Tenants (processes under libconcord_intercept, or programs using
// ipc::TenantClient) register on its control socket; a policy with a lease form steers them
// through leases (no launch waits for the daemon), any other policy decides every BE launch
// through the engine with a live source and a remote backend. SIGTERM or SIGINT stops it: tenants
// are told goodbye and go on without it.
#include <CLI/CLI.hpp>

#include <signal.h>

#include <iostream>
#include <optional>
#include <string>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "ipc/control_socket.h"

int main(int argc, char** argv) {
  using namespace concord;
  CLI::App app{"concordd: the Concord node daemon (one per GPU)"};
  daemon::DaemonOptions o;
  std::string group, device = "h100", level = "info";
  std::string mode = "0660";
  double stale_s = 2.0;
  app.add_option("--socket", o.socket_path, "Control socket path")->capture_default_str();
  app.add_option("--group", group, "Group of the control socket (its members may register tenants)");
  app.add_option("--socket-mode", mode, "File mode of the control socket (octal)")->capture_default_str();
  app.add_option("--policy", o.policy, "Policy, with parameters as name:key=value;key=value")->capture_default_str();
  app.add_option("--device-spec", device,
                 "The GPU the policies plan for: a built-in spec (h100, h200) or a device JSON file "
                 "(the daemon never touches the GPU itself)")
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
  app.add_option("--metrics-socket", o.metrics_socket, "Serve Prometheus text on this Unix socket");
  app.add_option("--metrics-port", o.metrics_port, "Serve Prometheus text on 127.0.0.1:PORT")->check(CLI::Range(0, 65535));
  app.add_option("--stale-after", stale_s, "Seconds without a tenant's heartbeat before it counts as dead")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", level, "trace, debug, info, warn, error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  daemon::install_json_logger(spdlog::level::from_str(level));
  auto fail = [](const Status& s, int code) {
    daemon::log_event(spdlog::level::err, "failed", {{"error", s.to_string()}});
    std::cerr << "concordd: " << s.to_string() << "\n";
    return code;
  };
  Result<DeviceSpec> spec = daemon::daemon_device(device);
  if (!spec.is_ok()) return fail(spec.status(), 2);
  o.device = *spec;
  try {
    o.socket_mode = static_cast<mode_t>(std::stoul(mode, nullptr, 8));
  } catch (const std::exception&) {
    return fail(Status::invalid_argument("--socket-mode '" + mode + "' is not an octal mode"), 2);
  }
  if (!group.empty()) {
    Result<uint32_t> gid = ipc::group_id(group);
    if (!gid.is_ok()) return fail(gid.status(), 2);
    o.socket_gid = *gid;
  }
  o.stale_after_ns = static_cast<uint64_t>(stale_s * 1e9);

  // SIGTERM and SIGINT are taken by this thread alone (blocked before any other thread starts).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Result<std::unique_ptr<daemon::Daemon>> d = daemon::Daemon::start(o);
  if (!d.is_ok()) return fail(d.status(), 1);
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
  if (!st.is_ok()) return fail(st, 1);
  return 0;
}
