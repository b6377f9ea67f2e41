// How the SM-set policies (FEDCM, FedC, KRISP) share SMs between kernels: each kernel's share of
// an SM's static resources next to the kernels already there (FEDCM's U[i,j], fedcm.md III-B), and
// how a kernel is launched on an SM set so that it holds about that share.
//
// On the AMD GPU of those papers a kernel's CU mask is the only control: kernels whose masks
// overlap are dispatched onto the shared CUs side by side by the hardware, each as resources allow.
// NVIDIA's block scheduler does not share that way: a launch with blocks still to issue gets every
// slot that frees up before a later launch gets any, so two large kernels on the same SMs run one
// after the other (DESIGN.md's pair: streams 1.00x serial). Concord can therefore arbitrate itself
// (SmSharing::arbitrate): an elastic kernel holds ceil(U x its resident blocks) on the SMs it
// shares with running kernels and its full occupancy on the SMs it has to itself (a two-tier TLP:
// Placement::tight_sms / tight_tlp), and when kernels leave, the ones that stay are raised
// (regrow_shared), as the hardware would hand them the freed resources. SmSharing::native, the
// default, leaves a set covering every SM to the block scheduler (a plain launch). Session 4's
// first arbitration capped a kernel on every SM of its set with one TLP; on the H200 that measured
// worse (mean STP fedcm 1.175 against native 1.209, fedc 1.243 against 1.300; docs/results.md):
// a kernel that scales with its warps runs about half as fast at half its blocks, on the SMs it
// did not even share. The two-tier version (24879f3) did better but still not better than native
// (fedcm 1.171 against 1.226, fedc 1.293 against 1.297; it wins where co-located kernels leave each
// other room and loses where a capped kernel needs its blocks), so native stays the default.
#pragma once

#include <optional>
#include <vector>

#include "concord/occupancy.h"
#include "concord/policy.h"

namespace concord::policy {

enum class SmSharing {
  native,     // whole-GPU sets native (the block scheduler decides); caps only on partial sets
  arbitrate,  // TLP caps by U on the SMs shared with running kernels, raised when they leave
};
// "native" (the default: measured better on the H200, docs/results.md) or "arbitrate" from a
// policy's `sharing` parameter.
Result<SmSharing> sharing_param(const std::string& policy, const PolicyParams& params);

// Static resources of the kernels running on each SM (what U[i,j] divides among): SMs grouped by
// the dispatches they hold, each group with the sum of those dispatches' block footprints. A few
// groups cover the device, so a share is computed once per group rather than once per SM.
struct SmOccupants {
  struct Group {
    SmSet sms;
    BlockFootprint load{0, 0, 0};
  };
  std::vector<Group> groups;  // disjoint; together every SM of the device
  // The load on one SM (zero when the SM is in no group).
  BlockFootprint on(int sm) const;
};
// `exclude`: leave that dispatch out (its own share next to the others).
SmOccupants occupants_of(const SchedContext& ctx, std::optional<DispatchId> exclude = std::nullopt);
// U[i,j]: the average over shared memory, registers and threads of the share of SM j's demand
// that the kernel's block would hold next to the blocks already there (1 when alone).
double resource_share(const BlockFootprint& kernel, const BlockFootprint& others_total);
double resource_share(const BlockFootprint& kernel, const std::vector<BlockFootprint>& others);
// Eq. 1's u for a kernel on `sms`: the mean of U[i,j] over the set.
double mean_share(const BlockFootprint& kernel, const SmOccupants& occ, const SmSet& sms);
// U[i,j] for every SM j of the device (index = SM id).
std::vector<double> share_per_sm(const BlockFootprint& kernel, const SmOccupants& occ, int sm_count);
// The SMs of `sms` the kernel would share (U < 1) and its mean U over them (1 when none).
struct SharedPart {
  SmSet sms;
  double share = 1;
};
SharedPart shared_part(const BlockFootprint& kernel, const SmOccupants& occ, const SmSet& sms);

// How an SM-set policy runs a kernel on `sms`, where `share` (0, 1] is the share of each SM's
// resources it is expected to hold next to the kernels already there (U). Opaque kernels: native
// (the engine rounds a partial set to the nearest green context). Elastic kernels:
//  - SmSharing::native: on every SM, a plain launch; on part of the GPU, persistent blocks on
//    exactly those SMs with TLP = ceil(share x resident blocks per SM) (persistent blocks hold
//    their slots until the launch ends, so without the cap the first kernel on an SM would keep
//    every later one off it).
//  - SmSharing::arbitrate: `shared` (from shared_part) says which SMs of the set other kernels
//    hold; the kernel is capped there only (tight_tlp = ceil(shared.share x resident blocks)) and
//    runs at full occupancy on the SMs it has to itself; a native launch when it shares none and
//    the set covers every SM.
Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share, SmSharing sharing = SmSharing::native, const SharedPart* shared = nullptr);

// SmSharing::arbitrate's other half, called after a policy's dispatches: every running
// persistent launch with a tight limit whose shared SMs or share changed because kernels left is
// raised: SMs no longer shared go to full occupancy, the rest to ceil(share x resident blocks).
// Limits are never lowered (resident blocks cannot be taken back). Returns how many launches
// were raised.
Result<int> regrow_shared(SchedContext& ctx);

}  // namespace concord::policy
