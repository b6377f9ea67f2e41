// Policy: the code that makes placements. Event driven: the engine calls a hook when a launch
// becomes ready, a dispatch completes, or a requested tick is due; the policy acts through the
// SchedContext (dispatch, resize, preempt, ask for a tick). Holding = not dispatching.
#pragma once

#include <functional>
#include <map>
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
#include "concord/workload.h"

namespace concord {

// A launch that has logical blocks waiting to be dispatched.
struct ReadyLaunch {
  LaunchId id;
  TenantId tenant;
  const TenantSpec* tenant_spec = nullptr;
  const KernelSpec* kernel = nullptr;
  int step = 0;                  // index of its step in the tenant's request
  int repeat = 0;                // index within the step's count (the step's repeat-th launch)
  int64_t request = 0;           // index of the request it belongs to
  Seconds ready_since = 0;       // when it became ready (queueing starts)
  Seconds request_arrival = 0;   // when its request arrived (LC latency counts from here)
  BlockRange pending;            // the first pending range of logical blocks
  int64_t pending_blocks = 0;    // all pending blocks (ranges may be split by preemption)
  bool has_running_dispatch = false;
};

// A dispatch the backend is running.
struct RunningDispatch {
  DispatchId id;
  std::vector<LaunchId> launches;  // one, or two when fused
  std::vector<TenantId> tenants;
  std::vector<const KernelSpec*> kernels;  // per part
  std::vector<int> variants;               // per part
  std::vector<int> parts_per_block;        // per part (fusion ratio)
  Placement placement;
  std::vector<BlockRange> ranges;
  Seconds dispatched_at = 0;
  DispatchId after;  // queued behind this dispatch (queue_next, dispatch_after); invalid when not
};

class SchedContext {
 public:
  virtual ~SchedContext() = default;
  virtual Seconds now() const = 0;
  virtual const DeviceSpec& device() const = 0;
  virtual const Workload& workload() const = 0;
  // Kernel speed estimates (measured profiles where attached, else a roofline).
  virtual const Estimator& estimator() const = 0;
  virtual Capabilities capabilities(const KernelSpec& kernel) const = 0;
  // Launches with pending blocks, in the order they became ready. The span stays valid (but may
  // be stale) until the next call of ready(); copy it before dispatching in a loop that calls
  // ready() again.
  virtual std::span<const ReadyLaunch> ready() const = 0;
  virtual std::span<const RunningDispatch> running() const = 0;
  virtual std::mt19937_64& rng() = 0;

  // Hands a placement to the backend. Errors when the launch is not ready, the placement asks
  // for something the backend cannot do for this kernel, or a field is out of range.
  virtual Result<DispatchId> dispatch(LaunchId launch, const Placement& placement) = 0;
  // Queues the next launch of the request that dispatch `behind` runs, stream-ordered after it:
  // the launch exists (and is dispatched with `placement`) before `behind` ends and starts on the
  // GPU when it does, with no host round trip in between — how a CUDA program puts a task's
  // kernels on one stream (raise.md V-B). `behind` must run one whole launch (not fused, no other
  // dispatch of it), be its tenant's latest launch, and not be the last of its request
  // (launches_after tells). The queued dispatch cannot be resized, capped or preempted while
  // `behind` runs. Returns the new dispatch; its launch is in running() from now on.
  virtual Result<DispatchId> queue_next(DispatchId behind, const Placement& placement) = 0;
  // Dispatches ready launch `launch` (any tenant's) to start on the GPU when running dispatch
  // `after` ends, with no host round trip in between (CUDA: its stream waits on that dispatch's end
  // event; the simulator holds it back): how a CUDA program hands the stream one task frees to the
  // next task, decided before the first one ends. Like a queue_next dispatch it cannot be resized,
  // capped or preempted while `after` runs.
  virtual Result<DispatchId> dispatch_after(LaunchId launch, const Placement& placement, DispatchId after) = 0;
  // How many launches of its request follow `launch` (0 for the last kernel of a request), and
  // the kernel of the next one (nullptr for the last).
  virtual int launches_after(LaunchId launch) const = 0;
  virtual const KernelSpec* next_kernel(LaunchId launch) const = 0;
  virtual Status resize(DispatchId dispatch, const SmSet& sms) = 0;
  // Changes the TLP limits of a running persistent dispatch (Backend::set_tlp; Placement's tlp,
  // tight_sms and tight_tlp).
  virtual Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms = {}, int tight_tlp = 0) = 0;
  virtual Status preempt(DispatchId dispatch) = 0;
  virtual Result<std::vector<int64_t>> progress(DispatchId dispatch) const = 0;
  // Calls on_tick at `at` (or as soon as the engine gets control after it).
  virtual void request_tick(Seconds at) = 0;
  // In on_start only: `tenant` will run native launches on `sms`; the backend prepares for it
  // before the clock starts.
  virtual Status prepare_sm_set(const SmSet& sms, TenantId tenant) = 0;
};

// Parameters for a policy, from the command line (--param key=value) or a bench.
using PolicyParams = std::map<std::string, std::string>;

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Before the clock starts and before any launch is ready.
  virtual Status on_start(SchedContext& ctx) {
    (void)ctx;
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
