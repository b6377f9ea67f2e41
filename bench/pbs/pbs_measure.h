// bench/pbs's figures, apart from its command line (tests/bench/pbs_test.cpp tests them):
// each tenant's share of SMs, the oracle's TLP combinations, work scaled down for the runs that
// need only a rate, each tenant's rate over a window of a run, and the paper's SD-based metrics
// (the PBS paper, Table III: SD_i = rate shared / rate alone on the same SMs at the
// tenant's best alone TLP; WS = sum SD, FI = min SD / max SD, HS = N / sum 1/SD).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "concord/engine.h"
#include "concord/status.h"
#include "concord/workload.h"
#include "lsbe_metrics.h"

namespace concord::pbs_bench {

// Tenant `i`'s SMs among `k` as "first-last", as PBS's runner splits them (an equal contiguous
// share each, the last tenant takes the remainder); every SM when `split` is false.
std::string share_of(int i, int k, int sm_count, bool split);

// Every combination of `levels` for `k` tenants, the first tenant's level varying slowest.
std::vector<std::vector<int>> combinations(const std::vector<int>& levels, int k);
// "1_4_0": a combination as the oracle's file names write it.
std::string combination_name(const std::vector<int>& tlps);

// `w` with each tenant's requests and each kernel step's count scaled by `factor` (in (0, 1]), at
// least one each.
Result<Workload> scaled(const Workload& w, double factor);

// A tenant's kernels done per second over `window` of `run` (a kernel across an edge counts by
// the share of its running time inside it); 0 for an empty window.
double rate_in(const RunRecord& run, TenantId tenant, lsbe::Window window);

// The co-run window of a shared run: from the latest first launch start among the tenants (all
// of them running) to the first tenant's finish. {0, 0} when a tenant never started.
lsbe::Window co_run_window(const RunRecord& run);

// The first "settled" event of a PBS trace (docs/policies.md: trace=FILE): when, after how many
// samples and TLP changes; nullopt when the file is missing or the search never settled.
struct Settle {
  double t = 0;
  int64_t samples = 0;
  int64_t tlp_changes = 0;
};
std::optional<Settle> first_settle(const std::string& trace_file);

struct SdMetrics {
  std::vector<double> sd;  // per tenant
  double ws = 0, fi = 0, hs = 0;
};
// From per-tenant shared and best-alone rates (same length, alone rates > 0). An error names a
// tenant without an alone rate.
Result<SdMetrics> sd_metrics(const std::vector<double>& shared_rates, const std::vector<double>& alone_rates);

}  // namespace concord::pbs_bench
