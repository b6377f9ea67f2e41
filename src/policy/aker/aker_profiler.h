// Aker's profiler step: fills the "aker" facet by timing kernels and fused pairs through the
// Backend interface (the simulator or the GPU). Built on the profile layer as its own target
// (concord_policy_aker_profiler): the policy never links it; `concord profile aker` does.
#pragma once

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "concord/backend_factory.h"
#include "concord/kernel.h"
#include "concord/profile.h"
#include "concord/status.h"

namespace concord::profile {

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
