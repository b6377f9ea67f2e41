// Green contexts: SM partitions for native (and opaque) launches. The device's SMs are split once
// into TPC-sized groups (CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, two SMs a group, plus
// what is left over); a probe kernel on each group reads %smid, which gives the SM -> group map.
// A context for an SM set is the union of the groups it touches, created on first use (about
// 1.5 ms each on an H200) and cached; streams are made per (set, owner, priority).
//
// One pool per device serves the whole process (`shared`): the driver does not give back all of a
// destroyed green context's memory (about 277 MB per backend with its 66 probe contexts on an H200,
// driver 580.159.04), and benches make hundreds of backends. Its methods lock, so backends alive
// at once may share it.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/driver_api.h"
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
  // The process's pool of device `device`, made on first use (a failure is returned each time and
  // not cached: under MPS the split fails, and that must not stick to a later non-MPS use).
  static Result<std::shared_ptr<GreenContextPool>> shared(int device);

  // SM ids of each group, in split order (the last one may be the left-over SMs).
  const std::vector<SmSet>& groups() const { return group_sms_; }
  // The union of the groups that `sms` touches: what a green context can give.
  SmSet cover(const SmSet& sms) const;
  // A stream whose kernels run only on cover(sms); one per (cover, owner, priority), cached (a
  // launch asking for a high priority must not get a normal stream made earlier for the same set).
  Result<cudaStream_t> stream_for(const SmSet& sms, int owner, int priority);
  int contexts_created() const;

 private:
  GreenContextPool() = default;
  Result<CUgreenCtx> context_for(const SmSet& cover);
  // The one place the backend makes a green context: over `parts` (groups of resources_), with its
  // own default stream; the caller destroys it. The interception library makes its own
  // (src/intercept/green_context.h): it must not link this layer or the CUDA runtime.
  Result<CUgreenCtx> make_context(std::vector<CUdevResource> parts) const;

  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  std::vector<CUdevResource> resources_;  // one per group
  std::vector<SmSet> group_sms_;
  std::map<std::vector<uint64_t>, CUgreenCtx> contexts_;
  std::map<std::tuple<std::vector<uint64_t>, int, int>, CUstream> streams_;  // by (cover, owner, priority)
  mutable std::mutex mu_;  // guards contexts_ and streams_
};

// Launches a probe on `stream`: every SM a block of it ran on (for tests and topology).
Result<SmSet> probe_sms(cudaStream_t stream, int blocks);

}  // namespace concord::cuda
