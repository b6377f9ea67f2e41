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
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const DeviceSpec& device() const = 0;
  virtual Capabilities capabilities(const KernelSpec& kernel) const = 0;
  // Can this backend run `request` as placed: ok, or unsupported / invalid_argument with a reason
  // naming the kernel(s) and the field. Answers for the whole placement, fusion pairs included,
  // and means the same on every backend: both apply check_dispatch_resources() (below); a backend
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

// The placement rule both backends apply (can_implement): SM set within the device, variants and
// ranges within the kernels' grids, cache policies and forms the kernels' capabilities allow, one
// block within the SM limits; for a fused pair, both kernels elastic in the persistent form, each
// part a whole number of warps, at most kMaxFusedParts parts, and the fused block (a parts of A, b
// of B) within one block's and one SM's threads, registers and shared memory.
inline constexpr int kMaxFusedParts = 15;  // named barriers 1..15, one per part (0 is __syncthreads)
// Static shared memory the fused wrapper itself holds (its per-part chunk slots and a flag).
inline constexpr int kFusedWrapperSharedBytes = 256;
Status check_dispatch_resources(const DeviceSpec& device, const DispatchRequest& request,
                                const Capabilities& first, const Capabilities* second);
// Registers per thread a fused block of `threads` threads may use on `device` so that one block
// fits an SM: the CUDA backend compiles fused kernels with this cap, and the rule checks the
// kernels' registers against it.
int fused_register_cap(const DeviceSpec& device, int threads);

// Whether a fused block of `parts_a` parts of variant `a` and `parts_b` parts of variant `b` fits
// (the fused-pair half of check_dispatch_resources): at most kMaxFusedParts parts (one named barrier
// each), whole warps per part, the block's threads and shared memory (the wrapper's included)
// within one block's limits, the larger body's registers within fused_register_cap, and one such
// block within an SM. unsupported (invalid_argument for a part count below 1) names what is over.
Status fused_block_fits(const DeviceSpec& device, const KernelVariant& a, int parts_a, const KernelVariant& b,
                        int parts_b);
// The fused block as one variant (threads, registers per thread, shared memory with the wrapper's),
// for occupancy: max_resident_blocks(device, fused_block_variant(...)) fused blocks fit an SM.
KernelVariant fused_block_variant(const KernelVariant& a, int parts_a, const KernelVariant& b, int parts_b);
// Every ratio a:b with a + b <= max_parts (and <= kMaxFusedParts) whose fused block fits, with the
// fused blocks resident per SM: Aker's fused versions of a pair (its section 5.4).
struct FusionRatio {
  int parts_a = 1;
  int parts_b = 1;
  int blocks_per_sm = 0;
};
std::vector<FusionRatio> fusion_ratios_that_fit(const DeviceSpec& device, const KernelVariant& a, const KernelVariant& b,
                                                int max_parts = kMaxFusedParts);
// The registers per thread a fused block of (a, parts_a, b, parts_b) is compiled with: the most
// that still let as many such blocks share an SM as the kernels' declared registers allow
// (max_resident_blocks of fused_block_variant), so that the compiled kernel keeps the occupancy a
// fusion was chosen for; never below the larger declared count, never above
// fused_register_cap(device, threads).
int fused_block_register_cap(const DeviceSpec& device, const KernelVariant& a, int parts_a, const KernelVariant& b,
                             int parts_b);

// A fused block's shape: a block-size variant of each kernel, the parts of each per block, and
// how many such blocks fit an SM.
struct FusionShape {
  int variant_a = 0;
  int variant_b = 0;
  int parts_a = 1;
  int parts_b = 1;
  int blocks_per_sm = 0;
  int threads = 0;  // of one fused block
  // Warps resident on a full SM: the occupancy the fused kernel runs at.
  int resident_warps() const { return blocks_per_sm * ((threads + 31) / 32); }
};
// What a choice of shape may be restricted to (-1: any): a variant a launch already runs, or the
// ratio of a measured version.
struct FusionShapeFilter {
  int variant_a = -1;
  int variant_b = -1;
  int parts_a = -1;
  int parts_b = -1;
  int max_parts = kMaxFusedParts;
};
// Every shape of (a, b) within `filter` whose fused block fits (fused_block_fits), variants in
// index order, then ratios as fusion_ratios_that_fit lists them.
std::vector<FusionShape> fusion_shapes_that_fit(const DeviceSpec& device, const KernelSpec& a, const KernelSpec& b,
                                                const FusionShapeFilter& filter = {});
// The fewest fused blocks per SM a chosen shape should leave when any shape allows it: with one
// block per SM, a fused launch's parts wait on each other's tails and the SM idles between them.
inline constexpr int kMinFusedBlocksPerSm = 2;
// The shape fusion uses when nothing was measured: among the shapes within `filter`, those with
// at least kMinFusedBlocksPerSm blocks per SM if there are any, and of them the one with the most
// resident warps per SM (occupancy: each part's throughput grows with the warps it keeps busy);
// ties go to more blocks per SM, then to the kernels' default variants, then to fewer parts.
// nullopt when no shape fits.
std::optional<FusionShape> best_fusion_shape(const DeviceSpec& device, const KernelSpec& a, const KernelSpec& b,
                                             const FusionShapeFilter& filter = {});

// Makes a fresh backend: the engine runs reference runs (alone, serial) on fresh instances.
struct BackendConfig {
  std::string kind = "sim";   // "sim" or "cuda"
  DeviceSpec device;          // the device to simulate (sim); ignored by cuda (it probes)
  uint64_t seed = 1;
  int device_index = 0;       // cuda: the GPU, counted among those CUDA_VISIBLE_DEVICES leaves
};
Result<std::unique_ptr<Backend>> make_backend(const BackendConfig& config);
// Registers how to make the "cuda" backend (done by the CUDA library when it is linked in).
void register_cuda_backend_factory(Result<std::unique_ptr<Backend>> (*factory)(const BackendConfig&));
// Backend kinds compiled into this build.
std::vector<std::string> available_backends();

}  // namespace concord
