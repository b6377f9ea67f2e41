// The LC/BE bench's commands (lsbe_bench.cpp: `run`; lsbe_mps.cpp: `mps` and its `peer` processes).
#pragma once

#include <string>
#include <vector>

#include "be_while_lc.h"
#include "concord/status.h"
#include "lsbe_metrics.h"
#include "lsbe_mix.h"

namespace concord::lsbe {

// Prints the error and returns the exit status 1.
int fail(const Status& s);

struct MpsOptions {
  std::string from;          // results JSON of `run`
  double be_share = 0;       // > 0: the third variant's BE share in place of sgdrc's
  std::vector<double> loads; // empty: all of the run's
  std::string backend = "cuda";
  std::string work_dir = "/tmp/concord-lsbe-mps";
  bool start_daemon = true;
  Seconds time_limit = 120;
  std::string out = "lsbe_mps.json";
};
int cmd_mps(const MpsOptions& options);

struct PeerOptions {
  std::string mix;
  std::string tenant;
  int requests = 0;
  double rate = 0;        // LC: Poisson rate
  double target = 0;      // LC: latency target, seconds
  uint64_t seed = 1;
  std::string backend = "cuda";
  Seconds time_limit = 120;
  std::string barrier;    // directory of the ready files
  int index = 0;          // this peer's ready file
  int n = 1;              // peers at the barrier
  std::string stop_file;  // the LC peer creates it when done; BE peers stop when it exists
  std::string out;
};
int cmd_peer(const PeerOptions& options);

}  // namespace concord::lsbe
