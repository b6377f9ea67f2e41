// SIGINT and SIGTERM as a request to stop a run: the first sets a flag that the engine reads
// (EngineOptions::stop), so the run ends early, stops what runs and writes what finished; a second
// one ends the process at once, by the signal's default action.
#pragma once

#include <atomic>

namespace concord::cli {

class StopSignals {
 public:
  // Installs the handlers for as long as the object lives (one object at a time). `quiet`: no
  // notice on stderr when a signal comes.
  explicit StopSignals(bool quiet);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // True once a signal came; for EngineOptions::stop.
  const std::atomic<bool>* flag() const;
  // The first signal that came (SIGINT, SIGTERM), 0 when none.
  int signal() const;
};

}  // namespace concord::cli
