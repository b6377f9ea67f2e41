// Tidal SM masking (SGDRC, the SGDRC paper Sections 4 and 7.1): the GPU's TPCs are split between the
// latency-critical (LC) kernel and the best-effort (BE) kernel running beside it. The LC side gets
// the fewest TPCs that reach its kernels' minimum latency, the BE side the rest, and all of the GPU
// while no LC work is queued. Pure functions of the device's topology and the needs they are given;
// the policy keeps the state (src/policy/sgdrc/).
//
// The LC side is always a prefix of the TPCs in id order, so equal needs give equal sets (a green
// context per set can be cached) and the LC set is the one the profiler measures a kernel's SM
// curve on (`concord profile run`: the first k TPCs), so a measured minimum holds on the set the
// kernel gets. LC needs are rounded up to one of `steps` sizes so that only a few distinct sets
// occur (a green context costs about 1.5 ms to create).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "concord/device.h"
#include "concord/estimator.h"
#include "concord/kernel.h"

namespace concord::policy {

// The device's TPCs in id order, each as its SMs.
std::vector<SmSet> tpcs_in_order(const DeviceSpec& device);

// The SMs of the LC side and the BE side for an LC share of `lc_tpcs` TPCs: the first `lc_tpcs`
// TPCs and the rest. lc_tpcs = 0: no LC side, BE on every SM.
struct TidalSplit {
  int lc_tpcs = 0;
  SmSet lc;
  SmSet be;
};
TidalSplit tidal_split(std::span<const SmSet> tpcs, int lc_tpcs);

// The LC share for a need of `need_tpcs` (0: no LC work): the smallest of the sizes
// ceil(k x tpc_count / steps), k = 1..steps, that covers it, at most tpc_count - be_reserve (the
// TPCs always left to BE). steps >= tpc_count keeps every need as it is.
int round_lc_need(int need_tpcs, int tpc_count, int steps, int be_reserve);
// Every share round_lc_need can return for a need >= 1, ascending and distinct (the sets a policy
// prepares before the run).
std::vector<int> lc_share_sizes(int tpc_count, int steps, int be_reserve);

// SGDRC's sliding window (Section 7.1): the LC need is the largest TPC need among the LC kernel in
// flight (or about to be dispatched) and the next `window` LC kernels behind it. `streams` holds
// each LC tenant's upcoming launches' needs in stream order, tenants in the round-robin order the
// policy serves them from the head's tenant on; streams[0][0] is the head. The window follows that
// order: the head, then round k takes the k-th upcoming launch of each tenant in turn (what the
// round robin dispatches if nothing else arrives). 0 when every stream is empty.
int window_need(const std::vector<std::vector<int>>& streams, int window);

// The fewest TPCs that reach a kernel's minimum latency (Section 7.1): with
// best = min over t of seconds_at(t), the smallest t in 1..tpc_count with
// seconds_at(t) <= (1 + tolerance) x best, found by binary search as the paper profiles it (each
// probe a measurement there). The search takes the time as non-increasing up to the first count
// that reaches the minimum; on a curve that is not (measurement noise), it returns a count within
// the tolerance, not necessarily the fewest.
int min_tpcs(const std::function<double(int tpcs)>& seconds_at, int tpc_count, double tolerance);

// min_tpcs for a kernel variant from the estimator (measured SM curve where `concord run
// --profiles` attached one, else the roofline), with the kernel on the first t TPCs of `tpcs`. A
// grid of B logical blocks fills at most B SMs, so counts past the TPCs that hold B SMs are not
// considered (the roofline alone would keep getting faster there).
int kernel_min_tpcs(const Estimator& estimator, const KernelSpec& kernel, int variant, std::span<const SmSet> tpcs,
                    double tolerance);

}  // namespace concord::policy
