#include "cli/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace concord::cli {
namespace {

// Written from the handler: lock-free atomics only (async-signal-safe).
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
bool g_quiet = false;
struct sigaction g_previous_int, g_previous_term;

void on_signal(int sig) {
  if (g_stop.exchange(true)) {
    // The second: exit at once, as the signal would have without a handler.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_signal.store(sig);
  if (!g_quiet) {
    static const char notice[] =
        "concord: stopping: ending the run and writing what finished (send the signal again to exit at once)\n";
    const ssize_t ignored = ::write(STDERR_FILENO, notice, sizeof(notice) - 1);
    (void)ignored;
  }
}

}  // namespace

StopSignals::StopSignals(bool quiet) {
  static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
  g_stop.store(false);
  g_signal.store(0);
  g_quiet = quiet;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

const std::atomic<bool>* StopSignals::flag() const { return &g_stop; }

int StopSignals::signal() const { return g_signal.load(); }

}  // namespace concord::cli
