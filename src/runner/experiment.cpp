#include "concord/experiment.h"
#include "concord/backend_factory.h"

#include <sstream>

namespace concord {

Headline::Kind headline_kind(const Workload& w) {
  for (const TenantSpec& t : w.tenants) {
    if (t.arrival.kind != ArrivalProcess::Kind::closed_loop) return Headline::Kind::open_loop;
  }
  return Headline::Kind::closed_loop;
}

std::optional<Seconds> ReferenceCache::find(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

namespace {

std::string key_prefix(const ExperimentConfig& c) {
  std::ostringstream o;
  o << c.backend.kind << "|" << c.backend.device.name << "|index=" << c.backend.device_index << "|seed=" << c.seed << "|";
  return o.str();
}

EngineOptions engine_options(const ExperimentConfig& c) {
  EngineOptions opts;
  opts.seed = c.seed;
  opts.time_limit = c.time_limit;
  opts.abort_grace = c.abort_grace;
  opts.stop = c.stop;
  return opts;
}

// Runs `workload` under `policy` on a fresh backend and returns the record.
Result<RunRecord> reference_run(const Workload& workload, const ExperimentConfig& config, const std::string& policy) {
  if (config.stop && config.stop->load()) return Status::cancelled("stopped before it started, as asked");
  auto backend = make_backend(config.backend);
  if (!backend) return backend.status();
  auto p = builtin_policies().make(policy, {});
  if (!p) return p.status();
  return run_workload(workload, **backend, **p, engine_options(config), config.source);
}

}  // namespace

int64_t estimated_record_bytes(const Workload& workload, bool compare_serial) {
  int64_t launches = 0;
  for (const TenantSpec& t : workload.tenants) launches += t.launches_per_request() * t.requests;
  return launches * kRecordBytesPerLaunch * (compare_serial ? 2 : 1);
}

WorkloadShape workload_shape(const Workload& workload) {
  WorkloadShape shape;
  shape.tenants = static_cast<int64_t>(workload.tenants.size());
  for (const TenantSpec& t : workload.tenants) shape.lc_tenants += t.cls == TenantClass::latency_critical;
  return shape;
}

ExperimentOutcome run_experiment_outcome(const Workload& workload, const ExperimentConfig& config, ReferenceCache& cache) {
  ExperimentOutcome out;
  auto end_early = [&](std::string stage, const Status& why) {
    out.status = Status(why.code(), stage + ": " + why.message());
    out.stage = std::move(stage);
    return std::move(out);
  };
  // The shared run first: when it ends early (a fault, the time limit, a stop), what its tenants
  // finished is the experiment's result, and a device a fault left unusable runs nothing more.
  {
    auto backend = make_backend(config.backend);
    if (!backend) return end_early("shared run", backend.status());
    auto policy = builtin_policies().make(config.policy, config.params);
    if (!policy) return end_early("shared run", policy.status());
    EngineOptions opts = engine_options(config);
    opts.observer = config.observer;
    out.ran = true;
    RunOutcome run = run_workload_outcome(workload, **backend, **policy, opts, config.source);
    out.result.run = std::move(run.record);
    if (!run.status) return end_early("shared run", run.status);
  }
  // Alone: each tenant by itself on the whole GPU (one tenant under `serial` runs each kernel
  // on every SM, as it would without Concord).
  const std::string prefix = key_prefix(config);
  std::vector<Seconds> alone;
  for (const TenantSpec& t : workload.tenants) {
    const std::string key = prefix + "alone|" + tenant_fingerprint(t);
    if (auto v = cache.find(key)) {
      alone.push_back(*v);
      continue;
    }
    Workload one;
    one.name = workload.name + "/" + t.name + "-alone";
    one.source = workload.source;
    one.tenants = {t};
    auto rec = reference_run(one, config, "serial");
    if (!rec) return end_early("alone run of tenant '" + t.name + "'", rec.status());
    const Seconds seconds = rec->tenants.front().elapsed();
    cache.put(key, seconds);
    alone.push_back(seconds);
  }
  std::optional<Seconds> serial;
  if (config.compare_serial) {
    std::string key = prefix + "serial";
    for (const TenantSpec& t : workload.tenants) key += "|" + t.name + "=" + tenant_fingerprint(t);
    serial = cache.find(key);
    if (!serial) {
      auto rec = reference_run(workload, config, "serial");
      if (!rec) return end_early("serial reference run", rec.status());
      serial = rec->makespan;
      cache.put(key, *serial);
    }
  }
  auto metrics = compute_metrics(out.result.run, alone, serial, headline_kind(workload));
  if (!metrics) return end_early("metrics", metrics.status());
  out.result.metrics = std::move(*metrics);
  out.result.alone = std::move(alone);
  return out;
}

Result<ExperimentResult> run_experiment(const Workload& workload, const ExperimentConfig& config, ReferenceCache& cache) {
  ExperimentOutcome outcome = run_experiment_outcome(workload, config, cache);
  if (!outcome.status) return outcome.status;
  return std::move(outcome.result);
}

}  // namespace concord
