// Green contexts: SM partitions for native (and opaque) launches. The device's SMs are split once
// into TPC-sized groups (CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, two SMs a group, plus
// what is left over); a probe kernel on each group reads %smid, which gives the SM -> group map.
// A context for an SM set is the union of the groups it touches, created on first use (about
// 1.5 ms each on an H200) and cached; streams are made per (set, owner).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/driver_api.h"
#include "concord/sm_set.h"
#include "concord/status.h"

namespace concord::cuda {

class GreenContextPool {
 public:
  ~GreenContextPool();
  GreenContextPool(const GreenContextPool&) = delete;
  GreenContextPool& operator=(const GreenContextPool&) = delete;

  // Splits device `device` and probes every group's SMs.
  static Result<std::unique_ptr<GreenContextPool>> create(int device);

  // SM ids of each group, in split order (the last one may be the left-over SMs).
  const std::vector<SmSet>& groups() const { return group_sms_; }
  // The union of the groups that `sms` touches: what a green context can give.
  SmSet cover(const SmSet& sms) const;
  // A stream whose kernels run only on cover(sms); one per (cover, owner), cached.
  Result<cudaStream_t> stream_for(const SmSet& sms, int owner, int priority);
  int contexts_created() const { return static_cast<int>(contexts_.size()); }

 private:
  GreenContextPool() = default;
  Result<CUgreenCtx> context_for(const SmSet& cover);

  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  std::vector<CUdevResource> resources_;  // one per group
  std::vector<SmSet> group_sms_;
  std::map<std::vector<uint64_t>, CUgreenCtx> contexts_;
  std::map<std::pair<std::vector<uint64_t>, int>, CUstream> streams_;
};

// Launches a probe on `stream`: every SM a block of it ran on (for tests and topology).
Result<SmSet> probe_sms(cudaStream_t stream, int blocks);

}  // namespace concord::cuda
