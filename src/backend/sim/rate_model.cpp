#include "backend/sim/rate_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace concord::sim {

std::vector<double> water_fill(std::span<const double> demands, std::span<const double> weights, double capacity) {
  const size_t n = demands.size();
  std::vector<double> alloc(n, 0.0);
  std::vector<bool> done(n, false);
  double left = capacity;
  for (size_t round = 0; round < n && left > 0; ++round) {
    double wsum = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!done[i]) wsum += weights[i];
    }
    if (wsum <= 0) break;
    // Satisfy every demand below its fair share; the rest split what remains.
    bool any_satisfied = false;
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      const double share = left * weights[i] / wsum;
      if (demands[i] - alloc[i] <= share) {
        any_satisfied = true;
      }
    }
    if (!any_satisfied) {
      for (size_t i = 0; i < n; ++i) {
        if (!done[i]) alloc[i] += left * weights[i] / wsum;
      }
      return alloc;
    }
    const double snapshot = left;
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      const double share = snapshot * weights[i] / wsum;
      if (demands[i] - alloc[i] <= share) {
        left -= demands[i] - alloc[i];
        alloc[i] = demands[i];
        done[i] = true;
      }
    }
  }
  return alloc;
}

RateModel::RateModel(const DeviceSpec& device, ModelParams params) : device_(device), params_(params) {
  dram_bandwidth_ = device_.dram_bytes_per_s * params_.dram_efficiency;
  sm_bandwidth_ = dram_bandwidth_ / device_.sm_count * params_.sm_bandwidth_share;
}

double RateModel::compute_seconds_per_block(const KernelSpec& kernel, const KernelVariant& v) const {
  const double peak = kernel.unit == ComputeUnit::tensor ? device_.tensor_flops : device_.fp32_flops;
  const double per_sm = peak * params_.compute_efficiency / device_.sm_count;
  return v.flops_per_block / per_sm;
}

void RateModel::rates_at(double phi, std::span<const Entity> entities, std::span<const SmGroup> groups,
                         std::span<const double> l2_loss, std::vector<double>& out) const {
  out.assign(entities.size(), 0.0);
  std::vector<double> demand, weight, mem_alloc, warps, compute_s, pipe_bytes;
  for (const SmGroup& g : groups) {
    const size_t n = g.residents.size();
    demand.assign(n, 0);
    weight.assign(n, 0);
    warps.assign(n, 0);
    compute_s.assign(n, 0);
    pipe_bytes.assign(n, 0);
    double total_warps = 0;
    for (size_t k = 0; k < n; ++k) {
      const Entity& e = entities[static_cast<size_t>(g.residents[k].first)];
      warps[k] = static_cast<double>(g.residents[k].second) * e.warps_per_block;
      total_warps += warps[k];
    }
    // Cache effects. Lost L1 hits stall issue and go down the SM's memory pipe to L2; lost L2 hits
    // become DRAM traffic (see dram_bytes()).
    for (size_t k = 0; k < n; ++k) {
      const auto idx = static_cast<size_t>(g.residents[k].first);
      const Entity& e = entities[idx];
      double l1_polluters = 0;
      for (size_t m = 0; m < n; ++m) {
        if (m != k && !bypasses_l1(entities[static_cast<size_t>(g.residents[m].first)].cache)) l1_polluters += warps[m];
      }
      const double l1_loss = bypasses_l1(e.cache) ? 1.0 : (total_warps > 0 ? l1_polluters / total_warps : 0.0);
      const double l1_factor = 1.0 + e.l1_sensitivity * l1_loss;
      compute_s[k] = e.compute_seconds_per_block * l1_factor;
      pipe_bytes[k] = e.bytes_per_block * (1.0 + e.l2_sensitivity * l2_loss[idx]) * l1_factor * phi;
    }
    // Stage 1: per-SM bandwidth, shared by warps, each asking what it would use at full issue.
    for (size_t k = 0; k < n; ++k) {
      const double cap_m = sm_bandwidth_ * std::min(1.0, warps[k] / params_.warps_to_saturate_memory);
      const double cap_c = std::min(1.0, warps[k] / params_.warps_to_saturate_issue);
      double want = compute_s[k] > 0 ? cap_c / compute_s[k] * pipe_bytes[k] : cap_m;
      const Entity& e = entities[static_cast<size_t>(g.residents[k].first)];
      if (e.max_rate_per_sm > 0) want = std::min(want, e.max_rate_per_sm / phi * pipe_bytes[k]);
      demand[k] = std::min(cap_m, want);
      weight[k] = warps[k];
    }
    mem_alloc = water_fill(demand, weight, sm_bandwidth_);
    // Stage 2: issue capacity, each asking what its bandwidth lets it use.
    for (size_t k = 0; k < n; ++k) {
      const double cap_c = std::min(1.0, warps[k] / params_.warps_to_saturate_issue);
      const double mem_rate = pipe_bytes[k] > 0 ? mem_alloc[k] / pipe_bytes[k] : std::numeric_limits<double>::infinity();
      demand[k] = std::min(cap_c, mem_rate * compute_s[k]);
    }
    const std::vector<double> issue = water_fill(demand, weight, 1.0);
    for (size_t k = 0; k < n; ++k) {
      const auto idx = static_cast<size_t>(g.residents[k].first);
      // Neighbours' memory pressure slows this part's issue (shared LSU, L1 and MSHRs).
      double others_pressure = 0;
      for (size_t m = 0; m < n; ++m) {
        if (m != k) others_pressure += mem_alloc[m] / sm_bandwidth_;
      }
      const double slow = 1.0 + params_.co_residence_penalty * std::min(1.0, others_pressure);
      const double compute_rate = compute_s[k] > 0 ? issue[k] / (compute_s[k] * slow) : std::numeric_limits<double>::infinity();
      const double mem_rate = pipe_bytes[k] > 0 ? mem_alloc[k] / pipe_bytes[k] : std::numeric_limits<double>::infinity();
      double rate = std::min(compute_rate, mem_rate);
      if (entities[idx].max_rate_per_sm > 0) rate = std::min(rate, entities[idx].max_rate_per_sm / phi);
      out[idx] += std::isfinite(rate) ? g.sms * rate : 0.0;  // a body with no work: nothing to model
    }
  }
}

