// How many logical blocks a persistent block takes per counter fetch (pure; unit-tested on the CPU).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace concord::cuda {

// Fetches per resident block over a launch: the chunk is the launch's blocks / (slots x fetches),
// 1..64 logical blocks. With 8 or more resident blocks per SM, 16 fetches keep the counter cold
// and the tail short (when one block of an SM finishes early, the others keep its issue slots
// busy). With 4 or fewer resident blocks per SM, a straggler's last chunk idles a quarter of the
// SM or more, so chunks are 4x finer (64 fetches): on the H200 this cut kmeans' elastic overhead
// (4 blocks/SM) from +11.6% to +7.9% and lbm's from +8.6% to +7.7%, while the same change for
// every kernel cost hotspot3d and gaussian (8 blocks/SM, short blocks) +281% and +128%
// (bench/results/gpu-h200/attempts/chunks64-7195c78-overhead.md).
inline int fetches_per_slot(int tlp) { return tlp <= 4 ? 64 : 16; }

// A fetch per this much work at most: one atomic and two barriers cost about a microsecond, so a
// chunk of 4 us or more keeps them near 1/4 or less of a block's time even when fetches collide.
inline constexpr double kFetchIntervalSeconds = 4e-6;

// Roofline seconds of one logical block on one of `slots` resident blocks sharing the device.
inline double block_seconds(double flops, double bytes, int64_t slots, double peak_flops, double peak_bytes_per_s) {
  const double s = static_cast<double>(std::max<int64_t>(1, slots));
  const double compute = peak_flops > 0 ? flops * s / peak_flops : 0;
  const double memory = peak_bytes_per_s > 0 ? bytes * s / peak_bytes_per_s : 0;
  return std::max(compute, memory);
}

// The chunk: at most the count rule above; and when a block's time is known (`seconds_per_block`
// > 0), no more blocks than about kFetchIntervalSeconds of work. Heavy blocks then fetch one or two
// at a time, which keeps the blocks in flight close together in the grid, as a plain launch's are:
// kmeans (34 strided feature rows per point) reads DRAM with better locality that way.
inline int chunk_for(int64_t blocks, int64_t resident_slots, int tlp, double seconds_per_block = 0) {
  const int64_t fetches = std::max<int64_t>(1, resident_slots) * fetches_per_slot(tlp);
  const int cap = static_cast<int>(std::clamp<int64_t>(blocks / fetches, 1, 64));
  if (seconds_per_block <= 0) return cap;
  const double by_time = std::max(1.0, kFetchIntervalSeconds / seconds_per_block + 0.5);
  return static_cast<int>(std::min<double>(cap, std::floor(by_time)));
}

}  // namespace concord::cuda
