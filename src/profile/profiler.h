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
  std::map<std::string, int64_t> sizes;   // per kernel; default: the suite's default size
  bool all_variants = false;              // default: the default variant only
  bool full = false;                      // every TPC step instead of the sampled plan
  double max_minutes = 0;                 // stop starting kernels after this long (0: no limit)
  int reps = 3;                           // timed repetitions per point (median)
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

}  // namespace concord::profile
