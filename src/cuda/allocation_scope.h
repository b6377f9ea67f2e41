// Which DeviceAllocator device buffers made on this thread come from: the CUDA backend opens a
// scope with a tenant's allocator around the preparation of that tenant's kernels, and the
// buffers made inside (cuda::DeviceBuffer) allocate and later release through it. Outside any
// scope, current() is null and buffers use cudaMalloc. Header-only and CUDA-free, so the CPU
// tests check it.
#pragma once

#include <memory>
#include <utility>

#include "concord/backend.h"

namespace concord {

class AllocationScope {
 public:
  explicit AllocationScope(std::shared_ptr<DeviceAllocator> allocator) : previous_(std::move(slot())) {
    slot() = std::move(allocator);
  }
  ~AllocationScope() { slot() = std::move(previous_); }
  AllocationScope(const AllocationScope&) = delete;
  AllocationScope& operator=(const AllocationScope&) = delete;

  // The allocator of the innermost open scope on this thread, or null.
  static const std::shared_ptr<DeviceAllocator>& current() { return slot(); }

 private:
  static std::shared_ptr<DeviceAllocator>& slot() {
    thread_local std::shared_ptr<DeviceAllocator> allocator;
    return allocator;
  }
  std::shared_ptr<DeviceAllocator> previous_;
};

}  // namespace concord
