// RAII owners of CUDA streams, events, device buffers and pinned host buffers. Destructors never fail loudly: a
// destroy error at teardown has nowhere to go, and the runtime reports it on the next call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "cuda/allocation_scope.h"
#include "cuda/check.h"

namespace concord::cuda {

// Where a Buffer's memory comes from: device memory (from the allocator of the open
// AllocationScope, else cudaMalloc), or page-locked host memory (staging for asynchronous copies).
struct DeviceMemory {
  static constexpr bool kFromScope = true;
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void release(void* p) { cudaFree(p); }
};
struct PinnedHostMemory {
  static constexpr bool kFromScope = false;
  static cudaError_t allocate(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }
  static void release(void* p) { cudaFreeHost(p); }
};

template <typename T, typename Memory>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { reset(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)), from_(std::move(o.from_)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
      from_ = std::move(o.from_);
    }
    return *this;
  }
  Status allocate(size_t count) {
    reset();
    if constexpr (Memory::kFromScope) {
      if (const auto& a = AllocationScope::current()) {
        auto p = a->allocate(count * sizeof(T));
        if (!p) return Status(p.status().code(), "allocator '" + a->name() + "': " + p.status().message());
        ptr_ = static_cast<T*>(*p);
        count_ = count;
        from_ = a;
        return Status::ok();
      }
    }
    void* p = nullptr;
    CONCORD_CUDA(Memory::allocate(&p, count * sizeof(T)));
    ptr_ = static_cast<T*>(p);
    count_ = count;
    return Status::ok();
  }
  void reset() {
    if (ptr_) {
      if (from_) from_->release(ptr_, count_ * sizeof(T));
      else Memory::release(ptr_);
    }
    ptr_ = nullptr;
    count_ = 0;
    from_.reset();
  }
  // Gives up the memory without freeing it: teardown with a kernel still running on the device
  // must not call cudaFree, which waits for the device.
  void abandon() {
    ptr_ = nullptr;
    count_ = 0;
    from_.reset();
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
  std::shared_ptr<DeviceAllocator> from_;  // null: Memory::release
};

template <typename T>
using DeviceBuffer = Buffer<T, DeviceMemory>;
template <typename T>
using HostBuffer = Buffer<T, PinnedHostMemory>;

class Stream {
 public:
  Stream() = default;
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  // A non-blocking stream (does not synchronise with the legacy default stream).
  Status create(int priority = 0) {
    CONCORD_CUDA(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority));
    return Status::ok();
  }
  // Takes ownership of a stream made elsewhere (a green context's).
  void adopt(cudaStream_t s) { s_ = s; }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  Status create() {
    CONCORD_CUDA(cudaEventCreate(&e_));
    return Status::ok();
  }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace concord::cuda
