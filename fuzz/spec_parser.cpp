// Fuzz target: the workload spec checker (the parser behind `concord validate` and `concord run`).
// Any input must give either a workload or diagnostics that each say where and why; nothing may
// throw, crash, hang or grow without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "concord/device.h"
#include "concord/suite.h"
#include "concord/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const concord::DeviceSpec device = concord::h200_spec();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const concord::WorkloadCheck check = concord::check_workload(text, "fuzz.yaml", &device);
  for (const auto& d : check.diagnostics) {
    if (d.reason.empty() || d.file.empty()) std::abort();
  }
  if (check.ok()) {
    // A spec that checks out is one a run can take: counts within the limits, numbers finite.
    if (!check.status().is_ok() || check.workload.tenants.empty()) std::abort();
    int64_t launches = 0;
    for (const auto& t : check.workload.tenants) {
      if (t.requests < 1 || t.requests > concord::spec_limits::kRequests || t.steps.empty()) std::abort();
      if (t.launches_per_request() < 1 || t.launches_per_request() > concord::spec_limits::kLaunchesPerRequest) std::abort();
      launches += t.launches_per_request() * t.requests;
      for (const auto& s : t.steps) {
        if (s.kernel.variants.empty() || s.kernel.default_variant < 0 || s.kernel.default_variant >= s.kernel.variant_count()) std::abort();
        for (const auto& v : s.kernel.variants) {
          if (v.logical_blocks < 1 || v.logical_blocks > concord::kMaxLogicalBlocks) std::abort();
        }
      }
      if (t.arrival.kind == concord::ArrivalProcess::Kind::timestamps &&
          t.arrival.timestamps.size() != static_cast<size_t>(t.requests)) {
        std::abort();
      }
    }
    if (launches > concord::spec_limits::kLaunches) std::abort();
  } else if (check.status().is_ok() || check.status().message().empty()) {
    std::abort();
  }
  // The one-error API agrees with the checker (without a device it may accept more).
  auto parsed = concord::parse_workload(text, "fuzz.yaml");
  if (check.ok() && !parsed.is_ok()) std::abort();
  return 0;
}
