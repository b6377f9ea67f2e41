// How many logical blocks a persistent block takes per counter fetch (pure; unit-tested on the CPU).
#pragma once

#include <algorithm>
#include <cstdint>

#include "concord/device.h"
#include "concord/kernel.h"

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

// Short blocks need a floor as well: with the count rule a launch of many short blocks got chunks
// of 1-3, and each fetch then costs more than the block (H200 chunk sweep, 67b23d5: vector_add
// 16 M +137% at chunk 1 against +10% at 8, bfs 4 M nodes +139% against +12%, stream_triad 64 M
// +32% at 3 against +7% at 8; hotspot3d, gaussian, hotspot and srad at 6 or more within noise).
// A block is short when its roofline time on one resident slot of a full GPU is under 16 us; such
// launches take at least 8 blocks a fetch, or as many as leave every resident block one chunk.
// Heavy blocks (compute-bound, or 4 or fewer per SM, where a straggler's chunk idles the SM) keep
// the count rule: for them a coarse last chunk is the larger cost (mri_q: ~100 us blocks).
inline constexpr double kShortBlockSeconds = 16e-6;
inline constexpr int64_t kShortBlockChunk = 8;

inline int chunk_for(int64_t blocks, int64_t resident_slots, int tlp, double block_seconds = 0) {
  const int64_t slots = std::max<int64_t>(1, resident_slots);
  int64_t chunk = blocks / (slots * fetches_per_slot(tlp));
  if (block_seconds > 0 && block_seconds < kShortBlockSeconds && tlp > 4) {
    chunk = std::max(chunk, std::min(kShortBlockChunk, (blocks + slots - 1) / slots));
  }
  return static_cast<int>(std::clamp<int64_t>(chunk, 1, 64));
}

// A logical block's roofline time on one resident slot when `tlp` blocks run on every SM of the
// device: its FLOPs at the slot's share of the peak, or its DRAM bytes at its share of the
// bandwidth, whichever is longer. The chunk rule's notion of a short block.
inline double slot_block_seconds(const KernelSpec& kernel, int variant, const DeviceSpec& d, int tlp) {
  const KernelVariant& v = kernel.variant(variant);
  const double slots = static_cast<double>(std::max(1, tlp)) * std::max(1, d.sm_count);
  const double peak = kernel.unit == ComputeUnit::tensor ? d.tensor_flops : d.fp32_flops;
  const double compute = peak > 0 ? v.flops_per_block / (peak / slots) : 0;
  const double memory = d.dram_bytes_per_s > 0 ? v.bytes_per_block / (d.dram_bytes_per_s / slots) : 0;
  return std::max(compute, memory);
}

}  // namespace concord::cuda
