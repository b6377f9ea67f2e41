// Static occupancy: how many blocks of a variant fit on one SM, from its per-block resources.
#pragma once

#include <array>

#include "concord/device.h"
#include "concord/kernel.h"

namespace concord {

// Resources one block holds on an SM (registers rounded to the per-warp allocation unit).
BlockFootprint footprint_of(const DeviceSpec& device, const KernelVariant& variant);
// Blocks of `footprint` that fit on an empty SM (0 when one block does not fit). Registers count
// per sub-partition (as CUDA's occupancy calculator counts them): an SM holds
// sub_partitions * floor(max_registers / sub_partitions / registers_per_warp) warps.
int max_resident_blocks(const DeviceSpec& device, const BlockFootprint& footprint);
inline int max_resident_blocks(const DeviceSpec& device, const KernelVariant& variant) {
  return max_resident_blocks(device, footprint_of(device, variant));
}

// Free resources of one SM. Registers are also kept per sub-partition of the register file: a
// block's warps go one at a time to the sub-partition with the most free registers, so a block
// fits where each of its warps finds a sub-partition with room (the hardware's rule for one
// kernel, and a close one for blocks of several kernels side by side).
struct SmResources {
  int threads = 0;
  int registers = 0;  // free registers, all sub-partitions together
  int shared_bytes = 0;
  int blocks = 0;
  int sub_partitions = 1;
  int sub_capacity = 0;  // registers of one sub-partition
  std::array<int, kMaxRegisterSubPartitions> sub_registers{};  // free registers in each sub-partition

  static SmResources empty_sm(const DeviceSpec& device);
  bool fits(const BlockFootprint& f) const;
  void take(const BlockFootprint& f, int n = 1);
  void give(const BlockFootprint& f, int n = 1);
};

}  // namespace concord
