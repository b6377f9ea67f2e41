// The workload spec as a tenant source: replays a YAML spec's tenants, arrivals and kernels in time.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "concord/backend.h"
#include "concord/engine.h"
#include "concord/policy.h"
#include "concord/tenant_source.h"
#include "concord/workload.h"

namespace concord {

struct SpecSourceOptions {
  uint64_t seed = 1;  // Poisson arrivals: each tenant draws from its own stream of this seed
  // Give the policy each tenant's request contents and request count as hints (a spec knows them;
  // an intercepted process would not). Off: policies run on the present alone.
  bool hints = true;
  // How a request's launches reach the engine: all at its arrival, as a program enqueues a task's
  // kernels on its stream (`request`), or each only when the one before it has ended, as a program
  // that synchronises after every kernel (`launch`: nothing is ever queued ahead).
  enum class Submit : uint8_t { request, launch };
  Submit submit = Submit::request;
};

// Every tenant joins in open(), in the spec's order (tenant i gets TenantId i). Closed-loop tenants
// submit their next request when the previous one ends; Poisson and timestamp tenants at their
// arrival times. The workload must outlive the source and the run (launches point at its kernels).
class SpecSource final : public TenantSource {
 public:
  SpecSource(const Workload& workload, SpecSourceOptions options);
  std::string name() const override { return "spec:" + workload_.name; }
  Status open(TenantSink& sink) override;
  Result<Seconds> pump(TenantSink& sink) override;
  Status on_request_end(TenantSink& sink, TenantId tenant, int64_t request, Seconds at) override;
  Status on_launch_end(TenantSink& sink, TenantId tenant, LaunchId launch, Seconds at) override;
  bool exhausted() const override;

 private:
  struct Tenant {
    const TenantSpec* spec = nullptr;
    TenantId id;
    std::vector<Seconds> arrivals;  // timed arrivals (Poisson, timestamps); empty: closed loop
    int64_t arrived = 0;            // requests that have arrived
    std::deque<Seconds> waiting;    // Submit::launch: arrived while another request was in flight
    int64_t request = -1;           // Submit::launch: the request being submitted, -1 none
    size_t step = 0;                // position reached in the request being submitted
    int64_t repeat = 0;
    bool left = false;
  };
  Status arrive(TenantSink& sink, Tenant& t, Seconds at);
  Status start_request(TenantSink& sink, Tenant& t, Seconds at);
  Status submit_next(TenantSink& sink, Tenant& t);
  Status leave_if_done(TenantSink& sink, Tenant& t);
  Tenant* find(TenantId id);

  const Workload& workload_;
  SpecSourceOptions options_;
  std::vector<Tenant> tenants_;
};

// The hints a spec gives for a tenant: its request's kernels and request count.
TenantHints spec_hints(const TenantSpec& tenant);

// Runs a workload spec to completion: run_engine over its SpecSource with options.seed and hints.
Result<RunRecord> run_workload(const Workload& workload, Backend& backend, Policy& policy,
                               const EngineOptions& options, SpecSourceOptions source = {});
// The same, keeping the record of a run that ended early (run_engine_outcome).
RunOutcome run_workload_outcome(const Workload& workload, Backend& backend, Policy& policy,
                                const EngineOptions& options, SpecSourceOptions source = {});

}  // namespace concord
