// How the SM-set policies (FEDCM, FedC, KRISP) share SMs between kernels: each kernel's share of
// an SM's static resources next to the kernels already there (FEDCM's U[i,j], FEDCM paper, Section III-B), and
// how a kernel is launched on an SM set so that it holds about that share.
//
// On the AMD GPU of those papers a kernel's CU mask is the only control: kernels whose masks
// overlap are dispatched onto the shared CUs side by side by the hardware, each as resources allow.
// NVIDIA's block scheduler does not share that way: a launch with blocks still to issue gets every
// slot that frees up before a later launch gets any, so two large kernels on the same SMs run one
// after the other (the compute + memory pair: streams 1.00x serial). A kernel on a set covering every SM is
// therefore a plain launch (the block scheduler decides), and one on part of the GPU runs as
// persistent blocks capped at ceil(U x resident blocks per SM), so that the first kernel on an SM
// does not keep every later one off it. Capping only on the SMs a kernel shares, and raising caps
// as co-runners leave, measured worse on the H200 (docs/policies.md) and is not offered.
#pragma once

#include <optional>
#include <vector>

#include "concord/occupancy.h"
#include "concord/policy.h"

namespace concord::policy {

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
// The static resources a dispatch holds per SM it runs on: its parts' block footprints, each times
// its blocks per fused block.
BlockFootprint dispatch_footprint(const DeviceSpec& device, const RunningDispatch& d);

// The load on every SM kept up to date as dispatches start and end, for policies that decide per
// launch: a decision then reads per-SM sums instead of rebuilding them from every running
// dispatch (occupants_of), so its cost does not grow with the number of tenants.
class SmLoad {
 public:
  void reset(int sm_count);
  void add(DispatchId id, const SmSet& sms, const BlockFootprint& footprint);
  void remove(DispatchId id);  // a dispatch it does not hold: nothing
  const BlockFootprint& on(int sm) const { return per_sm_[static_cast<size_t>(sm)]; }
  // Eq. 1's u for a kernel on `sms`: the mean of U[i,j] over the set (as mean_share).
  double mean_share(const BlockFootprint& kernel, const SmSet& sms) const;

 private:
  struct Held {
    DispatchId id;
    SmSet sms;
    BlockFootprint footprint;
  };
  std::vector<BlockFootprint> per_sm_;
  std::vector<Held> held_;  // few: the dispatches running now
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
// How an SM-set policy runs a kernel on `sms`, where `share` (0, 1] is the share of each SM's
// resources it is expected to hold next to the kernels already there (U). Opaque kernels: native
// (the engine rounds a partial set to the nearest green context). Elastic kernels: on every SM, a
// plain launch; on part of the GPU, persistent blocks on exactly those SMs with
// TLP = ceil(share x resident blocks per SM).
Placement sm_set_placement(const SchedContext& ctx, const KernelSpec& kernel, const SmSet& sms, CachePolicy cache,
                           double share);

}  // namespace concord::policy
