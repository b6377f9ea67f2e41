// The profiler: measures suite kernels on the GPU and stores the results (needs the CUDA build).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "concord/profile.h"

namespace concord::profile {

struct ProfileOptions {
  std::vector<std::string> kernels;       // empty: the whole suite
  // When non-empty: exactly these kernels (those of workload specs, with their sizes and block
  // sizes); `kernels` and `sizes` are then ignored.
  std::vector<KernelSpec> specs;
  std::map<std::string, int64_t> sizes;   // per kernel; default: the suite's default size
  bool all_variants = false;              // default: the default variant only
  bool full = false;                      // every TPC step instead of the sampled plan
  double max_minutes = 0;                 // stop starting kernels after this long (0: no limit)
  int reps = 3;                           // timed repetitions per point (median)
  // Also time each cache policy beside a streaming kernel sharing every SM (elastic kernels).
  bool pressure = true;
};

struct ProfileReport {
  int measured = 0;
  int skipped = 0;       // already in the store
  int left = 0;          // not started: time budget reached
  double seconds = 0;
};

// Profiles kernels into `store`, skipping keys it already holds (resumable); progress with an
// ETA goes to `progress`.
Result<ProfileReport> profile_kernels(ProfileStore& store, const ProfileOptions& options, std::ostream& progress);

// RAISE metrics through Nsight Compute: `ncu` profiles this program's worker (run_ncu_worker), which
// launches each job once after a marker kernel; the CSV is parsed into RAISE vectors and stored.
struct NcuOptions {
  std::string ncu = "ncu";       // the ncu executable
  std::string self;              // this program (default: /proc/self/exe)
  std::string work_dir = ".";    // where the job list and ncu's CSV are written
  std::vector<std::string> from_csv;  // parse these CSVs of earlier runs (one pass each) instead of running ncu
  std::string gpu, driver;       // with from_csv on a machine without the GPU: the key's GPU and driver
  int passes = 3;                // ncu passes over the jobs; each job's vector is their mean
};
struct NcuJob;
Result<int> profile_raise(ProfileStore& store, const std::vector<NcuJob>& jobs, const NcuOptions& options,
                          std::ostream& progress);
// The worker: one plain launch of each job of the job file, each after a marker kernel.
Status run_ncu_worker(const std::string& jobs_file);

}  // namespace concord::profile
