// Tenant sources: where the engine's work comes from. A source tells the engine, as time passes,
// that tenants join and leave, that requests arrive and that launches are submitted; the engine
// runs whatever has been submitted. The YAML spec is one source (src/frontend/spec_source.cpp); a test source
// or a live process (later: the daemon, the interception library) is another.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concord/ids.h"
#include "concord/kernel.h"
#include "concord/status.h"

namespace concord {

enum class TenantClass : uint8_t { latency_critical, best_effort };
const char* to_string(TenantClass c);

// What a tenant declares about itself when it joins: everything a policy may know of it.
struct TenantInfo {
  std::string name;
  TenantClass cls = TenantClass::best_effort;
  Seconds latency_target = 0;  // LC only: per-request target
  // Free-form facts the tenant states (`raise_type: MEM`): a policy reads the ones it knows.
  std::map<std::string, std::string> labels;
};

// Lookahead a source may choose to give (a spec can, an intercepted process cannot): what one
// request of the tenant runs, in order. Policies must also work without it (docs/policies.md says
// what each one loses).
struct TenantHints {
  struct Step {
    const KernelSpec* kernel = nullptr;
    int64_t count = 1;
  };
  std::vector<Step> request;     // the kernels of every request, in order
  int64_t requests = 0;          // how many requests the tenant will make (0: unknown)
};

// One kernel launch a tenant submits into its stream (stream order: it runs after the tenant's
// previous launch).
struct LaunchSubmission {
  const KernelSpec* kernel = nullptr;  // owned by the source; must outlive the run
  int64_t request = 0;                 // the request it belongs to (from TenantSink::arrive)
  bool last_of_request = false;        // its end ends the request
};

// What a source may do; the engine implements it. Calls are valid inside TenantSource's hooks.
class TenantSink {
 public:
  virtual ~TenantSink() = default;
  virtual Seconds now() const = 0;
  // A new tenant. `kernels`: the kernels it will launch, where known, so the backend prepares
  // them (inputs, modules) now rather than at their first launch. Returns its id.
  virtual Result<TenantId> join(const TenantInfo& info, std::optional<TenantHints> hints,
                                const std::vector<const KernelSpec*>& kernels) = 0;
  // A request of `tenant` arrived at `at` (<= now(): a replayed arrival time the engine reached a
  // little after it; a live source passes now()). Its latency counts from `at`. Returns its index
  // (0, 1, ...).
  virtual Result<int64_t> arrive(TenantId tenant, Seconds at) = 0;
  virtual Status submit(TenantId tenant, const LaunchSubmission& launch) = 0;
  // The tenant submits nothing more; it leaves once its submitted work has run.
  virtual Status leave(TenantId tenant) = 0;
  // The open request of `tenant` ends with the launch it submitted last (a live source learns of
  // a request's end only after its launches were submitted). Its latency counts to that launch's
  // end, which may already have come.
  virtual Status end_request(TenantId tenant) {
    (void)tenant;
    return Status::unsupported("end_request: this sink takes a request's end only with its last launch");
  }
  // The tenant is gone (its process died, or ended with launches outstanding): it submits nothing
  // more, its launches not yet dispatched are dropped, its running dispatches end as the backend
  // reports them (a failed end does not end the run), and then it leaves. `why` goes to the record.
  virtual Status drop(TenantId tenant, const std::string& why) {
    (void)tenant;
    (void)why;
    return Status::unsupported("drop: this sink cannot drop a tenant");
  }
};

class TenantSource {
 public:
  virtual ~TenantSource();
  virtual std::string name() const = 0;
  // Before the clock starts: tenants known up front join here, so the backend prepares them and
  // the policy sees them in on_start.
  virtual Status open(TenantSink& sink) = 0;
  // Delivers everything due at or before sink.now(); returns when it next has something to deliver
  // by itself (infinity: only in answer to on_request_end, or never).
  virtual Result<Seconds> pump(TenantSink& sink) = 0;
  // A request ended at `at` (closed-loop sources submit the next one here).
  virtual Status on_request_end(TenantSink& sink, TenantId tenant, int64_t request, Seconds at) {
    (void)sink;
    (void)tenant;
    (void)request;
    (void)at;
    return Status::ok();
  }
  // A launch of `tenant` ended at `at` (sources that submit one launch at a time go on here).
  virtual Status on_launch_end(TenantSink& sink, TenantId tenant, LaunchId launch, Seconds at) {
    (void)sink;
    (void)tenant;
    (void)launch;
    (void)at;
    return Status::ok();
  }
  // Nothing more will ever join, arrive or be submitted.
  virtual bool exhausted() const = 0;
};

}  // namespace concord
