// How the SM-set policies (FEDCM, FedC, KRISP) share SMs between kernels: each kernel's share of
// an SM's static resources next to the kernels already there (FEDCM's U[i,j], fedcm.md III-B), and
// how a kernel is launched on an SM set so that it holds about that share.
//
// On the AMD GPU of those papers a kernel's CU mask is the only control: kernels whose masks
// overlap are dispatched onto the shared CUs side by side by the hardware, each as resources allow.
// NVIDIA's block scheduler does not share that way: a launch with blocks still to issue gets every
// slot that frees up before a later launch gets any, so two large kernels on the same SMs run one
// after the other (DESIGN.md's pair: streams 1.00x serial). Concord therefore arbitrates itself
// (SmSharing::arbitrate): an elastic kernel on SMs that running kernels also use gets persistent
// blocks with TLP = ceil(U x its resident blocks per SM), and when kernels leave, the ones that
// stay are raised to their new share (regrow_shared), as the hardware would hand them the freed
// resources. SmSharing::native, the default, leaves a set covering every SM to the block
// scheduler (a plain launch). On the H200 arbitration measured worse for FEDCM and FedC (mean STP
// 1.175 against 1.209 and 1.243 against 1.300 over bench/fedcm's workloads, docs/results.md): a
// kernel that scales with its warps runs about half as fast at half its blocks, so sharing every
// SM gains only where neither kernel needs its full occupancy (DESIGN.md's pair: 0.97x serial at
// TLP 4/4 against 1.42x for a split of the SMs).
#pragma once

#include <vector>

#include "concord/occupancy.h"
#include "concord/policy.h"

namespace concord::policy {

enum class SmSharing {
  native,     // whole-GPU sets native (the block scheduler decides); caps only on partial sets
  arbitrate,  // TLP caps by U wherever SMs are shared, raised again when co-runners leave
};
// "native" (the default: measured better on the H200, docs/results.md) or "arbitrate" from a
// policy's `sharing` parameter.
Result<SmSharing> sharing_param(const std::string& policy, const PolicyParams& params);
const char* sharing_name(SmSharing s);

// Static resources of the kernels running on each SM (what U[i,j] divides among): the sum of the
// block footprints of the dispatches there.
struct SmOccupants {
  std::vector<BlockFootprint> per_sm;
};
SmOccupants occupants_of(const SchedContext& ctx);
// U[i,j]: the average over shared memory, registers and threads of the share of SM j's demand
// that the kernel's block would hold next to the blocks already there (1 when alone).
double resource_share(const BlockFootprint& kernel, const BlockFootprint& others_total);
double resource_share(const BlockFootprint& kernel, const std::vector<BlockFootprint>& others);
// Eq. 1's u for a kernel on `sms`: the mean of U[i,j] over the set.
double mean_share(const BlockFootprint& kernel, const SmOccupants& occ, const SmSet& sms);

// How an SM-set policy runs a kernel on `sms`, where `share` (0, 1] is the share of each SM's
// resources it is expected to hold next to the kernels already there (U). Opaque kernels: native
// (the engine rounds a partial set to the nearest green context). Elastic kernels: on part of the
// GPU, persistent blocks on exactly those SMs with TLP = ceil(share x resident blocks per SM)
// (persistent blocks hold their slots until the launch ends, so without the cap the first kernel
// on an SM would keep every later one off it); on every SM, native when the kernel has the SMs to
// itself (share 1) or under SmSharing::native, else persistent with the cap as on a part.
Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share, SmSharing sharing = SmSharing::native);

// SmSharing::arbitrate's other half, called after a policy's dispatches: every running persistent
// launch with a TLP cap whose share has grown (a kernel on its SMs finished) is raised to
// ceil(share x resident blocks per SM). Caps are never lowered (resident blocks cannot be taken
// back). Returns how many launches were raised.
Result<int> regrow_shared(SchedContext& ctx);

}  // namespace concord::policy
