#include "concord/occupancy.h"

#include <algorithm>

namespace concord {

namespace {

// DeviceSpec::validate keeps it in 1..kMaxRegisterSubPartitions; a spec built in code is held there too.
int sub_partitions_of(const DeviceSpec& device) {
  return std::clamp(device.sm.register_sub_partitions, 1, kMaxRegisterSubPartitions);
}

}  // namespace

BlockFootprint footprint_of(const DeviceSpec& device, const KernelVariant& v) {
  const int unit = std::max(1, device.sm.register_alloc_unit);
  const int per_warp = (v.registers_per_thread * 32 + unit - 1) / unit * unit;
  const int warps = v.warps_per_block();
  return {v.threads_per_block, per_warp * warps, v.shared_bytes_per_block, warps, per_warp};
}

int max_resident_blocks(const DeviceSpec& device, const BlockFootprint& f) {
  int n = device.sm.max_blocks;
  if (f.threads > 0) n = std::min(n, device.sm.max_threads / f.threads);
  if (f.registers > 0) n = std::min(n, device.sm.max_registers / f.registers);
  if (f.registers_per_warp > 0 && f.warps > 0) {
    const int sp = sub_partitions_of(device);
    // The launch check counts a block's warps rounded up to whole sub-partitions.
    const int assumed = f.registers_per_warp * ((f.warps + sp - 1) / sp * sp);
    if (assumed > device.sm.max_registers) return 0;
    const int warps_per_sm = device.sm.max_registers / sp / f.registers_per_warp * sp;
    n = std::min(n, warps_per_sm / f.warps);
  }
  if (f.shared_bytes > 0) n = std::min(n, device.sm.max_shared_bytes / f.shared_bytes);
  return std::max(n, 0);
}

SmResources SmResources::empty_sm(const DeviceSpec& device) {
  SmResources r;
  r.threads = device.sm.max_threads;
  r.registers = device.sm.max_registers;
  r.shared_bytes = device.sm.max_shared_bytes;
  r.blocks = device.sm.max_blocks;
  r.sub_partitions = sub_partitions_of(device);
  r.sub_capacity = device.sm.max_registers / r.sub_partitions;
  for (int k = 0; k < r.sub_partitions; ++k) r.sub_registers[static_cast<size_t>(k)] = r.sub_capacity;
  return r;
}

bool SmResources::fits(const BlockFootprint& f) const {
  if (blocks < 1 || threads < f.threads || registers < f.registers || shared_bytes < f.shared_bytes) return false;
  if (f.registers_per_warp <= 0 || f.warps <= 0) return true;
  SmResources trial = *this;
  for (int w = 0; w < f.warps; ++w) {
    auto most = std::max_element(trial.sub_registers.begin(), trial.sub_registers.begin() + trial.sub_partitions);
    if (*most < f.registers_per_warp) return false;
    *most -= f.registers_per_warp;
  }
  return true;
}

void SmResources::take(const BlockFootprint& f, int n) {
  if (n < 0) return give(f, -n);
  blocks -= n;
  threads -= n * f.threads;
  registers -= n * f.registers;
  shared_bytes -= n * f.shared_bytes;
  if (f.registers_per_warp <= 0) return;
  for (int w = 0; w < n * f.warps; ++w) {
    *std::max_element(sub_registers.begin(), sub_registers.begin() + sub_partitions) -= f.registers_per_warp;
  }
}

void SmResources::give(const BlockFootprint& f, int n) {
  if (n < 0) return take(f, -n);
  blocks += n;
  threads += n * f.threads;
  registers += n * f.registers;
  shared_bytes += n * f.shared_bytes;
  if (f.registers_per_warp <= 0) return;
  // A warp leaves the fullest sub-partition that held that many registers (the mirror of take's
  // choice).
  for (int w = 0; w < n * f.warps; ++w) {
    int* pick = nullptr;
    for (int k = 0; k < sub_partitions; ++k) {
      int& free_k = sub_registers[static_cast<size_t>(k)];
      if (free_k + f.registers_per_warp <= sub_capacity && (pick == nullptr || free_k < *pick)) pick = &free_k;
    }
    if (pick != nullptr) *pick += f.registers_per_warp;
  }
}

}  // namespace concord
