#include "intercept/room.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>

#include "intercept/green_context.h"

namespace concord::intercept {

Result<std::unique_ptr<Room>> Room::create(const RealDriver& driver, CUdevice device) {
  if (!driver.device_get_attribute) return Status::unsupported("room: this driver lacks cuDeviceGetAttribute");
  std::unique_ptr<Room> room(new Room(driver, device));
  RoomDevice& d = room->device_;
  const auto attr = [&](CUdevice_attribute a, int& out) -> Status {
    CONCORD_INTERCEPT_CU(driver.device_get_attribute(&out, a, device));
    return Status::ok();
  };
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.sm_count));
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, d.shared_per_sm));
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d.shared_per_block_max));
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, d.reserved_per_block));
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, d.threads_per_sm));
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, d.blocks_per_sm));
  CONCORD_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, d.registers_per_sm));
  return room;
}

Result<CUstream> Room::sm_stream(int sms, uint64_t owner, int priority) {
  if (!driver_.has_green_contexts()) return Status::unsupported("room: this driver lacks the green-context API");
  if (sms <= 0) return Status::invalid_argument("room: an SM count must be positive");
  const int count = std::min((sms + 1) / 2 * 2, device_.sm_count);
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_tuple(count, owner, priority);
  if (auto it = streams_.find(key); it != streams_.end()) return it->second.get();
  if (auto f = failed_counts_.find(count); f != failed_counts_.end()) return f->second;
  auto ctx = contexts_.find(count);
  if (ctx == contexts_.end()) {
    // A failure is remembered for the count: not asked of the driver again at every launch.
    Status made = make_context(count);
    if (!made) {
      failed_counts_.emplace(count, made);
      return made;
    }
    ctx = contexts_.find(count);
  }
  CUstream raw = nullptr;
  CONCORD_INTERCEPT_CU(driver_.green_ctx_stream_create(&raw, ctx->second.get(), CU_STREAM_NON_BLOCKING, priority));
  return streams_.emplace(key, OwnedStream(&driver_, raw)).first->second.get();
}

Status Room::make_context(int count) {
  {
    if (!have_all_) {
      CONCORD_INTERCEPT_CU(driver_.device_get_dev_resource(device_handle_, &all_, CU_DEV_RESOURCE_TYPE_SM));
      have_all_ = true;
    }
    // One group of `count` SMs split off the device (pairs of SMs: co-scheduling ignored, as for
    // the SM sets), the rest left out.
    CUdevResource group{};
    unsigned groups = 1;
    CUdevResource input = all_;
    CONCORD_INTERCEPT_CU(driver_.dev_sm_resource_split_by_count(&group, &groups, &input, nullptr,
                                                                CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                                                static_cast<unsigned>(count)));
    if (groups != 1) return Status::device_error("room: the device split into " + std::to_string(groups) + " groups of " + std::to_string(count) + " SMs, not one");
    Result<OwnedGreenCtx> made = make_green_context(driver_, device_handle_, std::span(&group, 1));
    if (!made) return made.status();
    contexts_.emplace(count, std::move(*made));
  }
  return Status::ok();
}

void Room::padding_failed(const void* function) {
  std::lock_guard<std::mutex> lock(mu_);
  functions_[function].usable = false;
}

void Room::forget(uint64_t owner) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(streams_, [owner](const auto& e) { return std::get<1>(e.first) == owner; });
}

Room::Known Room::learn(const void* function, bool kernel_handle) {
  Known k;
  if (!driver_.func_get_attribute || !driver_.func_set_attribute) return k;
  // A CUkernel (what the runtime launches) has a CUfunction in the current context, whose
  // attributes are the kernel's; a CUfunction is asked directly.
  CUfunction f = reinterpret_cast<CUfunction>(const_cast<void*>(function));
  if (kernel_handle) {
    if (!driver_.kernel_get_function || !driver_.kernel_set_attribute ||
        driver_.kernel_get_function(&f, reinterpret_cast<CUkernel>(const_cast<void*>(function))) != CUDA_SUCCESS || !f) {
      return k;
    }
    k.is_kernel = true;
  }
  int regs = 0, shared = 0, max_dynamic = 0;
  if (driver_.func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f) != CUDA_SUCCESS ||
      driver_.func_get_attribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) != CUDA_SUCCESS ||
      driver_.func_get_attribute(&max_dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f) != CUDA_SUCCESS) {
    return k;
  }
  k.attrs = RoomFunction{regs, shared};
  k.function = f;
  k.max_dynamic = max_dynamic;
  k.usable = true;
  return k;
}

Result<uint32_t> Room::shared_for(const void* function, bool kernel_handle, ipc::Dim3 block, uint32_t own_shared, int cap) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = functions_.find(function);
  if (it == functions_.end()) it = functions_.emplace(function, learn(function, kernel_handle)).first;
  Known& k = it->second;
  if (!k.usable) return Status::unsupported("room: the function's attributes cannot be read");
  const int threads = static_cast<int>(block.x * block.y * block.z);
  const uint32_t shared = padded_shared(device_, k.attrs, threads, own_shared, cap);
  // The device's per-block maximum can stop the padding short of the cap (a small cap on a part
  // with little shared memory per block): then it is not a cap.
  if (shared != own_shared && resident_blocks(device_, k.attrs, threads, static_cast<int>(shared)) > cap) {
    return Status::unsupported("room: the padding cannot hold this kernel at the cap");
  }
  if (shared > own_shared && static_cast<int>(shared) > k.max_dynamic) {
    const int want = static_cast<int>(shared);
    const CUresult r = k.is_kernel
                           ? driver_.kernel_set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, want,
                                                          reinterpret_cast<CUkernel>(const_cast<void*>(function)), device_handle_)
                           : driver_.func_set_attribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, want);
    if (r != CUDA_SUCCESS) {
      k.usable = false;
      return driver_status(r, "raising the function's dynamic shared memory maximum", __FILE__, __LINE__);
    }
    k.max_dynamic = want;
  }
  return shared;
}

}  // namespace concord::intercept
