// What a body sees: the logical block it processes, its thread index within its part, a barrier
// over its own part, its slice of shared memory, and cache-policy-typed loads and stores.
#pragma once

#include <cstdint>

#include "concord/device/cache_op.cuh"

namespace concord::device {

// `Barriers`: the named barriers (1..Barriers) a context of this type may use, one per part of a
// fused block (1 outside fusion). Each is named by a constant in the code: a barrier id held in a
// register makes ptxas reserve all 16 a block may have, which caps a fused kernel at a few blocks
// per SM whatever its registers and shared memory allow.
template <CacheOp Op, int Barriers = 1>
struct PartContext {
  static_assert(Barriers >= 1 && Barriers <= 15, "named barriers 1..15 (0 is __syncthreads)");
  int64_t block;     // logical block id
  int thread;        // 0 .. threads-1 within this part
  int threads;       // threads in this part (a multiple of 32)
  int barrier;       // named barrier id of this part (1..Barriers; 0 is __syncthreads)
  char* shared;      // this part's slice of dynamic shared memory

  // A barrier over this part's threads only: never __syncthreads(), which would hang a fused block.
  __device__ __forceinline__ void sync() const { sync_on<1>(); }
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

 private:
  // bar.sync on `barrier`, chosen among the constants 1..Barriers (a warp-uniform branch).
  template <int B>
  __device__ __forceinline__ void sync_on() const {
    if constexpr (B < Barriers) {
      if (barrier != B) {
        sync_on<B + 1>();
        return;
      }
    }
    asm volatile("bar.sync %0, %1;" ::"n"(B), "r"(threads) : "memory");
  }
};

}  // namespace concord::device
