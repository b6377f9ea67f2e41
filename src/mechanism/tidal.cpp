#include "mechanism/tidal.h"

#include <algorithm>
#include <limits>

namespace concord::policy {

std::vector<SmSet> tpcs_in_order(const DeviceSpec& device) {
  std::vector<SmSet> tpcs(static_cast<size_t>(device.tpc_count()));
  for (int sm = 0; sm < device.sm_count; ++sm) {
    const int t = device.tpc_of_sm[static_cast<size_t>(sm)];
    if (t >= 0 && static_cast<size_t>(t) < tpcs.size()) tpcs[static_cast<size_t>(t)].add(sm);
  }
  return tpcs;
}

TidalSplit tidal_split(std::span<const SmSet> tpcs, int lc_tpcs) {
  TidalSplit s;
  s.lc_tpcs = std::clamp(lc_tpcs, 0, static_cast<int>(tpcs.size()));
  for (size_t t = 0; t < tpcs.size(); ++t) {
    if (static_cast<int>(t) < s.lc_tpcs) {
      s.lc = s.lc | tpcs[t];
    } else {
      s.be = s.be | tpcs[t];
    }
  }
  return s;
}

int round_lc_need(int need_tpcs, int tpc_count, int steps, int be_reserve) {
  if (need_tpcs <= 0 || tpc_count <= 0) return 0;
  steps = std::clamp(steps, 1, tpc_count);
  const int cap = std::max(1, tpc_count - std::max(0, be_reserve));
  const int need = std::min(need_tpcs, tpc_count);
  // The smallest k with ceil(k * T / steps) >= need, i.e. k * T / steps > need - 1.
  const int k = (need - 1) * steps / tpc_count + 1;
  const int size = (k * tpc_count + steps - 1) / steps;
  return std::min(size, cap);
}

std::vector<int> lc_share_sizes(int tpc_count, int steps, int be_reserve) {
  std::vector<int> out;
  for (int need = 1; need <= tpc_count; ++need) {
    const int s = round_lc_need(need, tpc_count, steps, be_reserve);
    if (out.empty() || out.back() != s) out.push_back(s);
  }
  return out;
}

int window_need(const std::vector<std::vector<int>>& streams, int window) {
  int need = 0;
  int taken = 0;
  const int limit = std::max(0, window) + 1;
  for (size_t round = 0; taken < limit; ++round) {
    bool any = false;
    for (const auto& s : streams) {
      if (round >= s.size()) continue;
      any = true;
      need = std::max(need, s[round]);
      if (++taken == limit) break;
    }
    if (!any) break;
  }
  return need;
}

int min_tpcs(const std::function<double(int tpcs)>& seconds_at, int tpc_count, double tolerance) {
  if (tpc_count <= 1) return std::max(1, tpc_count);
  double best = std::numeric_limits<double>::infinity();
  int best_at = tpc_count;
  for (int t = 1; t <= tpc_count; ++t) {
    const double s = seconds_at(t);
    if (s < best) {
      best = s;
      best_at = t;
    }
  }
  const double target = best * (1.0 + std::max(0.0, tolerance));
  // The smallest count in [1, best_at] within the target; best_at itself is.
  int lo = 1, hi = best_at;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (seconds_at(mid) <= target) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

int kernel_min_tpcs(const Estimator& estimator, const KernelSpec& kernel, int variant, std::span<const SmSet> tpcs,
                    double tolerance) {
  // SMs of the first t TPCs, and the TPCs a grid of B blocks can fill.
  std::vector<int> sms_of_first(tpcs.size() + 1, 0);
  for (size_t t = 0; t < tpcs.size(); ++t) sms_of_first[t + 1] = sms_of_first[t] + tpcs[t].count();
  const int64_t blocks = kernel.variant(variant).logical_blocks;
  int usable = static_cast<int>(tpcs.size());
  for (int t = 1; t <= static_cast<int>(tpcs.size()); ++t) {
    if (sms_of_first[static_cast<size_t>(t)] >= blocks) {
      usable = t;
      break;
    }
  }
  auto seconds_at = [&](int t) { return estimator.seconds(kernel, variant, sms_of_first[static_cast<size_t>(t)]); };
  return min_tpcs(seconds_at, usable, tolerance);
}

}  // namespace concord::policy
