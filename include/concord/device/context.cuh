// What a body sees: the logical block it processes, its thread index within its part, a barrier
// over its own part, its slice of shared memory, and cache-policy-typed loads and stores.
#pragma once

#include <cstdint>

#include "concord/device/cache_op.cuh"

namespace concord::device {

template <CacheOp Op>
struct PartContext {
  int64_t block;     // logical block id
  int thread;        // 0 .. threads-1 within this part
  int threads;       // threads in this part (a multiple of 32)
  int barrier;       // named barrier id of this part (1..15; 0 is __syncthreads)
  char* shared;      // this part's slice of dynamic shared memory

  // A barrier over this part's threads only: never __syncthreads(), which would hang a fused block.
  __device__ __forceinline__ void sync() const { asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(threads) : "memory"); }
  template <typename T>
  __device__ __forceinline__ T load(const T* p) const {
    return Global<Op>::load(p);
  }
  template <typename T>
  __device__ __forceinline__ void store(T* p, T v) const {
    Global<Op>::store(p, v);
  }
  template <typename T>
  __device__ __forceinline__ T* shared_as() const {
    return reinterpret_cast<T*>(shared);
  }
};

}  // namespace concord::device
