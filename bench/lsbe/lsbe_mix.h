// A mix of the LC/BE bench: one LC tenant (an inference-like request chain) and one or more BE
// tenants (closed loop), read from a workload spec, and the workloads the bench derives from it:
// the LC alone (closed loop, or Poisson at a rate), each BE tenant alone, and the shared run.
#pragma once

#include <string>
#include <vector>

#include "concord/workload.h"

namespace concord::lsbe {

struct Mix {
  std::string file;
  Workload workload;  // the LC tenant first (tenant 0, so its Poisson stream is the same alone, shared and in its own process)
  const TenantSpec& lc() const { return workload.tenants.front(); }
  size_t be_count() const { return workload.tenants.size() - 1; }
  const TenantSpec& be(size_t i) const { return workload.tenants.at(i + 1); }
};

// Loads a mix: exactly one LC tenant and at least one BE tenant, or an error naming the file.
Result<Mix> load_mix(const std::string& path);

// The LC tenant alone, `requests` requests in a closed loop.
Workload lc_closed(const Mix& mix, int requests);
// The LC tenant alone, `requests` Poisson arrivals at `rate_per_s` with target `target`.
Workload lc_poisson(const Mix& mix, int requests, double rate_per_s, Seconds target);
// BE tenant `i` alone, `requests` requests in a closed loop.
Workload be_alone(const Mix& mix, size_t i, int requests);
// The shared run: the LC tenant as in lc_poisson and BE tenant i closed loop with be_requests[i]
// requests (a ceiling: the bench's source ends BE when the LC's last request ends).
Workload shared(const Mix& mix, int requests, double rate_per_s, Seconds target, const std::vector<int>& be_requests);

// A BE tenant's request ceiling: as many requests as it runs alone in half of `time_limit`, within
// the spec limits. The LC's end stops BE long before (a run whose LC outlasts that flags BE as
// having run out); a BE process that never hears of the LC's end still finishes within the limit.
int be_request_ceiling(double alone_requests_per_s, Seconds time_limit);

}  // namespace concord::lsbe
