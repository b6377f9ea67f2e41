#include "pbs_measure.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "concord/metrics.h"

namespace concord::pbs_bench {

std::string share_of(int i, int k, int sm_count, bool split) {
  if (!split || k <= 1) return "0-" + std::to_string(sm_count - 1);
  const int per = std::max(1, sm_count / k);
  const int first = i * per;
  const int last = i == k - 1 ? sm_count - 1 : first + per - 1;
  return std::to_string(first) + "-" + std::to_string(last);
}

std::vector<std::vector<int>> combinations(const std::vector<int>& levels, int k) {
  std::vector<std::vector<int>> out{{}};
  for (int t = 0; t < k; ++t) {
    std::vector<std::vector<int>> next;
    for (const auto& c : out) {
      for (int l : levels) {
        next.push_back(c);
        next.back().push_back(l);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string combination_name(const std::vector<int>& tlps) {
  std::string out;
  for (int t : tlps) out += (out.empty() ? "" : "_") + std::to_string(t);
  return out;
}

Result<Workload> scaled(const Workload& w, double factor) {
  if (!(factor > 0 && factor <= 1)) return Status::invalid_argument("work scale must be in (0, 1], is " + std::to_string(factor));
  Workload out = w;
  auto scale = [factor](int n) { return std::max(1, static_cast<int>(static_cast<double>(n) * factor + 0.5)); };
  for (TenantSpec& t : out.tenants) {
    t.requests = scale(t.requests);
    for (KernelStep& s : t.steps) s.count = scale(s.count);
  }
  return out;
}

double rate_in(const RunRecord& run, TenantId tenant, lsbe::Window window) {
  if (!(window.length() > 0)) return 0;
  return lsbe::kernels_in_window(lsbe::launch_times(run, tenant), window) / window.length();
}

lsbe::Window co_run_window(const RunRecord& run) {
  lsbe::Window w{0, std::numeric_limits<double>::infinity()};
  for (size_t i = 0; i < run.tenants.size(); ++i) {
    const auto times = lsbe::launch_times(run, TenantId{static_cast<int64_t>(i)});
    Seconds first = std::numeric_limits<double>::infinity();
    for (const auto& [start, end] : times) {
      if (end >= start) first = std::min(first, start);
    }
    if (first == std::numeric_limits<double>::infinity()) return {0, 0};
    w.begin = std::max(w.begin, first);
    w.end = std::min(w.end, run.tenants[i].finish);
  }
  if (run.tenants.empty() || !(w.end > w.begin)) return {0, 0};
  return w;
}

std::optional<Settle> first_settle(const std::string& trace_file) {
  std::ifstream in(trace_file);
  std::string line;
  while (std::getline(in, line)) {
    const auto e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object() || e.value("event", "") != "settled" || !e.contains("t") || !e["t"].is_number()) continue;
    return Settle{e["t"].get<double>(), e.value("samples", int64_t{0}), e.value("tlp_changes", int64_t{0})};
  }
  return std::nullopt;
}

Result<SdMetrics> sd_metrics(const std::vector<double>& shared_rates, const std::vector<double>& alone_rates) {
  if (shared_rates.empty() || shared_rates.size() != alone_rates.size()) {
    return Status::invalid_argument("sd_metrics: " + std::to_string(shared_rates.size()) + " shared rates for " +
                                    std::to_string(alone_rates.size()) + " alone rates");
  }
  SdMetrics m;
  for (size_t i = 0; i < shared_rates.size(); ++i) {
    if (!(alone_rates[i] > 0)) return Status::invalid_argument("sd_metrics: tenant " + std::to_string(i) + " has no alone rate");
    m.sd.push_back(shared_rates[i] / alone_rates[i]);
  }
  m.ws = system_throughput(m.sd);
  m.fi = fairness_index(m.sd);
  m.hs = harmonic_speedup(m.sd);
  return m;
}

}  // namespace concord::pbs_bench
