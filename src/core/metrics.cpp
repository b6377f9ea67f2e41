#include "concord/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace concord {

double normalized_progress(Seconds alone, Seconds shared) { return shared > 0 ? alone / shared : 0.0; }

double system_throughput(std::span<const double> np) {
  double s = 0;
  for (double x : np) s += x;
  return s;
}

double average_normalized_turnaround(std::span<const double> np) {
  if (np.empty()) return 0;
  double s = 0;
  for (double x : np) s += 1.0 / x;
  return s / static_cast<double>(np.size());
}

double fairness_index(std::span<const double> np) {
  if (np.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(np.begin(), np.end());
  return *hi > 0 ? *lo / *hi : 0.0;
}

double harmonic_speedup(std::span<const double> np) {
  if (np.empty()) return 0;
  double s = 0;
  for (double x : np) s += 1.0 / x;
  return static_cast<double>(np.size()) / s;
}

double percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p% of the values at or below it.
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t idx = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(v.size()))) - 1;
  return v[idx];
}

const char* to_string(Headline::Kind k) { return k == Headline::Kind::open_loop ? "open-loop" : "closed-loop"; }

std::string headline_text(const Headline& h) {
  if (h.name == "throughput_over_serial") {
    return fmt::format("Headline (closed loop): throughput {:.3f}x serial (the same work's makespan under serial over this run's; serial = 1)",
                       h.value);
  }
  if (h.name == "stp_window") {
    return fmt::format("Headline (closed loop): STP {:.3f} over the co-run window (no serial reference run: --no-serial)", h.value);
  }
  if (h.name == "lc_slo_attainment") {
    return fmt::format("Headline (open loop): LC SLO attainment {:.1f}% (goodput {:.3f} requests/s), BE progress {:.3f} (sum of BE NP)",
                       h.value * 100, h.lc_goodput_per_s, h.be_np_sum);
  }
  return fmt::format("Headline (open loop, no LC tenant): BE progress {:.3f} (sum of BE NP)", h.value);
}

Result<Metrics> compute_metrics(const RunRecord& run, std::span<const Seconds> alone, std::optional<Seconds> serial_makespan,
                                Headline::Kind kind) {
  if (alone.size() != run.tenants.size()) {
    return Status::invalid_argument("metrics: " + std::to_string(alone.size()) + " alone-times for " +
                                    std::to_string(run.tenants.size()) + " tenants");
  }
  Metrics m;
  std::vector<double> np;
  int64_t lc_requests = 0, lc_within = 0;
  bool any_lc = false;
  m.makespan = run.makespan;
  for (size_t i = 0; i < run.tenants.size(); ++i) {
    const TenantRecord& t = run.tenants[i];
    TenantMetrics tm;
    tm.name = t.name;
    tm.cls = t.cls;
    tm.alone = alone[i];
    tm.shared = t.elapsed();
    if (tm.alone <= 0 || tm.shared <= 0) {
      return Status::invalid_argument("metrics: tenant '" + t.name + "' has a non-positive alone or shared time");
    }
    tm.np = normalized_progress(tm.alone, tm.shared);
    tm.requests = static_cast<int64_t>(t.requests.size());
    tm.latency_target = t.latency_target;
    std::vector<double> lat;
    int64_t within = 0;
    for (const auto& r : t.requests) {
      lat.push_back(r.latency());
      if (t.latency_target > 0 && r.latency() <= t.latency_target) ++within;
    }
    tm.latency_p50 = percentile(lat, 50);
    tm.latency_p99 = percentile(lat, 99);
    tm.slo_attainment = t.latency_target > 0 && !lat.empty() ? static_cast<double>(within) / static_cast<double>(lat.size()) : 0;
    tm.requests_per_s = static_cast<double>(tm.requests) / tm.shared;
    tm.blocks_per_s = static_cast<double>(t.logical_blocks) / tm.shared;
    if (t.cls == TenantClass::latency_critical) {
      any_lc = true;
      lc_requests += static_cast<int64_t>(lat.size());
      lc_within += t.latency_target > 0 ? within : 0;
    } else {
      m.headline.be_np_sum += tm.np;
    }
    if (run.makespan > 0) {
      if (t.cls == TenantClass::latency_critical) m.lc_goodput += static_cast<double>(within) / run.makespan;
      else m.be_throughput += static_cast<double>(tm.requests) / run.makespan;
    }
    np.push_back(tm.np);
    m.tenants.push_back(std::move(tm));
  }
  m.np_sum = system_throughput(np);
  // The co-run window: until the first tenant finishes. Each tenant's work done by then, in
  // requests (the one in flight counted by the share of its running time elapsed), at its alone
  // time per request.
  if (!run.tenants.empty()) {
    Seconds w = run.tenants[0].finish;
    for (const TenantRecord& t : run.tenants) w = std::min(w, t.finish);
    m.window = w;
    for (size_t i = 0; i < run.tenants.size(); ++i) {
      const TenantRecord& t = run.tenants[i];
      if (t.requests.empty() || w <= t.begin) continue;
      double done = 0;
      for (const auto& r : t.requests) {
        if (r.end <= w) done += 1;
        else if (r.start < w && r.end > r.start) done += (w - r.start) / (r.end - r.start);
      }
      const double per_request = alone[i] / static_cast<double>(t.requests.size());
      m.tenants[i].np_window = done * per_request / (w - t.begin);
      m.stp_window += m.tenants[i].np_window;
    }
  }
  m.antt = average_normalized_turnaround(np);
  m.fi = fairness_index(np);
  m.hs = harmonic_speedup(np);
  m.overall_throughput = m.lc_goodput + m.be_throughput;
  if (serial_makespan && run.makespan > 0) {
    m.serial_makespan = serial_makespan;
    m.speedup_over_serial = *serial_makespan / run.makespan;
  }
  Headline& h = m.headline;
  h.kind = kind;
  h.lc_goodput_per_s = m.lc_goodput;
  if (kind == Headline::Kind::closed_loop) {
    h.name = m.speedup_over_serial ? "throughput_over_serial" : "stp_window";
    h.value = m.speedup_over_serial ? *m.speedup_over_serial : m.stp_window;
  } else if (any_lc) {
    h.name = "lc_slo_attainment";
    h.value = lc_requests > 0 ? static_cast<double>(lc_within) / static_cast<double>(lc_requests) : 0;
  } else {
    h.name = "be_np_sum";
    h.value = h.be_np_sum;
  }
  return m;
}

}  // namespace concord
