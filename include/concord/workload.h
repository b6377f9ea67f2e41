// Workload: tenants, their kernels, arrival processes and targets, read from a YAML spec.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "concord/device.h"
#include "concord/ids.h"
#include "concord/kernel.h"
#include "concord/raise.h"
#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord {

struct ArrivalProcess {
  enum class Kind : uint8_t { closed_loop, poisson, timestamps };
  Kind kind = Kind::closed_loop;
  double rate_per_s = 0;            // poisson
  std::vector<Seconds> timestamps;  // timestamps (seconds from the run's start, non-decreasing)
};
const char* to_string(ArrivalProcess::Kind k);

// One step of a tenant's request: a kernel (by suite name and size) run `count` times.
struct KernelStep {
  KernelSpec kernel;
  int count = 1;
};

struct TenantSpec {
  std::string name;
  TenantClass cls = TenantClass::best_effort;
  std::vector<KernelStep> steps;     // one request = all steps in order
  int requests = 1;                  // repetitions of the request
  ArrivalProcess arrival;
  Seconds latency_target = 0;        // LC only: per-request target, seconds
  // RAISE's task type as the user states it (`raise_type: COM|MEM|LAT`; raise.md VI-A classifies
  // its tasks by hand, Table IV). Absent: read from the measured vector (raise_class).
  std::optional<RaiseClass> raise_type;
  int64_t launches_per_request() const;
};

struct Workload {
  std::string name;
  std::string source;                // file it came from, for messages
  std::vector<TenantSpec> tenants;
};

// Parses a workload spec. Errors name the file, line, field and reason.
Result<Workload> load_workload_file(const std::string& path);
Result<Workload> parse_workload(const std::string& yaml_text, const std::string& source_name);

// Stable text of a tenant (kernels, sizes, requests, arrivals): the key for cached alone-times.
std::string tenant_fingerprint(const TenantSpec& t);

}  // namespace concord
