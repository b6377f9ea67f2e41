// The pieces of an LC/BE bench run that bench/lsbe and bench/aker share: the schemes (policies,
// those missing from the build left out and named when asked), one run through BeWhileLc on a
// fresh backend, the references (the LC alone in a closed loop, each BE tenant alone) and a
// shared run's figures over the LC's window.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "be_while_lc.h"
#include "concord/backend.h"
#include "concord/engine.h"
#include "concord/policy.h"
#include "concord/backend_factory.h"
#include "lsbe_metrics.h"
#include "lsbe_mix.h"

namespace concord::lsbe {

struct Scheme {
  std::string spec;  // as given: "name" or "name:key=value;..."
  PolicySpec policy;
};
struct Schemes {
  std::vector<Scheme> run;
  std::vector<std::string> skipped;  // given, but no policy of that name in this build
};
// Parses --schemes: each must name a registered policy with valid parameters, or (skip_unknown)
// a missing one is left out, named on stderr by `bench` and in `skipped`. An error when none is left.
Result<Schemes> parse_schemes(const std::vector<std::string>& specs, bool skip_unknown, const std::string& bench);

// The backend of `kind` ("sim": the built-in `device`; "cuda": the GPU it probes).
Result<BackendConfig> backend_config(const std::string& kind, const std::string& device);

// One run through the bench's source (BE while the LC runs) on a fresh backend.
struct Ran {
  RunRecord record;
  Status status;
  bool be_stopped = false;
};
// `stop_be` as BeWhileLc takes it (bench/pbs ends every tenant when the first is done).
Ran run_one(const Workload& w, const BackendConfig& cfg, const PolicySpec& policy, uint64_t seed, Seconds time_limit,
            EngineObserver* observer = nullptr, BeWhileLc::StopBe stop_be = {});
inline const PolicySpec kSerial{"serial", {}};

// The engine's costs of a run (makespan, seconds in policy, backend and engine, calls).
nlohmann::json engine_json(const RunRecord& r);

// The LC alone in a closed loop of `requests`: its capacity and service time without queueing.
// Run `repeats` times; the repetition with the median capacity is returned, with every
// repetition's figures in json["repetitions"] (one alone run on an H100 was once 2.7x slower than
// its repeats, docs/results.md).
struct LcAlone {
  double capacity_rps = 0;
  LcFigures figures;
  nlohmann::json json;
};
Result<LcAlone> lc_alone_closed(const Mix& mix, int requests, const BackendConfig& cfg, uint64_t seed, Seconds time_limit,
                                int repeats = 3);

// Each BE tenant alone in a closed loop of `requests`: kernels per second (the throughput
// reference) and request ceilings for shared runs within `time_limit` (be_request_ceiling); each
// tenant run `repeats` times, its median-rate repetition taken (all rates in
// "repetitions_kernels_per_s").
struct BeAlone {
  std::vector<double> kernels_per_s;
  std::vector<int> ceilings;
  nlohmann::json json;  // an array, one object per BE tenant
};
Result<BeAlone> be_alone_all(const Mix& mix, int requests, const BackendConfig& cfg, uint64_t seed, Seconds time_limit,
                             int repeats = 3);

// The LC at `rate` alone (Poisson, the same arrivals as the shared runs): its requests' record.
Result<RunRecord> lc_alone_at(const Mix& mix, int requests, double rate, const BackendConfig& cfg, uint64_t seed,
                              Seconds time_limit);

// A shared run's figures (tenant 0 the LC, then the BE tenants of `mix`) against `ref` with the
// LC's `target`: shared_figures, the BE tenants' mean SM share, whether BE stopped with the LC,
// and the engine's costs. Warns on stderr when a BE tenant ran out of requests.
nlohmann::json shared_run_figures(const Mix& mix, const Ran& ran, Seconds target, const Reference& ref,
                                  const ResizeLog& resizes, int sm_count);

}  // namespace concord::lsbe
