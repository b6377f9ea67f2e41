// `concord top`: the live tenants of a node daemon (concordd), from its control socket: who they
// are, how many launches they made and finished, LC request latency, and GPU memory (in use, at its
// peak, and the quota: an LC tenant's reservation or a BE tenant's limit). Refreshes every
// --interval seconds until interrupted; --once prints one snapshot (for scripts and tests).
// A client sees its own user's tenants (root sees all), as the daemon decides.
#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/stop_signals.h"
#include "ipc/control_socket.h"

namespace concord::cli {
namespace {

// What a BE tenant's lease does while LC work it yields to is in flight ("now" when it is):
// "runs", "holds", "cap 2", "room 66 SMs x 2/SM", "cap 2, room 66 SMs", "per launch".
std::string beside_lc(const ipc::TenantLease& l) {
  std::string room;
  if (l.room_sms != 0) room += fmt::format(" {} SMs", l.room_sms);
  if (l.room_blocks_per_sm != 0) room += fmt::format("{}{}/SM", l.room_sms != 0 ? " x " : " ", l.room_blocks_per_sm);
  std::string s;
  switch (l.yield) {
    case ipc::LeaseYield::none: return "runs";
    case ipc::LeaseYield::per_launch: return "per launch";
    case ipc::LeaseYield::close: s = "holds"; break;
    case ipc::LeaseYield::cap: s = fmt::format("cap {}", l.in_flight_cap) + (room.empty() ? "" : ", room" + room); break;
    case ipc::LeaseYield::room: s = "room" + room; break;
  }
  return l.yielding ? s + " (now)" : s;
}

// A memory size in a column: "0", "512K", "1.5G" (powers of 1024).
std::string size(uint64_t bytes) {
  static const char* const kUnits = "KMGTPE";
  if (bytes < 1024) return std::to_string(bytes);
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return v < 10 ? fmt::format("{:.1f}{}", v, kUnits[u]) : fmt::format("{:.0f}{}", v, kUnits[u]);
}

// A tenant's quota: an LC tenant's reservation ("8.0G res"), a BE tenant's limit, "-" for none.
std::string quota(const ipc::TenantEntry& t) {
  if (t.memory.limit_bytes == kNoMemoryLimit) return "-";
  return size(t.memory.limit_bytes) + (t.memory.reserved_bytes > 0 ? " res" : " lim");
}

Result<std::string> snapshot(const std::string& socket) {
  Result<ipc::ControlClient> client = ipc::ControlClient::connect(socket);
  if (!client.is_ok()) return client.status();
  const auto timeout = std::chrono::seconds(2);
  Result<ipc::Message> stats = client->call(ipc::GetStats{}, timeout);
  if (!stats.is_ok()) return stats.status();
  Result<ipc::Message> list = client->call(ipc::ListTenants{}, timeout);
  if (!list.is_ok()) return list.status();
  for (const ipc::Message* m : {&*stats, &*list}) {
    if (const auto* e = std::get_if<ipc::ErrorReply>(m)) return Status(e->code, "concordd: " + e->message);
  }
  const auto* s = std::get_if<ipc::Stats>(&*stats);
  const auto* l = std::get_if<ipc::TenantList>(&*list);
  if (s == nullptr || l == nullptr) return Status::parse_error("concordd answered with an unexpected message");
  std::string out = fmt::format("concordd {}: {} tenants, {} launches, {} rejected, {} dropped\n", socket, s->tenants,
                                s->launches, s->rejected, s->dropped);
  out += fmt::format("{:>6} {:>3} {:<24} {:>5} {:>6} {:>8} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}  {}\n", "ID", "GPU",
                     "NAME", "CLASS", "UID", "PID", "WEIGHT", "LAUNCHES", "DONE", "TARGETms", "P50ms", "P99ms", "MEM", "PEAK", "QUOTA",
                     "BESIDE LC");
  const auto ms = [](uint64_t ns) { return ns == 0 ? std::string("-") : fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); };
  for (const ipc::TenantEntry& t : l->tenants) {
    const bool lc = t.cls == TenantClass::latency_critical;
    out += fmt::format("{:>6} {:>3} {:<24} {:>5} {:>6} {:>8} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}  {}\n", t.id,
                       t.device.empty() ? "-" : t.device, t.name, lc ? "LC" : "BE",
                       t.uid, t.pid, t.weight, t.launches, t.completions, ms(t.latency_target_ns), lc ? ms(t.p50_ns) : "-",
                       lc ? ms(t.p99_ns) : "-", size(t.memory.live_bytes), size(t.memory.peak_bytes), quota(t),
                       lc ? "-" : beside_lc(t.lease));
  }
  return out;
}

}  // namespace

Subcommand add_top_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("top", "Show the live tenants of the node daemon (concordd)");
  struct Args {
    std::string socket;
    bool once = false;
    double interval = 1.0;
  };
  auto args = std::make_shared<Args>();
  args->socket = default_socket_path();
  app->add_option("--socket", args->socket, "The daemon's control socket (default: $CONCORD_SOCKET or /run/concord/concordd.sock)");
  app->add_flag("--once", args->once, "Print one snapshot and exit");
  app->add_option("--interval", args->interval, "Seconds between refreshes")->check(CLI::PositiveNumber);
  return {app, [args](const Config&) {
            if (args->once) {
              Result<std::string> s = snapshot(args->socket);
              if (!s.is_ok()) return fail(s.status());
              std::cout << *s << std::flush;
              return kExitOk;
            }
            StopSignals signals(true);
            while (!signals.flag()->load()) {
              Result<std::string> s = snapshot(args->socket);
              if (!s.is_ok()) return fail(s.status());
              std::cout << "\033[H\033[2J" << *s << std::flush;  // home, clear
              const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(args->interval);
              while (std::chrono::steady_clock::now() < until && !signals.flag()->load()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
              }
            }
            return kExitOk;
          }};
}

}  // namespace concord::cli
