// The profiler: measures suite kernels through the Backend interface (the simulator in CI, the
// CUDA backend on a GPU: the same code) and stores what it measured, field by field. RAISE's
// metrics come from Nsight Compute (profile/ncu.h), a separate CUDA-only tool.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "concord/backend.h"
#include "concord/profile.h"
#include "concord/placement_rule.h"
#include "concord/backend_factory.h"

namespace concord::profile {

struct ProfileOptions {
  std::vector<std::string> kernels;       // empty: the whole suite
  // When non-empty: exactly these kernels (those of workload specs, with their sizes and block
  // sizes); `kernels` and `sizes` are then ignored.
  std::vector<KernelSpec> specs;
  std::map<std::string, int64_t> sizes;   // per kernel; default: the suite's default size
  bool all_variants = false;              // default: the default variant only
  bool full = false;                      // every TPC step instead of the sampled plan
  double max_minutes = 0;                 // stop starting measurements after this long (0: no limit)
  int reps = 3;                           // timed repetitions per point (median), after one warm-up
  // Also time each cache policy beside a streaming kernel sharing every SM (kernels with a TLP).
  bool pressure = true;
};

struct ProfileReport {
  int measured = 0;      // kernel variants that got at least one field
  int skipped = 0;       // nothing missing in the store
  int left = 0;          // not finished: time budget reached
  int fields = 0;        // fields measured and stored
  double seconds = 0;
};

// Profiles kernels into `store` on backends made from `backend` (a fresh one per kernel, so a
// kernel's device memory is released before the next). For each kernel variant it asks the store
// what is missing and measures only that, committing each field as soon as it is measured
// (resumable; an interrupted run keeps what it finished). The key is the backend's device name and
// driver (the backend's name when the device states no driver). The backend is made before the
// store is written, so a machine without the device leaves the store as it was. Progress with an
// ETA goes to `progress`.
Result<ProfileReport> profile_kernels(ProfileStore& store, const BackendConfig& backend, const ProfileOptions& options,
                                      std::ostream& progress);

// The profile key's device identity on `backend`: its device's name, and its driver (the
// backend's name when the device states none).
ProfileKey device_key(const Backend& backend);

}  // namespace concord::profile
