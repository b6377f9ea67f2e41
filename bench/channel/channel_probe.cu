// concord_channel_probe --out RAW.json [--mode quick|full|smoke] [--seed S] [--buffer-mib N]
//
// Can HBM channel interference be seen and steered from user space (docs/channel_probe.md,
// SGDRC §5-6)? User space sees virtual addresses only; a large cudaMalloc is backed by 2 MiB
// pages, so within a 2 MiB-aligned region virtual offsets are physical offsets. The probe times:
//   calibration  single-line latency of an L2 hit, a line after an L2 flush and a line discarded
//                from the L2 (discard.global.L2), and the victim kernel's throughput alone;
//   conditions   a victim reading a set V of chunk offsets in every even page while an aggressor
//                on other SMs reads V, offsets disjoint from V or random ones in the odd pages;
//   maps         the victim's throughput for every pair of offset classes, across pages (victim
//                and aggressor in different pages) and within one page;
//   latency      SGDRC's Algorithm 1: two lines of one page read at once by one warp after an L2
//                flush, for every 2 KiB delta.
// Victim and aggressor run on disjoint SMs (%smid filtering), so they share only the memory
// system. Every figure goes to RAW.json (bench/channel/channel_raw.h), rewritten after each
// experiment, for concord_channel_analyze.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backend/cuda/cuda_backend.h"
#include "cuda/check.h"
#include "cuda/handles.h"
#include "channel_raw.h"
#include "concord/build_info.h"
#include "concord/cli_parse.h"
#include "concord/device/launch.cuh"
#include "concord/report.h"

namespace concord::channel {
namespace {

using cuda::DeviceBuffer;

constexpr int kMaxSms = 256;
constexpr int kThreads = 256;  // threads of a hammer block: 8 warps
constexpr int64_t kPage = 2 << 20;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Device side -------------------------------------------------------------------------------------

// One run's shared state: who started when, how much each side read, and each side's admitted
// blocks per SM. Reset from the host before every run.
struct RunControl {
  unsigned long long victim_start;      // earliest victim warp start (globaltimer ns)
  unsigned long long victim_end;        // latest victim warp end
  unsigned long long victim_deadline;   // the victim's window end, set by its first warp
  unsigned long long victim_visits;     // chunks read
  unsigned long long aggressor_start;
  unsigned long long aggressor_end;
  unsigned long long aggressor_deadline;
  unsigned long long aggressor_visits;
  int aggressor_sms_ready;              // aggressor SMs holding their first block
  int victim_wait_timeouts;
  unsigned sink;                        // keeps the reads from being optimised away
  unsigned blocks[2][kMaxSms];
};

struct HammerParams {
  const uint8_t* base;
  const unsigned long long* chunks;  // byte offsets of the chunks to read, in order
  int chunk_count;
  int side;                          // 0 victim, 1 aggressor
  unsigned long long sms[kMaxSms / 64];  // the SMs this side may run on (bit per %smid)
  int blocks_per_sm;
  int discard;                       // discard each chunk from the L2 after reading it
  unsigned long long window_ns;      // how long each warp reads, from the side's first warp
  int wait_for_sms;                  // victim: aggressor SMs to wait for before starting (0: none)
  unsigned long long wait_limit_ns;
  unsigned seed;
};

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ long long clock_cycles() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  return t;
}

__device__ __forceinline__ void discard_line(const uint8_t* p) {
  asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
}

// A warp reads one chunk: every lane 16 bytes per 512-byte row, all rows issued before any is used.
template <int kChunk>
__device__ __forceinline__ unsigned read_chunk(const uint8_t* chunk, int lane) {
  constexpr int kRows = kChunk / 512;
  const uint4* v = reinterpret_cast<const uint4*>(chunk);
  uint4 x[kRows];
#pragma unroll
  for (int k = 0; k < kRows; ++k) x[k] = __ldcg(v + lane + 32 * k);
  unsigned acc = 0;
#pragma unroll
  for (int k = 0; k < kRows; ++k) acc ^= x[k].x ^ x[k].y ^ x[k].z ^ x[k].w;
  return acc;
}

template <int kChunk>
__device__ __forceinline__ void discard_chunk(const uint8_t* chunk, int lane) {
  for (int line = lane; line < kChunk / 128; line += 32) discard_line(chunk + 128 * line);
}

// Victim or aggressor: admitted blocks (at most blocks_per_sm on each SM of the side's set) read
// their side's chunks in a loop, each warp from its own starting point, until the window closes.
template <int kChunk>
__global__ void __launch_bounds__(kThreads) hammer(HammerParams p, RunControl* ctl) {
  __shared__ int admitted;
  if (threadIdx.x == 0) {
    const unsigned sm = device::sm_id();
    int ok = sm < kMaxSms && ((p.sms[sm / 64] >> (sm % 64)) & 1ull);
    if (ok) {
      const unsigned slot = atomicAdd(&ctl->blocks[p.side][sm], 1u);
      ok = slot < static_cast<unsigned>(p.blocks_per_sm);
      if (ok && slot == 0 && p.side == 1) atomicAdd(&ctl->aggressor_sms_ready, 1);
    }
    admitted = ok;
  }
  __syncthreads();
  if (!admitted) return;
  const int lane = threadIdx.x & 31;
  const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  unsigned long long deadline = 0;
  if (lane == 0) {
    if (p.wait_for_sms > 0) {
      const unsigned long long t0 = global_ns();
      while (device::load_relaxed(&ctl->aggressor_sms_ready) < p.wait_for_sms) {
        if (global_ns() - t0 > p.wait_limit_ns) {
          atomicAdd(&ctl->victim_wait_timeouts, 1);
          break;
        }
        __nanosleep(256);
      }
    }
    const unsigned long long start = global_ns();
    unsigned long long* window_end = p.side == 0 ? &ctl->victim_deadline : &ctl->aggressor_deadline;
    const unsigned long long set = atomicCAS(window_end, 0ull, start + p.window_ns);
    deadline = set == 0 ? start + p.window_ns : set;
    atomicMin(p.side == 0 ? &ctl->victim_start : &ctl->aggressor_start, start);
  }
  deadline = __shfl_sync(0xffffffffu, deadline, 0);
  unsigned position = static_cast<unsigned>((static_cast<unsigned long long>(warp) * 2654435761ull + p.seed) %
                                            static_cast<unsigned long long>(p.chunk_count));
  unsigned long long visits = 0;
  unsigned acc = 0;
  while (true) {
    unsigned long long now = 0;
    if (lane == 0) now = global_ns();
    if (__shfl_sync(0xffffffffu, now, 0) >= deadline) break;
    const uint8_t* chunk = p.base + __ldg(p.chunks + position);
    acc ^= read_chunk<kChunk>(chunk, lane);
    if (p.discard) discard_chunk<kChunk>(chunk, lane);
    ++visits;
    if (++position == static_cast<unsigned>(p.chunk_count)) position = 0;
  }
  if (lane == 0) {
    atomicAdd(p.side == 0 ? &ctl->victim_visits : &ctl->aggressor_visits, visits);
    atomicMax(p.side == 0 ? &ctl->victim_end : &ctl->aggressor_end, global_ns());
  }
  if (acc == 0x9e3779b9u) ctl->sink = acc;
}

// Every block marks its SM in `seen` and holds it a few microseconds, so that the blocks spread
// over every SM: the %smid values this GPU uses.
__global__ void record_sms(unsigned long long* seen) {
  if (threadIdx.x != 0) return;
  const unsigned sm = device::sm_id();
  if (sm < kMaxSms) atomicOr(&seen[sm / 64], 1ull << (sm % 64));
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < 20000ull) {
  }
}

