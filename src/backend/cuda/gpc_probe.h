// The device's GPCs, measured: thread-block clusters of the largest sizes the device allows are
// launched with one block per SM (each block asks for nearly all of an SM's shared memory); every
// block records its %smid. All blocks of a cluster run in one GPC, so SMs that ever share a
// cluster share a GPC, and the connected groups of SMs are the GPCs. Needs cluster launch
// (compute capability 9.0 and later); elsewhere the answer is unsupported, with the reason.
#pragma once

#include <vector>

#include "concord/status.h"

namespace concord::cuda {

struct GpcProbe {
  // gpc_of_sm[s]: the GPC of SM s, GPCs numbered in the order of their lowest SM id.
  std::vector<int> gpc_of_sm;
  int largest_cluster = 0;  // the largest cluster size launched
  int clusters = 0;         // clusters launched in all
};

// Probes `device` (made current) with `sm_count` SMs. Unsupported when the device cannot launch
// clusters; device_error when some SM was never reached (its GPC is then unknown). Takes a few
// milliseconds; the answer (or the failure) is kept per device for the process.
Result<GpcProbe> probe_gpcs(int device, int sm_count);

}  // namespace concord::cuda
