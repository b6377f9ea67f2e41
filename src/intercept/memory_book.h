// The tenant's GPU memory as the interception library counts it, against the quota the daemon
// wrote into its lease page (concord/memory_quota.h; docs/intercept.md, "Memory"). No CUDA here:
// pointers and VMM handles are numbers, so the counting is tested without a driver.
//
// An allocation reserves its bytes before the real call, with one compare-exchange on the live
// count against the quota, and gives them back if the call fails: two threads racing for the last
// bytes never take the count over the quota, and it never goes below zero.
//   - device pointers (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, the stream-ordered and pool
//     allocations) are counted from their allocation to their free. A free takes its entry out of
//     the book before the real call (the driver may hand the address out again the moment the call
//     returns) and puts it back if the call fails;
//   - VMM physical memory (cuMemCreate) is counted once, however often it is mapped, until it is
//     freed as the driver frees it: every handle reference released (cuMemRelease, one per
//     cuMemCreate and per cuMemRetainAllocationHandle) and every mapping unmapped (cuMemUnmap).
//     The real VMM calls that change a handle's state run under the book's VMM mutex, so a handle
//     or address the driver hands out again is never confused with the one before it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "concord/memory_quota.h"

namespace concord::intercept {

class MemoryBook {
 public:
  // The quota, set once the daemon granted it (until then, and without a daemon: count only).
  void set_quota(const MemoryQuota& quota);
  MemoryQuota quota() const;
  uint64_t live() const { return live_.load(std::memory_order_acquire); }
  uint64_t peak() const { return peak_.load(std::memory_order_acquire); }
  // Bumped at every change of the live count (what the report to the daemon follows).
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // Before a real allocation of `bytes`: reserves them; false, reserving nothing, when they would
  // take the live count over the quota.
  bool reserve(uint64_t bytes);
  // The real allocation failed: the reservation back.
  void cancel(uint64_t bytes);

  // ---- device pointers ----
  // The real allocation succeeded: its reservation is the allocation at `ptr`.
  void allocated(uint64_t ptr, uint64_t bytes);
  // A free, before its real call: the entry of `ptr` out of the book (bytes 0: not one the library
  // counted, e.g. allocated before it started).
  struct Taken {
    uint64_t ptr = 0;
    uint64_t bytes = 0;
  };
  Taken take(uint64_t ptr);
  // After the real free: its bytes back to the quota, or (it failed) the entry back.
  void freed(const Taken& taken, bool ok);

  // ---- VMM: call these with vmm_mutex() held across the real call ----
  std::mutex& vmm_mutex() { return vmm_mu_; }
  // cuMemCreate succeeded (its bytes reserved before): one reference to `handle`.
  void created(uint64_t handle, uint64_t bytes);
  // cuMemRetainAllocationHandle gave `handle` (one more reference, if it is one the book counts).
  void retained(uint64_t handle);
  // cuMemMap mapped `handle` at `va`.
  void mapped(uint64_t va, uint64_t handle);
  // cuMemUnmap unmapped [va, va + size); cuMemRelease released one reference to `handle`. Either
  // frees an allocation with no reference and no mapping left: its bytes go back (returned).
  uint64_t unmapped(uint64_t va, uint64_t size);
  uint64_t released(uint64_t handle);

  // What cuMemGetInfo answers the tenant: with a quota, total = the quota and free = what is left
  // of it, at most what the device has free; without one, the driver's answer.
  std::pair<uint64_t, uint64_t> info(uint64_t real_free, uint64_t real_total) const;

  // An allocation refused for the quota: counted; whether to say so now (the first refusal, then
  // at most one line every `interval_ns`); `since` gets the refusals since the last line.
  bool refused(uint64_t now_ns, uint64_t interval_ns, uint64_t* since);
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  struct Physical {
    uint64_t bytes = 0;
    uint32_t references = 0;
    uint32_t mappings = 0;
  };
  void give_back(uint64_t bytes);
  // Frees `handle`'s allocation when nothing holds it any more (vmm_mu_ held); the bytes freed.
  uint64_t maybe_free(std::unordered_map<uint64_t, Physical>::iterator it);

  std::atomic<uint64_t> limit_{kNoMemoryLimit};
  std::atomic<uint64_t> reserved_{0};
  std::atomic<uint64_t> live_{0};
  std::atomic<uint64_t> peak_{0};
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> refusals_{0};
  std::atomic<uint64_t> logged_refusals_{0};
  std::atomic<uint64_t> last_log_ns_{0};

  std::mutex ptr_mu_;
  std::unordered_map<uint64_t, uint64_t> pointers_;  // device pointer -> bytes

  std::mutex vmm_mu_;
  std::unordered_map<uint64_t, Physical> physical_;  // VMM handle -> its allocation
  std::map<uint64_t, uint64_t> mappings_;            // mapped address -> its handle
};

}  // namespace concord::intercept
