#include "lsbe_runner.h"

#include <iostream>
#include <limits>

#include "concord/device.h"
#include "concord/backend_factory.h"

namespace concord::lsbe {

Result<Schemes> parse_schemes(const std::vector<std::string>& specs, bool skip_unknown, const std::string& bench) {
  if (specs.empty()) return Status::invalid_argument("--schemes: no scheme given");
  Schemes out;
  for (const std::string& s : specs) {
    auto spec = parse_policy_spec(s);
    if (!spec) return Status::invalid_argument("--schemes: " + spec.status().message());
    if (skip_unknown && !builtin_policies().contains(spec->name)) {
      std::cerr << bench << ": no policy '" << spec->name << "' in this build: scheme '" << s << "' left out\n";
      out.skipped.push_back(s);
      continue;
    }
    auto made = builtin_policies().make(spec->name, spec->params);
    if (!made) return Status(made.status().code(), "--schemes: '" + s + "': " + made.status().message());
    out.run.push_back({s, *spec});
  }
  if (out.run.empty()) return Status::invalid_argument("--schemes: none of them is registered in this build");
  return out;
}

Result<BackendConfig> backend_config(const std::string& kind, const std::string& device) {
  BackendConfig cfg;
  cfg.kind = kind;
  if (kind == "sim") {
    auto d = builtin_device(device);
    if (!d) return d.status();
    cfg.device = *d;
  }
  return cfg;
}

Ran run_one(const Workload& w, const BackendConfig& cfg, const PolicySpec& policy, uint64_t seed, Seconds time_limit,
            EngineObserver* observer, BeWhileLc::StopBe stop_be) {
  Ran out;
  auto backend = make_backend(cfg);
  if (!backend) {
    out.status = backend.status();
    return out;
  }
  auto p = builtin_policies().make(policy.name, policy.params);
  if (!p) {
    out.status = p.status();
    return out;
  }
  SpecSourceOptions source;
  source.seed = seed;
  BeWhileLc src(w, source, std::move(stop_be));
  EngineOptions o;
  o.seed = seed;
  o.time_limit = time_limit;
  o.observer = observer;
  RunOutcome r = run_engine_outcome(src, **backend, **p, o);
  out.record = std::move(r.record);
  out.status = r.status;
  out.be_stopped = src.be_stopped();
  return out;
}

nlohmann::json engine_json(const RunRecord& r) {
  return {{"makespan_s", r.makespan},
          {"policy_s", r.stats.policy_seconds},
          {"backend_s", r.stats.backend_seconds},
          {"engine_s", r.stats.engine_seconds},
          {"policy_calls", r.stats.policy_calls},
          {"dispatches", r.stats.dispatches},
          {"policy_stats", r.stats.policy}};  // the policy's own counters (concord: which rule each BE launch took)
}

Result<LcAlone> lc_alone_closed(const Mix& mix, int requests, const BackendConfig& cfg, uint64_t seed, Seconds time_limit,
                                int repeats) {
  if (repeats < 1) return Status::invalid_argument("LC alone: repeats must be >= 1");
  std::vector<nlohmann::json> reps;
  std::vector<LcFigures> figures;
  for (int k = 0; k < repeats; ++k) {
    Ran r = run_one(lc_closed(mix, requests), cfg, kSerial, seed, time_limit);
    if (!r.status) return r.status;
    const TenantRecord& t = r.record.tenants.front();
    figures.push_back(lc_figures(t.requests, std::numeric_limits<double>::infinity(), request_window(t.requests)));
    nlohmann::json j = to_json(figures.back());
    j["repetition"] = k;
    j["elapsed_s"] = t.elapsed();
    j["capacity_rps"] = static_cast<double>(t.requests.size()) / t.elapsed();
    j["engine"] = engine_json(r.record);
    reps.push_back(std::move(j));
  }
  auto median = median_by(reps, "capacity_rps");
  if (!median) return median.status();
  LcAlone out;
  out.capacity_rps = (*median)["capacity_rps"].get<double>();
  out.figures = figures.at((*median)["repetition"].get<size_t>());
  out.json = *median;
  out.json["repetitions"] = reps;
  return out;
}

Result<BeAlone> be_alone_all(const Mix& mix, int requests, const BackendConfig& cfg, uint64_t seed, Seconds time_limit,
                             int repeats) {
  if (repeats < 1) return Status::invalid_argument("BE alone: repeats must be >= 1");
  BeAlone out;
  out.json = nlohmann::json::array();
  for (size_t i = 0; i < mix.be_count(); ++i) {
    std::vector<nlohmann::json> reps;
    std::vector<double> rates;
    for (int k = 0; k < repeats; ++k) {
      Ran r = run_one(be_alone(mix, i, requests), cfg, kSerial, seed, time_limit);
      if (!r.status) return Status(r.status.code(), "BE '" + mix.be(i).name + "' alone: " + r.status.message());
      const TenantRecord& t = r.record.tenants.front();
      const double kernels = static_cast<double>(r.record.launches.size());
      rates.push_back(kernels / t.elapsed());
      reps.push_back({{"tenant", t.name}, {"requests", t.requests.size()}, {"kernels", kernels}, {"elapsed_s", t.elapsed()},
                      {"kernels_per_s", rates.back()}, {"requests_per_s", static_cast<double>(t.requests.size()) / t.elapsed()},
                      {"engine", engine_json(r.record)}});
    }
    auto median = median_by(reps, "kernels_per_s");
    if (!median) return median.status();
    nlohmann::json chosen = *median;
    chosen["repetitions_kernels_per_s"] = rates;
    out.kernels_per_s.push_back(chosen["kernels_per_s"].get<double>());
    out.ceilings.push_back(be_request_ceiling(chosen["requests_per_s"].get<double>(), time_limit));
    out.json.push_back(chosen);
    std::cerr << mix.workload.name << ": BE " << mix.be(i).name << " alone " << out.kernels_per_s.back() << " kernels/s (median of "
              << repeats << ")\n";
  }
  return out;
}

Result<RunRecord> lc_alone_at(const Mix& mix, int requests, double rate, const BackendConfig& cfg, uint64_t seed,
                              Seconds time_limit) {
  Ran r = run_one(lc_poisson(mix, requests, rate, 1.0), cfg, kSerial, seed, time_limit);
  if (!r.status) return r.status;
  return std::move(r.record);
}

nlohmann::json shared_run_figures(const Mix& mix, const Ran& ran, Seconds target, const Reference& ref,
                                  const ResizeLog& resizes, int sm_count) {
  const TenantRecord& lc = ran.record.tenants.front();
  const Window win = request_window(lc.requests);
  std::vector<BeWork> be;
  std::vector<TenantId> be_ids;
  for (size_t i = 0; i < mix.be_count(); ++i) {
    const TenantId id{static_cast<int64_t>(i + 1)};
    const TenantRecord& t = ran.record.tenants.at(i + 1);
    be_ids.push_back(id);
    be.push_back({t.name, kernels_in_window(launch_times(ran.record, id), win), t.finish < win.end});
    if (be.back().ran_out) std::cerr << "warning: BE '" << t.name << "' ran out of requests before the LC ended\n";
  }
  nlohmann::json run = shared_figures(lc_figures(lc.requests, target, win), win, be, ref);
  run["be_sm_share_mean"] = mean_sm_share(ran.record, resizes, be_ids, win, sm_count);
  run["be_stopped_with_lc"] = ran.be_stopped;
  run["engine"] = engine_json(ran.record);
  return run;
}

}  // namespace concord::lsbe
