#include "concord/occupancy.h"

#include <algorithm>

namespace concord {

BlockFootprint footprint_of(const DeviceSpec& device, const KernelVariant& v) {
  const int unit = std::max(1, device.sm.register_alloc_unit);
  const int per_warp = (v.registers_per_thread * 32 + unit - 1) / unit * unit;
  return {v.threads_per_block, per_warp * v.warps_per_block(), v.shared_bytes_per_block};
}

int max_resident_blocks(const DeviceSpec& device, const BlockFootprint& f) {
  int n = device.sm.max_blocks;
  if (f.threads > 0) n = std::min(n, device.sm.max_threads / f.threads);
  if (f.registers > 0) n = std::min(n, device.sm.max_registers / f.registers);
  if (f.shared_bytes > 0) n = std::min(n, device.sm.max_shared_bytes / f.shared_bytes);
  return std::max(n, 0);
}

}  // namespace concord
