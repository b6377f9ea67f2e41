// An experiment: one workload under one policy, plus the reference runs its metrics need
// (each tenant alone, and the whole workload under `serial`), on fresh backends of one kind.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "concord/spec_source.h"
#include "concord/metrics.h"
#include "concord/policy.h"
#include "concord/workload.h"

namespace concord {

// Alone-times and serial makespans, keyed by backend kind, device, seed and tenant fingerprint,
// so a bench that runs many policies over one workload measures each reference once.
class ReferenceCache {
 public:
  std::optional<Seconds> find(const std::string& key) const;
  void put(const std::string& key, Seconds value) { values_[key] = value; }
  size_t size() const { return values_.size(); }

 private:
  std::map<std::string, Seconds> values_;
};

struct ExperimentConfig {
  BackendConfig backend;
  std::string policy;
  PolicyParams params;
  uint64_t seed = 1;
  Seconds time_limit = 3600;         // each run (alone, serial, shared) stops past this on its clock
  bool compare_serial = true;        // run `serial` too, for speedup over serial
  EngineObserver* observer = nullptr;// sees the shared run only
  SpecSourceOptions source;          // how the spec reaches the engine (hints, submission); its seed is `seed`
};

struct ExperimentResult {
  RunRecord run;
  Metrics metrics;
  std::vector<Seconds> alone;        // per tenant
};

Result<ExperimentResult> run_experiment(const Workload& workload, const ExperimentConfig& config,
                                        ReferenceCache& cache);

}  // namespace concord
