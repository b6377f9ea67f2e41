// Policy: the code that makes placements. A policy is a plugin: the engine calls its hooks when a
// tenant joins or leaves, a launch becomes ready, a dispatch completes, or a requested tick is due;
// the policy keeps its own state and acts through the SchedContext (dispatch, resize, preempt, ask
// for a tick), which validates every request. Holding = not dispatching. A policy sees the present
// (tenants, ready, queued and running launches, profiles) and a tenant's future only through the
// hints its source chose to give.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "concord/device.h"
#include "concord/estimator.h"
#include "concord/ids.h"
#include "concord/placement.h"
#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord {

// A tenant as the policy sees it: what it declared when it joined, and hints if its source gave any.
struct TenantView {
  TenantId id;
  TenantInfo info;
  std::optional<TenantHints> hints;  // lookahead: only when the source offered it
  bool left = false;                 // submits nothing more (its queued work still runs)
};

// A launch that has logical blocks waiting to be dispatched: its tenant's stream has reached it.
struct ReadyLaunch {
  LaunchId id;
  TenantId tenant;
  const KernelSpec* kernel = nullptr;
  int64_t request = 0;           // index of the request it belongs to
  int64_t index = 0;             // its position among its request's launches (0: the first)
  bool last_of_request = false;  // its end ends the request
  Seconds ready_since = 0;       // when it became ready (queueing starts)
  Seconds request_arrival = 0;   // when its request arrived (LC latency counts from here)
  BlockRange pending;            // the first pending range of logical blocks
  int64_t pending_blocks = 0;    // all pending blocks (ranges may be split by preemption)
  bool has_running_dispatch = false;
  // The block-size variant the launch runs, fixed by its first dispatch; -1 before it, when any
  // variant may be chosen (`pending` is then the default variant's grid; another variant's grid
  // is its own logical_blocks).
  int variant = -1;
};

// A launch submitted into a tenant's stream behind the one that runs or is ready: what a program
// has enqueued but the GPU has not reached (the present, not a hint).
struct QueuedLaunch {
  LaunchId id;
  const KernelSpec* kernel = nullptr;
  int64_t request = 0;
  bool last_of_request = false;
};

// A dispatch the backend is running.
struct RunningDispatch {
  DispatchId id;
  PartList<LaunchId> launches;  // one, or two when fused
  PartList<TenantId> tenants;
  PartList<const KernelSpec*> kernels;  // per part
  PartList<int> variants;               // per part
  PartList<int> parts_per_block;        // per part (fusion ratio)
  Placement placement;
  PartList<BlockRange> ranges;
  Seconds dispatched_at = 0;
  DispatchId after;  // stream-ordered behind this dispatch; invalid when not
};

class SchedContext {
 public:
  virtual ~SchedContext() = default;
  virtual Seconds now() const = 0;
  virtual const DeviceSpec& device() const = 0;
  // Tenants that have joined so far (indexed by TenantId), including those that left.
  virtual std::span<const TenantView> tenants() const = 0;
  const TenantView& tenant(TenantId id) const { return tenants()[static_cast<size_t>(id.value)]; }
  // Kernel speed estimates (measured profiles where attached, else a roofline).
  virtual const Estimator& estimator() const = 0;
  virtual Capabilities capabilities(const KernelSpec& kernel) const = 0;
  // Launches with pending blocks, in the order they became ready. The span stays valid (but may
  // be stale) until the next call of ready(); copy it before dispatching in a loop that calls
  // ready() again.
  virtual std::span<const ReadyLaunch> ready() const = 0;
  // The launches `tenant` has submitted behind its ready or running one, in stream order.
  virtual std::span<const QueuedLaunch> queued(TenantId tenant) const = 0;
  // Dispatches the backend runs, in the order they were made (a new dispatch is last).
  virtual std::span<const RunningDispatch> running() const = 0;
  virtual std::mt19937_64& rng() = 0;

