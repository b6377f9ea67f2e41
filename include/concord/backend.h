// Backend: what executes placements. The CUDA backend and the simulator implement exactly this
// interface; nothing above it asks which one it has (backends are told apart by capabilities, never by name).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concord/device.h"
#include "concord/ids.h"
#include "concord/kernel.h"
#include "concord/part_list.h"
#include "concord/placement.h"
#include "concord/status.h"

namespace concord {

// What a backend can do with a given kernel. Policies ask; the engine enforces.
struct Capabilities {
  bool persistent_form = false;  // elastic wrapper: exact SM sets, TLP, ranges, preemption
  bool exact_sm_sets = false;    // 1-SM granular sets (else rounded up to TPCs)
  bool tlp = false;              // resident-block limit per SM
  bool split_range = false;      // run a sub-range of the logical grid
  bool resize = false;           // change the SM set or the TLP of a running launch
  bool preempt = false;          // stop a running launch at a logical-block boundary
  bool fusion = false;           // fuse with a partner's body
  bool l1_bypass = false;        // cache policies that bypass L1
  bool l2_evict_first = false;   // L2 evict-first (per-load operator or access-policy window)
  bool block_variants = false;   // block-size variants beyond the default
};

// One part of a dispatch: a launch's kernel and the logical blocks to run.
struct DispatchPart {
  LaunchId launch;
  TenantId tenant;
  const KernelSpec* kernel = nullptr;  // owned by the workload; outlives the run
  int variant = 0;
  BlockRange range;
  int parts_per_block = 1;             // fusion ratio share
};

struct DispatchRequest {
  DispatchId id;
  PartList<DispatchPart> parts;        // one, or two for a fused launch
  Placement placement;
  // Stream order: when valid and that dispatch is still running, this one starts only after it
  // ends, with no host round trip in between (CUDA: a wait on its end event; the simulator holds
  // it back). SchedContext::queue_next uses it; the engine keeps such a dispatch from being resized,
  // capped or preempted while it waits (backends do not check it again).
  DispatchId after;
};

// A dispatch that ended: all its blocks done, preempted, or failed.
struct Completion {
  DispatchId dispatch;
  Seconds start = 0;    // when its first block became resident
  Seconds end = 0;
  bool preempted = false;
  // Per part, the logical blocks it finished (a prefix of its range: work is handed out in order).
  PartList<int64_t> blocks_done;
  // Not ok when the dispatch failed on the device (a fault in its kernel, or abandoned by
  // abort_all): the message names the tenant, the kernel and the dispatch. blocks_done then holds
  // what is known to have finished (0 when the counters could not be read).
  Status error;
};

// Where a tenant's device memory (its kernels' inputs and outputs) comes from. The CUDA backend
// allocates a tenant's kernel buffers through the allocator set for that tenant, and through
// cudaMalloc when none is set; SGDRC's memory colouring plugs in here. An allocator may be called
// from the engine's thread only, and must outlive the buffers it handed out (the backend keeps a
// shared_ptr to it for as long as any of them lives).
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual std::string name() const = 0;
  // `bytes` of device memory, or an error that names why not.
  virtual Result<void*> allocate(size_t bytes) = 0;
  // Gives back memory that allocate() returned, with the same byte count.
  virtual void release(void* p, size_t bytes) = 0;
};

class Backend {
 public:
  virtual ~Backend();
  virtual std::string name() const = 0;
  virtual const DeviceSpec& device() const = 0;
  virtual Capabilities capabilities(const KernelSpec& kernel) const = 0;
  // Can this backend run `request` as placed: ok, or unsupported / invalid_argument with a reason
  // naming the kernel(s) and the field. Answers for the whole placement, fusion pairs included,
  // and means the same on every backend: both apply check_dispatch_resources() (concord/placement_rule.h); a backend
  // adds only what its environment lacks (the CUDA backend: a device body, the fusion compiler).
  virtual Status can_implement(const DispatchRequest& request) const;

  // Gets ready for a tenant that joined and the kernels it will launch, where known (streams,
  // allocations, inputs, modules): before the clock for tenants known up front, else when the
  // tenant joins. Kernels not named here are prepared at their first dispatch.
  virtual Status prepare_tenant(TenantId tenant, const std::vector<const KernelSpec*>& kernels) {
    (void)tenant;
    (void)kernels;
    return Status::ok();
  }
  // Gets ready to run `tenant`'s native launches on `sms` (a green context is slow to create and
  // may wait for the device to drain): a policy that knows its partitions says so in on_start.
  virtual Status prepare_sm_set(const SmSet& sms, TenantId tenant) {
    (void)sms;
    (void)tenant;
    return Status::ok();
  }
  // Sets where `tenant`'s kernel buffers are allocated from now on (nullptr: the default). Set it
  // before the tenant's kernels are prepared: buffers already made stay where they are.
  virtual Status set_allocator(TenantId tenant, std::shared_ptr<DeviceAllocator> allocator) {
    (void)tenant;
    (void)allocator;
    return Status::ok();
  }
  // Gets ready to run `request` (the CUDA backend compiles and loads a fused pair's kernel, which
  // takes about a second when it is in no cache); dispatch() does the same when it was not done.
  virtual Status prepare_dispatch(const DispatchRequest& request) {
    (void)request;
    return Status::ok();
  }
  // Sets time 0 of the run: called by the engine after preparation, before the first arrival.
  virtual Status start_clock() { return Status::ok(); }
  // Starts a dispatch now. The request was validated by the engine against capabilities().
  virtual Status dispatch(const DispatchRequest& request) = 0;
  // Changes the allowed SM set of a running persistent dispatch.
  virtual Status set_sm_set(DispatchId dispatch, const SmSet& sms) = 0;
  // Changes the resident-block limits of a running persistent dispatch: `tlp` per SM (0: as many
  // as fit), and `tight_tlp` on the SMs of `tight_sms` (0: none). Raising a limit fills the new
  // slots as they free up; lowering one admits no new block beyond it (resident blocks keep
  // running: they hold no logical block they could give back).
  virtual Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) = 0;
  // Stops a running dispatch after its blocks finish their current logical block.
  virtual Status preempt(DispatchId dispatch) = 0;
  // Logical blocks finished so far, per part (the online progress counter).
  virtual Result<std::vector<int64_t>> progress(DispatchId dispatch) const = 0;

  virtual Seconds now() const = 0;
  // Advances time until the next completion or `until`, whichever is first, and returns the
  // completions that happened (in time order, possibly several at one instant). A simulator
  // jumps; a real device waits, but returns (possibly with nothing) at least every few
  // milliseconds of wall time, so that its caller can watch for a stop request.
  virtual Result<std::vector<Completion>> advance(Seconds until) = 0;
  // Number of dispatches started and not yet completed.
  virtual int running() const = 0;
  // The watchdog: preempts every running persistent dispatch and waits at most `grace` seconds
  // for every dispatch to end. Returns ok when all ended (their completions, preempted, come out
  // of the next advance()), else device_error naming each dispatch still running (tenant, kernel,
  // dispatch): an opaque or native kernel cannot be stopped from the host, and the caller should
  // end the run. Never blocks past `grace` (plus a poll interval).
  virtual Status abort_all(Seconds grace) = 0;
};

}  // namespace concord