std::vector<double> RateModel::solve_with(std::span<const Entity> entities, std::span<const SmGroup> groups,
                                          std::span<const double> l2_loss) const {
  std::vector<double> rates;
  auto traffic = [&](const std::vector<double>& r) {
    double t = 0;
    for (size_t i = 0; i < r.size(); ++i) t += r[i] * entities[i].bytes_per_block * (1.0 + entities[i].l2_sensitivity * l2_loss[i]);
    return t;
  };
  rates_at(1.0, entities, groups, l2_loss, rates);
  double demand = traffic(rates);
  if (demand <= dram_bandwidth_) return rates;
  // DRAM is over-subscribed: find the latency inflation phi at which traffic fits (bisection;
  // traffic falls monotonically with phi).
  double lo = 1.0, hi = 2.0;
  for (int i = 0; i < 64; ++i) {
    rates_at(hi, entities, groups, l2_loss, rates);
    if (traffic(rates) <= dram_bandwidth_) break;
    lo = hi;
    hi *= 2;
  }
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    rates_at(mid, entities, groups, l2_loss, rates);
    if (traffic(rates) > dram_bandwidth_) lo = mid;
    else hi = mid;
  }
  rates_at(hi, entities, groups, l2_loss, rates);
  return rates;
}

std::vector<double> RateModel::solve(std::span<const Entity> entities, std::span<const SmGroup> groups) const {
  std::vector<double> l2_loss(entities.size(), 0.0);
  std::vector<double> rates = solve_with(entities, groups, l2_loss);
  // L2 is shared by all SMs: a part loses the share of DRAM traffic that others bring in
  // without evict-first (its own evict-first policy forfeits its reuse entirely).
  bool any_sensitive = false;
  for (const Entity& e : entities) any_sensitive |= e.l2_sensitivity > 0;
  if (!any_sensitive) return rates;
  double total = 0, polluting = 0;
  for (size_t i = 0; i < entities.size(); ++i) {
    const double t = rates[i] * entities[i].bytes_per_block;
    total += t;
    if (!evicts_l2_first(entities[i].cache)) polluting += t;
  }
  for (size_t i = 0; i < entities.size(); ++i) {
    if (evicts_l2_first(entities[i].cache)) {
      l2_loss[i] = 1.0;
      continue;
    }
    if (entities[i].l2_persist) continue;  // kept in the persisting part: loses nothing to others
    const double own = rates[i] * entities[i].bytes_per_block;
    l2_loss[i] = total > 0 ? (polluting - own) / total : 0.0;
  }
  return solve_with(entities, groups, l2_loss);
}

}  // namespace concord::sim
