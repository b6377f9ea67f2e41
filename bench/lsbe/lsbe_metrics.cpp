#include "lsbe_metrics.h"

#include <algorithm>

#include "concord/metrics.h"

namespace concord::lsbe {

Window request_window(std::span<const RequestRecord> requests) {
  if (requests.empty()) return {};
  Window w{requests.front().arrival, requests.front().end};
  for (const RequestRecord& r : requests) {
    w.begin = std::min(w.begin, r.arrival);
    w.end = std::max(w.end, r.end);
  }
  return w;
}

double kernels_in_window(std::span<const std::pair<Seconds, Seconds>> kernels, Window window) {
  double done = 0;
  for (const auto& [start, end] : kernels) {
    if (end < start) continue;
    if (end == start) {
      done += start >= window.begin && start <= window.end ? 1 : 0;
      continue;
    }
    const Seconds inside = std::min(end, window.end) - std::max(start, window.begin);
    if (inside > 0) done += inside / (end - start);
  }
  return done;
}

std::vector<std::pair<Seconds, Seconds>> launch_times(const RunRecord& run, TenantId tenant) {
  std::vector<std::pair<Seconds, Seconds>> out;
  for (const LaunchRecord& l : run.launches) {
    if (l.tenant == tenant) out.emplace_back(l.start, l.end);
  }
  return out;
}

double mean_sm_share(const RunRecord& run, const ResizeLog& resizes, std::span<const TenantId> tenants, Window window,
                     int sm_count) {
  if (window.length() <= 0 || sm_count <= 0) return 0;
  // Each dispatch of the tenants as segments of constant SM set, clipped to the window.
  struct Segment {
    Seconds begin, end;
    SmSet sms;
  };
  std::vector<Segment> segments;
  for (const DispatchRecord& d : run.dispatches) {
    const bool ours = std::any_of(d.tenants.begin(), d.tenants.end(), [&](TenantId t) {
      return std::find(tenants.begin(), tenants.end(), t) != tenants.end();
    });
    if (!ours || d.start < 0) continue;
    const Seconds end = d.end >= d.start ? d.end : run.makespan;  // one the run's end left running
    Seconds at = d.start;
    SmSet sms = d.placement.sms;
    if (const auto* changes = resizes.of(d.id)) {
      for (const auto& [when, next] : *changes) {
        if (when > at) {
          segments.push_back({at, std::min(when, end), sms});
          at = std::min(when, end);
        }
        sms = next;
      }
    }
    if (end > at) segments.push_back({at, end, sms});
  }
  std::vector<Seconds> edges{window.begin, window.end};
  for (const Segment& s : segments) {
    if (s.begin > window.begin && s.begin < window.end) edges.push_back(s.begin);
    if (s.end > window.begin && s.end < window.end) edges.push_back(s.end);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  // Each interval between consecutive edges holds one union; segments sorted by start let the
  // sweep skip those that have not begun.
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  double sm_seconds = 0;
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    const Seconds mid = (edges[i] + edges[i + 1]) / 2;
    SmSet held;
    for (const Segment& s : segments) {
      if (s.begin > mid) break;
      if (s.end > mid) held = held | s.sms;
    }
    sm_seconds += held.count() * (edges[i + 1] - edges[i]);
  }
  return sm_seconds / (window.length() * sm_count);
}

LcFigures lc_figures(std::span<const RequestRecord> requests, Seconds target, Window window) {
  LcFigures f;
  for (const RequestRecord& r : requests) {
    if (r.end < r.arrival) continue;  // unfinished
    f.latencies.push_back(r.latency());
    if (r.latency() <= target) ++f.within_target;
  }
  f.requests = static_cast<int64_t>(f.latencies.size());
  f.slo_attainment = f.requests > 0 ? static_cast<double>(f.within_target) / static_cast<double>(f.requests) : 0;
  f.p50 = percentile(f.latencies, 50);
  f.p99 = percentile(f.latencies, 99);
  f.goodput_rps = window.length() > 0 ? static_cast<double>(f.within_target) / window.length() : 0;
  return f;
}

nlohmann::json to_json(const LcFigures& f) {
  return {{"requests", f.requests},   {"within_target", f.within_target}, {"slo_attainment", f.slo_attainment},
          {"p50_s", f.p50},           {"p99_s", f.p99},                   {"goodput_rps", f.goodput_rps},
          {"latencies_s", f.latencies}};
}

nlohmann::json shared_figures(const LcFigures& lc, Window window, const std::vector<BeWork>& be, const Reference& ref) {
  nlohmann::json lc_json = to_json(lc);
  lc_json["p99_over_alone"] = ref.lc_alone_p99 > 0 ? lc.p99 / ref.lc_alone_p99 : 0;
  const double goodput_norm = ref.lc_capacity_rps > 0 ? lc.goodput_rps / ref.lc_capacity_rps : 0;
  lc_json["goodput_norm"] = goodput_norm;
  nlohmann::json be_json = nlohmann::json::array();
  double be_norm = 0;
  for (size_t i = 0; i < be.size(); ++i) {
    const double per_s = window.length() > 0 ? be[i].kernels_in_window / window.length() : 0;
    const double alone = i < ref.be_kernels_per_s.size() ? ref.be_kernels_per_s[i] : 0;
    const double norm = alone > 0 ? per_s / alone : 0;
    be_norm += norm;
    be_json.push_back({{"tenant", be[i].tenant}, {"kernels_in_window", be[i].kernels_in_window}, {"kernels_per_s", per_s},
                       {"norm", norm}, {"ran_out", be[i].ran_out}});
  }
  return {{"window_s", {window.begin, window.end}}, {"window_length_s", window.length()}, {"lc", lc_json}, {"be", be_json},
          {"be_norm", be_norm}, {"overall_norm", goodput_norm + be_norm}};
}

Result<nlohmann::json> median_by(std::span<const nlohmann::json> runs, const std::string& key) {
  if (runs.empty()) return Status::invalid_argument("median_by: no runs");
  std::vector<std::pair<double, size_t>> values;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto it = runs[i].find(key);
    if (it == runs[i].end() || !it->is_number()) {
      return Status::invalid_argument("repetition " + std::to_string(i) + ": no number '" + key + "'");
    }
    values.emplace_back(it->get<double>(), i);
  }
  std::sort(values.begin(), values.end());
  return runs[values[(values.size() - 1) / 2].second];
}

}  // namespace concord::lsbe
