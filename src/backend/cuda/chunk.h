// How many logical blocks a persistent block takes per counter fetch (pure; unit-tested on the CPU).
#pragma once

#include <algorithm>
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

inline int chunk_for(int64_t blocks, int64_t resident_slots, int tlp) {
  const int64_t fetches = std::max<int64_t>(1, resident_slots) * fetches_per_slot(tlp);
  return static_cast<int>(std::clamp<int64_t>(blocks / fetches, 1, 64));
}

}  // namespace concord::cuda
