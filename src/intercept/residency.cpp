#include "intercept/residency.h"

#include <algorithm>

namespace concord::intercept {

int resident_blocks(const RoomDevice& d, const RoomFunction& f, int threads, int dynamic_shared) {
  if (threads <= 0) return 0;
  const int warps = (threads + 31) / 32;
  int blocks = d.blocks_per_sm > 0 ? d.blocks_per_sm : 32;
  if (d.threads_per_sm > 0) blocks = std::min(blocks, d.threads_per_sm / (warps * 32));
  if (f.registers > 0 && d.registers_per_sm > 0) {
    // Registers are given per warp in units of 256.
    const int per_warp = (f.registers * 32 + 255) / 256 * 256;
    blocks = std::min(blocks, d.registers_per_sm / (per_warp * warps));
  }
  const int shared = f.static_shared + dynamic_shared + d.reserved_per_block;
  if (shared > 0 && d.shared_per_sm > 0) blocks = std::min(blocks, d.shared_per_sm / shared);
  return std::max(blocks, 0);
}

uint32_t padded_shared(const RoomDevice& d, const RoomFunction& f, int threads, uint32_t own_shared, int cap) {
  if (cap <= 0 || d.shared_per_sm <= 0) return own_shared;
  if (resident_blocks(d, f, threads, static_cast<int>(own_shared)) <= cap) return own_shared;
  // At most `cap` blocks fit when one takes more than shared_per_sm / (cap + 1).
  const int per_block = d.shared_per_sm / (cap + 1) + 1;
  int dynamic = per_block - f.static_shared - d.reserved_per_block;
  dynamic = (dynamic + 127) / 128 * 128;  // whole allocation units
  const int most = d.shared_per_block_max - f.static_shared;
  dynamic = std::clamp(dynamic, static_cast<int>(own_shared), std::max(most, static_cast<int>(own_shared)));
  return static_cast<uint32_t>(dynamic);
}

}  // namespace concord::intercept
