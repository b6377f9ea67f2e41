// The engine: a runtime that takes tenants, requests and launches from a tenant source as they
// come, asks a policy for placements, has a backend run them, and records every launch, dispatch
// and request with timestamps.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "concord/ids.h"
#include "concord/placement.h"
#include "concord/policy.h"
#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord {

struct DispatchRecord {
  DispatchId id;
  PartList<LaunchId> launches;
  PartList<TenantId> tenants;
  PartList<BlockRange> ranges;
  PartList<int64_t> blocks_done;
  Placement placement;
  Seconds dispatched = 0;  // when the policy dispatched it
  DispatchId after;        // queued behind this dispatch (SchedContext::queue_next), if valid
  // When it began running and ended: -1 for a dispatch that had not ended when the run ended
  // early (a fault, the time limit, a stop) and could not be stopped.
  Seconds start = 0;
  Seconds end = 0;
  Seconds seen = 0;        // when the engine received its completion (host clock; end to seen: the backend's latency)
  bool preempted = false;
  std::string error;       // why it failed on the device (the backend's message); empty when it did not
};

struct LaunchRecord {
  LaunchId id;
  TenantId tenant;
  std::string kernel;
  int64_t request = 0;
  int64_t index = 0;   // its position among its request's launches
  int64_t logical_blocks = 0;
  Seconds ready = 0;   // became ready (its predecessor finished, or its request arrived)
  Seconds start = 0;   // first dispatch began running
  Seconds end = 0;     // last logical block finished
};

struct RequestRecord {
  Seconds arrival = 0;
  Seconds start = 0;   // first kernel began running
  Seconds end = 0;     // last kernel finished
  Seconds latency() const { return end - arrival; }
};

struct TenantRecord {
  std::string name;
  TenantClass cls = TenantClass::best_effort;
  Seconds latency_target = 0;
  Seconds joined = 0;  // when it joined
  Seconds begin = 0;   // first request's arrival
  Seconds finish = 0;  // last request's end
  int64_t logical_blocks = 0;
  std::vector<RequestRecord> requests;
  Seconds elapsed() const { return finish - begin; }
};

struct EngineStats {
  int64_t policy_calls = 0;
  int64_t dispatches = 0;
  double policy_seconds = 0;  // wall time spent inside policy hooks (including the backend calls they make)
  double backend_seconds = 0; // of which in the backend's dispatch, resize and preempt (launching)
  double engine_seconds = 0;  // wall time of the whole run (for the overhead share)
  // What the policy counted about its own decisions (Policy::stats), read when the run ends.
  std::map<std::string, double> policy;
};

struct RunRecord {
  std::string policy;
  std::string backend;
  std::string device;
  uint64_t seed = 0;
  Seconds makespan = 0;
  std::vector<TenantRecord> tenants;
  std::vector<LaunchRecord> launches;
  std::vector<DispatchRecord> dispatches;
  EngineStats stats;
};

// Watches a run as it happens (tracing, live displays). All hooks are optional.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_dispatch(const DispatchRecord& dispatch) { (void)dispatch; }
  virtual void on_dispatch_end(const DispatchRecord& dispatch) { (void)dispatch; }
  // A running dispatch's SM set changed to `sms` at `at` (a policy's resize). DispatchRecord keeps
  // the set a dispatch started with; this is where the later ones show.
  virtual void on_resize(DispatchId dispatch, const SmSet& sms, Seconds at) {
    (void)dispatch;
    (void)sms;
    (void)at;
  }
  virtual void on_request_end(TenantId tenant, const RequestRecord& request) {
    (void)tenant;
    (void)request;
  }
};

struct EngineOptions {
  uint64_t seed = 1;
  // Ends a run whose clock passes this (a policy that never finishes the work, a kernel that
  // never ends), as deadline_exceeded.
  Seconds time_limit = 3600;
  // When a run ends early (a fault, the time limit, a stop), how long running work gets to stop
  // (Backend::abort_all) before the run gives up on it.
  Seconds abort_grace = 5;
  // When set, the engine reads it between steps (at least every few milliseconds of wall time on
  // a device): true ends the run early, as cancelled. A signal handler may set it.
  const std::atomic<bool>* stop = nullptr;
  EngineObserver* observer = nullptr;
  // Called after the backend prepared the workload and the policy started, just before the clock
  // starts (a multi-process bench waits for its peers here). An error aborts the run.
  std::function<Status()> before_clock;
  // False: finished launches, dispatches and requests are forgotten as the run goes (a live
  // source that runs for days, the daemon's); the RunRecord then holds only what had not
  // finished when the run ended. Observers still hear of everything.
  bool keep_history = true;
};

// A run as far as it went. `status` is ok when every tenant's work ran. Otherwise it says why the
// run ended early: a fault (device_error naming the tenant, kernel, launch and dispatch), the time
// limit (deadline_exceeded, naming what was running), a stop (cancelled), or any other error (a
// policy's, the source's); running work was stopped first (abort_all with abort_grace), and the
// message names what could not be stopped. `record` then holds what happened until the end:
// finished requests and launches (an unfinished one has end -1), every dispatch with what it did
// (blocks_done; a failed one its error; one that never ended start and end -1), and the tenants.
struct [[nodiscard]] RunOutcome {
  RunRecord record;
  Status status;
};

// Runs what `source` submits until it is exhausted and every tenant's work has run. The backend
// must be fresh (time 0, nothing running).
RunOutcome run_engine_outcome(TenantSource& source, Backend& backend, Policy& policy, const EngineOptions& options);
// The same, for callers that want a whole run or an error: the record of a run that ended early
// is dropped.
Result<RunRecord> run_engine(TenantSource& source, Backend& backend, Policy& policy, const EngineOptions& options);

}  // namespace concord
