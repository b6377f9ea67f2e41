// Multi-process runs for the benches' MPS peers: each tenant in a process of its own (the bench's
// own program, spawned with its environment changed), the peers meeting at a file barrier so their
// clocks start together, and the MPS control daemon started and stopped around them.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "concord/status.h"

namespace concord {

// Seconds since the epoch on the system clock: one clock for every process of a machine, to place
// the peers' runs against each other.
double wall_clock_seconds();

// Writes `text` to a temporary file beside `path` and renames it over `path`: a reader (or a run
// killed mid-write) sees the previous complete file or the new one, never half of one.
Status write_file_atomically(const std::string& path, const std::string& text);

// Writes this peer's ready file (`index`) into `dir` and waits until `n` peers (this one included)
// have written theirs; an error after `timeout_s`.
Status wait_at_barrier(const std::string& dir, int index, int n, double timeout_s = 120);

// The path of the running program (/proc/self/exe).
Result<std::string> this_executable();

// Starts `args[0]` with `args` and this process's environment, less the variables named in `unset`
// and with those of `set` set (or replaced). Returns its pid.
Result<pid_t> spawn_process(const std::vector<std::string>& args, const std::map<std::string, std::string>& set = {},
                            const std::vector<std::string>& unset = {});

// Waits for each process; true for each that exited with status 0.
std::vector<bool> wait_processes(const std::vector<pid_t>& pids);

// The MPS control daemon (nvidia-cuda-mps-control -d) with its pipe and log directories under a
// work directory. start() sets CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY in this
// process's environment, so the processes it spawns afterwards are MPS clients of this daemon;
// the daemon quits when the object goes (or at quit()).
class MpsDaemon {
 public:
  static Result<std::unique_ptr<MpsDaemon>> start(const std::string& work_dir);
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;
  ~MpsDaemon();
  // Asks the daemon to quit; returns the last `max_bytes` of its control log.
  std::string quit(size_t max_bytes = 4000);
  const std::string& pipe_dir() const { return pipe_dir_; }

 private:
  MpsDaemon(std::string pipe_dir, std::string log_dir) : pipe_dir_(std::move(pipe_dir)), log_dir_(std::move(log_dir)) {}
  std::string pipe_dir_;
  std::string log_dir_;
  bool running_ = true;
};

}  // namespace concord
