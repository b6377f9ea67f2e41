// An experiment: one workload under one policy, plus the reference runs its metrics need
// (each tenant alone, and the whole workload under `serial`), on fresh backends of one kind.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "concord/engine.h"
#include "concord/spec_source.h"
#include "concord/metrics.h"
#include "concord/policy.h"
#include "concord/workload.h"
#include "concord/backend_factory.h"

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

// The headline of a run of `w`: open-loop when any tenant has an arrival process (Poisson or
// timestamps), else closed-loop.
Headline::Kind headline_kind(const Workload& w);

struct ExperimentConfig {
  BackendConfig backend;
  std::string policy;
  PolicyParams params;
  uint64_t seed = 1;
  bool compare_serial = true;        // run `serial` too, for speedup over serial
  EngineObserver* observer = nullptr;// sees the shared run only
  SpecSourceOptions source;          // how the spec reaches the engine (hints, submission); its seed is `seed`
  // Each run's (the shared run's and each reference run's) limit and stop flag (EngineOptions).
  Seconds time_limit = EngineOptions{}.time_limit;
  Seconds abort_grace = EngineOptions{}.abort_grace;
  const std::atomic<bool>* stop = nullptr;
};

struct ExperimentResult {
  RunRecord run;
  Metrics metrics;
  std::vector<Seconds> alone;        // per tenant
};

// An experiment as far as it went. The shared run goes first, then the reference runs (each
// tenant alone, then serial): a fault, the time limit or a stop in the shared run ends the
// experiment with what its tenants finished; one in a reference run leaves the shared run whole,
// without metrics.
struct [[nodiscard]] ExperimentOutcome {
  ExperimentResult result;  // `run` as far as it went; `metrics` and `alone` only when status is ok
  Status status;            // ok, or why the experiment ended early (the run's message, prefixed by `stage`)
  std::string stage;        // where it ended: "shared run", "alone run of tenant 'x'", "serial reference run"
  bool ran = false;         // the shared run was started: `result.run` holds a record worth writing out
};

// The memory an experiment's records take, in bytes, estimated before it runs: about 1.3 KB per
// launch for each run's records held at once (the shared run's, plus the serial reference run's
// while it runs; measured on the simulator, 2026-11-28: 1.25 KB per launch). `concord validate`
// reports it and `concord run` refuses up front a run that would not fit (docs/running.md).
inline constexpr int64_t kRecordBytesPerLaunch = 1300;
int64_t estimated_record_bytes(const Workload& workload, bool compare_serial);
// The shape a policy may refuse before a run (Policy::admits): tenants, and how many are LC.
WorkloadShape workload_shape(const Workload& workload);

ExperimentOutcome run_experiment_outcome(const Workload& workload, const ExperimentConfig& config, ReferenceCache& cache);
// The same, for callers that want a whole experiment or an error.
Result<ExperimentResult> run_experiment(const Workload& workload, const ExperimentConfig& config,
                                        ReferenceCache& cache);

}  // namespace concord
