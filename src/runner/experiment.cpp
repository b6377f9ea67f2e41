#include "concord/experiment.h"

#include <sstream>

namespace concord {

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

// Runs `workload` under `policy` on a fresh backend and returns the record.
Result<RunRecord> reference_run(const Workload& workload, const ExperimentConfig& config, const std::string& policy) {
  auto backend = make_backend(config.backend);
  if (!backend) return backend.status();
  auto p = builtin_policies().make(policy, {});
  if (!p) return p.status();
  EngineOptions opts;
  opts.seed = config.seed;
  opts.time_limit = config.time_limit;
  return run_workload(workload, **backend, **p, opts, config.source);
}

}  // namespace

Result<ExperimentResult> run_experiment(const Workload& workload, const ExperimentConfig& config, ReferenceCache& cache) {
  ExperimentResult out;
  const std::string prefix = key_prefix(config);
  // Alone: each tenant by itself on the whole GPU (one tenant under `serial` runs each kernel
  // on every SM, as it would without Concord).
  for (const TenantSpec& t : workload.tenants) {
    const std::string key = prefix + "alone|" + tenant_fingerprint(t);
    if (auto v = cache.find(key)) {
      out.alone.push_back(*v);
      continue;
    }
    Workload one;
    one.name = workload.name + "/" + t.name + "-alone";
    one.source = workload.source;
    one.tenants = {t};
    auto rec = reference_run(one, config, "serial");
    if (!rec) return Status(rec.status().code(), "alone run of tenant '" + t.name + "': " + rec.status().message());
    const Seconds alone = rec->tenants.front().elapsed();
    cache.put(key, alone);
    out.alone.push_back(alone);
  }
  std::optional<Seconds> serial;
  if (config.compare_serial) {
    std::string key = prefix + "serial";
    for (const TenantSpec& t : workload.tenants) key += "|" + t.name + "=" + tenant_fingerprint(t);
    serial = cache.find(key);
    if (!serial) {
      auto rec = reference_run(workload, config, "serial");
      if (!rec) return Status(rec.status().code(), "serial reference run: " + rec.status().message());
      serial = rec->makespan;
      cache.put(key, *serial);
    }
  }
  auto backend = make_backend(config.backend);
  if (!backend) return backend.status();
  auto policy = builtin_policies().make(config.policy, config.params);
  if (!policy) return policy.status();
  EngineOptions opts;
  opts.seed = config.seed;
  opts.time_limit = config.time_limit;
  opts.observer = config.observer;
  auto run = run_workload(workload, **backend, **policy, opts, config.source);
  if (!run) return run.status();
  out.run = std::move(*run);
  auto metrics = compute_metrics(out.run, out.alone, serial);
  if (!metrics) return metrics.status();
  out.metrics = std::move(*metrics);
  return out;
}

}  // namespace concord