  // Hands a placement to the backend. Errors when the launch is not ready, the placement asks
  // for something the backend cannot do for this kernel, or a field is out of range.
  //
  // With `after` (a running dispatch), the dispatch starts on the GPU when `after` ends, with no
  // host round trip in between (CUDA: its stream waits on that dispatch's end event; the simulator
  // holds it back): how a CUDA program puts a task's kernels on one stream (RAISE paper, Section V-B). `launch`
  // may then also be the first queued launch of the tenant whose whole current launch `after` runs
  // (it becomes ready when `after` ends). A dispatch behind another cannot be resized, capped or
  // preempted while `after` runs.
  virtual Result<DispatchId> dispatch(LaunchId launch, const Placement& placement, DispatchId after = {}) = 0;
  virtual Status resize(DispatchId dispatch, const SmSet& sms) = 0;
  // Changes the TLP limits of a running persistent dispatch (Backend::set_tlp; Placement's tlp,
  // tight_sms and tight_tlp).
  virtual Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms = {}, int tight_tlp = 0) = 0;
  virtual Status preempt(DispatchId dispatch) = 0;
  virtual Result<std::vector<int64_t>> progress(DispatchId dispatch) const = 0;
  // Calls on_tick at `at` (or as soon as the engine gets control after it).
  virtual void request_tick(Seconds at) = 0;
  // Before the clock only (on_start, or on_tenant_joined of a tenant that joins before it):
  // `tenant` will run native launches on `sms`; the backend prepares for it.
  virtual Status prepare_sm_set(const SmSet& sms, TenantId tenant) = 0;
};

// Parameters for a policy, from the command line (--param key=value) or a bench.
using PolicyParams = std::map<std::string, std::string>;

// What a policy may refuse before a run: the workload's shape.
struct WorkloadShape {
  int64_t tenants = 0;
  int64_t lc_tenants = 0;
};

class Policy {
 public:
  virtual ~Policy();
  virtual std::string name() const = 0;
  // Whether a tenant's next launch gets the decision its previous one got while no
  // latency-critical work intervenes. The node daemon then releases such a launch at once (a
  // follow-on release, docs/daemon.md) instead of waiting for its predecessor's end to reach the
  // engine. Default false: a follow-on release undoes a policy that decides launch by launch
  // (round-robin's turns, random's draws, a paper policy's per-kernel choice); a policy whose
  // decisions stand until the LC's work changes them says true.
  virtual bool repeats_decisions() const { return false; }
  // Whether the policy can run a workload of `shape` on `device`, asked before anything runs:
  // `concord run` refuses up front with the reason, `concord validate` names the policies that
  // would refuse. Default: every workload.
  virtual Status admits(const WorkloadShape& shape, const DeviceSpec& device) const {
    (void)shape;
    (void)device;
    return Status::ok();
  }
  // Before the clock starts and before any launch is ready; the tenants a source knew up front
  // have joined (on_tenant_joined ran for each).
  virtual Status on_start(SchedContext& ctx) {
    (void)ctx;
    return Status::ok();
  }
  // A tenant joined (before the clock, or while the run goes on).
  virtual Status on_tenant_joined(SchedContext& ctx, TenantId tenant) {
    (void)ctx;
    (void)tenant;
    return Status::ok();
  }
  // A tenant's last launch ended after it left.
  virtual Status on_tenant_left(SchedContext& ctx, TenantId tenant) {
    (void)ctx;
    (void)tenant;
    return Status::ok();
  }
  // Default hooks all run schedule(): a policy that only looks at the ready set needs nothing else.
  virtual Status on_ready(SchedContext& ctx, LaunchId launch) {
    (void)launch;
    return schedule(ctx);
  }
  virtual Status on_complete(SchedContext& ctx, const Completion& completion) {
    (void)completion;
    return schedule(ctx);
  }
  virtual Status on_tick(SchedContext& ctx) { return schedule(ctx); }
  // Counters a policy keeps about its own decisions (name to value; e.g. Aker's decision time per
  // LC kernel and its models' prediction errors), written with the run's results. Default: none.
  virtual std::map<std::string, double> stats() const { return {}; }

 protected:
  virtual Status schedule(SchedContext& ctx) { (void)ctx; return Status::ok(); }
};

using PolicyFactory = std::function<Result<std::unique_ptr<Policy>>(const PolicyParams&)>;

class PolicyRegistry {
 public:
  // Registers a factory under `name`; a duplicate name is an error.
  Status add(const std::string& name, const std::string& summary, PolicyFactory factory);
  Result<std::unique_ptr<Policy>> make(const std::string& name, const PolicyParams& params) const;
  struct Entry {
    std::string name;
    std::string summary;
  };
  std::vector<Entry> list() const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

 private:
  struct Item {
    std::string summary;
    PolicyFactory factory;
  };
  std::map<std::string, Item> entries_;
};

// A policy with parameters in one string, as the benches take them: "name" or
// "name:key=value;key=value" (e.g. "raise:cascade=1"). An error names the spec and what is wrong.
struct PolicySpec {
  std::string name;
  PolicyParams params;
};
Result<PolicySpec> parse_policy_spec(const std::string& spec);

// The registry with every policy built into Concord.
const PolicyRegistry& builtin_policies();

}  // namespace concord