// Reads `count` 16-byte words with every SM: evicts whatever the L2 held.
__global__ void flush_l2(const uint4* data, size_t count, RunControl* ctl) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) ctl->sink = acc;
}

// What happens to the base line before its timed read.
enum class Prepare { none, read, read_and_discard };

// One warp times n reads (n <= 32): read i loads first[i] in the even lanes and second[i] in the
// odd lanes (one warp instruction, so both requests leave together); the clock stops when both
// values are in. cycles[i] gets the SM cycles between. `prepare` reads the first line beforehand
// (an L2 hit follows) or reads and discards it (whether discard sends the next read to DRAM).
template <Prepare kPrepare>
__global__ void timed_reads(const uint8_t* base, const long long* first, const long long* second, int n,
                            long long* cycles, RunControl* ctl) {
  __shared__ unsigned seen[32];
  const int lane = threadIdx.x;
  long long mine_first = 0, mine_second = 0;
  if (lane < n) {
    mine_first = first[lane];
    mine_second = second[lane];
  }
  // The addresses must be in registers before any clock starts.
  seen[lane] = static_cast<unsigned>(mine_first ^ mine_second);
  __syncwarp();
  unsigned acc = 0;
  for (int i = 0; i < n; ++i) {
    const long long a = __shfl_sync(0xffffffffu, mine_first, i);
    const long long b = __shfl_sync(0xffffffffu, mine_second, i);
    const uint8_t* line = base + ((lane & 1) ? b : a);
    if constexpr (kPrepare != Prepare::none) {
      unsigned warm;
      asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(warm) : "l"(base + a) : "memory");
      seen[lane] = warm;  // waits for the value
      if constexpr (kPrepare == Prepare::read_and_discard) {
        if (lane == 0) discard_line(base + a);
        __threadfence();
      }
      __syncwarp();
    }
    const long long t0 = clock_cycles();
    unsigned v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(line) : "memory");
    const unsigned w = __shfl_xor_sync(0xffffffffu, v, 1);
    seen[lane] = v + w;  // waits for both lanes' values
    const long long t1 = clock_cycles();
    if (lane == 0) cycles[i] = t1 - t0;
    acc ^= seen[lane];
    __syncwarp();
  }
  if (acc == 0x9e3779b9u) ctl->sink = acc;
}

// SM cycles against %globaltimer over about two milliseconds: the SM clock now.
__global__ void measure_clock(long long* out) {
  const unsigned long long t0 = global_ns();
  const long long c0 = clock_cycles();
  unsigned long long t1 = t0;
  while (t1 - t0 < 2000000ull) t1 = global_ns();
  const long long c1 = clock_cycles();
  out[0] = c1 - c0;
  out[1] = static_cast<long long>(t1 - t0);
}

// ---- Host side ---------------------------------------------------------------------------------------

