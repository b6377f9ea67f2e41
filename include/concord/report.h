// Results as files and tables: JSON with every raw figure (docs/schema/results-v2.json) and a
// terminal summary.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <string_view>

#include "concord/device.h"
#include "concord/experiment.h"

namespace concord {

// The version of the results JSON's layout (its "schema_version"; docs/schema/results-v<N>.json).
inline constexpr int kResultsSchemaVersion = 2;

struct RunContext {
  std::string workload_file;
  std::map<std::string, std::string> params;  // the policy's parameters
  std::string version;                        // the build's version
  std::string commit;                         // the build's git commit, "unknown" when not known
  DeviceSpec device;                          // the device the run used, as its backend states it
};

// Where a results file's figures come from, as a JSON object's text: {"build": {"version",
// "commit"}, "device_info": {"name", "simulated", "sm_count", "gpcs", "l2_bytes", "clock_hz",
// "memory_clock_hz", "driver_version", "cuda_version", "cuda_driver_version"}} (null where the
// backend does not know a figure). The CLI's results and every bench's carry both objects.
std::string provenance_json(const DeviceSpec& device, const std::string& backend, const std::string& version,
                            const std::string& commit);

// The whole experiment as JSON text: build and device identity, status (complete or where and why
// it ended early), metrics, per-tenant and
// per-request figures, per-launch and per-dispatch start/end, engine statistics.
std::string experiment_json(const ExperimentResult& result, const RunContext& context);
// The same for an experiment that may have ended early: then `status` says where and why,
// `metrics` and the tenants' metric fields are null, and every time not reached is null.
std::string experiment_json(const ExperimentOutcome& outcome, const RunContext& context);
// The same text, given to `sink` piece by piece (the launches and dispatches one element at a
// time), for a file written as it is made: no copy of the whole text or a JSON tree of it is held.
using JsonSink = std::function<void(std::string_view)>;
void write_experiment_json(const ExperimentOutcome& outcome, const RunContext& context, const JsonSink& sink);
// A fixed-width summary: tenants (NP, latency), then the headline STP over the co-run window
// (serial execution scores 1), ANTT, FI, HS, makespan, speedup over serial, and the sum of NP
// over each tenant's whole run, named as such.
void print_summary(std::ostream& out, const ExperimentResult& result);
// print_summary for a complete experiment; for one that ended early, where it ended and each
// tenant's finished requests and logical blocks (the reason is the caller's error message).
void print_outcome(std::ostream& out, const ExperimentOutcome& outcome);

}  // namespace concord
