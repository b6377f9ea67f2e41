// Room for a BE launch while LC work is in flight (include/concord/lease.h, Lease::be_sm_cap and
// be_blocks_per_sm_cap), made in the tenant's own process for kernels the library cannot rewrite:
//
//   - an SM-count cap: a green context holding `sms` SMs (one group split off the device by
//     count), whose streams the launch goes to with the event hand-offs of StreamPlacer::on_green.
//     Under MPS a client's green context confines its kernels to as many SMs as the group has (not
//     to given SMs: docs/intercept.md), which is all a count cap asks. Contexts are made once per
//     count, streams once per (count, application stream, priority);
//   - a residency cap: the launch's dynamic shared memory padded so that at most `blocks_per_sm`
//     of its blocks fit on an SM (the kernel never reads memory it did not ask for, so what it
//     computes is unchanged). The padding comes from the function's static shared memory, the
//     device's shared memory per SM and its per-block reservation; a kernel whose registers,
//     threads or own shared memory already keep it at or below the cap is not padded, and the
//     function's own dynamic size is the floor. The function's dynamic-shared-memory maximum is
//     raised as needed (per function, never lowered).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "concord/status.h"
#include "intercept/cu_handles.h"
#include "intercept/real_driver.h"
#include "intercept/residency.h"
#include "ipc/protocol.h"

namespace concord::intercept {

class Room {
 public:
  // `device`'s limits; the context the launches come from must be current.
  static Result<std::unique_ptr<Room>> create(const RealDriver& driver, CUdevice device);

  const RoomDevice& device() const { return device_; }
  // A stream of a green context of `sms` SMs (rounded up to an even count) at `priority` for the
  // application stream `owner`; an error when the driver has no green contexts or cannot split.
  Result<CUstream> sm_stream(int sms, uint64_t owner, int priority);
  // The dynamic shared memory to launch `function` (a CUkernel when `kernel_handle`, else a
  // CUfunction) with, for at most `cap` blocks per SM; raises the function's maximum when the
  // padding needs it (device-wide for a CUkernel, so its copy in a green context has it too). An
  // error when the function's attributes cannot be read or set (the caller launches unpadded).
  Result<uint32_t> shared_for(const void* function, bool kernel_handle, ipc::Dim3 block, uint32_t own_shared, int cap);
  // The driver refused a padded launch of `function` (the application may have set its own
  // maximum since): it is not padded again.
  void padding_failed(const void* function);
  // The application destroyed its stream `owner`: its green streams go.
  void forget(uint64_t owner);

 private:
  Room(const RealDriver& driver, CUdevice device) : driver_(driver), device_handle_(device) {}
  struct Known {
    RoomFunction attrs;
    bool is_kernel = false;  // a CUkernel (its maximum is set device-wide)
    CUfunction function = nullptr;
    int max_dynamic = 0;     // the function's dynamic-shared-memory maximum as last set or read
    bool usable = false;
  };
  Known learn(const void* function, bool kernel_handle);
  Status make_context(int count);  // under mu_

  const RealDriver& driver_;
  CUdevice device_handle_;
  RoomDevice device_;
  std::mutex mu_;
  CUdevResource all_{};
  bool have_all_ = false;
  std::map<int, OwnedGreenCtx> contexts_;                        // by SM count
  std::map<int, Status> failed_counts_;                          // counts the device would not split off
  std::map<std::tuple<int, uint64_t, int>, OwnedStream> streams_;  // by (count, owner, priority)
  std::unordered_map<const void*, Known> functions_;
};

}  // namespace concord::intercept
