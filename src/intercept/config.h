// The interception library's settings, from the environment of the process it is preloaded into.
// Parsing is separate from reading the environment so that it is tested without either.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "concord/status.h"
#include "ipc/protocol.h"

namespace concord::intercept {

struct InterceptConfig {
  bool disabled = false;                                 // CONCORD_DISABLE=1: pass-through, no daemon
  std::string socket_path = "/run/concord/concordd.sock";  // CONCORD_SOCKET
  // CONCORD_CLASS, _TARGET_MS, _WEIGHT, _NAME; CONCORD_LC_REFUSED (an LC tenant the daemon does
  // not grant LC: `be`, the default, runs it as a BE tenant; `pass-through` unscheduled);
  // CONCORD_MEMORY_RESERVE (an LC tenant's GPU memory reservation) or CONCORD_MEMORY_LIMIT (a BE
  // tenant's own limit), as tenant.memory_bytes.
  ipc::RegisterTenant tenant;
  std::string stats_path;                                // CONCORD_INTERCEPT_STATS: counters as JSON at exit
  bool log = false;                                      // CONCORD_INTERCEPT_LOG=1: one line per event worth it
  // CONCORD_GREEN_CONTEXTS=1: honour the daemon's SM sets through green contexts. Off by default:
  // under MPS (which cross-process co-running needs) green contexts do not place work by SM, and
  // the SM probe crashed the library's GPU test app (docs/intercept.md, "Known problems").
  bool green_contexts = false;
  // CONCORD_ROOM=0: ignore a lease's room terms (SM-count and residency caps for BE launches while
  // LC work is in flight); on by default (the lease asks for them only when its policy does).
  bool room = true;
  // CONCORD_RECONNECT=0: pass-through for good once the daemon goes; by default the library
  // registers again when a daemon is back on the socket (a restart, a package upgrade).
  bool reconnect = true;
  uint32_t poll_us = 50;                                 // CONCORD_POLL_US: the completion thread's poll period (LC)
  // CONCORD_BE_POLL_US: a BE tenant's poll period. Longer: a BE's markers are pending almost all
  // the time, and each poll's event queries take the driver's locks beside the launching thread.
  uint32_t be_poll_us = 200;
  // CONCORD_MARKER_EVERY: under a lease, a completion marker (an event) after every this many
  // launches of a stream, besides the application's synchronisations and the markers at the end
  // of an LC burst (docs/intercept.md, "Completions").
  uint32_t marker_every = 64;
};

// Reads the settings through `lookup` (getenv's contract: null when unset). `default_name` names
// the tenant when CONCORD_NAME is unset (the program's name). A bad value is an invalid_argument
// naming the variable, its value and what it must be.
Result<InterceptConfig> parse_config(const std::function<const char*(const char*)>& lookup,
                                     const std::string& default_name);

// A tenant name the protocol accepts made of `raw`: printable ASCII, at most the protocol's
// length, never empty ("tenant" when nothing is left).
std::string sanitize_name(const std::string& raw);

}  // namespace concord::intercept
