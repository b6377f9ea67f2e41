// The profiler: measures suite kernels through the Backend interface (the simulator in CI, the
// CUDA backend on a GPU: the same code) and stores what it measured, field by field. RAISE's
// metrics come from Nsight Compute (profile_raise), a separate CUDA-only tool.
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

// RAISE metrics through Nsight Compute: `ncu` profiles this program's worker (`concord profile
// raise-worker`, CUDA builds: ncu_worker.h), which launches each job once after a marker kernel;
// the CSV is parsed into RAISE vectors and stored as "raise" facets.
struct NcuOptions {
  std::string ncu = "ncu";       // the ncu executable
  std::string self;              // this program (default: /proc/self/exe)
  std::string work_dir = ".";    // where the job list and ncu's CSV are written
  std::vector<std::string> from_csv;  // parse these CSVs of earlier runs (one pass each) instead of running ncu
  std::string gpu, driver;       // the key's device (required): device_key() of the CUDA backend, or given
  int passes = 3;                // ncu passes over the jobs; each job's vector is their mean
};
struct NcuJob;
Result<int> profile_raise(ProfileStore& store, const std::vector<NcuJob>& jobs, const NcuOptions& options,
                          std::ostream& progress);

// Aker's facet ("aker", src/policy/aker/aker_facet.h) through the Backend interface (the simulator
// or the GPU), stored per kernel variant under the backend's device key:
// - each kernel's class from its utilisations on every SM (its time there, its FLOPs and bytes),
//   and its solo time against logical blocks at 1/8, 1/4, 1/2 and all of its grid (6.3);
// - for each pair (K_1, K_2), each fused version (ratio a:b of parts in a block) the backend can
//   run, in the block-size variants best_fusion_shape chooses for that ratio (several fused
//   blocks per SM; `default_variants` keeps the kernels' defaults), with the solo line of each
//   variant it uses: the fused time / K_1's time alone in the persistent form at a coarse sweep of
//   load ratios (kAkerSweepRatios, the paper's 0.1, 0.2, 1.8, 1.9 among them, and K_2's smallest
//   ranges of one and two blocks), then at kAkerKneeFactors times the knee the sweep shows, so
//   that both segments hold points near it. Entries of other partners already stored are kept.
struct AkerProfileOptions {
  std::vector<KernelSpec> kernels;                           // K_1 and K_2 of every pair must be here
  std::vector<std::pair<std::string, std::string>> pairs;    // (K_1 name, K_2 name)
  std::vector<std::pair<int, int>> ratios{{1, 1}, {2, 1}, {1, 2}};  // fused versions tried per pair
  bool default_variants = false;                             // fuse the default variants only
  int reps = 3;
};
// The load ratios of the coarse sweep, and the factors of the knee measured after it.
inline constexpr double kAkerSweepRatios[] = {0.05, 0.1, 0.2, 0.4, 0.7, 1.0, 1.4, 1.8, 1.9, 2.6, 3.5};
inline constexpr double kAkerKneeFactors[] = {0.6, 0.8, 1.25, 1.6};
struct AkerProfileReport {
  int kernels = 0;
  int versions = 0;          // fused versions stored
  std::vector<std::string> skipped;  // versions the backend refused or that gave no two-segment fit, with why
};
Result<AkerProfileReport> profile_aker(ProfileStore& store, const BackendConfig& backend, const AkerProfileOptions& options,
                                       std::ostream& progress);

}  // namespace concord::profile
