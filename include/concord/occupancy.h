// Static occupancy: how many blocks of a variant fit on one SM, from its per-block resources.
#pragma once

#include "concord/device.h"
#include "concord/kernel.h"

namespace concord {

// Resources one block holds on an SM (registers rounded to the per-warp allocation unit).
BlockFootprint footprint_of(const DeviceSpec& device, const KernelVariant& variant);
// Blocks of `footprint` that fit on an empty SM (0 when one block does not fit).
int max_resident_blocks(const DeviceSpec& device, const BlockFootprint& footprint);
inline int max_resident_blocks(const DeviceSpec& device, const KernelVariant& variant) {
  return max_resident_blocks(device, footprint_of(device, variant));
}

// Free resources of one SM.
struct SmResources {
  int threads = 0;
  int registers = 0;
  int shared_bytes = 0;
  int blocks = 0;
  static SmResources empty_sm(const DeviceSpec& device) {
    return {device.sm.max_threads, device.sm.max_registers, device.sm.max_shared_bytes, device.sm.max_blocks};
  }
  bool fits(const BlockFootprint& f) const {
    return blocks >= 1 && threads >= f.threads && registers >= f.registers && shared_bytes >= f.shared_bytes;
  }
  void take(const BlockFootprint& f, int n = 1) {
    blocks -= n;
    threads -= n * f.threads;
    registers -= n * f.registers;
    shared_bytes -= n * f.shared_bytes;
  }
  void give(const BlockFootprint& f, int n = 1) { take(f, -n); }
};

}  // namespace concord
