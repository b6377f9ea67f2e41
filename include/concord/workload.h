// Workload: tenants, their kernels, arrival processes and targets, read from a YAML spec.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "concord/device.h"
#include "concord/ids.h"
#include "concord/kernel.h"
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
  // Facts the tenant states for policies that know them, passed on as TenantInfo::labels. The spec
  // writes RAISE's task type as `raise_type: COM|MEM|LAT` (RAISE paper, Section VI-A classifies its tasks by
  // hand, Table IV); it becomes the label "raise_type". Absent: the policy reads the type from the
  // measured vector.
  std::map<std::string, std::string> labels;
  int64_t launches_per_request() const;
};

struct Workload {
  std::string name;
  std::string source;                // file it came from, for messages
  std::vector<TenantSpec> tenants;
};

// Limits on what a spec may ask for; docs/running.md ("Limits of a workload spec") states them.
// Counts are per tenant unless said otherwise. Each keeps the arithmetic on sizes and counts far
// inside 64 bits and the engine's per-request records inside memory.
namespace spec_limits {
inline constexpr int64_t kSpecBytes = int64_t{1} << 20;           // the spec file
inline constexpr int64_t kTimestampFileBytes = int64_t{64} << 20;  // one timestamps file
inline constexpr int64_t kTenants = 256;                           // per workload
inline constexpr int64_t kStepsPerTenant = 1024;                   // entries of `kernels`
inline constexpr int64_t kRequests = 1'000'000;                    // also timestamps per tenant
inline constexpr int64_t kCount = 1'000'000;                       // one step's `count`
inline constexpr int64_t kLaunchesPerRequest = 1'000'000;          // sum of the steps' counts
inline constexpr int64_t kLaunches = 100'000'000;                  // requests x launches, all tenants
inline constexpr int64_t kSize = int64_t{1} << 40;                 // a kernel's `size`
inline constexpr double kTargetMs = 3.6e6;                         // `target_ms`: one hour
inline constexpr double kPoissonRate = 1e7;                        // requests per second
inline constexpr double kTimestampSeconds = 1e6;                   // latest arrival time
inline constexpr size_t kNameBytes = 256;                          // workload and tenant names
inline constexpr int kNestingDepth = 64;                           // YAML levels (blocks and brackets)
}  // namespace spec_limits

// One problem found in a spec: where it is (file, 1-based line or 0 for the file as a whole, the
// field's path such as "tenants[0].kernels[1].size") and why it is a problem. A warning names
// something that runs but that some policies cannot use (a variant they might choose that does
// not fit on an SM).
struct SpecDiagnostic {
  enum class Severity : uint8_t { error, warning };
  Severity severity = Severity::error;
  StatusCode code = StatusCode::parse_error;  // not_found / io_error when a file cannot be read
  std::string file;
  int line = 0;
  std::string field;
  std::string reason;
  // "file:line: field 'f': reason" ("warning: " before the field for a warning).
  std::string to_string() const;
};

// Everything a check of a spec found: the workload as far as it parsed (complete when ok()) and
// every problem, errors and warnings, in file order.
struct WorkloadCheck {
  Workload workload;
  std::vector<SpecDiagnostic> diagnostics;
  bool ok() const;          // no errors (warnings allowed)
  size_t error_count() const;
  // ok, or the first error's code with every error in the message, one per line.
  Status status() const;
};

// The one validation path of `concord validate` and `concord run`: parses the spec and checks
// everything a run would fail on, reporting every problem rather than the first. With a device,
// also checks that each step's block fits on one of its SMs (registers, shared memory, threads):
// an error for the variant the step runs, a warning for the step's other variants.
WorkloadCheck check_workload_file(const std::string& path, const DeviceSpec* device = nullptr);
WorkloadCheck check_workload(const std::string& yaml_text, const std::string& source_name,
                             const DeviceSpec* device = nullptr);

// Parses a workload spec (check_workload without a device). An error when the spec has any;
// the message names every one (file, line, field, reason), one per line.
Result<Workload> load_workload_file(const std::string& path);
Result<Workload> parse_workload(const std::string& yaml_text, const std::string& source_name);

// Stable text of a tenant (kernels, sizes, requests, arrivals): the key for cached alone-times.
std::string tenant_fingerprint(const TenantSpec& t);

}  // namespace concord