#define PROBE_CHECK(expr)                                                                \
  do {                                                                                   \
    const ::concord::Status s_ = (expr);                                                 \
    if (!s_.is_ok()) {                                                                   \
      std::fprintf(stderr, "concord_channel_probe: %s\n", s_.to_string().c_str());       \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

template <typename T>
T checked(Result<T> r) {
  PROBE_CHECK(r.status());
  return std::move(*r);
}

// How much each experiment measures.
struct MapSize {
  int granularity, classes, reps;
};
struct Plan {
  int64_t buffer_mib;
  double run_us;
  double lead_us;          // the aggressor reads 2 x lead_us longer than the victim: a victim
                           // that starts up to that much after it is still covered
  double wait_limit_ms;    // the victim waits this long for the aggressor at most
  std::vector<std::pair<int, int>> conditions;  // granularity, repetitions
  std::vector<MapSize> cross_maps;
  int same_page_pages;
  MapSize same_page;
  int latency_bases, latency_base_offsets, latency_reps, latency_deltas;  // deltas 0: every one
  int calibration_lines;
  int attempts;            // tries of a run before it is recorded as missing
  int give_up_after;       // stop once this many runs (and over half) went missing; 0: never
};

Plan plan_for(const std::string& mode) {
  if (mode == "full") {
    return {16384, 1000, 400, 50, {{2048, 24}, {1024, 12}, {4096, 12}},
            {{2048, 96, 3}, {1024, 32, 3}, {4096, 32, 3}}, 2, {2048, 32, 3}, 32, 4, 7, 0, 256, 3, 50};
  }
  // For compute-sanitizer: every kernel and path, a few runs each. The victim gives up on an
  // aggressor after half a second, once, and missing runs never stop it, in case the tool runs the
  // two kernels one after the other.
  if (mode == "smoke") {
    return {512, 200, 2000, 500, {{2048, 2}}, {{2048, 4, 2}}, 1, {2048, 4, 2}, 4, 2, 2, 16, 32, 1, 0};
  }
  return {8192, 1000, 400, 50, {{2048, 10}, {1024, 6}, {4096, 6}}, {{2048, 32, 2}}, 1, {2048, 24, 2},
          16, 2, 3, 0, 128, 3, 50};
}

// A list of chunk byte offsets resident on the device.
struct ChunkList {
  const unsigned long long* chunks = nullptr;
  int count = 0;
};

class Probe {
 public:
  Probe(const Plan& plan, uint64_t seed) : plan_(plan), rng_(seed), seed_(seed) {}

  Status init() {
    CONCORD_CUDA(cudaGetDeviceProperties(&prop_, 0));
    sms_ = prop_.multiProcessorCount;
    CONCORD_RETURN_IF_ERROR(split_sms());
    const int64_t bytes = plan_.buffer_mib << 20;
    pages_ = bytes / kPage;
    if (pages_ < 8) return Status::invalid_argument("--buffer-mib: at least 16 MiB (8 pages of 2 MiB)");
    CONCORD_RETURN_IF_ERROR(buffer_.allocate(bytes + kPage));
    base_ = buffer_.get() + (kPage - reinterpret_cast<uintptr_t>(buffer_.get()) % kPage) % kPage;
    CONCORD_CUDA(cudaMemset(buffer_.get(), 0, buffer_.bytes()));
    const size_t flush_bytes = 4 * static_cast<size_t>(prop_.l2CacheSize);
    CONCORD_RETURN_IF_ERROR(flush_.allocate(flush_bytes / sizeof(uint4)));
    CONCORD_CUDA(cudaMemset(flush_.get(), 0, flush_.bytes()));
    CONCORD_RETURN_IF_ERROR(control_.allocate(1));
    CONCORD_RETURN_IF_ERROR(control_host_.allocate(1));
    CONCORD_RETURN_IF_ERROR(control_init_.allocate(1));
    RunControl init{};
    init.victim_start = init.aggressor_start = ~0ull;
    *control_init_.get() = init;
    CONCORD_RETURN_IF_ERROR(victim_stream_.create());
    CONCORD_RETURN_IF_ERROR(aggressor_stream_.create());
    CONCORD_RETURN_IF_ERROR(reset_done_.create());
    CONCORD_RETURN_IF_ERROR(aggressor_done_.create());
    CONCORD_RETURN_IF_ERROR(timing_.allocate(32));
    CONCORD_RETURN_IF_ERROR(addresses_.allocate(2 * 32));
    CONCORD_RETURN_IF_ERROR(clock_.allocate(2));
    return Status::ok();
  }

  ProbeConfig config(const std::string& mode) const {
    ProbeConfig c;
    c.mode = mode;
    c.seed = seed_;
    c.buffer_bytes = pages_ * kPage;
    c.page_bytes = kPage;
    c.victim_sms = victim_sms_;
    c.aggressor_sms = aggressor_sms_;
    c.victim_warps_per_sm = kVictimBlocksPerSm * kThreads / 32;
    c.aggressor_warps_per_sm = kAggressorBlocksPerSm * kThreads / 32;
    c.run_us = plan_.run_us;
    return c;
  }
  const cudaDeviceProp& properties() const { return prop_; }
  int64_t pages() const { return pages_; }
  int runs() const { return runs_; }
  int invalid_runs() const { return invalid_runs_; }

  // Chunk offsets (granularity bytes) `offsets` in every page of `pages`: one list per offset,
  // stored one after another in `storage`.
  Result<std::vector<ChunkList>> upload_classes(DeviceBuffer<unsigned long long>& storage, const std::vector<int>& offsets,
                                                const std::vector<int64_t>& pages, int granularity) {
    std::vector<unsigned long long> host;
    host.reserve(offsets.size() * pages.size());
    for (int o : offsets) {
      for (int64_t p : pages) host.push_back(static_cast<unsigned long long>(p * kPage + int64_t{o} * granularity));
    }
    CONCORD_RETURN_IF_ERROR(storage.allocate(host.size()));
    CONCORD_CUDA(cudaMemcpy(storage.get(), host.data(), host.size() * sizeof(unsigned long long), cudaMemcpyHostToDevice));
    std::vector<ChunkList> lists;
    for (size_t i = 0; i < offsets.size(); ++i) {
      lists.push_back({storage.get() + i * pages.size(), static_cast<int>(pages.size())});
    }
    return lists;
  }
  // One list of every chunk of offsets x pages (a set of offsets read together).
  Result<ChunkList> upload_set(DeviceBuffer<unsigned long long>& storage, const std::vector<int>& offsets,
                               const std::vector<int64_t>& pages, int granularity) {
    auto lists = upload_classes(storage, offsets, pages, granularity);
    if (!lists) return lists.status();
    return ChunkList{storage.get(), static_cast<int>(offsets.size() * pages.size())};
  }

  std::vector<int64_t> victim_pages() const { return pages_of(0); }
  std::vector<int64_t> aggressor_pages() const { return pages_of(1); }

  // Victim throughput in GB/s over its window, alone or beside the aggressor; NaN when no try gave
  // a run whose window the aggressor covered.
  Result<double> victim_gbps(const ChunkList& victim, const ChunkList* aggressor, int granularity, bool discard) {
    for (int attempt = 0; attempt < plan_.attempts; ++attempt) {
      ++runs_;
      auto r = run_once(victim, aggressor, granularity, discard);
      if (!r) return r.status();
      if (std::isfinite(*r)) return *r;
      ++invalid_runs_;
      // Runs that keep failing cost their whole wait each: stop rather than wait for every one.
      if (plan_.give_up_after > 0 && invalid_runs_ >= plan_.give_up_after && 2 * invalid_runs_ > runs_) {
        return Status::failed_precondition(std::to_string(invalid_runs_) + " of " + std::to_string(runs_) +
                                           " runs without a measurement (the aggressor did not cover the victim)");
      }
    }
    return kNaN;
  }

  // SM cycles of timed reads of pairs (first[i], second[i]) of byte offsets, at most 32, in one
  // kernel, after an L2 flush when `flush`.
  Result<std::vector<long long>> time_reads(Prepare prepare, const std::vector<long long>& first,
                                            const std::vector<long long>& second, bool flush) {
    const int n = static_cast<int>(first.size());
    if (n == 0 || n > 32 || second.size() != first.size()) return Status::internal("time_reads: 1 to 32 pairs");
    CONCORD_CUDA(cudaMemcpyAsync(addresses_.get(), first.data(), n * sizeof(long long), cudaMemcpyHostToDevice,
                                 victim_stream_.get()));
    CONCORD_CUDA(cudaMemcpyAsync(addresses_.get() + 32, second.data(), n * sizeof(long long), cudaMemcpyHostToDevice,
                                 victim_stream_.get()));
    if (flush) CONCORD_RETURN_IF_ERROR(flush_l2_now());
    const cudaStream_t s = victim_stream_.get();
    switch (prepare) {
      case Prepare::none:
        timed_reads<Prepare::none><<<1, 32, 0, s>>>(base_, addresses_.get(), addresses_.get() + 32, n, timing_.get(), control_.get());
        break;
      case Prepare::read:
        timed_reads<Prepare::read><<<1, 32, 0, s>>>(base_, addresses_.get(), addresses_.get() + 32, n, timing_.get(), control_.get());
        break;
      case Prepare::read_and_discard:
        timed_reads<Prepare::read_and_discard>
            <<<1, 32, 0, s>>>(base_, addresses_.get(), addresses_.get() + 32, n, timing_.get(), control_.get());
        break;
    }
    CONCORD_CUDA_LAUNCHED();
    std::vector<long long> out(n);
    CONCORD_CUDA(cudaMemcpyAsync(out.data(), timing_.get(), n * sizeof(long long), cudaMemcpyDeviceToHost, s));
    CONCORD_CUDA(cudaStreamSynchronize(s));
    return out;
  }

  // Pair latencies for many batches without a host round trip each: batch k flushes the L2, then
  // times pairs (first[j], partners[k][j]). Returns cycles [batch][pair].
  Result<std::vector<long long>> time_pair_batches(const std::vector<long long>& first,
                                                   const std::vector<std::vector<long long>>& partners) {
    const int n = static_cast<int>(first.size());
    const size_t batches = partners.size();
    DeviceBuffer<long long> firsts, seconds, cycles;
    CONCORD_RETURN_IF_ERROR(firsts.allocate(n));
    CONCORD_RETURN_IF_ERROR(seconds.allocate(batches * n));
    CONCORD_RETURN_IF_ERROR(cycles.allocate(batches * n));
    std::vector<long long> flat;
    for (const auto& p : partners) flat.insert(flat.end(), p.begin(), p.end());
    const cudaStream_t s = victim_stream_.get();
    CONCORD_CUDA(cudaMemcpy(firsts.get(), first.data(), n * sizeof(long long), cudaMemcpyHostToDevice));
    CONCORD_CUDA(cudaMemcpy(seconds.get(), flat.data(), flat.size() * sizeof(long long), cudaMemcpyHostToDevice));
    for (size_t k = 0; k < batches; ++k) {
      CONCORD_RETURN_IF_ERROR(flush_l2_now());
      timed_reads<Prepare::none><<<1, 32, 0, s>>>(base_, firsts.get(), seconds.get() + k * n, n, cycles.get() + k * n,
                                                  control_.get());
      CONCORD_CUDA_LAUNCHED();
    }
    std::vector<long long> out(batches * n);
    CONCORD_CUDA(cudaMemcpyAsync(out.data(), cycles.get(), out.size() * sizeof(long long), cudaMemcpyDeviceToHost, s));
    CONCORD_CUDA(cudaStreamSynchronize(s));
    return out;
  }

  Result<double> sm_clock_mhz() {
    measure_clock<<<1, 1, 0, victim_stream_.get()>>>(clock_.get());
    CONCORD_CUDA_LAUNCHED();
    long long out[2];
    CONCORD_CUDA(cudaMemcpyAsync(out, clock_.get(), sizeof out, cudaMemcpyDeviceToHost, victim_stream_.get()));
    CONCORD_CUDA(cudaStreamSynchronize(victim_stream_.get()));
    return out[1] > 0 ? 1e3 * static_cast<double>(out[0]) / static_cast<double>(out[1]) : kNaN;
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  static constexpr int kVictimBlocksPerSm = 1;     // 8 warps: a few chunks in flight per SM
  static constexpr int kAggressorBlocksPerSm = 4;  // 32 warps: as much pressure as it can make

  // The %smid values blocks ran on, lower half for the victim and upper half for the aggressor
  // (SMs with nearby ids share a GPC, so each side keeps mostly to its own GPCs).
  Status split_sms() {
    DeviceBuffer<unsigned long long> seen;
    CONCORD_RETURN_IF_ERROR(seen.allocate(kMaxSms / 64));
    CONCORD_CUDA(cudaMemset(seen.get(), 0, seen.bytes()));
    record_sms<<<sms_ * 16, 1024>>>(seen.get());  // two such blocks fill an SM: they must spread
    CONCORD_CUDA_LAUNCHED();
    unsigned long long bits[kMaxSms / 64];
    CONCORD_CUDA(cudaMemcpy(bits, seen.get(), sizeof bits, cudaMemcpyDeviceToHost));
    std::vector<int> ids;
    for (int sm = 0; sm < kMaxSms; ++sm) {
      if ((bits[sm / 64] >> (sm % 64)) & 1ull) ids.push_back(sm);
    }
    if (ids.size() < 2) return Status::failed_precondition("blocks ran on fewer than two SMs");
    if (static_cast<int>(ids.size()) != sms_) {
      std::fprintf(stderr, "concord_channel_probe: blocks ran on %zu SMs of %d\n", ids.size(), sms_);
    }
    victim_sms_ = static_cast<int>(ids.size()) / 2;
    aggressor_sms_ = static_cast<int>(ids.size()) - victim_sms_;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto& side = i < static_cast<size_t>(victim_sms_) ? victim_set_ : aggressor_set_;
      side[ids[i] / 64] |= 1ull << (ids[i] % 64);
    }
    return Status::ok();
  }

  std::vector<int64_t> pages_of(int parity) const {
    std::vector<int64_t> out;
    for (int64_t p = parity; p < pages_; p += 2) out.push_back(p);
    return out;
  }

  Status flush_l2_now() {
    flush_l2<<<sms_ * 4, 512, 0, victim_stream_.get()>>>(flush_.get(), flush_.size(), control_.get());
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }

  Status launch(const HammerParams& p, int granularity, cudaStream_t s) {
    const int grid = sms_ * p.blocks_per_sm * 3;  // more than the admitted blocks: each SM fills up
    switch (granularity) {
      case 1024:
        hammer<1024><<<grid, kThreads, 0, s>>>(p, control_.get());
        break;
      case 2048:
        hammer<2048><<<grid, kThreads, 0, s>>>(p, control_.get());
        break;
      case 4096:
        hammer<4096><<<grid, kThreads, 0, s>>>(p, control_.get());
        break;
      default:
        return Status::invalid_argument("chunk of " + std::to_string(granularity) + " bytes: 1024, 2048 or 4096");
    }
    CONCORD_CUDA_LAUNCHED();
    return Status::ok();
  }

  // One run: the aggressor (if any) starts first and holds its SMs for lead + window; the victim
  // waits until every aggressor SM is busy, then reads for its window. NaN when the aggressor did
  // not cover the victim's window.
  Result<double> run_once(const ChunkList& victim, const ChunkList* aggressor, int granularity, bool discard) {
    const cudaStream_t vs = victim_stream_.get(), as = aggressor_stream_.get();
    CONCORD_CUDA(cudaMemcpyAsync(control_.get(), control_init_.get(), sizeof(RunControl), cudaMemcpyHostToDevice, vs));
    CONCORD_CUDA(cudaEventRecord(reset_done_.get(), vs));
    const auto window_ns = static_cast<unsigned long long>(plan_.run_us * 1e3);
    const auto lead_ns = static_cast<unsigned long long>(plan_.lead_us * 1e3);
    if (aggressor) {
      CONCORD_CUDA(cudaStreamWaitEvent(as, reset_done_.get(), 0));
      HammerParams a{base_, aggressor->chunks, aggressor->count, 1, {}, kAggressorBlocksPerSm, discard ? 1 : 0,
                     window_ns + 2 * lead_ns, 0, 0, static_cast<unsigned>(rng_())};
      std::copy(std::begin(aggressor_set_), std::end(aggressor_set_), a.sms);
      CONCORD_RETURN_IF_ERROR(launch(a, granularity, as));
      CONCORD_CUDA(cudaEventRecord(aggressor_done_.get(), as));
    }
    HammerParams v{base_, victim.chunks, victim.count, 0, {}, kVictimBlocksPerSm, discard ? 1 : 0, window_ns,
                   aggressor ? aggressor_sms_ : 0, static_cast<unsigned long long>(plan_.wait_limit_ms * 1e6),
                   static_cast<unsigned>(rng_())};
    std::copy(std::begin(victim_set_), std::end(victim_set_), v.sms);
    CONCORD_RETURN_IF_ERROR(launch(v, granularity, vs));
    if (aggressor) CONCORD_CUDA(cudaStreamWaitEvent(vs, aggressor_done_.get(), 0));
    CONCORD_CUDA(cudaMemcpyAsync(control_host_.get(), control_.get(), sizeof(RunControl), cudaMemcpyDeviceToHost, vs));
    CONCORD_CUDA(cudaStreamSynchronize(vs));
    const RunControl& c = *control_host_.get();
    if (c.victim_visits == 0 || c.victim_end <= c.victim_start) return kNaN;
    if (aggressor) {
      const bool covered = c.victim_wait_timeouts == 0 && c.aggressor_start <= c.victim_start &&
                           c.aggressor_deadline >= c.victim_end && c.aggressor_sms_ready >= aggressor_sms_;
      if (!covered) return kNaN;
    }
    return static_cast<double>(c.victim_visits) * granularity / static_cast<double>(c.victim_end - c.victim_start);
  }

  Plan plan_;
  std::mt19937_64 rng_;
  uint64_t seed_;
  cudaDeviceProp prop_{};
  int sms_ = 0, victim_sms_ = 0, aggressor_sms_ = 0;
  unsigned long long victim_set_[kMaxSms / 64] = {}, aggressor_set_[kMaxSms / 64] = {};
  int64_t pages_ = 0;
  int runs_ = 0, invalid_runs_ = 0;
  DeviceBuffer<uint8_t> buffer_;
  uint8_t* base_ = nullptr;  // buffer_ rounded up to a 2 MiB boundary
  DeviceBuffer<uint4> flush_;
  DeviceBuffer<RunControl> control_;
  cuda::HostBuffer<RunControl> control_host_, control_init_;
  DeviceBuffer<long long> timing_, addresses_, clock_;
  cuda::Stream victim_stream_, aggressor_stream_;
  cuda::Event reset_done_, aggressor_done_;
};

// ---- Experiments -------------------------------------------------------------------------------------

std::vector<int> sample_offsets(std::mt19937_64& rng, int chunks, int count, const std::vector<int>& excluded = {}) {
  std::vector<int> pool;
  for (int o = 0; o < chunks; ++o) {
    if (std::find(excluded.begin(), excluded.end(), o) == excluded.end()) pool.push_back(o);
  }
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(std::min<size_t>(pool.size(), count));
  std::sort(pool.begin(), pool.end());
  return pool;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? kNaN : v[v.size() / 2];
}

Calibration calibrate(Probe& probe, const Plan& plan) {
  Calibration cal;
  auto& rng = probe.rng();
  // Single lines: chunk starts at random pages and offsets, 32 per kernel.
  std::uniform_int_distribution<int64_t> page(0, probe.pages() - 1);
  std::uniform_int_distribution<int> offset(0, static_cast<int>(kPage / 2048) - 1);
  for (int batch = 0; batch < plan.calibration_lines / 32; ++batch) {
    std::vector<long long> lines(32);
    for (auto& l : lines) l = page(rng) * kPage + int64_t{offset(rng)} * 2048;
    for (auto [prepare, out] : {std::pair{Prepare::read, &cal.l2_hit_cycles}, std::pair{Prepare::none, &cal.dram_cycles},
                                std::pair{Prepare::read_and_discard, &cal.after_discard_cycles}}) {
      for (long long c : checked(probe.time_reads(prepare, lines, lines, true))) out->push_back(static_cast<double>(c));
    }
  }
  // Victim throughput alone: every chunk of many pages, then one offset over the victim's pages
  // (small enough for the L2), then the same offset discarded after each read.
  DeviceBuffer<unsigned long long> storage;
  auto pages = probe.victim_pages();
  auto stream_pages = pages;
  stream_pages.resize(std::min<size_t>(stream_pages.size(), 1024));
  std::vector<int> all(kPage / 2048);
  std::iota(all.begin(), all.end(), 0);
  const ChunkList stream = checked(probe.upload_set(storage, all, stream_pages, 2048));
  std::vector<double> gbps;
  for (int i = 0; i < 3; ++i) gbps.push_back(checked(probe.victim_gbps(stream, nullptr, 2048, false)));
  cal.stream_gbps = median_of(gbps);
  const ChunkList one = checked(probe.upload_set(storage, {offset(rng)}, pages, 2048));
  gbps.clear();
  for (int i = 0; i < 3; ++i) gbps.push_back(checked(probe.victim_gbps(one, nullptr, 2048, false)));
  cal.class_gbps = median_of(gbps);
  gbps.clear();
  for (int i = 0; i < 3; ++i) gbps.push_back(checked(probe.victim_gbps(one, nullptr, 2048, true)));
  cal.class_discard_gbps = median_of(gbps);
  return cal;
}

// Sets of chunk offsets large enough (four times the L2 over the victim's pages) that reading them
// goes to DRAM without any discard.
ConditionsExperiment conditions(Probe& probe, int granularity, int reps) {
  ConditionsExperiment e;
  e.granularity = granularity;
  e.discard = false;
  const int chunks = static_cast<int>(kPage / granularity);
  const auto victim_pages = probe.victim_pages(), aggressor_pages = probe.aggressor_pages();
  const double per_offset = static_cast<double>(victim_pages.size()) * granularity;
  e.offsets_per_set = std::clamp(static_cast<int>(std::ceil(4.0 * probe.properties().l2CacheSize / per_offset)), 1, chunks / 4);
  auto& rng = probe.rng();
  DeviceBuffer<unsigned long long> victim_storage, equal_storage, disjoint_storage, random_storage;
  for (int r = 0; r < reps; ++r) {
    ConditionRep rep;
    rep.victim_offsets = sample_offsets(rng, chunks, e.offsets_per_set);
    const auto disjoint = sample_offsets(rng, chunks, e.offsets_per_set, rep.victim_offsets);
    const auto random = sample_offsets(rng, chunks, e.offsets_per_set);
    const ChunkList v = checked(probe.upload_set(victim_storage, rep.victim_offsets, victim_pages, granularity));
    const ChunkList eq = checked(probe.upload_set(equal_storage, rep.victim_offsets, aggressor_pages, granularity));
    const ChunkList dis = checked(probe.upload_set(disjoint_storage, disjoint, aggressor_pages, granularity));
    const ChunkList rnd = checked(probe.upload_set(random_storage, random, aggressor_pages, granularity));
    // The five runs in a random order, so that drift falls on all of them alike.
    std::vector<std::pair<double*, const ChunkList*>> runs = {
        {&rep.alone, nullptr}, {&rep.alone_again, nullptr}, {&rep.equal, &eq}, {&rep.disjoint, &dis}, {&rep.random, &rnd}};
    std::shuffle(runs.begin(), runs.end(), rng);
    for (auto& [out, aggressor] : runs) *out = checked(probe.victim_gbps(v, aggressor, granularity, false));
    e.reps.push_back(std::move(rep));
  }
  return e;
}

// Every ordered pair of classes, each repetition in its own random order, with the victim alone
// for each class once per repetition. Classes are single chunk offsets, discarded after each read
// (one offset over many pages fits in the L2).
InterferenceMap map_of(Probe& probe, const std::string& kind, const MapSize& size, int64_t page) {
  InterferenceMap m;
  m.kind = kind;
  m.granularity = size.granularity;
  m.discard = true;
  m.reps = size.reps;
  m.page = kind == "same_page" ? page : -1;
  m.name = kind + "_" + std::to_string(size.granularity) + (kind == "same_page" ? "_page" + std::to_string(page) : "");
  auto& rng = probe.rng();
  m.offsets = sample_offsets(rng, static_cast<int>(kPage / size.granularity), size.classes);
  const int k = m.classes();
  DeviceBuffer<unsigned long long> victim_storage, aggressor_storage;
  const std::vector<int64_t> victim_pages = kind == "same_page" ? std::vector<int64_t>{page} : probe.victim_pages();
  const std::vector<int64_t> aggressor_pages = kind == "same_page" ? std::vector<int64_t>{page} : probe.aggressor_pages();
  const auto victims = checked(probe.upload_classes(victim_storage, m.offsets, victim_pages, size.granularity));
  const auto aggressors = checked(probe.upload_classes(aggressor_storage, m.offsets, aggressor_pages, size.granularity));
  m.alone.assign(static_cast<size_t>(m.reps) * k, kNaN);
  m.shared.assign(static_cast<size_t>(m.reps) * k * k, kNaN);
  for (int r = 0; r < m.reps; ++r) {
    std::vector<std::pair<int, int>> cells;  // (i, -1): alone
    for (int i = 0; i < k; ++i) {
      cells.push_back({i, -1});
      for (int j = 0; j < k; ++j) {
        if (kind != "same_page" || i != j) cells.push_back({i, j});
      }
    }
    std::shuffle(cells.begin(), cells.end(), rng);
    for (auto [i, j] : cells) {
      const double gbps = checked(probe.victim_gbps(victims[i], j < 0 ? nullptr : &aggressors[j], size.granularity, true));
      if (j < 0) {
        m.alone[static_cast<size_t>(r) * k + i] = gbps;
      } else {
        m.shared[(static_cast<size_t>(r) * k + i) * k + j] = gbps;
      }
    }
  }
  return m;
}

LatencyProbe latency(Probe& probe, const Plan& plan) {
  LatencyProbe l;
  l.granularity = 2048;
  l.reps = plan.latency_reps;
  const int chunks = static_cast<int>(kPage / l.granularity);
  auto& rng = probe.rng();
  // Bases in distinct pages; each of a few in-page offsets used by several pages, so that a
  // conflict pattern the same in every page can show.
  std::vector<int64_t> pages(probe.pages());
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  const auto offsets = sample_offsets(rng, chunks, plan.latency_base_offsets);
  for (int b = 0; b < plan.latency_bases; ++b) {
    l.base_pages.push_back(pages[b]);
    l.base_offsets.push_back(offsets[b % offsets.size()]);
  }
  const int delta_count = plan.latency_deltas > 0 ? plan.latency_deltas : chunks - 1;
  for (int d = 1; d <= delta_count; ++d) l.deltas.push_back(d);
  const int b_n = plan.latency_bases, d_n = delta_count;
  std::vector<long long> first(b_n);
  for (int b = 0; b < b_n; ++b) first[b] = l.base_pages[b] * kPage + int64_t{l.base_offsets[b]} * l.granularity;
  l.pair_cycles.assign(static_cast<size_t>(b_n) * d_n * l.reps, 0);
  l.single_cycles.assign(static_cast<size_t>(b_n) * l.reps, 0);
  for (int r = 0; r < l.reps; ++r) {
    // One batch per delta, in a random order; then the base lines alone.
    std::vector<int> order(d_n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<long long>> partners;
    for (int d : order) {
      std::vector<long long> p(b_n);
      for (int b = 0; b < b_n; ++b) {
        const int partner = (l.base_offsets[b] + l.deltas[d]) % chunks;
        p[b] = l.base_pages[b] * kPage + int64_t{partner} * l.granularity;
      }
      partners.push_back(std::move(p));
    }
    partners.push_back(first);
    const auto cycles = checked(probe.time_pair_batches(first, partners));
    for (int k = 0; k < d_n; ++k) {
      for (int b = 0; b < b_n; ++b) {
        l.pair_cycles[(static_cast<size_t>(b) * d_n + order[k]) * l.reps + r] = static_cast<double>(cycles[static_cast<size_t>(k) * b_n + b]);
      }
    }
    for (int b = 0; b < b_n; ++b) {
      l.single_cycles[static_cast<size_t>(b) * l.reps + r] = static_cast<double>(cycles[static_cast<size_t>(d_n) * b_n + b]);
    }
  }
  return l;
}

void save(const RawProbe& raw, const std::string& path) {
  std::ofstream out(path);
  out << raw_to_json(raw).dump() << "\n";
  if (!out) {
    std::fprintf(stderr, "concord_channel_probe: %s: cannot write\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace
}  // namespace concord::channel

int main(int argc, char** argv) {
  using namespace concord;
  using namespace concord::channel;
  CLI::App app{"Times HBM channel interference from user space: writes the raw timings for concord_channel_analyze"};
  std::string out_path, mode = "quick";
  uint64_t seed = 1;
  int64_t buffer_mib = 0;
  app.add_option("--out", out_path, "raw timings (JSON)")->required();
  app.add_option("--mode", mode, "quick (about 20 s on an H100), full (about 90 s) or smoke (for compute-sanitizer)")
      ->check(CLI::IsMember({"quick", "full", "smoke"}))
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of every random choice")->capture_default_str();
  app.add_option("--buffer-mib", buffer_mib, "probed buffer in MiB (default: the mode's)")->check(CLI::Range(16, 1 << 20));
  CONCORD_PARSE_COMMAND_LINE(app, argc, argv);

  Plan plan = plan_for(mode);
  if (buffer_mib > 0) plan.buffer_mib = buffer_mib;
  Probe probe(plan, seed);
  PROBE_CHECK(probe.init());
  const auto& prop = probe.properties();
  std::fprintf(stderr, "device %s: %d SMs, L2 %d MiB, buffer %lld MiB in %lld pages; mode %s\n", prop.name,
               prop.multiProcessorCount, prop.l2CacheSize >> 20, static_cast<long long>(probe.pages() * 2),
               static_cast<long long>(probe.pages()), mode.c_str());

  RawProbe raw;
  const auto spec = checked(cuda::probe_device_spec(0));
  raw.provenance = nlohmann::json::parse(provenance_json(spec, "cuda", concord::build_version(), concord::build_commit()));
  raw.config = probe.config(mode);
  const auto t0 = std::chrono::steady_clock::now();
  auto step = [&](const std::string& what) {
    save(raw, out_path);
    std::fprintf(stderr, "%7.1f s  %s (%d runs, %d without a measurement)\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), what.c_str(), probe.runs(),
                 probe.invalid_runs());
  };
  raw.calibration.sm_clock_mhz_start = checked(probe.sm_clock_mhz());
  const double clock_start = raw.calibration.sm_clock_mhz_start;
  raw.calibration = calibrate(probe, plan);
  raw.calibration.sm_clock_mhz_start = clock_start;
  step("calibration");
  for (const auto& [granularity, reps] : plan.conditions) {
    raw.conditions.push_back(conditions(probe, granularity, reps));
    step("conditions at " + std::to_string(granularity) + " B");
  }
  for (const auto& size : plan.cross_maps) {
    raw.maps.push_back(map_of(probe, "cross_page", size, -1));
    step("map " + raw.maps.back().name);
  }
  std::uniform_int_distribution<int64_t> page(0, probe.pages() - 1);
  for (int p = 0; p < plan.same_page_pages; ++p) {
    raw.maps.push_back(map_of(probe, "same_page", plan.same_page, page(probe.rng())));
    step("map " + raw.maps.back().name);
  }
  raw.latency = latency(probe, plan);
  raw.calibration.sm_clock_mhz_end = checked(probe.sm_clock_mhz());
  step("latency");
  return 0;
}
