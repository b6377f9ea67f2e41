// The simulator's throughput model: given what is resident on every SM, how many logical blocks
// per second each running part completes. See docs/simulator.md for the model and its limits.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "concord/device.h"
#include "concord/kernel.h"

namespace concord::sim {

struct ModelParams {
  double compute_efficiency = 0.90;   // share of peak FLOP/s a saturating kernel reaches
  double dram_efficiency = 0.90;      // share of peak DRAM bandwidth a streaming kernel reaches
  double warps_to_saturate_issue = 16;  // resident warps per SM for full issue rate
  double warps_to_saturate_memory = 32; // resident warps per SM for full per-SM bandwidth
  // One SM can pull this many times its even share (1/S) of DRAM bandwidth: a memory-bound
  // kernel saturates DRAM on about 1/share of the SMs.
  double sm_bandwidth_share = 3.0;
  // Compute slowdown per unit of neighbours' memory pressure on the same SM (LSU/L1 contention).
  double co_residence_penalty = 0.3;
  // From a launch to its first block (host launch path, driver, front end): a dispatch of a tenant
  // with nothing on the GPU reaches the block scheduler this long after the engine dispatched it.
  // A tenant's launch right behind its own running or just-ended work pays nothing: a process's
  // launches run ahead of the GPU in its stream, so that one was queued already. H200: a plain
  // launch costs 3.4-4.8 us as an MPS client (docs/results.md, the launch-path A/B of 2026-11-29).
  double launch_seconds = 4e-6;
};

// One running part (a launch's body inside a dispatch), as the model sees it.
struct Entity {
  double compute_seconds_per_block = 0;  // at the full issue rate of one SM
  double bytes_per_block = 0;
  int warps_per_block = 1;
  CachePolicy cache = CachePolicy::normal;
  bool l2_persist = false;  // its data held in L2's persisting part: others' traffic does not evict it
  double l1_sensitivity = 0;
  double l2_sensitivity = 0;
  // Logical blocks per second one SM completes at most, at DRAM latency 1 (0: no bound): a kernel
  // whose measured curve says it runs slower than the model's roofline is bound by something the
  // model does not see (latency, dependent loads); it then draws only the DRAM traffic of its
  // measured rate, and slows with DRAM latency (the bound over phi).
  double max_rate_per_sm = 0;
};

// SMs with identical residency, counted once.
struct SmGroup {
  int sms = 0;                                 // how many SMs look like this
  std::vector<std::pair<int, int>> residents;  // (entity index, resident blocks), blocks > 0
};

class RateModel {
 public:
  RateModel(const DeviceSpec& device, ModelParams params);
  // Per-block compute time of a kernel variant on one SM at the full issue rate.
  double compute_seconds_per_block(const KernelSpec& kernel, const KernelVariant& variant) const;
  // Logical blocks per second for each entity.
  std::vector<double> solve(std::span<const Entity> entities, std::span<const SmGroup> groups) const;
  const ModelParams& params() const { return params_; }

 private:
  // Rates with DRAM latency inflation `phi` and L2 loss per entity.
  void rates_at(double phi, std::span<const Entity> entities, std::span<const SmGroup> groups,
                std::span<const double> l2_loss, std::vector<double>& out) const;
  std::vector<double> solve_with(std::span<const Entity> entities, std::span<const SmGroup> groups,
                                 std::span<const double> l2_loss) const;

  DeviceSpec device_;
  ModelParams params_;
  double sm_bandwidth_ = 0;   // bytes/s one SM can pull at most
  double dram_bandwidth_ = 0; // achievable bytes/s of the whole device
};

// Weighted max-min fair share of `capacity` among demands (water-filling).
std::vector<double> water_fill(std::span<const double> demands, std::span<const double> weights, double capacity);

}  // namespace concord::sim
