// Estimator: what a policy asks about a kernel's speed — seconds on c SMs with a cache policy,
// and FEDCM's demand d — from measured profiles when the kernel was profiled (its SM curve and
// cache slowdowns, attached by `concord run --profiles`), from a roofline of its FLOPs and bytes
// otherwise. Policies ask the estimator; they never ask which backend runs.
#pragma once

#include <algorithm>

#include "concord/device.h"
#include "concord/kernel.h"

namespace concord {

class Estimator {
 public:
  struct Roofline {
    double compute_efficiency = 0.90;  // share of peak FLOP/s a saturating kernel reaches
    double dram_efficiency = 0.90;     // share of peak DRAM bandwidth a streaming kernel reaches
    double sm_bandwidth_share = 3.0;   // one SM pulls at most this many times its even share of DRAM
  };
  explicit Estimator(DeviceSpec device) : Estimator(std::move(device), Roofline{}) {}
  Estimator(DeviceSpec device, Roofline roofline)
      : device_(std::move(device)),
        roofline_(roofline),
        tpc_step_(std::max(1, device_.sm_count / std::max(1, device_.tpc_count()))) {}

  // Seconds for the whole logical grid of `variant`, alone on `sms` SMs at full TLP.
  double seconds(const KernelSpec& kernel, int variant, int sms, CachePolicy cache = CachePolicy::normal) const;
  // FEDCM's d (Section III-A): the fewest SMs, in TPC steps, whose time is within `tolerance` of
  // the all-SM time.
  int demand_sms(const KernelSpec& kernel, int variant, double tolerance = 0.1) const;
  // True when the answer for this variant comes from a measured curve.
  bool measured(const KernelSpec& kernel, int variant) const;
  const DeviceSpec& device() const { return device_; }

 private:
  double roofline_seconds(const KernelSpec& kernel, const KernelVariant& v, int sms) const;

  DeviceSpec device_;
  Roofline roofline_;
  int tpc_step_;  // SMs per TPC, demand_sms's step
};

}  // namespace concord
