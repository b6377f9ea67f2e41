// The simulator backend: a deterministic discrete-event model of the GPU (docs/simulator.md).
// Rates are piecewise constant between events (dispatch, completion, resize, preempt, time
// limits); residency follows per-SM occupancy limits and the hardware block scheduler's greed.
#pragma once

#include <map>
#include <vector>

#include "backend/sim/rate_model.h"
#include "concord/backend.h"
#include "concord/occupancy.h"

namespace concord::sim {

struct SimOptions {
  ModelParams model;
};

class SimBackend final : public Backend {
 public:
  SimBackend(DeviceSpec device, SimOptions options = {});

  std::string name() const override { return "sim"; }
  const DeviceSpec& device() const override { return device_; }
  Capabilities capabilities(const KernelSpec& kernel) const override;
  Status dispatch(const DispatchRequest& request) override;
  Status set_sm_set(DispatchId dispatch, const SmSet& sms) override;
  Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) override;
  Status preempt(DispatchId dispatch) override;
  Result<std::vector<int64_t>> progress(DispatchId dispatch) const override;
  Seconds now() const override { return now_; }
  Result<std::vector<Completion>> advance(Seconds until) override;
  int running() const override { return static_cast<int>(dispatches_.size()); }
  // Preempts every persistent dispatch; a native one cannot be stopped, and is reported when, at
  // its present rate, it would not end within `grace` (the clock does not move here).
  Status abort_all(Seconds grace) override;

  // Inspection for tests: blocks resident on `sm` per running dispatch, and the SM's free resources.
  std::map<DispatchId, int> residents_on(int sm) const;
  SmResources free_resources(int sm) const { return free_[static_cast<size_t>(sm)]; }
  // Current rate (logical blocks/s) of each part of a running dispatch.
  std::vector<double> rates_of(DispatchId dispatch) const;

 private:
  struct Part {
    LaunchId launch;
    TenantId tenant;
    const KernelSpec* kernel = nullptr;
    const KernelVariant* variant = nullptr;
    BlockRange range;
    int parts_per_block = 1;
    double done = 0;       // logical blocks finished (fluid)
    double rate = 0;       // logical blocks per second now
    double curve_scale = 1;// measured/modelled speed where the curve is faster than the model (slower: a bound in the solve); 1 without a curve
    bool finished = false;
    double remaining() const { return static_cast<double>(range.size()) - done; }
  };
  struct Running {
    DispatchId id;
    int64_t order = 0;     // dispatch sequence: the block scheduler serves older launches first
    DispatchId after;      // stream order: held back until this dispatch ends (then ordered anew)
    std::vector<Part> parts;
    Placement placement;
    SmSet allowed;
    BlockFootprint footprint;  // of one (possibly fused) block
    int per_sm_cap = 0;        // resident blocks per SM allowed (TLP, occupancy)
    SmSet tight_sms;           // SMs where tight_cap applies instead
    int tight_cap = 0;         // 0: none
    int cap_on(int sm) const { return tight_cap > 0 && tight_sms.contains(sm) ? tight_cap : per_sm_cap; }
    std::vector<int> resident; // per SM
    Seconds start = -1;
    Seconds ready_at = 0;      // when it reaches the block scheduler (the launch's latency)
    bool preempting = false;
    double stop_target = -1;   // preempting: blocks done of part 0 at which it stops
    std::vector<double> stop_targets;
  };

  Running* find(DispatchId id);
  const Running* find(DispatchId id) const;
  void release(Running& r, int sm, int blocks);
  void allocate_blocks();
  void recompute_rates();
  double model_alone_rate(const Part& p, int sms);
  double curve_rate(const Part& p, int sms) const;
  void progress_to(Seconds t);
  bool is_done(const Running& r) const;

  DeviceSpec device_;
  SimOptions options_;
  RateModel model_;
  Seconds now_ = 0;
  int64_t next_order_ = 0;
  std::vector<Running> dispatches_;
  std::vector<SmResources> free_;
  bool dirty_ = true;
  std::map<std::tuple<const KernelSpec*, const KernelVariant*, int>, double> alone_rate_cache_;
  std::map<int64_t, Seconds> tenant_last_end_;  // when each tenant's latest dispatch ended
};

}  // namespace concord::sim
