#include "policy/raise/raise_metrics.h"

#include <algorithm>

namespace concord {

const std::array<RaiseMetricInfo, kRaiseMetrics>& raise_metric_info() {
  // Percent metrics map 100% to 10. IPC is per SM: Hopper issues at most one instruction per
  // cycle on each of an SM's four sub-partitions, so 4 maps to 10 (the paper's 4.0 maximum on
  // Volta, Section IV-B). tex_utilization has no one-to-one Hopper counter: the unified L1/TEX
  // cache's throughput share stands in for it.
  static const std::array<RaiseMetricInfo, kRaiseMetrics> info{{
      {"AOC", "achieved_occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", 100},
      {"SME", "sm_efficiency", "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed", 100},
      {"IPC", "ipc", "sm__inst_executed.avg.per_cycle_active", 4},
      {"ISU", "issue_slot_utilization", "smsp__issue_active.avg.pct_of_peak_sustained_active", 100},
      {"SPU", "single_precision_fu_utilization", "smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", 100},
      {"DU", "dram_utilization", "dram__throughput.avg.pct_of_peak_sustained_elapsed", 100},
      {"LSU", "ldst_fu_utilization", "smsp__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", 100},
      {"TU", "tex_utilization", "l1tex__throughput.avg.pct_of_peak_sustained_active", 100},
  }};
  return info;
}

double raise_scale(RaiseMetric m, double ncu_value) {
  const double full = raise_metric_info()[static_cast<size_t>(m)].full_scale;
  return std::clamp(ncu_value / full * 10.0, 0.0, 10.0);
}

const char* to_string(RaiseClass c) {
  switch (c) {
    case RaiseClass::com: return "COM";
    case RaiseClass::mem: return "MEM";
    case RaiseClass::lat: return "LAT";
  }
  return "?";
}

std::optional<RaiseClass> raise_class_from_string(const std::string& s) {
  for (RaiseClass c : {RaiseClass::com, RaiseClass::mem, RaiseClass::lat}) {
    if (s == to_string(c)) return c;
  }
  return std::nullopt;
}

RaiseClass raise_class(const RaiseVector& m, double threshold) {
  const double ipc = at(m, RaiseMetric::ipc);
  const double du = at(m, RaiseMetric::du);
  if (ipc < threshold && du < threshold) return RaiseClass::lat;
  return ipc >= du ? RaiseClass::com : RaiseClass::mem;
}

double raise_score(const RaiseVector& m, RaiseClass c) {
  double sum = 0;
  for (double v : m) sum += v;
  if (c == RaiseClass::lat) return sum / kRaiseMetrics;
  const double key = c == RaiseClass::com ? at(m, RaiseMetric::ipc) : at(m, RaiseMetric::du);
  return 0.5 * key + 0.5 * (sum - key) / (kRaiseMetrics - 1);
}

}  // namespace concord
