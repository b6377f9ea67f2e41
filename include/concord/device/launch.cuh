// The three ways one body runs: standalone (one logical block per CUDA block), elastic
// (persistent blocks gated by SM set and TLP, fetching logical blocks from the control block's
// counter) and fused (a:b parts of two bodies in one block, each part looping on its own counter).
#pragma once

#include <cstdint>

#include "concord/device/context.cuh"
#include "concord/device/control.h"

namespace concord::device {

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Relaxed atomic loads (PTX memory model): see host writes without volatile.
__device__ __forceinline__ int32_t load_relaxed(const int32_t* p) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t load_relaxed(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// The launch's fixed fields, read once per block: the host sets them before the launch and never
// changes them while it runs (it writes only `allowed` and `preempt`).
struct Range {
  int64_t begin;
  int64_t end;
  int64_t chunk;
};
__device__ __forceinline__ Range range_of(const ElasticControl* ctl) {
  return {ctl->range_begin, ctl->range_end, ctl->chunk > 0 ? ctl->chunk : 1};
}

// May this block take more work: its SM allowed, no preempt, and blocks left to hand out. The
// three loads do not depend on each other, so they travel together: one round trip to L2, where
// testing them one after another took three (the latency of a short kernel's every block).
__device__ __forceinline__ bool may_fetch(const ElasticControl* ctl, unsigned sm, const Range& r) {
  const uint64_t word = load_relaxed(&ctl->allowed[(sm % kMaxControlSms) / 64]);
  const int32_t preempt = load_relaxed(&ctl->preempt);
  const uint64_t next = load_relaxed(reinterpret_cast<const uint64_t*>(&ctl->next));
  return sm < kMaxControlSms && ((word >> (sm % 64)) & 1u) && preempt == 0 &&
         next < static_cast<uint64_t>(r.end - r.begin);
}

// Leader only: the next chunk [begin, end) of this control's range, or begin = -1 when the part
// must stop. One atomic per chunk: a single counter for every block of the GPU is a hot spot, so
// the host sizes chunks to keep fetches rare; every block handed out is finished (the finished
// blocks always form a prefix of the range). `checked`: may_fetch was just true (admission), so
// the first fetch goes straight to the counter.
struct Chunk {
  int64_t begin;
  int64_t end;
};

__device__ __forceinline__ Chunk fetch_chunk(ElasticControl* ctl, unsigned sm, const Range& r, bool checked = false) {
  if (!checked && !may_fetch(ctl, sm, r)) return {-1, -1};
  const unsigned long long i = atomicAdd(&ctl->next, static_cast<unsigned long long>(r.chunk));
  const int64_t b = r.begin + static_cast<int64_t>(i);
  if (b >= r.end) return {-1, -1};
  return {b, b + r.chunk < r.end ? b + r.chunk : r.end};
}

__device__ __forceinline__ void count_done(ElasticControl* ctl, unsigned sm, int64_t blocks) {
  atomicAdd(&ctl->done, static_cast<unsigned long long>(blocks));
  atomicAdd(&ctl->sm_done[sm], static_cast<unsigned>(blocks));
}

// The resident-block limit on `sm` now: tight_tlp on the SMs of `tight` (those shared with other
// kernels), else tlp. The three loads do not depend on each other.
__device__ __forceinline__ int32_t tlp_limit(const ElasticControl* ctl, unsigned sm) {
  const int32_t everywhere = load_relaxed(&ctl->tlp);
  const int32_t tight_tlp = load_relaxed(&ctl->tight_tlp);
  const uint64_t tight = load_relaxed(&ctl->tight[(sm % kMaxControlSms) / 64]);
  return tight_tlp > 0 && ((tight >> (sm % 64)) & 1u) ? tight_tlp : everywhere;
}

// Leader only: admits this block on its SM if it may fetch and the SM holds fewer than its limit.
// The limit's loads travel with may_fetch's (none depends on another).
__device__ __forceinline__ bool admit(ElasticControl* ctl, unsigned sm, const Range& r) {
  const int32_t tlp = tlp_limit(ctl, sm);
  if (!may_fetch(ctl, sm, r)) return false;
  // Compare-and-swap, not add-then-undo: an add over the limit would show the SM one block over it
  // for a moment, a running block in leave_if_over_limit could take that for a lowered limit and
  // leave, and the undo would then leave the SM one block under its limit for good.
  int32_t seen = load_relaxed(&ctl->resident[sm]);
  while (seen < tlp) {
    const int32_t prev = atomicCAS(&ctl->resident[sm], seen, seen + 1);
    if (prev == seen) {
      atomicMax(&ctl->resident_peak[sm], seen + 1);
      return true;
    }
    seen = prev;
  }
  return false;
}

// Leader only, between chunks: true when this block must leave its SM because the SM holds more
// blocks of this launch than the limit now allows (the host lowered the TLP while the launch
// runs); the block is then no longer counted there. The compare-and-swap takes one block off the
// count only while the count is above the limit, so exactly the surplus leaves and the count never
// dips below the limit on the way (which would let a new block in).
__device__ __forceinline__ bool leave_if_over_limit(ElasticControl* ctl, unsigned sm) {
  const int32_t limit = tlp_limit(ctl, sm);
  int32_t seen = load_relaxed(&ctl->resident[sm]);
  while (seen > limit) {
    const int32_t prev = atomicCAS(&ctl->resident[sm], seen, seen - 1);
    if (prev == seen) return true;
    seen = prev;
  }
  return false;
}

// The leader of a block or part records a logical block in the audit (control.h) just before
// calling the body for it.
__device__ __forceinline__ void audit_block(const BlockAudit& audit, int64_t block, unsigned sm) {
  if (audit.runs == nullptr) return;
  atomicAdd(&audit.runs[block], 1u);
  audit.sm[block] = sm;
}

template <typename Body, CacheOp Op>
__global__ void standalone_kernel(Body body, int64_t range_begin, BlockAudit audit) {
  extern __shared__ __align__(16) char dynamic_shared[];
  PartContext<Op> ctx{range_begin + static_cast<int64_t>(blockIdx.x), static_cast<int>(threadIdx.x),
                      static_cast<int>(blockDim.x), 1, dynamic_shared};
  if (threadIdx.x == 0) audit_block(audit, ctx.block, sm_id());
  body(ctx);
}

template <typename Body, CacheOp Op>
__global__ void elastic_kernel(Body body, ElasticControl* ctl, BlockAudit audit) {
  extern __shared__ __align__(16) char dynamic_shared[];
  __shared__ Chunk chunk;
  __shared__ Range range;  // the leader's; in shared memory so that no register stays live across the body
  __shared__ int admitted;
  const unsigned sm = sm_id();
  if (threadIdx.x == 0) {
    const Range r = range_of(ctl);  // its loads travel with admission's
    admitted = admit(ctl, sm, r);
    // Admission just tested what a fetch would: the first fetch goes straight to the counter.
    chunk = admitted ? fetch_chunk(ctl, sm, r, /*checked=*/true) : Chunk{-1, -1};
    range = r;
  }
  __syncthreads();
  if (!admitted) return;  // owns nothing: work is handed out only through the counter
  bool counted = true;     // the leader's: this block is still in the SM's resident count
  PartContext<Op> ctx{-1, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), 1, dynamic_shared};
  while (true) {
    const Chunk mine = chunk;
    if (mine.begin < 0) break;
    for (ctx.block = mine.begin; ctx.block < mine.end; ++ctx.block) {
      if (threadIdx.x == 0) audit_block(audit, ctx.block, sm);
      body(ctx);
      ctx.sync();  // the body's shared memory is free before the next logical block uses it
    }
    // Every thread read `chunk` before the body's barrier: the leader may overwrite it now. The
    // range's last chunk leaves nothing to fetch; a lowered TLP sends the surplus blocks away here,
    // so a new limit holds within one chunk (the work fetched is always finished first).
    if (threadIdx.x == 0) {
      count_done(ctl, sm, mine.end - mine.begin);
      if (mine.end >= range.end) {
        chunk = Chunk{-1, -1};
      } else if (leave_if_over_limit(ctl, sm)) {
        counted = false;
        chunk = Chunk{-1, -1};
      } else {
        chunk = fetch_chunk(ctl, sm, range);
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && counted) atomicSub(&ctl->resident[sm], 1);
}

// A fused block: parts [0, a) run BodyA with threads_a threads each, parts [a, a+b) run BodyB with
// threads_b each. Admission (SM set, TLP, preempt) follows ctl_a; each body fetches from its own
// control. Shared memory: a slices of shared_a bytes, then b slices of shared_b bytes. `Parts` is
// a + b, fixed when the kernel is compiled (the fusion compiler compiles one per part count): the
// block uses named barriers 0..Parts, so the barriers never cap its blocks per SM below what its
// registers and shared memory allow.
template <typename BodyA, typename BodyB, CacheOp Op, int Parts>
__global__ void fused_kernel(BodyA body_a, BodyB body_b, ElasticControl* ctl_a, ElasticControl* ctl_b, int parts_a,
                             int parts_b, int threads_a, int threads_b, int shared_a, int shared_b, BlockAudit audit_a,
                             BlockAudit audit_b) {
  extern __shared__ __align__(16) char dynamic_shared[];
  __shared__ Chunk chunks[Parts];
  __shared__ int admitted;
  const unsigned sm = sm_id();
  if (threadIdx.x == 0) admitted = admit(ctl_a, sm, range_of(ctl_a));
  __syncthreads();
  if (!admitted) return;
  const int t = static_cast<int>(threadIdx.x);
  const bool in_a = t < parts_a * threads_a;
  const int part = in_a ? t / threads_a : parts_a + (t - parts_a * threads_a) / threads_b;
  const int part_threads = in_a ? threads_a : threads_b;
  const int local = in_a ? t % threads_a : (t - parts_a * threads_a) % threads_b;
  char* slice = in_a ? dynamic_shared + static_cast<size_t>(part) * shared_a
                     : dynamic_shared + static_cast<size_t>(parts_a) * shared_a +
                           static_cast<size_t>(part - parts_a) * shared_b;
  PartContext<Op, Parts> ctx{-1, local, part_threads, 1 + part, slice};
  ElasticControl* ctl = in_a ? ctl_a : ctl_b;
  while (true) {
    if (local == 0) chunks[part] = fetch_chunk(ctl, sm, range_of(ctl));
    ctx.sync();
    const Chunk mine = chunks[part];
    if (mine.begin < 0) break;
    for (ctx.block = mine.begin; ctx.block < mine.end; ++ctx.block) {
      if (local == 0) audit_block(in_a ? audit_a : audit_b, ctx.block, sm);
      if (in_a) body_a(ctx);
      else body_b(ctx);
      ctx.sync();
    }
    if (local == 0) count_done(ctl, sm, mine.end - mine.begin);
  }
  __syncthreads();
  if (t == 0) atomicSub(&ctl_a->resident[sm], 1);
}

}  // namespace concord::device
