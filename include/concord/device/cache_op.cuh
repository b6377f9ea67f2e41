// Global loads and stores whose cache operator is a template parameter (CUTLASS-style: one PTX
// instruction per specialisation). Policies map to FEDCM's s0/s1/s2/s12 (docs/hardware.md):
//   normal         ld.global
//   l1_bypass      ld.global.cg                      (cache in L2 only)
//   l2_evict_first ld.global.L2::cache_hint, evict-first policy
//   both           ld.global.cg.L2::cache_hint, evict-first policy
#pragma once

#include <cstdint>

namespace concord::device {

enum class CacheOp : int { normal = 0, l1_bypass = 1, l2_evict_first = 2, both = 3 };

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

template <CacheOp Op>
struct Global;

template <>
struct Global<CacheOp::normal> {
  __device__ __forceinline__ static int load(const int* p) { return *p; }
  __device__ __forceinline__ static float2 load(const float2* p) { return *p; }
  __device__ __forceinline__ static void store(float2* p, float2 v) { *p = v; }
  __device__ __forceinline__ static float load(const float* p) { return *p; }
  __device__ __forceinline__ static float4 load(const float4* p) { return *p; }
  __device__ __forceinline__ static void store(float* p, float v) { *p = v; }
  __device__ __forceinline__ static void store(float4* p, float4 v) { *p = v; }
};

template <>
struct Global<CacheOp::l1_bypass> {
  __device__ __forceinline__ static int load(const int* p) {
    int v;
    asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
  }
  __device__ __forceinline__ static float2 load(const float2* p) {
    float2 v;
    asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
    return v;
  }
  __device__ __forceinline__ static void store(float2* p, float2 v) {
    asm volatile("st.global.cg.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v.x), "f"(v.y) : "memory");
  }
  __device__ __forceinline__ static float load(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
  }
  __device__ __forceinline__ static float4 load(const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
  }
  __device__ __forceinline__ static void store(float* p, float v) {
    asm volatile("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
  }
  __device__ __forceinline__ static void store(float4* p, float4 v) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
  }
};

template <>
struct Global<CacheOp::l2_evict_first> {
  __device__ __forceinline__ static int load(const int* p) {
    int v;
    asm volatile("ld.global.L2::cache_hint.s32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static float2 load(const float2* p) {
    float2 v;
    asm volatile("ld.global.L2::cache_hint.v2.f32 {%0, %1}, [%2], %3;" : "=f"(v.x), "=f"(v.y) : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static void store(float2* p, float2 v) {
    asm volatile("st.global.L2::cache_hint.v2.f32 [%0], {%1, %2}, %3;" ::"l"(p), "f"(v.x), "f"(v.y), "l"(evict_first_policy())
                 : "memory");
  }
  __device__ __forceinline__ static float load(const float* p) {
    float v;
    asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static float4 load(const float4* p) {
    float4 v;
    asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static void store(float* p, float v) {
    asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(evict_first_policy()) : "memory");
  }
  __device__ __forceinline__ static void store(float4* p, float4 v) {
    asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w), "l"(evict_first_policy())
                 : "memory");
  }
};

template <>
struct Global<CacheOp::both> {
  __device__ __forceinline__ static int load(const int* p) {
    int v;
    asm volatile("ld.global.cg.L2::cache_hint.s32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static float2 load(const float2* p) {
    float2 v;
    asm volatile("ld.global.cg.L2::cache_hint.v2.f32 {%0, %1}, [%2], %3;" : "=f"(v.x), "=f"(v.y) : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static void store(float2* p, float2 v) { Global<CacheOp::l2_evict_first>::store(p, v); }
  __device__ __forceinline__ static float load(const float* p) {
    float v;
    asm volatile("ld.global.cg.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static float4 load(const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(evict_first_policy()));
    return v;
  }
  __device__ __forceinline__ static void store(float* p, float v) { Global<CacheOp::l2_evict_first>::store(p, v); }
  __device__ __forceinline__ static void store(float4* p, float4 v) { Global<CacheOp::l2_evict_first>::store(p, v); }
};

}  // namespace concord::device
