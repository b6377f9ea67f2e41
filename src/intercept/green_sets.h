// SM sets for opaque launches in the tenant's own process: green contexts over TPC-sized groups
// of the device's SMs, driver API only (the library must not load the CUDA runtime).
//
// The device is split once into groups of two SMs (CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING;
// the left-over SMs a group of their own); a probe kernel (PTX, %smid) in a context of each group
// alone gives the SM ids of every group. An announced set becomes the green context of the union of
// the groups it touches (its cover), made when the announcement arrives, not when a launch needs it;
// streams of that context are made per (owner, priority) on first use.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "concord/sm_set.h"
#include "concord/status.h"
#include "intercept/cu_handles.h"
#include "intercept/real_driver.h"

namespace concord::intercept {

class GreenSets {
 public:
  // Splits `device` and probes every group; the primary context of `device` must be current on
  // the calling thread (the probe's memory lives there).
  static Result<std::unique_ptr<GreenSets>> create(const RealDriver& driver, CUdevice device);

  // The green context for the set the daemon announced as `handle` (replacing an earlier one of
  // that handle). An empty set, or SMs the device does not have, is invalid_argument.
  Status prepare(uint32_t handle, const SmSet& sms);
  // A stream of `handle`'s context at `priority` for `owner` (the application stream it shadows):
  // not_found when `handle` was never prepared.
  Result<CUstream> stream(uint32_t handle, uint64_t owner, int priority);
  // The SMs `handle`'s context covers (empty when unknown).
  SmSet cover_of(uint32_t handle) const;

  const std::vector<SmSet>& groups() const { return group_sms_; }
  // The union of the groups `sms` touches.
  SmSet cover(const SmSet& sms) const;

 private:
  GreenSets(const RealDriver& driver, CUdevice device) : driver_(driver), device_(device) {}
  Result<SmSet> probe(CUstream stream, CUkernel kernel);

  struct Prepared {
    SmSet cover;
    std::shared_ptr<OwnedGreenCtx> context;
  };
  const RealDriver& driver_;
  CUdevice device_;
  std::vector<CUdevResource> resources_;  // one per group
  std::vector<SmSet> group_sms_;
  std::map<std::vector<uint64_t>, std::shared_ptr<OwnedGreenCtx>> contexts_;  // by cover
  std::map<uint32_t, Prepared> handles_;
  // By (cover, owner, priority): a handle announced again with another set gets new streams, and
  // the old ones (perhaps in use by a launch on another thread) live on with their context.
  std::map<std::tuple<std::vector<uint64_t>, uint64_t, int>, OwnedStream> streams_;
  mutable std::mutex mu_;
};

}  // namespace concord::intercept
