// Metrics, one definition each (docs/running.md, metrics).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "concord/engine.h"

namespace concord {

// NP_i = T_alone_i / T_shared_i.
double normalized_progress(Seconds alone, Seconds shared);
// STP = sum NP_i (FEDCM throughput, PBS weighted speedup).
double system_throughput(std::span<const double> np);
// ANTT = mean(1 / NP_i).
double average_normalized_turnaround(std::span<const double> np);
// FI = min over pairs NP_i / NP_j = min NP / max NP.
double fairness_index(std::span<const double> np);
// HS = N / sum(1 / NP_i).
double harmonic_speedup(std::span<const double> np);
// Nearest-rank percentile of `values` (p in [0, 100]); 0 for an empty span.
double percentile(std::span<const double> values, double p);

struct TenantMetrics {
  std::string name;
  TenantClass cls = TenantClass::best_effort;
  Seconds alone = 0;
  Seconds shared = 0;
  double np = 0;
  // Over the co-run window (until the first tenant finishes): the alone time of the work this
  // tenant completed in it (requests, the one in flight pro rata) over the window.
  double np_window = 0;
  int64_t requests = 0;
  Seconds latency_p50 = 0;  // LC: request latency including queueing
  Seconds latency_p99 = 0;
  Seconds latency_target = 0;
  double slo_attainment = 0;     // LC: share of requests within target
  double requests_per_s = 0;     // completed requests over the tenant's elapsed time
  double blocks_per_s = 0;       // logical blocks over the tenant's elapsed time
};

// The one figure a run is judged by, by the kind of workload (docs/running.md, "The headline"):
// - closed loop (every tenant runs its requests back to back): throughput over serial, the same
//   work's makespan under `serial` over this run's; serial scores exactly 1. Without a serial
//   reference run (--no-serial) the STP over the co-run window stands in;
// - open loop (a tenant has arrivals: Poisson or timestamps): the makespan follows the arrivals,
//   so throughput says little; the LC tenants' SLO attainment (their requests within target over
//   all their requests), with their goodput and the BE tenants' progress (sum of their NP) beside
//   it. An open-loop workload without LC tenants is judged by that BE progress.
struct Headline {
  enum class Kind : uint8_t { closed_loop, open_loop };
  Kind kind = Kind::closed_loop;
  // The figure's key in the results file (metrics.headline.name) and its value:
  // "throughput_over_serial", "stp_window", "lc_slo_attainment" or "be_np_sum".
  std::string name;
  double value = 0;
  // Open loop: LC requests within target per second of makespan, and the BE tenants' NP sum.
  double lc_goodput_per_s = 0;
  double be_np_sum = 0;
};
const char* to_string(Headline::Kind k);
// The printed headline line (without a newline), the same figures as the results file's.
std::string headline_text(const Headline& h);

struct Metrics {
  std::vector<TenantMetrics> tenants;
  Headline headline;
  // The sum of NP over each tenant's whole run. Counts the tail after the first tenant finished,
  // where the rest run alone, so serial execution scores above 1 here.
  double np_sum = 0;
  // STP over the co-run window, while every tenant still has work: sum of np_window. Serial
  // execution scores about 1 here (the GPU does one tenant's work at a time at alone speed), as in
  // FEDCM's and PBS's throughput; exactly 1 only where the tenants take whole turns.
  double stp_window = 0;
  Seconds window = 0;  // end of the co-run window (the first tenant's finish)
  double antt = 0;
  double fi = 0;
  double hs = 0;
  Seconds makespan = 0;
  std::optional<Seconds> serial_makespan;
  std::optional<double> speedup_over_serial;
  double lc_goodput = 0;          // LC requests within target per second of makespan
  double be_throughput = 0;       // BE requests per second of makespan
  double overall_throughput = 0;  // lc_goodput + be_throughput (SGDRC)
};

// `alone` holds T_alone for each tenant, in workload order; `kind` says which headline applies
// (headline_kind() of the workload run, experiment.h).
Result<Metrics> compute_metrics(const RunRecord& run, std::span<const Seconds> alone,
                                std::optional<Seconds> serial_makespan, Headline::Kind kind = Headline::Kind::closed_loop);

}  // namespace concord
