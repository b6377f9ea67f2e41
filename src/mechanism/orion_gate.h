// Orion's admission rule for best-effort kernels (eth-easl/orion, src/scheduler/scheduler_eval.cpp,
// Scheduler::busy_wait_profile) and the per-kernel profile it reads (profiling/postprocessing:
// get_num_blocks.py for the SMs a kernel needs, roofline_analysis.py for its compute/memory
// class). Pure functions of what they are given, so the rule is tested on hand-built cases;
// docs/policies.md states what is followed and every deviation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "concord/device.h"
#include "concord/estimator.h"
#include "concord/ids.h"
#include "concord/kernel.h"

namespace concord::policy {

// Orion's "profile" of a kernel: 1 compute-bound, 0 memory-bound, -1 neither known.
enum class OrionProfile : int8_t { unknown = -1, memory = 0, compute = 1 };
const char* to_string(OrionProfile p);

// What Orion knows of one kernel before it runs.
struct OrionOp {
  int64_t sm_need = 0;  // SMs its grid fills at full occupancy; not capped at the device's SM count
  Seconds seconds = 0;  // alone on every SM
  OrionProfile profile = OrionProfile::unknown;
};

// The share of peak SM or DRAM throughput at which a kernel without FP32 work counts as bound by
// it (roofline_analysis.py's 60%).
inline constexpr double kOrionBusyShare = 0.6;

// SMs a grid of `blocks` fills when `resident` of its blocks fit on one SM: ceil(blocks /
// resident); a block that fits on no SM (resident 0) needs more SMs than any device has.
int64_t orion_sm_need(int64_t blocks, int resident);
// The roofline class of a kernel doing `flops` and moving `bytes` of DRAM traffic in `seconds`:
// with any FLOPs, compute-bound when its arithmetic intensity flops/bytes is above the device's
// knee (peak FLOP/s of `unit` over peak DRAM bytes/s), else memory-bound; without FLOPs,
// memory-bound when it uses kOrionBusyShare of peak DRAM bandwidth, else unknown.
OrionProfile orion_profile(const DeviceSpec& device, ComputeUnit unit, double flops, double bytes, Seconds seconds);
// The profile of `kernel`'s default variant: SM need from the occupancy calculator, duration on
// every SM and class from `estimator` (a measured curve where one is attached, else the roofline).
OrionOp orion_op(const Estimator& estimator, const KernelSpec& kernel);

// The thresholds: SM_THRESHOLD (the device's SM count for an inference LC tenant) and the BE
// duration after which further BE work waits for BE work to drain (DUR_THRESHOLD).
struct OrionRule {
  int64_t sm_threshold = 0;
  Seconds max_be_seconds = 0;
};

// What the rule carries from one BE admission to the next.
struct OrionBeState {
  int64_t pass_sms = 0;     // SM needs of the BE kernels admitted in this scheduling pass
  Seconds since_drain = 0;  // durations of the BE kernels admitted since the gate last opened
  bool gated = false;       // since_drain went over max_be_seconds: BE waits until no BE kernel runs
};

// The present, as the rule sees it.
struct OrionView {
  bool lc_active = false;                  // an LC request has a kernel launched and has not ended
  std::span<const OrionProfile> lc_kernels;  // the profile of the kernel each active LC request runs
  bool be_running = false;                 // a BE kernel has been launched and has not ended
  bool lc_has_work = false;                // an LC tenant may still send requests
};

enum class OrionVerdict : uint8_t {
  launch,
  wait_sms,       // an LC request is active and the BE kernels of this pass would need too many SMs
  wait_profile,   // an LC request is active and runs a kernel of the same profile
  wait_duration,  // the BE duration gate is closed and BE work still runs
};
const char* to_string(OrionVerdict v);

struct OrionDecision {
  OrionVerdict verdict = OrionVerdict::launch;
  OrionBeState state;  // after the decision (unchanged unless the kernel launches)
};

// Whether BE kernel `be` launches now. Without an active LC request it launches; with one, only
// when the pass's BE SM needs with its own stay within sm_threshold and its profile differs from
// every active LC request's kernel (an unknown profile on either side differs). Either way, once
// the BE durations admitted since the gate last opened exceed max_be_seconds while an LC tenant
// still has work, the next BE kernel waits until no BE kernel runs, and the count starts again.
OrionDecision orion_admit(const OrionRule& rule, const OrionBeState& state, const OrionView& view, const OrionOp& be);

// Each LC tenant's request latency alone, as Orion reads it for DUR_THRESHOLD: from the tenant's
// hint (the sum of its request's kernels' durations) when it gave one, else from the kernels of
// the last whole request it launched (until it has launched one whole, those of its first request
// so far).
class OrionLcLatency {
 public:
  // The tenant's hint: its whole request takes `seconds` alone; launches no longer change it.
  void hinted(TenantId tenant, Seconds seconds);
  // One of the tenant's LC kernels launched: `seconds` alone, of request `request`, its last one or not.
  void launched(TenantId tenant, Seconds seconds, int64_t request, bool last);
  // The tenant's request latency alone; 0 while not known.
  Seconds seconds(TenantId tenant) const;

 private:
  struct Request {
    Seconds seconds = 0;
    bool hinted = false;
    bool whole = false;    // a whole request has been summed
    int64_t current = -1;  // the request being summed
    Seconds current_seconds = 0;
  };
  Request& of(TenantId tenant);
  std::vector<Request> by_tenant_;
};

}  // namespace concord::policy
